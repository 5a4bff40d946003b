"""The loops of host attribution that run over every row of million-row tables, compiled.

Host attribution (:mod:`nsysan.analyze.host`) cuts each feeding thread's timeline into
segments with one cause (a sweep over the edges of every interval of the thread) and
adds up, for each host portion of a gap, the time each cause holds inside it (the
run of segments the portion overlaps). On exports with millions of kernels both touch
millions of rows several times when written as table operations (a sort of all
edges, running sums, filters, look-ups), and were most of the time of all analyses
together. As
loops compiled by numba they are one pass each, with no intermediate tables
(``benchmarks/analysis_bench.py`` gives the figures).

The same goes for naming each gap's largest cause (a first-maximum over a dozen
columns, which as a table expression is a dozen passes).

The sweep also names each segment's innermost NVTX range as it goes (the ranges'
starts are one of its streams), so no second pass over the segments is needed.

The functions here take and return plain numpy arrays (:class:`Segments` is a few of
them); the meaning (which layer is which cause, what a portion is) stays in host.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from nsysan.compiled import NO_EDGE
from nsysan.compiled import compiled as _compiled

__all__ = [
    "CROSSING",
    "OUTSIDE",
    "EdgeStreams",
    "Segments",
    "at_or_before",
    "cause_segments",
    "first_largest",
    "first_meeting",
    "last_at_or_before",
    "time_per_cause",
]


class EdgeStreams:
    """The start and end times of every layer's intervals, per thread, each run sorted.

    Tables are added with each row's layer (negative: not an interval of any layer)
    and thread (``0 .. threads - 1``); they stay as given until :meth:`take_arrays`,
    which writes every layer's starts and ends, thread by thread, into one array (the
    caller passes a table whole when most of its rows are in, and only those rows
    when few are). Every interval gives a
    start edge (+1) to its layer's start stream and an end edge (-1) to its end stream,
    so a layer's open count is known at any instant from the two.
    """

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self._tables: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []

    def add_rows(
        self, layer: np.ndarray, thread: np.ndarray, start: np.ndarray, end: np.ndarray
    ) -> None:
        """Intervals ``[start, end)`` (``end > start``), row by row in ``layer`` of ``thread``.

        Rows of one layer and thread that come in start order keep that order in
        the start stream (rows are never reordered unless their times are not sorted).
        """
        self._tables.append(
            (
                np.ascontiguousarray(layer, dtype=np.int8),
                np.ascontiguousarray(thread, dtype=np.int32),
                np.ascontiguousarray(start, dtype=np.int64),
                np.ascontiguousarray(end, dtype=np.int64),
            )
        )

    def add_layer(self, layer: int, thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> None:
        """Intervals ``[start, end)`` (``end > start``) all in ``layer``."""
        self.add_rows(np.full(len(start), layer, dtype=np.int8), thread, start, end)

    def take_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The non-empty streams: their times end to end, where each thread's run starts, layers, steps.

        Returns ``times``; ``bounds`` (streams x threads + 1: the run of stream ``s``
        and thread ``t`` is ``times[bounds[s, t]:bounds[s, t + 1]]``, sorted);
        ``layers`` and ``steps`` (+1 or -1) per stream. Streams are in (layer, start
        before end) order. The tables are handed over (the object is empty afterwards).
        """
        tables, self._tables = self._tables, []
        slots = 1 + max((int(t[0].max(initial=-1)) for t in tables), default=-1)
        counts = np.zeros((2 * slots, self.threads), dtype=np.int64)
        for layer, thread, _, _ in tables:
            _count_rows(layer, thread, counts)
        runs = np.zeros(counts.size + 1, dtype=np.int64)
        np.cumsum(counts.ravel(), out=runs[1:])
        times = np.empty(runs[-1], dtype=np.int64)
        free = runs[:-1].reshape(counts.shape).copy()
        for layer, thread, start, end in tables:
            _scatter_rows(layer, thread, start, end, free, times)
        del tables
        bounds = np.empty((2 * slots, self.threads + 1), dtype=np.int64)
        bounds[:, :-1] = runs[:-1].reshape(counts.shape)
        bounds[:, -1] = runs[1:].reshape(counts.shape)[:, -1] if self.threads else 0
        _sort_runs(times, bounds)
        kept = np.flatnonzero(bounds[:, -1] > bounds[:, 0])
        layers = kept // 2
        steps = np.where(kept % 2 == 0, 1, -1)
        return times, np.ascontiguousarray(bounds[kept]), layers, steps


@_compiled
def _count_rows(layer, thread, counts):  # type: ignore[no-untyped-def]
    """Adds each row of a layer to the count of its (start stream, thread) and (end stream, thread)."""
    for i in range(len(layer)):
        if layer[i] >= 0:
            counts[2 * layer[i], thread[i]] += 1
            counts[2 * layer[i] + 1, thread[i]] += 1


@_compiled
def _scatter_rows(layer, thread, start, end, free, times):  # type: ignore[no-untyped-def]
    """Writes each row's start and end at the next free place of its runs (rows kept in order)."""
    for i in range(len(layer)):
        if layer[i] >= 0:
            s = 2 * layer[i]
            times[free[s, thread[i]]] = start[i]
            free[s, thread[i]] += 1
            times[free[s + 1, thread[i]]] = end[i]
            free[s + 1, thread[i]] += 1


def _sort_runs(times: np.ndarray, bounds: np.ndarray) -> None:
    """Sorts, in place, each run of ``times`` that is not sorted already.

    Edges of one stream and thread at one instant are interchangeable, so only the
    times matter. Each thread's NVTX ranges come in start order (their start stream
    must stay in that order), so their runs are never sorted here. Unsorted runs
    are mostly in order with a few exceptions, which a stable sort (timsort) takes
    in about one pass.
    """
    for lo, hi in _unsorted_runs(times, bounds):
        times[lo:hi].sort(kind="stable")


@_compiled
def _unsorted_runs(times, bounds):  # type: ignore[no-untyped-def]
    """The ``(lo, hi)`` of every run of ``times`` that is not sorted."""
    found = []
    for s in range(bounds.shape[0]):
        for t in range(bounds.shape[1] - 1):
            lo, hi = bounds[s, t], bounds[s, t + 1]
            for i in range(lo + 1, hi):
                if times[i] < times[i - 1]:
                    found.append((lo, hi))
                    break
    return found


@dataclass(frozen=True)
class Segments:
    """Disjoint segments of one cause each, thread by thread, in start order.

    ``bounds``: thread ``t``'s segments are rows ``bounds[t]:bounds[t + 1]``;
    ``start``, ``end`` (int64); ``cause`` (int8 layer number); ``nvtx_range`` (int32):
    the row of the innermost NVTX range holding the segment, :data:`CROSSING` where
    ranges cross there and none is innermost, :data:`OUTSIDE` in no range.
    """

    bounds: np.ndarray
    start: np.ndarray
    end: np.ndarray
    cause: np.ndarray
    nvtx_range: np.ndarray

    def thread(self) -> np.ndarray:
        """Each segment's thread (int64)."""
        return np.repeat(np.arange(len(self.bounds) - 1), np.diff(self.bounds))


# Segments' ``nvtx_range`` when no single range holds them.
CROSSING, OUTSIDE = -1, -2


def cause_segments(
    streams: EdgeStreams,
    layer_count: int,
    nvtx_layer: int = -1,
    range_depth: np.ndarray | None = None,
    range_end: np.ndarray | None = None,
    window_layer: int = -1,
    merge: bool = False,
) -> Segments:
    """Disjoint segments of one cause each, and the innermost NVTX range of each.

    Between two consecutive instants with an edge on a thread, the state after the
    last edge at the first instant holds. The segment's cause is the lowest-numbered
    layer open (layer numbers are precedence); time with no layer open is no
    segment.

    ``nvtx_layer`` (negative: none) holds the NVTX ranges, added in (thread, start)
    order, ranges opened at one instant outermost first; ``range_depth`` and
    ``range_end`` are their nesting depth (1 = outermost) and end, in that order. A
    segment's innermost range is the last range opened at or before its start at its
    depth (the open count of ``nvtx_layer``); when that one ended before the segment
    ends (ranges that cross instead of nesting), the most recently opened range if it
    still holds the segment; else none (:data:`CROSSING`).

    With ``window_layer`` (a layer number >= ``layer_count``, never a cause), only time
    inside at least one of that layer's intervals gives segments: the rest of the
    timeline, which no host portion reads, is never stored.

    With ``merge``, a segment that continues the previous one (same cause and
    innermost range, no time between) extends it instead: the thread is cut only
    where the cause or the range changes, not at every edge.
    """
    threads = streams.threads
    times, bounds, layers, steps = streams.take_arrays()
    if nvtx_layer < 0 or range_depth is None or range_end is None:
        range_depth = range_end = np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero((layers == nvtx_layer) & (steps > 0))
    return Segments(
        *_sweep(
            times,
            bounds,
            layers,
            steps,
            threads,
            layer_count,
            nvtx_layer,
            starts[0] if len(starts) else -1,
            np.ascontiguousarray(range_depth),
            np.ascontiguousarray(range_end),
            window_layer,
            merge,
        )
    )


@_compiled
def _sweep(  # type: ignore[no-untyped-def]
    times,
    bounds,
    stream_layer,
    stream_step,
    threads,
    layer_count,
    nvtx_layer,
    nvtx_starts,
    range_depth,
    range_end,
    window_layer,
    merge,
):
    streams = bounds.shape[0]
    pos = np.empty(streams, dtype=np.int64)
    stop = np.empty(streams, dtype=np.int64)
    # Each stream's next time (``NO_EDGE`` once it is done): the heads are scanned at
    # every instant, so they sit side by side rather than behind two look-ups each.
    heads = np.empty(streams, dtype=np.int64)
    depth = np.zeros(max(layer_count, window_layer + 1, nvtx_layer + 1, 1), dtype=np.int64)
    deepest = max(1, range_depth.max() + 1) if len(range_depth) else 1
    last_at_depth = np.full(deepest, -1, dtype=np.int64)
    # A segment ends at an edge, so there are fewer segments than edges.
    capacity = len(times)
    seg_bounds = np.zeros(threads + 1, dtype=np.int64)
    seg_start = np.empty(capacity, dtype=np.int64)
    seg_end = np.empty(capacity, dtype=np.int64)
    seg_cause = np.empty(capacity, dtype=np.int8)
    seg_range = np.empty(capacity, dtype=np.int32)
    count = 0
    for thread in range(threads):
        seg_bounds[thread] = count
        remaining = 0
        for s in range(streams):
            pos[s] = bounds[s, thread]
            stop[s] = bounds[s, thread + 1]
            heads[s] = NO_EDGE
            if pos[s] < stop[s]:
                heads[s] = times[pos[s]]
                remaining += 1
        last_at_depth[:] = -1
        latest = -1
        prev_time, prev_cause, prev_depth = 0, -1, 0
        prev_inside = window_layer < 0
        while remaining > 0:
            # The next instant: the smallest time among the stream heads.
            now = heads[0]
            for s in range(1, streams):
                now = min(now, heads[s])
            if prev_cause >= 0 and prev_inside:
                innermost = OUTSIDE
                if prev_depth > 0:
                    candidate = last_at_depth[prev_depth] if prev_depth < deepest else -1
                    if candidate >= 0 and range_end[candidate] >= now:
                        innermost = candidate
                    elif latest >= 0 and range_end[latest] >= now:
                        innermost = latest
                    else:
                        innermost = CROSSING
                if (
                    merge
                    and count > seg_bounds[thread]
                    and seg_end[count - 1] == prev_time
                    and seg_cause[count - 1] == prev_cause
                    and seg_range[count - 1] == innermost
                ):
                    seg_end[count - 1] = now
                else:
                    seg_start[count] = prev_time
                    seg_end[count] = now
                    seg_cause[count] = prev_cause
                    seg_range[count] = innermost
                    count += 1
            for s in range(streams):
                # A done stream's head can equal ``now`` only if a time is NO_EDGE.
                if heads[s] != now or pos[s] == stop[s]:
                    continue
                i = pos[s]
                while i < stop[s] and times[i] == now:
                    depth[stream_layer[s]] += stream_step[s]
                    if s == nvtx_starts:
                        # The ranges' start stream holds them in range order.
                        row = i - bounds[s, 0]
                        if range_depth[row] > 0:
                            last_at_depth[range_depth[row]] = row
                        latest = row
                    i += 1
                pos[s] = i
                if i < stop[s]:
                    heads[s] = times[i]
                else:
                    heads[s] = NO_EDGE
                    remaining -= 1
            prev_cause = -1
            for layer in range(layer_count):
                if depth[layer] > 0:
                    prev_cause = layer
                    break
            prev_time = now
            prev_depth = depth[nvtx_layer] if nvtx_layer >= 0 else 0
            prev_inside = window_layer < 0 or depth[window_layer] > 0
    seg_bounds[threads] = count
    # Views, not copies: the unused tail was never written, so it holds no memory.
    return seg_bounds, seg_start[:count], seg_end[:count], seg_cause[:count], seg_range[:count]


def time_per_cause(
    segments: Segments,
    layer_count: int,
    portions: Sequence[np.ndarray],
    slots: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Per slot, the time of its portion in the segments of each cause, and inside NVTX ranges.

    ``segments`` is :func:`cause_segments`' output; ``portions`` are threads, starts,
    ends and slots (where each portion's times are written; a slot holds one
    portion), in any order. Returns the causes that occur in ``segments`` (layer
    numbers) and an int64 array with one row per such cause and a last row for the
    time in segments inside at least one NVTX range, one column per slot (0 for
    slots with no portion).

    Each portion finds the first segment of its thread it meets (:func:`first_meeting`)
    and adds up the run of segments it overlaps: the cost follows the segments inside
    portions, not every segment of the threads.
    """
    present = np.flatnonzero(_layers_met(segments.cause, layer_count))
    # Only causes that occur get a row: usually two or three of seven.
    row = np.full(max(layer_count, 1), -1, dtype=np.int64)
    row[present] = np.arange(len(present))
    out = np.zeros((len(present) + 1, slots), dtype=np.int64)
    thread, start, end, slot = (np.ascontiguousarray(a) for a in portions)
    _add_overlaps(
        segments.bounds,
        segments.start,
        segments.end,
        segments.cause,
        segments.nvtx_range,
        row,
        thread,
        start,
        end,
        slot,
        out,
    )
    return present, out


@_compiled
def _layers_met(cause, layer_count):  # type: ignore[no-untyped-def]
    """Whether each layer ``0 .. layer_count - 1`` is some segment's cause (a bincount
    would copy the int8 causes to a machine-word array first)."""
    met = np.zeros(layer_count, dtype=np.bool_)
    for i in range(len(cause)):
        met[cause[i]] = True
    return met


@_compiled
def _add_overlaps(  # type: ignore[no-untyped-def]
    seg_bounds, seg_start, seg_end, seg_cause, seg_range, row, thread, start, end, slot, out
):
    """Adds each portion's overlap with every segment to its cause's row (and the range row)."""
    in_range = out.shape[0] - 1
    hints = seg_bounds[:-1].copy()
    for p in range(len(thread)):
        i, hi = first_meeting(seg_bounds, seg_end, thread[p], start[p], hints)
        while i < hi and seg_start[i] < end[p]:
            overlap = min(seg_end[i], end[p]) - max(seg_start[i], start[p])
            if overlap > 0:
                out[row[seg_cause[i]], slot[p]] += overlap
                if seg_range[i] != OUTSIDE:
                    out[in_range, slot[p]] += overlap
            i += 1


@_compiled
def at_or_before(values, instants):  # type: ignore[no-untyped-def]
    """Per instant, how many ``values`` are at or before it; both sorted ascending.

    ``np.searchsorted(values, instants, side="right")`` as one merge: linear, where a
    binary search per instant jumps about millions of rows.
    """
    counts = np.empty(len(instants), dtype=np.int64)
    j = 0
    for i in range(len(instants)):
        while j < len(values) and values[j] <= instants[i]:
            j += 1
        counts[i] = j
    return counts


@_compiled
def last_at_or_before(starts, lo, hi, hint, instant):  # type: ignore[no-untyped-def]
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
def first_meeting(seg_bounds, seg_end, th, start, hints):  # type: ignore[no-untyped-def]
    """The first segment of thread ``th`` ending after ``start``, and its thread's end row.

    Gallops from the segment the thread's previous search found (``hints[th]``, updated;
    start with each thread's first row): portions come in about time order, so a search
    costs the log of the distance from there, in memory the last one touched, instead
    of a binary search over the thread's millions of segments (twice as fast at 5M gaps).
    """
    lo, hi = seg_bounds[th], seg_bounds[th + 1]
    if lo == hi:
        return lo, hi
    row = last_at_or_before(seg_end, lo, hi, min(hints[th], hi - 1), start)
    if seg_end[row] <= start:
        row += 1
    hints[th] = row
    return row, hi
