"""Host tables left on disk (nsysan.stored): the analyses read from them what they read
from tables in memory, the files outlive their cache entry while a trace reads them and
go with it, and any failure to leave them there keeps them in memory."""

from __future__ import annotations

import dataclasses
import gc
import os
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest
from conftest import REPO, SHARED_TRACES, cori_rank_files

from nsysan import stored
from nsysan.analysis import analyze
from nsysan.analyze.host_tables import on_threads, overlapping, rows_on_threads
from nsysan.ingest import cache, load_trace
from nsysan.ingest.assembly import stored_assembled
from nsysan.model import CUDA_API, OSRT
from nsysan.report.document import analysis_document
from nsysan.settings import Settings
from nsysan.stored import STORED_TABLES, StoredTable, TablePart

FIXTURES = REPO / "fixtures"


def _inputs(name: str) -> list[Path]:
    if name == "cori":
        paths = cori_rank_files()
    elif name.startswith("T"):
        paths = [SHARED_TRACES / name / "trace.sqlite"]
    else:
        paths = [FIXTURES / f"{name}.sqlite"]
    if not paths or not all(p.exists() for p in paths):
        pytest.skip(f"{name} not available")
    return paths


def _document(trace) -> dict:  # type: ignore[no-untyped-def]
    analysis = analyze(trace, Settings(), detail_tables=True)
    return analysis_document(analysis, detail="full")


def _stored_names(trace) -> list[str]:  # type: ignore[no-untyped-def]
    return [n for n in STORED_TABLES if isinstance(trace.table(n), StoredTable)]


@pytest.mark.parametrize(
    "name",
    [
        "T039-gpu-poisson-solver",
        "cori",
        "gil-blocked",
        "cpu-saturated",
        "serving-graphs-nodes",
        "serving-graphs",
        "request-burst",
        "pp-bubble",
    ],
)
def test_tables_on_disk_give_the_analysis_of_tables_in_memory(
    name: str, cache_on: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = _inputs(name)
    cache.set_enabled(False)
    in_memory = _document(load_trace(paths))
    cache.set_enabled(True)
    monkeypatch.setattr(stored, "STORE_MIN_ROWS", 0)
    cold = load_trace(paths, store_host_tables=True)  # read from SQLite, then left on disk
    warm = load_trace(paths, store_host_tables=True)  # from the cache entry
    for trace in (cold, warm):
        assert "cuda_api" in _stored_names(trace)
        # Launch calls are looked up among the calls kept apart, not the whole table.
        assert isinstance(trace.operation_calls, StoredTable)
        assert trace.operation_calls.height < trace.cuda_api.height
        assert _document(trace) == in_memory


@pytest.mark.parametrize(
    "name",
    ["T039-gpu-poisson-solver", "cori", "gil-blocked", "serving-graphs-nodes", "serving-graphs"],
)
def test_summary_of_tables_on_disk_is_that_of_tables_in_memory(
    name: str, cache_on: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The summary path reads a table on disk its own way: the launch calls are
    # streamed in batches, never held (host_launch._streamed_launch_of).
    def summary(trace) -> dict:  # type: ignore[no-untyped-def]
        return analysis_document(analyze(trace, Settings(), detail_tables=False))

    paths = _inputs(name)
    cache.set_enabled(False)
    in_memory = summary(load_trace(paths))
    cache.set_enabled(True)
    monkeypatch.setattr(stored, "STORE_MIN_ROWS", 0)
    on_disk = load_trace(paths, store_host_tables=True)
    assert "cuda_api" in _stored_names(on_disk)
    assert isinstance(on_disk.operation_calls, StoredTable)
    assert summary(on_disk) == in_memory
    host = in_memory["results"]["host"]
    assert host["per_gpu"]
    assert "steady" not in host  # Analysis.steady_causes shows it, not this result


def test_a_run_of_files_some_on_disk(cache_on: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Two Cori ranks (5,592 CUDA calls, 29,072 scheduling events each) and T039 (14,100
    # CUDA calls, no scheduling): between those sizes, each table mixes files on disk
    # and in memory.
    paths = [*_inputs("cori")[:2], *_inputs("T039-gpu-poisson-solver")]
    cache.set_enabled(False)
    in_memory = load_trace(paths)
    cache.set_enabled(True)
    monkeypatch.setattr(stored, "STORE_MIN_ROWS", 10_000)
    mixed = load_trace(paths, store_host_tables=True)
    assert _stored_names(mixed) == ["cuda_api", "sched"]
    for name in STORED_TABLES:
        table = mixed.table(name)
        assert table.height == in_memory.table(name).height
        # A big table is stored by thread: each thread's rows in their order.
        by_thread = ["source", "pid", "tid"]
        assert (
            stored.collected(table)
            .sort(by_thread, maintain_order=True)
            .equals(in_memory.table(name).sort(by_thread, maintain_order=True))
        ), name
    assert mixed.notes == in_memory.notes
    assert _document(mixed) == _document(in_memory)


def test_small_tables_stay_in_memory(cache_on: Path) -> None:
    trace = load_trace(_inputs("T039-gpu-poisson-solver"), store_host_tables=True)
    assert _stored_names(trace) == []
    assert not (cache_on / "runs").exists()


def test_files_outlive_their_entry_and_go_with_the_trace(
    cache_on: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = _inputs("gil-blocked")
    monkeypatch.setattr(stored, "STORE_MIN_ROWS", 0)
    trace = load_trace(paths, store_host_tables=True)
    expected = {n: stored.collected(trace.table(n)) for n in _stored_names(trace)}
    assert expected
    for entry in cache_on.iterdir():  # as eviction or another run's clean-up would
        if entry.name != "runs":
            for f in entry.iterdir():
                f.unlink()
            entry.rmdir()
    for name, frame in expected.items():
        assert stored.collected(trace.table(name)).equals(frame)
    assert len(list((cache_on / "runs").iterdir())) == 1
    del trace
    gc.collect()
    assert list((cache_on / "runs").iterdir()) == []


def test_unlinkable_entry_keeps_tables_in_memory(
    cache_on: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = _inputs("gil-blocked")
    monkeypatch.setattr(stored, "STORE_MIN_ROWS", 0)

    def refuse(*_: object) -> None:
        raise OSError("links not supported")

    monkeypatch.setattr(os, "link", refuse)
    for _ in range(2):  # a miss, then a hit
        trace = load_trace(paths, store_host_tables=True)
        assert _stored_names(trace) == []
        assert trace.cuda_api.height > 0
    assert len([p for p in cache_on.iterdir() if p.name != "runs"]) == 1  # entry kept


def test_rows_on_threads_reads_what_on_threads_keeps(tmp_path: Path) -> None:
    rows = pl.DataFrame(
        {
            "source": [0, 0, 1, 0, 1, 0],
            "pid": [5, 5, 5, 7, 5, 5],
            "tid": [1, 2, 1, 1, 3, 1],
            "correlation_id": [1, 2, 3, 4, 5, 6],
            "start_ns": [10, 20, 30, 40, 50, 60],
            "end_ns": [11, 21, 31, 41, 51, 61],
            "name": ["a", "b", "c", "d", "e", "f"],
        },
        schema=CUDA_API,
    )
    path = tmp_path / "t.parquet"
    rows.write_parquet(path, row_group_size=2)
    query = pl.scan_parquet(path)
    table = StoredTable(query=query, height=rows.height, schema=query.collect_schema())
    for keys in (
        [(0, 5, 1), (1, 5, 3)],
        [(0, 5, 1)],
        [(1, 5, 1), (0, 7, 1), (0, 9, 9)],
        [(0, 5, -1), (0, 5, 2)],  # a key that does not pack
        [],  # no feeding thread
        [(s, 5, t) for s in (0, 1) for t in range(20)],  # more than 32: the packed keys
    ):
        threads = pl.DataFrame(
            keys, schema={"source": pl.Int32, "pid": pl.Int32, "tid": pl.Int32}, orient="row"
        ).with_row_index("_th")
        assert rows_on_threads(table, threads).equals(on_threads(rows, threads))
        assert rows_on_threads(rows, threads).equals(on_threads(rows, threads))
        # Only the columns asked for (with the thread keys) are read from disk.
        narrow = rows_on_threads(table, threads, columns=("start_ns", "tid"))
        assert narrow.equals(on_threads(rows, threads).select("source", "pid", "tid", "start_ns"))


def test_assembled_query_shifts_and_drops_like_the_in_memory_path(tmp_path: Path) -> None:
    first = pl.DataFrame(
        {"source": [0, 0], "pid": [1, 1], "tid": [1, 1], "start_ns": [5, 9], "end_ns": [7, 8]},
    )
    second = pl.DataFrame(
        {"source": [1, 1], "pid": [2, 2], "tid": [3, 3], "start_ns": [1, 4], "end_ns": [3, 2]},
    )
    path = tmp_path / "first.parquet"
    first.write_parquet(path)
    query = pl.scan_parquet(path)
    on_disk = StoredTable(query=query, height=2, schema=query.collect_schema())
    offsets = pl.DataFrame(
        {"source": [0, 1], "offset_ns": [0, 100]},
        schema={"source": pl.Int32, "offset_ns": pl.Int64},
    )
    table, dropped = stored_assembled([on_disk, second], offsets, OSRT)
    assert dropped == 2  # one inverted row in each file
    assert table.height == 2
    got = table.collect()
    assert got.schema == pl.Schema(OSRT)
    assert got.select("source", "start_ns", "end_ns").rows() == [(0, 5, 7), (1, 101, 103)]
    # The file on disk, with the facts the table cache writes with it: its inverted row
    # is counted from them, not by a read, and its span is on the trace's timeline.
    counted = dataclasses.replace(on_disk, parts=(TablePart(query, 2, (5, 8), 1),))
    table, dropped = stored_assembled([counted, second], offsets, OSRT)
    assert (dropped, table.height) == (2, 2)
    assert [part.span for part in table.parts] == [(5, 8), (101, 103)]
    assert table.collect().equals(got)
    for span, want in (((0, 6), [(0, 5, 7)]), ((101, 102), [(1, 101, 103)]), ((50, 60), [])):
        read = table.lazy(span).filter(overlapping(span)).collect()
        assert read.schema == pl.Schema(OSRT)
        assert read.select("source", "start_ns", "end_ns").rows() == want


def _calls_table() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "source": [0, 0, 0, 1, 0, 0],
            "pid": [5, 5, 5, 5, 7, 5],
            "tid": [1, 1, 2, 1, 1, 1],
            "correlation_id": [10, 11, 11, 10, 10, None],
            "start_ns": [1, 2, 3, 4, 5, 6],
            "end_ns": [2, 3, 4, 5, 6, 7],
            "name": ["cudaLaunchKernel", "cudaMemcpy", "x", "y", "z", "w"],
        },
        schema=CUDA_API,
    )


@pytest.mark.parametrize("wide", [False, True, "sparse"])
def test_launch_calls_read_from_disk_are_those_of_the_gaps_keys(wide: bool | str) -> None:
    from nsysan.analyze.host_launch import _launch_calls

    # An id far above the others leaves no table of asked ids: the packed keys are
    # looked up instead.
    calls = _calls_table()
    extra = {True: [-(1 << 40)], "sparse": [1 << 45]}.get(wide, [])  # a negative id does not pack
    ids = [11, 10, None, 99, *extra]
    found = pl.DataFrame(
        {
            "_feed_source": [0, 1, 0, 0] + [0] * len(extra),
            "_feed_pid": [5, 5, 5, 5] + [5] * len(extra),
            "next_correlation_id": ids,
        },
        schema={"_feed_source": pl.Int32, "_feed_pid": pl.Int32, "next_correlation_id": pl.Int64},
    )
    on_disk = StoredTable(query=calls.lazy(), height=calls.height, schema=calls.schema)
    got = _launch_calls(on_disk, found)
    # Every call of (0, 5, 11), (1, 5, 10), none of (0, 7, 10) or the null id, in table order.
    assert got["launch_start_ns"].to_list() == [2, 3, 4]
    # In memory every call with an id is kept (the look-up picks among them).
    assert _launch_calls(calls, found)["launch_start_ns"].to_list() == [1, 2, 3, 4, 5]
    assert got.columns == [
        "next_correlation_id",
        "_feed_source",
        "_feed_pid",
        "tid",
        "launch_name",
        "launch_start_ns",
        "launch_end_ns",
    ]


def test_launch_starts_read_only_the_kernels_calls() -> None:
    from nsysan.analyze.balance_iterations import _launch_starts

    calls = _calls_table()
    kernels = pl.DataFrame(
        {
            "source": [0, 0, 1],
            "pid": [5, 5, 5],
            "correlation_id": [11, 12, 10],
            "start_ns": [100, 200, 300],
            "end_ns": [110, 210, 310],
        },
        schema={
            "source": pl.Int32,
            "pid": pl.Int32,
            "correlation_id": pl.Int64,
            "start_ns": pl.Int64,
            "end_ns": pl.Int64,
        },
    )
    expected = (
        kernels.join(
            calls.select("source", "pid", "correlation_id", "start_ns"),
            on=["source", "pid", "correlation_id"],
        )
        .select("source", "pid", "start_ns", "end_ns", pl.col("start_ns_right").alias("launch_ns"))
        .sort("launch_ns")
    )
    assert _launch_starts(kernels, calls).equals(expected)
    on_disk = calls.lazy()
    stored_calls = StoredTable(query=on_disk, height=calls.height, schema=calls.schema)
    assert _launch_starts(kernels, stored_calls).equals(expected)


def test_a_damaged_file_on_disk_is_a_miss(cache_on: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Bytes changed inside a stored file (its footer intact): it would fail to decode
    # only when an analysis reads it, so its checksum makes it a miss at the look-up.
    paths = _inputs("gil-blocked")
    monkeypatch.setattr(stored, "STORE_MIN_ROWS", 0)
    first = _document(load_trace(paths, store_host_tables=True))
    (entry,) = [p for p in cache_on.iterdir() if p.name != "runs"]
    (damaged,) = entry.glob("table.cuda_api.*.parquet")  # one slice: a small table
    with damaged.open("r+b") as fh:
        fh.seek(damaged.stat().st_size // 3)
        fh.write(b"\xff" * 64)
    again = load_trace(paths, store_host_tables=True)  # read from SQLite, stored afresh
    assert "cuda_api" in _stored_names(again)
    assert _document(again) == first
    assert [p for p in cache_on.iterdir() if p.name != "runs"] == [entry]
    assert pl.read_parquet(damaged).height == again.cuda_api.height  # rewritten whole


def test_big_tables_are_stored_by_thread(cache_on: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Slices of 4,096 rows (of T039's 14,100 CUDA calls), each in thread order, in row
    # groups of 512: a group's read skips the row groups of other threads.
    paths = _inputs("T039-gpu-poisson-solver")
    monkeypatch.setattr(stored, "STORE_MIN_ROWS", 0)
    monkeypatch.setattr(cache, "SLICE_ROWS", 4096)
    monkeypatch.setattr(cache, "ROW_GROUP_ROWS", 512)
    cache.set_enabled(False)
    calls = load_trace(paths).cuda_api
    cache.set_enabled(True)
    trace = load_trace(paths, store_host_tables=True)
    (entry,) = [p for p in cache_on.iterdir() if p.name != "runs"]
    files = sorted(entry.glob("table.cuda_api.*.parquet"))
    assert len(files) == -(-calls.height // 4096) == 4
    keys = ["source", "pid", "tid"]
    for number, file in enumerate(files):
        part = pl.read_parquet(file)
        # Each file is its slice of the table, sorted by thread, stably.
        assert part.equals(calls.slice(number * 4096, 4096).sort(keys, maintain_order=True))
        metadata = pq.ParquetFile(file).metadata
        assert metadata.num_row_groups == -(-part.height // 512)
        assert metadata.row_group(0).column(2).statistics.has_min_max  # tid
    stored_calls = trace.cuda_api
    assert isinstance(stored_calls, StoredTable)
    assert stored.collected(stored_calls).equals(pl.concat([pl.read_parquet(f) for f in files]))
    # Every thread's rows read alone are its rows in the table's order.
    threads = calls.select(keys).unique().sort(keys)
    assert threads.height > 1
    for thread in threads.with_columns(pl.lit(0, dtype=pl.Int32).alias("_th")).iter_slices(1):
        assert rows_on_threads(stored_calls, thread).equals(on_threads(calls, thread))
    # Each file is a part that knows its rows and the span of their time.
    assert len(stored_calls.parts) == len(files)
    for part, file in zip(stored_calls.parts, files, strict=True):
        rows = pl.read_parquet(file)
        assert part.rows == rows.height and part.inverted == 0
        assert part.span == (rows["start_ns"].min(), rows["end_ns"].max())
    # A time slice's read opens only the files whose span overlaps it, and reads the
    # rows a read of every file reads.
    lo, hi = calls["start_ns"].min(), calls["end_ns"].max()
    for cut in range(8):
        span = (lo + (hi - lo) * cut // 8, lo + (hi - lo) * (cut + 1) // 8)
        opened = [part for part in stored_calls.parts if part.overlaps(span)]
        assert 0 < len(opened) <= len(files)
        for thread in threads.with_columns(pl.lit(0, dtype=pl.Int32).alias("_th")).iter_slices(1):
            want = on_threads(calls.filter(overlapping(span)), thread)
            assert rows_on_threads(stored_calls, thread, span).equals(want)
    # T039's calls come in time order, but for a few long ones: a slice opens fewer files.
    assert any(
        len(
            [
                p
                for p in stored_calls.parts
                if p.overlaps((lo + (hi - lo) * c // 8, lo + (hi - lo) * (c + 1) // 8))
            ]
        )
        < len(files)
        for c in range(8)
    )
    # The warm run's parts are those the first run read in place.
    again = load_trace(paths, store_host_tables=True).cuda_api
    assert [(p.rows, p.span, p.inverted) for p in again.parts] == [
        (p.rows, p.span, p.inverted) for p in stored_calls.parts
    ]


def test_launch_calls_of_a_long_table_on_disk_keep_the_asked_in_order() -> None:
    # Enough rows for the streaming engine to test them in many batches, behind a filter
    # (as a table whose inverted rows are dropped is read).
    from nsysan.analyze.host_launch import _launch_calls

    rng = np.random.default_rng(3)
    n = 400_000
    calls = pl.DataFrame(
        {
            "source": rng.integers(0, 2, n),
            "pid": rng.choice([5, 9], n),
            "tid": rng.integers(1, 4, n),
            "correlation_id": rng.integers(0, n // 2, n),
            "start_ns": np.arange(n),
            "end_ns": np.arange(n) + 1 - (np.arange(n) % 97 == 0) * 5,
            "name": ["cudaLaunchKernel"] * n,
        },
        schema=CUDA_API,
    )
    kept = calls.filter(pl.col("end_ns") >= pl.col("start_ns"))
    on_disk = StoredTable(
        query=calls.lazy().filter(pl.col("end_ns") >= pl.col("start_ns")),
        height=kept.height,
        schema=calls.schema,
    )
    found = pl.DataFrame(
        {
            "_feed_source": rng.integers(0, 2, 50_000),
            "_feed_pid": rng.choice([5, 9, 11], 50_000),
            "next_correlation_id": rng.integers(0, n, 50_000),
        },
        schema={"_feed_source": pl.Int32, "_feed_pid": pl.Int32, "next_correlation_id": pl.Int64},
    )
    asked = found.rename(
        {"_feed_source": "source", "_feed_pid": "pid", "next_correlation_id": "correlation_id"}
    )
    expected = kept.join(asked.unique(), on=["source", "pid", "correlation_id"], how="semi")
    got = _launch_calls(on_disk, found)
    assert 0 < got.height < kept.height
    assert got["launch_start_ns"].to_list() == expected["start_ns"].to_list()
