"""The loops of host attribution that run over every row of million-row tables, compiled.

Host attribution (:mod:`nsysan.analyze.host`) cuts each feeding thread's timeline into
segments with one cause (a sweep over the edges of every interval of the thread) and
reads, for each host portion of a gap, the time each cause holds inside it (running
totals read at both ends). On exports with millions of kernels both touch millions of
rows several times when written as table operations (a sort of all edges, running
sums, filters, look-ups), and were most of the time of all analyses together. As
loops compiled by numba they are one pass each, with no intermediate tables
(``benchmarks/analysis_bench.py`` gives the figures).

The same goes for naming each gap's largest cause (a first-maximum over a dozen
columns, which as a table expression is a dozen passes).

The functions here take and return plain numpy arrays; the meaning (which layer is
which cause, what a portion is) stays in host.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numba import njit

__all__ = [
    "EdgeStreams",
    "codes_at",
    "cause_segments",
    "find_rows",
    "first_largest",
    "gather_sorted",
    "innermost_ranges",
    "time_per_cause",
    "time_per_text",
]


def _compiled(function: Callable[..., Any]) -> Any:
    """``function`` compiled by numba, cached on disk when a cache folder is writable."""
    try:
        return njit(nogil=True, cache=True)(function)
    except RuntimeError:
        # Neither the package folder nor numba's user cache can be written (a
        # read-only install): compile once per process instead.
        return njit(nogil=True)(function)


class EdgeStreams:
    """Interval edges as streams sorted by (thread, time), each adding ``step`` to a layer.

    Every interval of a layer gives a start edge (+1) to one stream and an end edge
    (-1) to another, so a layer's open count is known at any instant from the two.
    """

    def __init__(self) -> None:
        self._threads: list[np.ndarray] = []
        self._times: list[np.ndarray] = []
        self.layers: list[int] = []
        self.steps: list[int] = []

    def add_layer(self, layer: int, thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> None:
        """Intervals ``[start, end)`` of ``layer`` (thread ids are small non-negative ints)."""
        for times, step in ((start, 1), (end, -1)):
            order = _thread_time_order(thread, times)
            self._threads.append(thread if order is None else thread[order])
            self._times.append(times if order is None else times[order])
            self.layers.append(layer)
            self.steps.append(step)

    def take_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """All streams end to end: threads, times, and where each stream starts (plus the end).

        The streams are handed over (the object is empty afterwards), so their
        separate copies are freed before the sweep allocates its output.
        """
        offsets = np.zeros(len(self._times) + 1, dtype=np.int64)
        np.cumsum([len(t) for t in self._times], out=offsets[1:])
        if not self._times:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), offsets
        # Thread numbers keep their (narrow) type: these are tens of millions of edges.
        threads = np.concatenate(self._threads)
        self._threads = []
        times = np.concatenate(self._times).astype(np.int64, copy=False)
        self._times, self.layers, self.steps = [], [], []
        return threads, times, offsets


def _thread_time_order(thread: np.ndarray, times: np.ndarray) -> np.ndarray | None:
    """The permutation that orders the edges by (thread, time); None when they already are."""
    if _sorted_by_thread_time(thread, times):
        return None
    if np.all(times[:-1] <= times[1:]):
        # Already in time order (ingest order, several threads interleaved): a stable
        # sort by the small thread number keeps it within each thread.
        narrow = thread.astype(np.uint16) if thread.max(initial=0) < 1 << 16 else thread
        return np.argsort(narrow, kind="stable")
    return np.lexsort((times, thread))


@_compiled
def _sorted_by_thread_time(thread: np.ndarray, times: np.ndarray) -> bool:
    for i in range(1, len(times)):
        if thread[i] < thread[i - 1] or (thread[i] == thread[i - 1] and times[i] < times[i - 1]):
            return False
    return True


def cause_segments(
    streams: EdgeStreams, layer_count: int, depth_layer: int, window_layer: int = -1
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Disjoint segments of one cause each, in (thread, start) order.

    Between two consecutive instants with an edge on a thread, the state after the
    last edge at the first instant holds. The segment's cause is the lowest-numbered
    layer open (layer numbers are precedence); time with no layer open is no
    segment. Returns threads, starts, ends, causes (int8 layer numbers) and the open
    count of ``depth_layer`` (0 everywhere when it is negative).

    With ``window_layer`` (a layer number >= ``layer_count``, never a cause), only time
    inside at least one of that layer's intervals gives segments: the rest of the
    timeline, which no host portion reads, is never stored.
    """
    layers, steps = streams.layers, streams.steps
    threads, times, offsets = streams.take_arrays()
    return _sweep(
        threads,
        times,
        offsets,
        np.asarray(layers, dtype=np.int64),
        np.asarray(steps, dtype=np.int64),
        layer_count,
        depth_layer,
        window_layer,
    )


@_compiled
def _sweep(
    threads, times, offsets, stream_layer, stream_step, layer_count, depth_layer, window_layer
):  # type: ignore[no-untyped-def]
    streams = len(offsets) - 1
    pos = offsets[:-1].copy()
    stop = offsets[1:]
    depth = np.zeros(max(layer_count, window_layer + 1, 1), dtype=np.int64)
    # A segment ends at an edge, so there are fewer segments than edges.
    capacity = len(times)
    seg_thread = np.empty(capacity, dtype=threads.dtype)
    seg_start = np.empty(capacity, dtype=np.int64)
    seg_end = np.empty(capacity, dtype=np.int64)
    seg_cause = np.empty(capacity, dtype=np.int8)
    seg_depth = np.empty(capacity, dtype=np.int32)
    count = 0
    prev_thread, prev_time, prev_cause, prev_depth = -1, 0, -1, 0
    prev_inside = window_layer < 0
    while True:
        # The next instant: the smallest (thread, time) among the stream heads.
        best = -1
        now_thread, now_time = 0, 0
        for s in range(streams):
            i = pos[s]
            if i < stop[s] and (
                best < 0
                or threads[i] < now_thread
                or (threads[i] == now_thread and times[i] < now_time)
            ):
                best, now_thread, now_time = s, threads[i], times[i]
        if best < 0:
            break
        if prev_cause >= 0 and prev_inside and prev_thread == now_thread:
            seg_thread[count] = prev_thread
            seg_start[count] = prev_time
            seg_end[count] = now_time
            seg_cause[count] = prev_cause
            seg_depth[count] = prev_depth
            count += 1
        for s in range(streams):
            i = pos[s]
            while i < stop[s] and threads[i] == now_thread and times[i] == now_time:
                depth[stream_layer[s]] += stream_step[s]
                i += 1
            pos[s] = i
        prev_cause = -1
        for layer in range(layer_count):
            if depth[layer] > 0:
                prev_cause = layer
                break
        prev_thread, prev_time = now_thread, now_time
        prev_depth = depth[depth_layer] if depth_layer >= 0 else 0
        prev_inside = window_layer < 0 or depth[window_layer] > 0
    # Views, not copies: the unused tail was never written, so it holds no memory.
    return (
        seg_thread[:count],
        seg_start[:count],
        seg_end[:count],
        seg_cause[:count],
        seg_depth[:count],
    )


def time_per_cause(
    segments: Sequence[np.ndarray],
    layer_count: int,
    portions: Sequence[np.ndarray],
    slots: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Per slot, the time of its portion in the segments of each cause, and inside depth > 0.

    ``segments`` is :func:`cause_segments`' output; ``portions`` are threads, starts,
    ends and slots (where each portion's times are written; a slot holds one
    portion). Returns the causes that occur in ``segments`` (layer numbers) and an
    int64 array with one row per such cause and a last row for depth > 0, one column
    per slot (0 for slots with no portion).

    A portion's time in a cause is a running total of that cause's time along its
    thread, read at the portion's end minus read at its start. The readings are
    taken in time order per thread (starts in one pass, ends in another), so the
    running totals are carried along instead of stored per segment.
    """
    seg_thread, seg_start, seg_end, seg_cause, seg_depth = segments
    present = np.flatnonzero(np.bincount(seg_cause, minlength=layer_count))
    # Only causes that occur get a running total: usually two or three of seven.
    column = np.full(max(layer_count, 1), -1, dtype=np.int64)
    column[present] = np.arange(len(present))
    thread, start, end, slot = portions
    out = np.zeros((len(present) + 1, slots), dtype=np.int64)
    if len(seg_start) == 0:
        return present, out
    for times, sign in ((start, -1), (end, 1)):
        order = _thread_time_order(thread, times)
        _add_readings(
            seg_thread,
            seg_start,
            seg_end,
            seg_cause,
            seg_depth,
            column,
            len(present),
            thread,
            times,
            np.arange(len(times)) if order is None else order,
            slot,
            sign,
            out,
        )
    return present, out


@_compiled
def _add_readings(  # type: ignore[no-untyped-def]
    seg_thread,
    seg_start,
    seg_end,
    seg_cause,
    seg_depth,
    column,
    causes,
    thread,
    times,
    order,
    slot,
    sign,
    out,
):
    """Adds ``sign`` x the running totals read at ``times`` (visited in ``order``) to ``out``.

    ``order`` visits the readings by (thread, time). A reading at an instant is the
    time of the thread's segments before the last segment starting at or before the
    instant, plus that segment's time up to the instant; 0 before the thread's first
    segment.
    """
    parts = causes + 1
    acc = np.zeros(parts, dtype=np.int64)
    current = -1
    at = lo = hi = 0
    for k in order:
        t = thread[k]
        if t != current:
            # A new thread: its run of segments, totals from 0.
            current = t
            lo = np.searchsorted(seg_thread, t, side="left")
            hi = np.searchsorted(seg_thread, t, side="right")
            at = lo
            acc[:] = 0
        if lo >= hi or times[k] < seg_start[lo]:
            continue
        while at + 1 < hi and seg_start[at + 1] <= times[k]:
            length = seg_end[at] - seg_start[at]
            acc[column[seg_cause[at]]] += length
            if seg_depth[at] > 0:
                acc[causes] += length
            at += 1
        into = min(times[k], seg_end[at]) - seg_start[at]
        held = column[seg_cause[at]]
        for p in range(parts):
            value = acc[p]
            if p == held or (p == causes and seg_depth[at] > 0):
                value += into
            out[p, slot[k]] += sign * value


@_compiled
def _last_at_or_before(starts, lo, hi, hint, instant):  # type: ignore[no-untyped-def]
    """The last row in ``[lo, hi)`` of sorted ``starts`` at or before ``instant`` (``lo`` if none).

    Gallops from ``hint``: a search costs the log of the distance from there.
    """
    if starts[hint] <= instant:
        # Forward: find a row past the instant, doubling the stride.
        below, stride = hint, 1
        while below + stride < hi and starts[below + stride] <= instant:
            below += stride
            stride *= 2
        above = min(below + stride, hi)
    else:
        above, stride = hint, 1
        while above - stride >= lo and starts[above - stride] > instant:
            above -= stride
            stride *= 2
        below = above - stride
        if below < lo:
            if starts[lo] > instant:
                return lo
            below = lo
    # starts[below] <= instant < starts[above] (above == hi: past the end).
    while above - below > 1:
        middle = (below + above) // 2
        if starts[middle] <= instant:
            below = middle
        else:
            above = middle
    return below


def first_largest(columns: Sequence[np.ndarray | None], where: np.ndarray) -> np.ndarray:
    """Per row, the position of the largest of ``columns`` (the first on a tie); -1 where not ``where``.

    A ``None`` column is left out of the comparison (a column known to be smaller).
    """
    real = [c for c in columns if c is not None]
    if not real:
        return np.full(len(where), -1, dtype=np.int8)
    # Always as many arrays (a stand-in for the left-out ones), so the loop is
    # compiled once, not once per count of columns.
    arrays = tuple(
        np.ascontiguousarray(real[0] if c is None else c, dtype=np.int64) for c in columns
    )
    compared = np.array([c is not None for c in columns])
    return _first_largest(arrays, compared, where)


@_compiled
def _first_largest(columns, compared, where):  # type: ignore[no-untyped-def]
    rows = len(where)
    top = np.full(rows, -1, dtype=np.int8)
    for i in range(rows):
        if not where[i]:
            continue
        at = -1
        best = 0
        for j in range(len(columns)):
            if compared[j] and (at < 0 or columns[j][i] > best):
                best, at = columns[j][i], j
        top[i] = at
    return top


@_compiled
def gather_sorted(keys, order):  # type: ignore[no-untyped-def]
    """``keys[order]`` (sorted by ``order``) and whether two of them are equal."""
    table = np.empty(len(order), dtype=keys.dtype)
    repeated = False
    for i in range(len(order)):
        table[i] = keys[order[i]]
        if i and table[i] == table[i - 1]:
            repeated = True
    return table, repeated


@_compiled
def find_rows(table, rows, queries):  # type: ignore[no-untyped-def]
    """Per query, ``rows[i]`` for the ``i`` with ``table[i] == query``; -1 where none.

    ``table`` is sorted with distinct values. Queries mostly rise (ids in time
    order), so each search gallops from where the previous one ended.
    """
    found = np.full(len(queries), -1, dtype=np.int64)
    n = len(table)
    if n == 0:
        return found
    at = 0
    for k in range(len(queries)):
        at = _last_at_or_before(table, 0, n, at, queries[k])
        if table[at] == queries[k]:
            found[k] = rows[at]
    return found


def time_per_text(
    segments: Sequence[np.ndarray], portions: Sequence[np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per portion and text, the time of the segments with that text inside the portion.

    ``segments``: thread, start, end, text (an integer code; segments with a code
    below -1 have no text and are left out), counted (whether the time also counts
    as ``counted_ns``); disjoint per thread and sorted by thread then start, so their
    ends rise too. ``portions``: thread, start, end, in any order and
    possibly overlapping one another. Returns, one row per (portion, text) met:
    the portion's row, the row of the first segment with that text (to name it),
    ``covered_ns`` and ``counted_ns``. Each portion searches its thread's segments
    once and walks the run it meets; no table of (portion, segment) pairs is built.
    """
    th, start, end, text = (np.ascontiguousarray(a) for a in segments[:4])
    counted = np.ascontiguousarray(segments[4], dtype=np.bool_)
    p_th, p_start, p_end = (np.ascontiguousarray(a) for a in portions)
    rows = _texts_met(th, start, end, text, p_th, p_start, p_end)
    return _text_totals(th, start, end, text, counted, p_th, p_start, p_end, rows)


@_compiled
def _first_meeting(seg_th, seg_end, th, start):  # type: ignore[no-untyped-def]
    """The first segment of thread ``th`` ending after ``start``, and its thread's end row."""
    lo = np.searchsorted(seg_th, th, side="left")
    hi = np.searchsorted(seg_th, th, side="right")
    return lo + np.searchsorted(seg_end[lo:hi], start, side="right"), hi


@_compiled
def _texts_met(th, start, end, text, p_th, p_start, p_end):  # type: ignore[no-untyped-def]
    """Distinct texts per portion: its rows in the output."""
    rows = np.zeros(len(p_th), dtype=np.int64)
    seen = np.empty(0, dtype=np.int64)
    for p in range(len(p_th)):
        i, hi = _first_meeting(th, end, p_th[p], p_start[p])
        first = i
        while i < hi and start[i] < p_end[p]:
            i += 1
        if len(seen) < i - first:
            seen = np.empty(2 * (i - first), dtype=np.int64)
        n = 0
        for k in range(first, i):
            if text[k] < -1 or min(end[k], p_end[p]) <= max(start[k], p_start[p]):
                continue
            known = False
            for m in range(n):
                if seen[m] == text[k]:
                    known = True
                    break
            if not known:
                seen[n] = text[k]
                n += 1
        rows[p] = n
    return rows


@_compiled
def _text_totals(th, start, end, text, counted, p_th, p_start, p_end, rows):  # type: ignore[no-untyped-def]
    total = rows.sum()
    portion = np.empty(total, dtype=np.int64)
    first_segment = np.empty(total, dtype=np.int64)
    covered = np.zeros(total, dtype=np.int64)
    counted_ns = np.zeros(total, dtype=np.int64)
    out = 0
    for p in range(len(p_th)):
        i, hi = _first_meeting(th, end, p_th[p], p_start[p])
        n = 0  # texts of this portion so far: rows out .. out + n
        while i < hi and start[i] < p_end[p]:
            o = min(end[i], p_end[p]) - max(start[i], p_start[p])
            if o > 0 and text[i] >= -1:
                at = -1
                for m in range(n):
                    if text[first_segment[out + m]] == text[i]:
                        at = out + m
                        break
                if at < 0:
                    at = out + n
                    n += 1
                    portion[at], first_segment[at] = p, i
                covered[at] += o
                if counted[i]:
                    counted_ns[at] += o
            i += 1
        out += n
    return portion, first_segment, covered, counted_ns


def innermost_ranges(segments: Sequence[np.ndarray], ranges: Sequence[np.ndarray]) -> np.ndarray:
    """Per segment, the row of the innermost NVTX range holding it; -1 where ranges cross.

    Segments outside every range (depth 0) get -2. ``segments`` (thread, start, end,
    depth: the NVTX ranges open) and ``ranges`` (thread, start, end,
    depth) are sorted by thread then start (ranges opened at one instant outermost
    first). The candidate is the last range opened at or before the segment's start
    at the segment's depth; when it ended before the segment ends (ranges that cross
    instead of nesting), the most recently opened range if it still holds the
    segment; else none.
    """
    # Arrays keep their integer types (no copies of tens of millions of rows).
    s_th, s_start, s_end, s_depth = (np.ascontiguousarray(a) for a in segments)
    r_th, r_start, r_end, r_depth = (np.ascontiguousarray(a) for a in ranges)
    return _innermost_ranges(s_th, s_start, s_end, s_depth, r_th, r_start, r_end, r_depth)


@_compiled
def _innermost_ranges(s_th, s_start, s_end, s_depth, r_th, r_start, r_end, r_depth):  # type: ignore[no-untyped-def]
    found = np.full(len(s_th), -1, dtype=np.int64)
    deepest = max(1, r_depth.max() + 1) if len(r_depth) else 1
    last_at_depth = np.full(deepest, -1, dtype=np.int64)
    latest = -1
    thread = -1
    j = 0
    for i in range(len(s_th)):
        if s_th[i] != thread:
            thread = s_th[i]
            last_at_depth[:] = -1
            latest = -1
            while j < len(r_th) and r_th[j] < thread:
                j += 1
        while j < len(r_th) and r_th[j] == thread and r_start[j] <= s_start[i]:
            if r_depth[j] > 0:
                last_at_depth[r_depth[j]] = j
            latest = j
            j += 1
        d = s_depth[i]
        if d <= 0:
            found[i] = -2
            continue
        candidate = last_at_depth[d] if d < deepest else -1
        if candidate >= 0 and r_end[candidate] >= s_end[i]:
            found[i] = candidate
        elif latest >= 0 and r_end[latest] >= s_end[i]:
            found[i] = latest
    return found


@_compiled
def codes_at(rows, codes):  # type: ignore[no-untyped-def]
    """``codes[rows]`` where ``rows >= 0``, else ``rows`` itself (negative markers kept).

    One output array, where the numpy expression makes three temporaries of the
    length of ``rows`` (tens of millions of segments).
    """
    out = np.empty(len(rows), dtype=np.int64)
    for i in range(len(rows)):
        out[i] = codes[rows[i]] if rows[i] >= 0 else rows[i]
    return out
