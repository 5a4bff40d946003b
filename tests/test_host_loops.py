"""The compiled loops of host attribution against nanosecond-by-nanosecond brute force."""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from nsysan.analyze import host_loops
from nsysan.analyze.host_loops import (
    EdgeStreams,
    cause_segments,
    find_rows,
    first_largest,
    gather_sorted,
    time_per_cause,
)

LAYERS = 4
THREADS = 3
HORIZON = 120

# (layer, thread, start, length): intervals may nest, overlap and share edges.
intervals = st.lists(
    st.tuples(
        st.integers(0, LAYERS - 1),
        st.integers(0, THREADS - 1),
        st.integers(0, HORIZON - 20),
        st.integers(1, 20),
    ),
    max_size=25,
)
# (thread, start, length), in any order.
portions = st.lists(
    st.tuples(st.integers(0, THREADS - 1), st.integers(0, HORIZON), st.integers(0, 30)),
    max_size=12,
)


def streams_of(rows: list[tuple[int, int, int, int]], shuffle: int) -> EdgeStreams:
    streams = EdgeStreams()
    for layer in range(LAYERS):
        mine = [r for r in rows if r[0] == layer]
        if not mine:
            continue
        # The rows come in any order: the streams sort them.
        mine = random.Random(shuffle).sample(mine, len(mine)) if shuffle else mine
        thread = np.array([r[1] for r in mine], dtype=np.uint32)
        start = np.array([r[2] for r in mine], dtype=np.int64)
        streams.add_layer(layer, thread, start, start + np.array([r[3] for r in mine]))
    return streams


def brute_force(
    rows: list[tuple[int, int, int, int]], depth_layer: int
) -> dict[tuple[int, int], tuple[int, int]]:
    """Per (thread, nanosecond): the lowest layer open and the open count of ``depth_layer``."""
    state = {}
    for thread in range(THREADS):
        for t in range(HORIZON + 40):
            open_ = [r[0] for r in rows if r[1] == thread and r[2] <= t < r[2] + r[3]]
            if open_:
                state[(thread, t)] = (min(open_), open_.count(depth_layer))
    return state


@hsettings(max_examples=150, deadline=None)
@given(rows=intervals, depth_layer=st.integers(-1, LAYERS - 1), shuffle=st.integers(0, 7))
def test_segments_cover_exactly_the_instants_some_layer_holds(
    rows: list[tuple[int, int, int, int]], depth_layer: int, shuffle: int
) -> None:
    thread, start, end, cause, depth = cause_segments(
        streams_of(rows, shuffle), LAYERS, depth_layer
    )
    got = {}
    for th, s, e, c, d in zip(thread, start, end, cause, depth, strict=True):
        assert s < e
        for t in range(s, e):
            assert (int(th), t) not in got, "segments overlap"
            got[(int(th), t)] = (int(c), int(d))
    expected = brute_force(rows, depth_layer)
    if depth_layer < 0:
        expected = {k: (c, 0) for k, (c, _) in expected.items()}
    assert got == expected
    # In (thread, start) order.
    keys = list(zip(thread.tolist(), start.tolist(), strict=True))
    assert keys == sorted(keys)


@hsettings(max_examples=150, deadline=None)
@given(rows=intervals, wanted=portions, depth_layer=st.integers(-1, LAYERS - 1))
def test_time_per_cause_sums_the_instants_of_each_portion(
    rows: list[tuple[int, int, int, int]],
    wanted: list[tuple[int, int, int]],
    depth_layer: int,
) -> None:
    segments = cause_segments(streams_of(rows, 0), LAYERS, depth_layer)
    slots = len(wanted) + 2
    # Slots out of order, and two left without a portion.
    slot = np.array([slots - 1 - i for i in range(len(wanted))], dtype=np.int64)
    present, spent = time_per_cause(
        segments,
        LAYERS,
        [
            np.array([w[0] for w in wanted], dtype=np.uint32),
            np.array([w[1] for w in wanted], dtype=np.int64),
            np.array([w[1] + w[2] for w in wanted], dtype=np.int64),
            slot,
        ],
        slots,
    )
    state = brute_force(rows, depth_layer)
    assert sorted(present.tolist()) == sorted({c for c, _ in state.values()})
    expected = np.zeros((len(present) + 1, slots), dtype=np.int64)
    for (thread, start, length), at in zip(wanted, slot.tolist(), strict=True):
        for t in range(start, start + length):
            if (thread, t) in state:
                cause, depth = state[(thread, t)]
                expected[present.tolist().index(cause), at] += 1
                expected[-1, at] += depth_layer >= 0 and depth > 0
    np.testing.assert_array_equal(spent, expected)


def test_no_segments_give_no_time() -> None:
    present, spent = time_per_cause(
        cause_segments(EdgeStreams(), LAYERS, -1),
        LAYERS,
        [np.zeros(2, np.uint32), np.array([0, 5]), np.array([9, 9]), np.array([0, 1])],
        3,
    )
    assert present.size == 0
    np.testing.assert_array_equal(spent, np.zeros((1, 3), dtype=np.int64))


@hsettings(deadline=None)  # the first example may compile the loop
@given(st.lists(st.lists(st.integers(0, 5), min_size=3, max_size=3), max_size=20))
def test_first_largest_takes_the_first_of_equals(rows: list[list[int]]) -> None:
    columns = [np.array([r[j] for r in rows], dtype=np.int64) for j in range(3)]
    where = np.array([i % 4 != 3 for i in range(len(rows))], dtype=bool)
    got = first_largest(columns, where)
    expected = [r.index(max(r)) if w else -1 for r, w in zip(rows, where, strict=True)]
    assert got.tolist() == expected
    # A column left out never wins, even when it holds the largest value.
    got = first_largest([columns[0], None, columns[2]], where)
    expected = [(0 if r[0] >= r[2] else 2) if w else -1 for r, w in zip(rows, where, strict=True)]
    assert got.tolist() == expected


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


def test_without_a_writable_cache_the_loops_compile_per_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[dict[str, bool]] = []

    def njit(**options: bool) -> Callable[[Callable[..., int]], Callable[..., int]]:
        asked.append(options)
        if options.get("cache"):
            raise RuntimeError("cannot cache function: no locator available")
        return lambda function: function

    monkeypatch.setattr(host_loops, "njit", njit)
    compiled = host_loops._compiled(lambda: 7)
    assert compiled() == 7
    assert asked == [{"nogil": True, "cache": True}, {"nogil": True}]


@hsettings(max_examples=150, deadline=None)
@given(rows=intervals, wanted=portions, depth_layer=st.integers(-1, LAYERS - 1))
def test_a_window_layer_keeps_only_the_segments_inside_it(
    rows: list[tuple[int, int, int, int]],
    wanted: list[tuple[int, int, int]],
    depth_layer: int,
) -> None:
    streams = streams_of(rows, 0)
    streams.add_layer(
        LAYERS,
        np.array([w[0] for w in wanted], dtype=np.uint32),
        np.array([w[1] for w in wanted], dtype=np.int64),
        np.array([w[1] + w[2] for w in wanted], dtype=np.int64),
    )
    thread, start, end, cause, depth = cause_segments(streams, LAYERS, depth_layer, LAYERS)
    inside = {(th, t) for th, s, n in wanted for t in range(s, s + n)}
    got = {}
    for th, s, e, c, d in zip(thread, start, end, cause, depth, strict=True):
        for t in range(s, e):
            got[(int(th), t)] = (int(c), int(d))
    expected = {
        k: (c, d if depth_layer >= 0 else 0)
        for k, (c, d) in brute_force(rows, depth_layer).items()
        if k in inside
    }
    assert got == expected


# Disjoint segments per thread (thread, start, length, text, counted), built by cutting
# each thread's line at random points.
@st.composite
def _text_segments(draw: st.DrawFn) -> list[tuple[int, int, int, int, bool]]:
    out = []
    for th in range(THREADS):
        cuts = sorted(set(draw(st.lists(st.integers(0, HORIZON), max_size=12))))
        for a, b in zip(cuts, cuts[1:], strict=False):
            if draw(st.booleans()):
                # Text -2: in no range (left out); -1: crossing ranges (a text).
                out.append((th, a, b - a, draw(st.integers(-2, 3)), draw(st.booleans())))
    return out


@given(_text_segments(), portions)
@hsettings(max_examples=200, deadline=None)
def test_time_per_text_sums_the_instants_of_each_portion(
    segs: list[tuple[int, int, int, int, bool]], ps: list[tuple[int, int, int]]
) -> None:
    seg = [np.array([s[i] for s in segs], dtype=np.int64) for i in range(5)]
    seg[2] = seg[1] + seg[2]  # lengths to ends
    por = [np.array([p[i] for p in ps], dtype=np.int64) for i in range(3)]
    por[2] = por[1] + por[2]
    portion, first, covered, counted = host_loops.time_per_text(
        [seg[0], seg[1], seg[2], seg[3], seg[4].astype(bool)], por
    )
    got = {
        (int(p), int(seg[3][f])): (int(c), int(n))
        for p, f, c, n in zip(portion, first, covered, counted, strict=True)
    }
    assert len(got) == len(portion)  # one row per (portion, text)
    want: dict[tuple[int, int], list[int]] = {}
    for p, (th, a, length) in enumerate(ps):
        for t in range(a, a + length):
            for s_th, s_a, s_len, text, is_counted in segs:
                if s_th == th and s_a <= t < s_a + s_len and text >= -1:
                    tally = want.setdefault((p, text), [0, 0])
                    tally[0] += 1
                    tally[1] += int(is_counted)
    assert got == {k: (v[0], v[1]) for k, v in want.items()}
    for f, p in zip(first, portion, strict=True):  # the named segment is one that met it
        assert seg[0][f] == por[0][p]


def test_innermost_ranges_takes_the_deepest_holding_range_else_the_latest() -> None:
    # Thread 0: A [0,100) depth 1 holds B [10,50) depth 2; C [60,120) depth 2 crosses A.
    ranges = [
        np.array(v, dtype=np.int64) for v in ([0, 0, 0], [0, 10, 60], [100, 50, 120], [1, 2, 2])
    ]
    segments = [
        np.array(v, dtype=np.int64)
        for v in ([0, 0, 0, 0], [5, 20, 70, 105], [10, 40, 90, 110], [1, 2, 2, 1])
    ]
    # In A only; in B; in C (depth 2 and holding); after A ended, depth 1: C is the
    # latest opened and still holds it.
    assert host_loops.innermost_ranges(segments, ranges).tolist() == [0, 1, 2, 2]
    # A segment running past every range open at its start has none.
    past = [np.array(v, dtype=np.int64) for v in ([0], [90], [130], [2])]
    assert host_loops.innermost_ranges(past, ranges).tolist() == [-1]
