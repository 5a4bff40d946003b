"""A thread group's host portions attributed in time slices give the unsliced result."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import example, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from test_host import busy_host, launch, make_trace, rng

from nsysan.analyze import host as host_module
from nsysan.analyze import host_range_order, host_slices, host_timeline
from nsysan.analyze.busy import measure_busy
from nsysan.analyze.gaps import measure_gaps
from nsysan.analyze.host import HostResult, attribute_gaps
from nsysan.analyze.host_causes import NVTX_CROSSING
from nsysan.analyze.host_range_order import range_order
from nsysan.analyze.host_slices import range_runs, ranges_in_slice, time_slices
from nsysan.analyze.transfers import transfer_intervals
from nsysan.model import Trace
from nsysan.settings import Settings
from nsysan.stored import STORED_TABLES, StoredTable


def _attributed(trace: Trace, detail: bool = True) -> HostResult:
    settings = Settings()
    busy = measure_busy(trace, settings)
    gaps = measure_gaps(busy.intervals, busy.summary, busy.keys)
    return attribute_gaps(
        trace,
        gaps.gaps,
        settings,
        gaps.keys,
        transfers=transfer_intervals(trace),
        per_gap_detail=detail,
    )


def _assert_same(a: HostResult, b: HostResult) -> None:
    for name in HostResult.__dataclass_fields__:
        x, y = getattr(a, name), getattr(b, name)
        assert x.equals(y) if isinstance(x, pl.DataFrame) else x == y, name


@pytest.mark.parametrize("size", [1, 2, 7, 20])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_slices_give_the_unsliced_result(
    seed: int, size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Three threads with CUDA, OS runtime and sync calls, GIL waits, descheduled time,
    # memcpys under the gaps, nested push/pop ranges and crossing start/end ranges.
    trace = busy_host(seed)
    whole = _attributed(trace)
    spans: list[Any] = []
    cut = host_slices.ranges_in_slice

    def counted(ranges: pl.DataFrame, runs: Any, lo: int, hi: int) -> pl.DataFrame:
        spans.append((lo, hi))
        return cut(ranges, runs, lo, hi)

    monkeypatch.setattr(host_slices, "SLICE_PORTIONS", size)
    monkeypatch.setattr(host_slices, "ranges_in_slice", counted)
    sliced = _attributed(trace)
    assert len(spans) > 1
    _assert_same(sliced, whole)
    assert whole.gaps["nvtx_ns"].sum() > 0 and whole.gaps["gil_wait_ns"].sum() > 0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_summary_texts_summed_slice_by_slice_give_the_unsliced_sums(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without the detail, each slice's NVTX text time is summed per GPU as soon as the
    # slice is done (host_slices.thread_group_time's summed_texts).
    trace = busy_host(seed)
    whole = _attributed(trace, detail=False)
    returned: list[pl.DataFrame] = []
    group_time = host_slices.thread_group_time

    def kept(*args: Any, **kwargs: Any) -> Any:
        spent, texts = group_time(*args, **kwargs)
        returned.append(texts)
        return spent, texts

    monkeypatch.setattr(host_slices, "SLICE_PORTIONS", 2)
    monkeypatch.setattr(host_module, "thread_group_time", kept)
    sliced = _attributed(trace, detail=False)
    _assert_same(sliced, whole)
    assert whole.nvtx["nvtx_ns"].sum() > 0
    # A (GPU, text) pair twice in one group's sums: each slice was summed on its own
    # (summed once per group, every pair would be there once).
    assert any(t.select("gpu", "nvtx_text").is_duplicated().any() for t in returned)


def _on_disk(trace: Trace) -> Trace:
    """``trace`` with its host tables read through queries, as from the table cache."""
    return dataclasses.replace(
        trace,
        **{
            name: StoredTable(query=df.lazy(), height=df.height, schema=df.schema)
            for name in STORED_TABLES
            if isinstance(df := trace.table(name), pl.DataFrame)
        },
    )


@pytest.mark.parametrize("detail", [True, False])
@pytest.mark.parametrize("seed", [0, 1])
def test_slices_of_tables_on_disk_give_the_result_in_memory(
    seed: int, detail: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A group's NVTX ranges read from disk by nvtx_ranges, its slices' rows by span.
    trace = busy_host(seed)
    whole = _attributed(trace, detail)
    monkeypatch.setattr(host_slices, "SLICE_PORTIONS", 3)
    _assert_same(_attributed(_on_disk(trace), detail), whole)


def test_a_crossing_range_ended_before_the_slice_still_decides() -> None:
    # Two gaps, [10, 400) and [410, 1000), their kernels launched at 350 and 900: two
    # host portions, one slice each. In the second, after 500 only "c" is open, but
    # the sweep's candidates are "a" (last opened at depth 1) and "b" (last opened at
    # all), both ended: crossing time. "b" ended before that slice starts; without it
    # the slice would take "c" for the segments' range.
    se = {"event_type": "NvtxStartEndRange"}
    trace = make_trace(
        kernels=[
            {"start_ns": 0, "end_ns": 10, "correlation_id": 1},
            {"start_ns": 400, "end_ns": 410, "correlation_id": 2},
            {"start_ns": 1_000, "end_ns": 1_010, "correlation_id": 3},
        ],
        cuda_api=[launch(350, 360, 2), launch(900, 910, 3)],
        nvtx=[rng(100, 500, "a", **se), rng(150, 800, "c", **se), rng(200, 300, "b", **se)],
    )
    whole = _attributed(trace)
    texts = dict(whole.nvtx.select("text", "nvtx_ns").rows())
    assert texts[NVTX_CROSSING] == 300
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(host_slices, "SLICE_PORTIONS", 1)
        _assert_same(_attributed(trace), whole)


def test_time_slices_take_every_portion_once_in_start_order() -> None:
    rand = np.random.default_rng(5)
    start = rand.integers(0, 1_000_000, 1_000)
    portions = pl.DataFrame({"start_ns": start, "end_ns": start + rand.integers(1, 50_000, 1_000)})
    slices = list(time_slices(portions, 128))
    rows = np.concatenate([r for r, _ in slices])
    assert np.array_equal(np.sort(rows), np.arange(1_000))
    previous_last = -1
    for r, span in slices:
        assert span is not None and len(r) <= 128
        lo, hi = span
        part = portions[r]
        assert part["start_ns"].min() == lo and part["end_ns"].max() == hi
        assert lo >= previous_last
        previous_last = int(part["start_ns"].max())
    (whole,) = time_slices(portions, 1_000)
    assert whole[1] is None and np.array_equal(whole[0], np.arange(1_000))


def test_ranges_in_slice_keeps_the_last_before_it_per_thread_and_depth() -> None:
    ranges = pl.DataFrame(
        {
            "_th": [0, 0, 0, 0, 1, 1],
            "start_ns": [0, 10, 20, 30, 5, 60],
            "_range_end": [100, 15, 25, 35, 8, 70],
            "text": ["outer", "x", "y", "z", "t1", "t1b"],
            "_depth": [1, 2, 2, 2, 1, 1],
        }
    )
    kept = ranges_in_slice(ranges, range_runs(ranges), 50, 80)
    # Thread 0: "outer" overlaps; "z", the last opened before 50 and the last at
    # depth 2. Thread 1: "t1" (last before, depth 1) and "t1b" (overlaps).
    assert kept["text"].to_list() == ["outer", "z", "t1", "t1b"]


# Ranges (thread, start, length) that nest or cross, on two threads; a span (lo, length).
_ranges = st.lists(
    st.tuples(st.integers(0, 1), st.integers(0, 40), st.integers(1, 30)), max_size=30
)


@hsettings(max_examples=500, deadline=None)
@given(_ranges, st.integers(0, 50), st.integers(1, 20), st.sampled_from([1, 2, 3, 256]))
# [22, 28) is the last begun before 30 at depth 1 (neither the thread's last nor open),
# and [30, 40) begins at the span's start, at that depth: not before it.
@example([(0, 10, 10), (0, 22, 6), (0, 24, 2), (0, 30, 10)], 30, 5, 256)
def test_ranges_in_slice_are_those_of_the_definition(
    rows: list[tuple[int, int, int]], lo: int, length: int, block: int
) -> None:
    # In blocks of 1-3 ranges, whole blocks ended before the span are skipped.
    ordered = sorted((t, a, a + n) for t, a, n in rows)
    ordered.sort(key=lambda r: (r[0], r[1], -r[2]))  # as nvtx_ranges orders them
    th, start, end = ([r[k] for r in ordered] for k in range(3))
    depth = host_timeline._nesting_depth(*(np.array(v, dtype=np.int64) for v in (th, start, end)))
    ranges = pl.DataFrame(
        {
            "_th": th,
            "start_ns": start,
            "_range_end": end,
            "text": [f"r{i}" for i in range(len(th))],
            "_depth": depth,
        },
        schema={
            "_th": pl.UInt32,
            "start_ns": pl.Int64,
            "_range_end": pl.Int64,
            "text": pl.String,
            "_depth": pl.Int32,
        },
    )
    depth = depth.tolist()
    hi = lo + length
    want = set()
    for i in range(len(th)):
        mine = [j for j in range(len(th)) if th[j] == th[i] and start[j] < lo]
        if start[i] < hi and end[i] > lo:
            want.add(i)  # overlaps the span
        if mine and i == mine[-1]:
            want.add(i)  # the last begun before it on its thread
        if [j for j in mine if depth[j] == depth[i]][-1:] == [i]:
            want.add(i)  # the last begun before it at its depth
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(host_slices, "_RANGE_BLOCK", block)
        kept = ranges_in_slice(ranges, range_runs(ranges), lo, hi)
    assert kept.equals(ranges[sorted(want)])


def test_texts_numbered_by_code_or_among_the_ranges_or_not_at_all(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    codes = np.array([7, 3, 7, 900], dtype=np.uint32)
    monkeypatch.setattr(host_timeline, "_KEY_TEXT_CELLS", 2_000)
    # Codes as they are: 901 texts for two keys fit.
    numbers, crossing, count = host_timeline._text_numbers(codes, 5, 2)
    assert numbers.tolist() == [7, 3, 7, 900] and (crossing, count) == (5, 901)
    # Three keys do not: the distinct codes (and the crossing one) in order, 3 5 7 900.
    numbers, crossing, count = host_timeline._text_numbers(codes, 5, 3)
    assert numbers.tolist() == [2, 0, 2, 3] and (crossing, count) == (1, 4)
    # The crossing code may be one of the ranges' texts (a range named like it).
    numbers, crossing, count = host_timeline._text_numbers(codes, 900, 3)
    assert numbers.tolist() == [1, 0, 1, 2] and (crossing, count) == (2, 3)
    monkeypatch.setattr(host_timeline, "_KEY_TEXT_CELLS", 11)
    assert host_timeline._text_numbers(codes, 5, 3) is None


@pytest.mark.parametrize("cells", [0, 1 << 21])
@pytest.mark.parametrize("seed", [0, 1])
def test_texts_summed_per_gpu_are_those_of_the_per_gap_texts(
    seed: int, cells: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Summed in the (GPU, text) table, or (no cell allowed) from the per-gap rows.
    trace = busy_host(seed)
    detail = _attributed(trace, detail=True)
    monkeypatch.setattr(host_timeline, "_KEY_TEXT_CELLS", cells)
    monkeypatch.setattr(host_slices, "SLICE_PORTIONS", 3)
    lean = _attributed(trace, detail=False)
    assert lean.nvtx.equals(detail.nvtx) and lean.per_gpu.equals(detail.per_gpu)
    assert detail.nvtx["nvtx_ns"].sum() > 0


@hsettings(max_examples=400, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 2), st.integers(0, 30), st.integers(1, 10)), max_size=40),
    st.sampled_from(["as drawn", "by thread", "in order"]),
)
def test_range_order_is_the_three_key_sort(rows: list[tuple[int, int, int]], how: str) -> None:
    # Threads interleaved or grouped, starts out of order or not, ties at one instant.
    if how == "by thread":
        rows = sorted(rows, key=lambda r: r[0])
    elif how == "in order":
        rows = sorted(rows, key=lambda r: (r[0], r[1], -r[2]))
    thread, start, length = (np.array([r[k] for r in rows], dtype=np.int64) for k in range(3))
    end = start + length
    want = np.lexsort((-end, start, thread))
    got = range_order(thread.astype(np.uint32), start, end)
    if got is None:  # said to be in order
        assert np.array_equal(want, np.arange(len(rows)))
    else:
        assert np.array_equal(got, want)
    if how == "in order":
        assert got is None


@hsettings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, 30), st.integers(1, 4)),
        min_size=16,
        max_size=80,
    ),
    st.lists(st.tuples(st.integers(0, 79), st.integers(0, 79)), min_size=1, max_size=2),
)
def test_a_few_rows_out_of_place_are_merged_back(
    rows: list[tuple[int, int, int]], moves: list[tuple[int, int]]
) -> None:
    # Ranges in order (ties at one instant and equal keys included), then one or two rows
    # moved elsewhere: too early or too late in the table, as an export leaves them. Two
    # rows moved opposite ways may leave many rows before a later one and many after an
    # earlier one: then the sort.
    rows = sorted(rows, key=lambda r: (r[0], r[1], -r[2]))
    for a, b in moves:
        rows.insert(b % len(rows), rows.pop(a % len(rows)))
    thread, start, length = (np.array([r[k] for r in rows], dtype=np.int64) for k in range(3))
    end = start + length
    want = np.lexsort((-end, start, thread))
    got = range_order(thread.astype(np.uint32), start, end)
    if got is None:
        assert np.array_equal(want, np.arange(len(rows)))
        return
    assert np.array_equal(got, want)
    merged = host_range_order._merged_order(thread.astype(np.uint32), start, end)
    if len(moves) == 1:
        # One row moved: it alone is out of place, merged back, not sorted.
        assert merged is not None and np.array_equal(merged, want)
    elif merged is not None:
        assert np.array_equal(merged, want)


def test_rows_out_of_place_past_the_share_are_sorted_instead() -> None:
    start = np.arange(64, dtype=np.int64)[::-1].copy()  # every row out of place
    thread = np.zeros(64, dtype=np.uint32)
    end = start + 1
    assert host_range_order._merged_order(thread, start, end) is None
    assert np.array_equal(range_order(thread, start, end), np.arange(64)[::-1])
    # One early row far from its place: one row out of place, merged back.
    start = np.concatenate([[1000], np.arange(63)]).astype(np.int64)
    order = host_range_order._merged_order(thread, start, start + 1)
    assert order is not None and order.tolist() == [*range(1, 64), 0]
    # The smaller set is taken: one late row, not the hundred rows it is late by.
    start = np.concatenate([np.arange(1, 101), [0], np.arange(101, 1000)]).astype(np.int64)
    thread = np.zeros(1000, dtype=np.uint32)
    out, few = host_range_order._out_of_place(thread, start, start + 1, 125)
    assert few and np.flatnonzero(out).tolist() == [100]
    assert np.array_equal(range_order(thread, start, start + 1), np.argsort(start, kind="stable"))


@hsettings(max_examples=200, deadline=None)
@given(
    st.integers(0, 3000),
    st.lists(st.tuples(st.integers(0, 2999), st.integers(0, 2999)), max_size=3),
    st.booleans(),
)
@example(1000, [(5, 900)], False)
@example(1000, [(900, 5), (3, 4)], False)
def test_rows_put_in_order_by_runs_or_by_gather_are_the_gather(
    n: int, moves: list[tuple[int, int]], shuffled: bool
) -> None:
    # A few rows moved (a few runs of consecutive rows: joined as slices) or every row
    # shuffled (short runs: gathered), over columns of several types.
    order = list(range(n))
    for a, b in moves:
        if n:
            order.insert(b % n, order.pop(a % n))
    positions = np.array(order, dtype=np.int64)
    if shuffled:
        positions = np.random.default_rng(n).permutation(n)
    frame = pl.DataFrame(
        {
            "_th": np.arange(n, dtype=np.int32) % 3,
            "start_ns": np.arange(n, dtype=np.int64) * 7,
            "text": pl.Series([f"r{i % 5}" for i in range(n)], dtype=pl.Categorical),
        }
    )
    want = frame.select(pl.all().gather(positions))
    got = host_range_order.in_order(frame.clone(), positions)
    assert got.equals(want) and got.schema == want.schema
    assert all(got[c].n_chunks() == 1 for c in got.columns)
