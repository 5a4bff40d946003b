"""The launch-call look-up's compiled parts against dictionaries (nsysan.analyze.host_calls)."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from nsysan.analyze import host_launch
from nsysan.analyze.host_calls import (
    MAX_DIRECT_PROCESSES,
    asked_ids,
    asked_rows,
    direct_call_rows,
    direct_call_table,
    find_rows,
    gather_sorted,
)


@hsettings(deadline=None)
@given(
    st.lists(st.integers(0, 40), max_size=30),
    st.lists(st.integers(-2, 45), max_size=30),
)
def test_find_rows_matches_a_dictionary(keys: list[int], queries: list[int]) -> None:
    array = np.array(keys, dtype=np.int64)
    order = np.argsort(array, kind="stable")
    table, repeated = gather_sorted(array, order)
    assert table.tolist() == sorted(keys)
    assert repeated == (len(set(keys)) < len(keys))
    if repeated:
        return
    rows = find_rows(table, order, np.array(sorted(queries) + queries, dtype=np.int64))
    row_of = {k: i for i, k in enumerate(keys)}
    assert rows.tolist() == [row_of.get(q, -1) for q in sorted(queries) + queries]


_call = st.tuples(
    st.integers(0, 2),  # source
    st.sampled_from([7, 4_000, 2**16 - 1]),  # pid
    st.integers(0, 25),  # correlation id
    st.integers(0, 5),  # start
    st.integers(0, 5),  # end
)
_query = st.tuples(st.integers(-1, 2), st.sampled_from([-1, 7, 8, 2**16 - 1]), st.integers(-1, 30))


def _preferred(calls: list[tuple[int, int, int, int, int]]) -> dict[tuple[int, int, int], int]:
    """Per (source, pid, id): the row of the earliest (start, end), then the first."""
    best: dict[tuple[int, int, int], int] = {}
    for row, (source, pid, cid, start, end) in enumerate(calls):
        held = best.get((source, pid, cid))
        if held is None or (start, end) < calls[held][3:]:
            best[(source, pid, cid)] = row
    return best


def _arrays(rows: list[tuple[int, ...]], width: int) -> list[np.ndarray]:
    return [np.array([r[i] for r in rows], dtype=np.int64) for i in range(width)]


@hsettings(deadline=None)
@given(st.lists(_call, max_size=40), st.lists(_query, max_size=30))
def test_direct_table_finds_the_preferred_call(
    calls: list[tuple[int, int, int, int, int]], queries: list[tuple[int, int, int]]
) -> None:
    lookup = direct_call_table(*_arrays(calls, 5), max_slots=10_000)
    assert lookup is not None
    got = direct_call_rows(lookup, *_arrays(queries, 3))
    best = _preferred(calls)
    assert got.tolist() == [best.get(q, -1) for q in queries]


@hsettings(deadline=None)
@given(st.lists(_call, max_size=30), st.lists(_query, max_size=40))
def test_asked_rows_are_the_calls_with_an_asked_key(
    asked: list[tuple[int, int, int, int, int]], calls: list[tuple[int, int, int]]
) -> None:
    keys = [a[:3] for a in asked]
    table = asked_ids(*_arrays(keys, 3), max_slots=10_000)
    assert table is not None
    got = asked_rows(table, *_arrays(calls, 3))
    assert got.tolist() == [c in set(keys) for c in calls]


def test_asked_ids_refuse_sparse_ids_and_too_many_processes() -> None:
    ids = np.array([0, 10**9], dtype=np.int64)
    zeros = np.zeros(2, dtype=np.int64)
    assert asked_ids(zeros, zeros, ids, max_slots=1_000) is None
    pids = np.arange(MAX_DIRECT_PROCESSES + 1, dtype=np.int64)
    same = np.zeros(len(pids), dtype=np.int64)
    assert asked_ids(same, pids, same, max_slots=1_000) is None


def test_direct_table_refuses_sparse_ids_and_too_many_processes() -> None:
    ids = np.array([0, 10**9], dtype=np.int64)
    zeros = np.zeros(2, dtype=np.int64)
    assert direct_call_table(zeros, zeros, ids, zeros, zeros, max_slots=1_000) is None
    many = MAX_DIRECT_PROCESSES + 1
    pids = np.arange(many, dtype=np.int64)
    same = np.zeros(many, dtype=np.int64)
    assert direct_call_table(same, pids, same, same, same, max_slots=1_000) is None
    assert direct_call_table(same[:-1], pids[:-1], same[:-1], same[:-1], same[:-1], 1_000)


@hsettings(deadline=None, max_examples=60)
@given(st.lists(_call, max_size=40), st.lists(_query, max_size=30), st.booleans())
def test_direct_and_sorted_look_ups_give_one_table(
    calls: list[tuple[int, int, int, int, int]],
    queries: list[tuple[int, int, int]],
    sparse: bool,
) -> None:
    # Sparse ids (a huge gap between two of a process) send _launch_of to the sorted
    # keys; both ways must give the same rows.
    def frame(rows: list[tuple[int, ...]], names: list[str]) -> pl.DataFrame:
        schema = {n: (pl.Int32 if n in ("_feed_source", "_feed_pid") else pl.Int64) for n in names}
        return pl.DataFrame(rows, schema=schema, orient="row")

    keys = host_launch._CALL_KEYS
    found = frame(queries, keys).with_columns(pl.when(pl.col(c) >= 0).then(pl.col(c)) for c in keys)
    if sparse:
        calls = [*calls, (0, 7, 0, 9, 9), (0, 7, 2**40, 0, 0)]
    table = frame(calls, [*keys, *host_launch._PREFERRED_CALL]).with_columns(
        pl.int_range(pl.len()).alias("row")
    )
    widths = [2, 16, 41]  # what bit_widths gives the sparse case: 59 bits, packed
    direct = host_launch._direct_rows(found, table)
    assert (direct is None) == sparse
    expected = _preferred([tuple(c) for c in calls])  # type: ignore[misc]
    sorted_rows = host_launch._sorted_rows(found, table, widths)
    want = [expected.get(tuple(q), -1) for q in queries]  # type: ignore[arg-type]
    assert sorted_rows.tolist() == want
    if direct is not None:
        assert direct.tolist() == want
    joined = host_launch._launch_of(found, table)
    assert_frame_equal(joined.select(keys), found)
    assert joined["row"].to_list() == [None if w < 0 else w for w in want]


# Few keys and instants: calls share keys and tie on (start, end), queries repeat keys.
_close_call = st.tuples(
    st.integers(0, 1), st.just(7), st.integers(0, 4), st.integers(0, 2), st.integers(0, 2)
)
_close_query = st.tuples(st.integers(-1, 1), st.sampled_from([-1, 7]), st.integers(-1, 5))


@hsettings(deadline=None, max_examples=150)
@given(
    st.lists(st.tuples(_close_call, st.sampled_from([1, 2, 3, None])), max_size=30),
    st.lists(_close_query, max_size=20),
    st.integers(1, 7),
    st.none() | st.integers(0, 30),
)
def test_streamed_look_up_gives_the_preferred_call(
    calls: list[tuple[tuple[int, int, int, int, int], int | None]],
    queries: list[tuple[int, int, int]],
    batch_rows: int,
    cut: int | None,
) -> None:
    # Calls on disk read in batches (of a few rows here, so a key's calls fall in
    # several): each gap gets its key's preferred call, none without one. Queries
    # repeat keys (the kernels of one CUDA graph launch share its id); a call's tid
    # may be missing. With ``cut``, the table is two files, read one after the other.
    from nsysan.stored import StoredTable, TablePart

    keys = host_launch._CALL_KEYS
    found = pl.DataFrame(queries, schema=dict.fromkeys(keys, pl.Int64), orient="row").with_columns(
        pl.when(pl.col(c) >= 0).then(pl.col(c)).cast(pl.Int32 if c != keys[2] else pl.Int64)
        for c in keys
    )
    rows = [(*call, tid) for call, tid in calls]
    table = pl.DataFrame(
        rows,
        schema={
            "source": pl.Int32,
            "pid": pl.Int32,
            "correlation_id": pl.Int64,
            "start_ns": pl.Int64,
            "end_ns": pl.Int64,
            "tid": pl.Int32,
        },
        orient="row",
    )
    parts = ()
    if cut is not None:
        cut = min(cut, table.height)
        parts = tuple(TablePart(f.lazy(), f.height) for f in (table[:cut], table[cut:]))
    on_disk = StoredTable(query=table.lazy(), height=table.height, schema=table.schema, parts=parts)
    original = host_launch._CALL_BATCH_ROWS
    host_launch._CALL_BATCH_ROWS = batch_rows
    try:
        got = host_launch._streamed_launch_of(found, on_disk)
    finally:
        host_launch._CALL_BATCH_ROWS = original
    assert got is not None
    assert_frame_equal(got.select(keys), found)
    assert got.schema["tid"] == pl.Int32
    best = _preferred([call for call, _ in calls])
    want = [best.get(q) for q in queries]  # type: ignore[call-overload]
    assert got["launch_start_ns"].to_list() == [None if w is None else calls[w][0][3] for w in want]
    assert got["launch_end_ns"].to_list() == [None if w is None else calls[w][0][4] for w in want]
    assert got["tid"].to_list() == [None if w is None else calls[w][1] for w in want]


def test_streamed_look_up_leaves_keys_that_do_not_pack_to_the_others() -> None:
    from nsysan.stored import StoredTable

    found = pl.DataFrame(
        {"_feed_source": [0], "_feed_pid": [7], "next_correlation_id": [-(1 << 40)]},
        schema={"_feed_source": pl.Int32, "_feed_pid": pl.Int32, "next_correlation_id": pl.Int64},
    )
    table = pl.DataFrame(
        {
            "source": [0],
            "pid": [7],
            "correlation_id": [1],
            "start_ns": [0],
            "end_ns": [1],
            "tid": [1],
        }
    )
    on_disk = StoredTable(query=table.lazy(), height=1, schema=table.schema)
    assert host_launch._streamed_launch_of(found, on_disk) is None
