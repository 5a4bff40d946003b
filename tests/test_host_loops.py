"""The compiled loops of host attribution against nanosecond-by-nanosecond brute force."""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from nsysan import compiled as compiled_module
from nsysan.analyze import host_text_loops
from nsysan.analyze.host_loops import (
    CROSSING,
    OUTSIDE,
    EdgeStreams,
    Segments,
    at_or_before,
    cause_segments,
    first_largest,
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


def streams_of(
    rows: list[tuple[int, int, int, int]], shuffle: int, depth_layer: int
) -> EdgeStreams:
    """The rows as edge streams; ``depth_layer``'s rows added as NVTX ranges (range order)."""
    streams = EdgeStreams(THREADS)
    others = [r for r in rows if r[0] != depth_layer]
    # The rows come in any order, all layers mixed: the streams sort them.
    others = random.Random(shuffle).sample(others, len(others)) if shuffle else others
    if others:
        streams.add_rows(
            np.array([r[0] for r in others]),
            np.array([r[1] for r in others], dtype=np.uint32),
            np.array([r[2] for r in others]),
            np.array([r[2] + r[3] for r in others]),
        )
    ranges = ranges_of(rows, depth_layer)
    if ranges[0].size:
        streams.add_layer(depth_layer, ranges[0], ranges[1], ranges[2])
    return streams


def ranges_of(rows: list[tuple[int, int, int, int]], depth_layer: int) -> list[np.ndarray]:
    """``depth_layer``'s rows as NVTX ranges: thread, start, end, depth, in range order."""
    mine = sorted(
        ((r[1], r[2], r[2] + r[3]) for r in rows if r[0] == depth_layer),
        key=lambda r: (r[0], r[1], -r[2]),
    )
    depth = [
        sum(1 for o in mine[: i + 1] if o[0] == r[0])
        - sum(1 for o in mine if o[0] == r[0] and o[2] <= r[1])
        for i, r in enumerate(mine)
    ]
    if not mine:
        return [np.zeros(0, np.int64)] * 4
    columns = [list(column) for column in zip(*mine, strict=True)]
    return [np.array(v, dtype=np.int64) for v in (*columns, depth)]


def segments_of(
    rows: list[tuple[int, int, int, int]],
    depth_layer: int,
    shuffle: int = 0,
    window: list[tuple[int, int, int]] | None = None,
    merge: bool = False,
) -> Segments:
    streams = streams_of(rows, shuffle, depth_layer)
    if window is not None:
        streams.add_layer(
            LAYERS,
            np.array([w[0] for w in window], dtype=np.uint32),
            np.array([w[1] for w in window], dtype=np.int64),
            np.array([w[1] + w[2] for w in window], dtype=np.int64),
        )
    ranges = ranges_of(rows, depth_layer)
    window_layer = LAYERS if window is not None else -1
    return cause_segments(streams, LAYERS, depth_layer, ranges[3], ranges[2], window_layer, merge)


def brute_force(
    rows: list[tuple[int, int, int, int]], depth_layer: int
) -> dict[tuple[int, int], tuple[int, bool]]:
    """Per (thread, nanosecond): the lowest layer open and whether ``depth_layer`` is open."""
    state = {}
    for thread in range(THREADS):
        for t in range(HORIZON + 40):
            open_ = [r[0] for r in rows if r[1] == thread and r[2] <= t < r[2] + r[3]]
            if open_:
                state[(thread, t)] = (min(open_), depth_layer in open_)
    return state


def instants(
    segments: Segments, rows: list[tuple[int, int, int, int]], depth_layer: int
) -> dict[tuple[int, int], tuple[int, bool]]:
    """Per (thread, nanosecond) in a segment: its cause and whether it is in a range.

    Checks on the way that segments are disjoint, in start order per thread, and
    that a segment's innermost range holds it.
    """
    ranges = ranges_of(rows, depth_layer)
    got = {}
    for th, s, e, c, r in zip(
        segments.thread(),
        segments.start,
        segments.end,
        segments.cause,
        segments.nvtx_range,
        strict=True,
    ):
        assert s < e
        if r >= 0:
            assert ranges[0][r] == th and ranges[1][r] <= s and ranges[2][r] >= e
        for t in range(s, e):
            assert (int(th), t) not in got, "segments overlap"
            got[(int(th), t)] = (int(c), bool(r != OUTSIDE))
    for lo, hi in zip(segments.bounds, segments.bounds[1:], strict=False):
        assert list(segments.start[lo:hi]) == sorted(segments.start[lo:hi])
    return got


@hsettings(max_examples=150, deadline=None)
@given(
    rows=intervals,
    depth_layer=st.integers(-1, LAYERS - 1),
    shuffle=st.integers(0, 7),
    merge=st.booleans(),
)
def test_segments_cover_exactly_the_instants_some_layer_holds(
    rows: list[tuple[int, int, int, int]], depth_layer: int, shuffle: int, merge: bool
) -> None:
    segments = segments_of(rows, depth_layer, shuffle, merge=merge)
    assert instants(segments, rows, depth_layer) == brute_force(rows, depth_layer)
    if merge:  # a segment never just continues the previous one
        same = (
            (segments.start[1:] == segments.end[:-1])
            & (segments.cause[1:] == segments.cause[:-1])
            & (segments.nvtx_range[1:] == segments.nvtx_range[:-1])
        )
        assert not np.any(same & (segments.thread()[1:] == segments.thread()[:-1]))


@hsettings(max_examples=150, deadline=None)
@given(rows=intervals, wanted=portions, depth_layer=st.integers(-1, LAYERS - 1))
def test_time_per_cause_sums_the_instants_of_each_portion(
    rows: list[tuple[int, int, int, int]],
    wanted: list[tuple[int, int, int]],
    depth_layer: int,
) -> None:
    segments = segments_of(rows, depth_layer)
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
                cause, in_range = state[(thread, t)]
                expected[present.tolist().index(cause), at] += 1
                expected[-1, at] += in_range
    np.testing.assert_array_equal(spent, expected)


def test_no_segments_give_no_time() -> None:
    present, spent = time_per_cause(
        cause_segments(EdgeStreams(1), LAYERS),
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


def test_without_a_writable_cache_the_loops_compile_per_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[dict[str, bool]] = []

    def njit(**options: bool) -> Callable[[Callable[..., int]], Callable[..., int]]:
        asked.append(options)
        if options.get("cache"):
            raise RuntimeError("cannot cache function: no locator available")
        return lambda function: function

    monkeypatch.setattr(compiled_module, "njit", njit)
    compiled = compiled_module.compiled(lambda: 7)
    assert compiled() == 7
    assert asked == [{"nogil": True, "cache": True}, {"nogil": True}]


@hsettings(max_examples=150, deadline=None)
@given(rows=intervals, wanted=portions, depth_layer=st.integers(-1, LAYERS - 1))
def test_a_window_layer_keeps_only_the_segments_inside_it(
    rows: list[tuple[int, int, int, int]],
    wanted: list[tuple[int, int, int]],
    depth_layer: int,
) -> None:
    got = instants(segments_of(rows, depth_layer, window=wanted), rows, depth_layer)
    inside = {(th, t) for th, s, n in wanted for t in range(s, s + n)}
    expected = {k: v for k, v in brute_force(rows, depth_layer).items() if k in inside}
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
                # Range -2: in no range (left out); -1: crossing ranges (a text).
                out.append((th, a, b - a, draw(st.integers(-2, 3)), draw(st.booleans())))
    return out


def _texts_input(
    segs: list[tuple[int, int, int, int, bool]], ps: list[tuple[int, int, int]]
) -> tuple[Segments, list[np.ndarray]]:
    """:func:`_text_segments` as segments (cause 1 where counted), ``ps`` as portion arrays."""
    counts = np.bincount([s[0] for s in segs], minlength=THREADS)
    segments = Segments(
        np.concatenate([[0], np.cumsum(counts)]),
        np.array([s[1] for s in segs], dtype=np.int64),
        np.array([s[1] + s[2] for s in segs], dtype=np.int64),
        np.array([1 if s[4] else 0 for s in segs], dtype=np.int8),
        np.array([s[3] for s in segs], dtype=np.int32),
    )
    por = [np.array([p[i] for p in ps], dtype=np.int64) for i in range(3)]
    por[2] = por[1] + por[2]
    return segments, por


@given(_text_segments(), portions, st.sampled_from([CROSSING, 7]))
@hsettings(max_examples=200, deadline=None)
def test_time_per_text_sums_the_instants_of_each_portion(
    segs: list[tuple[int, int, int, int, bool]], ps: list[tuple[int, int, int]], crossing: int
) -> None:
    # Ranges 0..3 have texts 5, 6, 7, 5: two ranges share a text, and crossing ranges
    # share one with range 2 when ``crossing`` is 7.
    codes = np.array([5, 6, 7, 5])
    segments, por = _texts_input(segs, ps)

    def text(row: int) -> int:
        return int(codes[row]) if row >= 0 else crossing

    portion, named, covered, counted = host_text_loops.time_per_text(
        segments, codes, crossing, 1, por
    )
    got = {
        (int(p), text(r)): (int(c), int(n))
        for p, r, c, n in zip(portion, named, covered, counted, strict=True)
    }
    assert len(got) == len(portion)  # one row per (portion, text)
    want: dict[tuple[int, int], list[int]] = {}
    for p, (th, a, length) in enumerate(ps):
        for t in range(a, a + length):
            for s_th, s_a, s_len, row, is_counted in segs:
                if s_th == th and s_a <= t < s_a + s_len and row >= -1:
                    tally = want.setdefault((p, text(row)), [0, 0])
                    tally[0] += 1
                    tally[1] += int(is_counted)
    assert got == {k: (v[0], v[1]) for k, v in want.items()}
    for r, p in zip(named, portion, strict=True):  # the range named is one the portion met
        assert any(s[0] == ps[p][0] and s[3] == r for s in segs)


@given(
    _text_segments(),
    portions,
    st.sampled_from([CROSSING, 7]),
    st.lists(st.integers(0, 2), min_size=12, max_size=12),
)
@hsettings(max_examples=200, deadline=None)
def test_time_per_key_and_text_sums_time_per_text_over_each_key(
    segs: list[tuple[int, int, int, int, bool]],
    ps: list[tuple[int, int, int]],
    crossing: int,
    key_of: list[int],
) -> None:
    # The same texts as above, numbered 0..3 (crossing: 3, or 2 when it shares range
    # 2's text); portions in three keys (GPUs), in any order.
    codes = np.array([5, 6, 7, 5])
    segments, por = _texts_input(segs, ps)
    keys = np.array(key_of[: len(ps)], dtype=np.int64)
    number = {5: 0, 6: 1, 7: 2, CROSSING: 3}

    def text(row: int) -> int:
        return int(codes[row]) if row >= 0 else crossing

    portion, named, covered, counted = host_text_loops.time_per_text(
        segments, codes, crossing, 1, por
    )
    want: dict[tuple[int, int], list[int]] = {}
    for p, r, c, n in zip(portion, named, covered, counted, strict=True):
        tally = want.setdefault((int(keys[p]), text(r)), [0, 0])
        tally[0] += int(c)
        tally[1] += int(n)
    key, named, covered, counted = host_text_loops.time_per_key_and_text(
        segments,
        np.array([number[c] for c in codes]),
        number[crossing],
        4,
        1,
        por,
        keys,
        3,
    )
    got = {
        (int(k), text(r)): [int(c), int(n)]
        for k, r, c, n in zip(key, named, covered, counted, strict=True)
    }
    assert len(got) == len(key)  # one row per (key, text)
    assert got == want
    for k, r in zip(key, named, strict=True):  # the range named is one the key's portions met
        assert any(
            s[3] == r and keys[p] == k and s[0] == ps[p][0] for s in segs for p in range(len(ps))
        )


@given(
    st.lists(st.integers(-5, 40), max_size=30),
    st.lists(st.integers(-10, 50), max_size=30),
)
@hsettings(deadline=None)
def test_at_or_before_counts_like_a_binary_search(values: list[int], instants: list[int]) -> None:
    ordered, asked = (
        np.sort(np.array(values, dtype=np.int64)),
        np.sort(np.array(instants, dtype=np.int64)),
    )
    np.testing.assert_array_equal(
        at_or_before(ordered, asked), np.searchsorted(ordered, asked, side="right")
    )


def innermost_per_segment(
    ranges: list[list[int]], depth: list[int], window: list[list[int]] | None = None
) -> dict[tuple[int, int], int]:
    """``(start, end)`` -> innermost range row of the segments of one thread's ``ranges``."""
    streams = EdgeStreams(1)
    range_arrays = [np.array(v, dtype=np.int64) for v in ([0] * len(ranges[0]), *ranges)]
    streams.add_layer(0, *range_arrays)
    if window is not None:
        streams.add_layer(1, np.zeros(len(window[0]), np.int32), *map(np.array, window))
    segments = cause_segments(
        streams, 1, 0, np.array(depth), range_arrays[2], 1 if window is not None else -1
    )
    ends = zip(segments.start.tolist(), segments.end.tolist(), strict=True)
    return dict(zip(ends, segments.nvtx_range.tolist(), strict=True))


def test_the_innermost_range_is_the_deepest_holding_one_else_the_latest() -> None:
    # A [0,100) depth 1 holds B [10,50) depth 2; C [60,120) depth 2 crosses A. Only
    # the time inside the windows is cut.
    got = innermost_per_segment(
        [[0, 10, 60], [100, 50, 120]], [1, 2, 2], [[5, 40, 90, 110], [20, 70, 105, 125]]
    )
    # In A only; in B; in C (depth 2 and holding); after A ended, depth 1: C is the
    # latest opened and still holds it.
    assert got == {
        (5, 10): 0,
        (10, 20): 1,
        (40, 50): 1,
        (50, 60): 0,
        (60, 70): 2,
        (90, 100): 2,
        (100, 105): 2,
        (110, 120): 2,
    }
    # A [0,50) depth 1, B [10,100) depth 2, C [20,30) depth 3: once A ends, neither
    # the last range opened at depth 1 (A) nor the latest (C) holds [50, 100).
    got = innermost_per_segment([[0, 10, 20], [50, 100, 30]], [1, 2, 3])
    assert got == {(0, 10): 0, (10, 20): 1, (20, 30): 2, (30, 50): 1, (50, 100): CROSSING}
