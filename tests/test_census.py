"""`nsysan info` counts host-side tables in SQLite: the same summary as a full read.

:func:`nsysan.ingest.load_census` replaces the CUDA API, NVTX, OS-runtime,
scheduling and overhead reads by one aggregate query each. Whatever the export holds,
damaged rows included, ``info`` must say exactly what it said from the full read.
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
from nsysan.ingest.census import census_table
from nsysan.ingest.sqlite import open_export

sys.path.insert(0, str(Path(__file__).parent))
import hostile_corpus  # noqa: E402


def _both(paths: list[Path]) -> tuple[dict[str, Any], dict[str, Any]]:
    full = summarize(load_trace(paths))
    counted = summarize(*load_census(paths))
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
            with pytest.raises(NsysanError) as again:
                summarize(*load_census(paths))
            assert again.value.message == exc.message, case.name
            continue
        if counted != full:
            disagree.append(case.name)
    assert not disagree


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
