"""`nsysan info` counts host-side tables in SQLite instead of reading them.

``info --exact`` (:func:`nsysan.ingest.load_census` with ``exact=True``) replaces the
CUDA API, NVTX, OS-runtime, scheduling and overhead reads by one aggregate query each.
Whatever the export holds, damaged rows included, it must say exactly what the full
read says. Plain ``info`` takes those tables' stored rows from their row ids: its GPU
figures must still be the full read's, and each stored count the table's COUNT(*).
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import SHARED_TRACES, cori_rank_files, single_file_traces

from nsysan.errors import NsysanError
from nsysan.info import summarize
from nsysan.ingest import load_census, load_trace
from nsysan.ingest.census import census_table, stored_rows
from nsysan.ingest.sqlite import ExportDB, open_export

sys.path.insert(0, str(Path(__file__).parent))
import hostile_corpus  # noqa: E402


def _both(paths: list[Path]) -> tuple[dict[str, Any], dict[str, Any]]:
    full = summarize(load_trace(paths))
    counted = summarize(*load_census(paths, exact=True))
    # Table reads run two at a time, so notes from different tables may come in
    # either order; each note must be there.
    for s in (full, counted):
        s["notes"] = sorted(s["notes"])
    return full, counted


@pytest.mark.shared
@pytest.mark.parametrize("path", single_file_traces(), ids=lambda p: p.parent.name)
def test_census_summary_equals_the_full_read(path: Path) -> None:
    full, counted = _both([path])
    assert counted == full


@pytest.mark.shared
def test_census_summary_equals_the_full_read_on_eight_ranks() -> None:
    files = cori_rank_files()
    if not files:
        pytest.skip("needs the real traces")
    full, counted = _both(files)
    assert counted == full
    assert counted["counts"]["cuda_api"] > 0


HOSTILE_BASE = SHARED_TRACES / "T033-dlprof" / "trace.sqlite"


@pytest.mark.shared
@pytest.mark.slow
def test_census_agrees_with_the_full_read_on_the_hostile_corpus(tmp_path: Path) -> None:
    if not HOSTILE_BASE.exists():
        pytest.skip("needs the real traces")
    disagree = []
    for case in hostile_corpus.CASES:
        paths = hostile_corpus.build(case, HOSTILE_BASE, tmp_path / case.name)
        try:
            full, counted = _both(paths)
        except NsysanError as exc:  # refused: the census must refuse the same way
            for exact in (True, False):
                with pytest.raises(NsysanError) as again:
                    summarize(*load_census(paths, exact=exact))
                assert again.value.message == exc.message, case.name
            continue
        quick = summarize(*load_census(paths))
        if _gpu_part(quick) != _gpu_part(full):
            disagree.append(f"{case.name} (stored)")
        if counted != full:
            disagree.append(case.name)
    assert not disagree


# What plain `info` must say as the full read does: everything about the GPUs.
_GPU_KEYS = ("sources", "gpus", "processes_with_gpu_work")
_GPU_TABLES = ("kernels", "graphs", "memcpy", "memset")


def _gpu_part(summary: dict[str, Any]) -> dict[str, Any]:
    return {
        **{k: summary[k] for k in _GPU_KEYS},
        "counts": {t: summary["counts"][t] for t in _GPU_TABLES},
    }


def _gpu_span(trace: Any) -> tuple[int | None, int | None]:
    frames = [trace.table(t) for t in _GPU_TABLES if trace.table(t).height]
    if not frames:
        return None, None
    return (
        min(int(f["start_ns"].min()) for f in frames),
        max(int(f["end_ns"].max()) for f in frames),
    )


def _table_rows(paths: list[Path]) -> dict[str, int]:
    tables = {
        "cuda_api": "CUPTI_ACTIVITY_KIND_RUNTIME",
        "nvtx": "NVTX_EVENTS",
        "osrt": "OSRT_API",
        "sched": "SCHED_EVENTS",
        "overhead": "PROFILER_OVERHEAD",
    }
    rows = dict.fromkeys(tables, 0)
    for path in paths:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            have = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
            for name, table in tables.items():
                if table in have:
                    rows[name] += conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    return rows


def _check_stored_summary(paths: list[Path]) -> dict[str, Any]:
    trace = load_trace(paths)
    full = summarize(trace)
    quick = summarize(*load_census(paths))
    assert _gpu_part(quick) == _gpu_part(full)
    stored = {t: n for t, n in _table_rows(paths).items() if t in quick["stored_counts"]}
    assert {t: quick["counts"][t] for t in stored} == stored
    assert quick["span_covers"] == [
        t
        for t in ("kernels", "graphs", "memcpy", "memset", "cuda_api", "nvtx", "osrt")
        if t not in stored and quick["counts"][t]
    ]
    if set(stored) >= {"cuda_api", "nvtx", "osrt"}:
        assert (quick["span_ns"]["start"], quick["span_ns"]["end"]) == _gpu_span(trace)
    has_gpu_work = full["counts"]["kernels"] or full["counts"]["graphs"]
    launches = full["kernel_launch_calls"] if not has_gpu_work else None
    assert quick["kernel_launch_calls"] == launches
    assert quick["missing"] == full["missing"]
    return quick


@pytest.mark.shared
@pytest.mark.parametrize("path", single_file_traces(), ids=lambda p: p.parent.name)
def test_stored_counts_keep_the_full_reads_gpu_figures(path: Path) -> None:
    _check_stored_summary([path])


@pytest.mark.shared
def test_stored_counts_on_eight_ranks_add_up_per_table() -> None:
    files = cori_rank_files()
    if not files:
        pytest.skip("needs the real traces")
    quick = _check_stored_summary(files)
    assert quick["counts"]["cuda_api"] > 0
    assert {"cuda_api", "sched"} <= set(quick["stored_counts"])


def _api_table(path: Path, rows: list[tuple[object, object, object, object]]) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)")
        conn.executemany(
            "INSERT INTO StringIds VALUES (?, ?)",
            [(1, "cudaLaunchKernel_v7000"), (2, "cudaMemcpy_v3020")],
        )
        conn.execute(
            "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME "
            "(start INT, end INT, globalTid INT, correlationId INT, nameId INT)"
        )
        conn.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, ?, 7, ?)", rows)


def test_census_counts_kept_rows_inverted_rows_and_launches(tmp_path: Path) -> None:
    path = tmp_path / "api.sqlite"
    _api_table(
        path,
        [
            (100, 200, 5, 1),  # a launch
            (300, 350, 5, 2),
            (400, 390, 5, 1),  # ends before it starts: dropped, counted as inverted
            ("x", 500, 5, 1),  # text start: dropped by validation, with a note
            (600, 900, None, 2),  # no thread: dropped
        ],
    )
    db = open_export(path)
    try:
        c = census_table(
            db,
            "CUPTI_ACTIVITY_KIND_RUNTIME",
            {"start_ns": "start", "end_ns": "end", "name_id": "nameId", "global_tid": "globalTid"},
            launch_name_ids=[1],
        )
    finally:
        db.close()
    assert (c.rows, c.inverted, c.start_ns, c.end_ns, c.launch_calls) == (2, 1, 100, 350, 1)
    assert any("CUPTI_ACTIVITY_KIND_RUNTIME" in n and "start" in n for n in db.notes), db.notes


def _rowid_table(path: Path, rowids: list[int], without_rowid: bool = False) -> ExportDB:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)")
        conn.execute(
            "CREATE TABLE OSRT_API (start INT, end INT, globalTid INT"
            + (", PRIMARY KEY (start)) WITHOUT ROWID" if without_rowid else ")")
        )
        column = "start" if without_rowid else "rowid"
        conn.executemany(
            f"INSERT INTO OSRT_API ({column}, end, globalTid) VALUES (?, 5, 1)",
            [(r,) for r in rowids],
        )
    return open_export(path)


@pytest.mark.parametrize(
    ("rowids", "without_rowid", "rows"),
    [
        ([1, 2, 3, 4], False, 4),  # as Nsight Systems writes them
        ([], False, 0),
        ([3, 4, 5], False, 3),  # first rows deleted: the id range still counts
        ([1, 2, 1 << 62], False, 3),  # an id no file has room for: counted row by row
        ([-5, 1, 2], False, 3),  # an id below 1: counted row by row
        ([10, 20, 30], True, 3),  # no row ids: counted row by row
    ],
)
def test_stored_rows_come_from_row_ids_or_a_count(
    tmp_path: Path, rowids: list[int], without_rowid: bool, rows: int
) -> None:
    db = _rowid_table(tmp_path / "t.sqlite", rowids, without_rowid)
    try:
        c = stored_rows(db, "OSRT_API")
        missing = stored_rows(db, "NVTX_EVENTS")
    finally:
        db.close()
    launches = None if rows else 0
    assert (c.rows, c.stored, c.start_ns, c.end_ns, c.launch_calls) == (
        rows,
        True,
        None,
        None,
        launches,
    )
    assert missing.rows == 0 and not missing.stored


def test_stored_counts_still_count_launches_without_gpu_activity(tmp_path: Path) -> None:
    path = tmp_path / "api.sqlite"
    _api_table(path, [(100, 200, 5 << 24, 1), (300, 350, 5 << 24, 2), (400, 450, 5 << 24, 1)])
    quick = summarize(*load_census([path]))
    assert quick["kernel_launch_calls"] == 2
    assert "cuda_api" not in quick["stored_counts"]
    assert any("2 kernel launch calls" in m for m in quick["missing"]), quick["missing"]
