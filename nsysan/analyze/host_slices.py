"""A group of feeding threads attributed in time slices of its host portions.

Part of host attribution (:mod:`nsysan.analyze.host`). A group is attributed from its
threads' host rows; one process's main thread can hold most of a trace's CUDA calls
(4M at 5M kernels), so the rows, edges and segments of a group grew with the trace
(~0.4 GB a group at 5M kernels, ~1 GB at 20M, two groups at once on two cores). Its
host portions are therefore taken :data:`SLICE_PORTIONS` at a time, in start order,
and a slice reads only the CUDA API and OS runtime rows that overlap its portions'
span ``[lo, hi)``.

This is exact, not an approximation: a portion's time per cause and NVTX text comes
from the segments inside it, and a segment at an instant depends only on the
intervals open then, which overlap the span, and on the NVTX ranges the sweep
(:func:`~nsysan.analyze.host_loops.cause_segments`) last saw open at each depth and
last saw open at all. So a slice keeps the group's ranges (numbered and nested over
the whole group, :func:`~nsysan.analyze.host_timeline.nvtx_ranges`) that overlap the
span and, started before it, the last one of each thread and the last one of each
thread and depth: ranges that cross rather than nest are found as without slices.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

import numpy as np
import polars as pl

from nsysan.analyze.host_tables import (
    THREAD_NUMBER,
    Span,
    on_threads,
    overlapping,
    portion_time_type,
    position_type,
    rows_on_threads,
    with_rows_on_threads,
)
from nsysan.analyze.host_timeline import (
    cause_time_per_gap,
    descheduled_intervals,
    edge_streams,
    nvtx_ranges,
    streams_cut,
    text_time_per_gap,
    text_time_per_key,
)
from nsysan.compiled import compiled
from nsysan.model import Trace

__all__ = [
    "SLICE_PORTIONS",
    "RangeRuns",
    "TimeSlice",
    "range_runs",
    "ranges_in_slice",
    "thread_group_time",
    "time_slices",
]

# Host portions per slice: at 5M kernels a main thread's ~1M portions are cut in 8
# slices, each reading an eighth of its CUDA calls. 125K peaked ~0.09 GB lower than
# 250K there, at the same time (benchmarks/README.md, stop 31).
SLICE_PORTIONS: Final = 125_000
# The tables a slice reads for its span (its NVTX ranges and descheduled time are taken
# from the group's).
_SLICED_TABLES = ("cuda_api", "osrt")
# A slice's CUDA calls are read without their correlation ids, which no edge needs
# (a seventh of the columns decoded).
_SLICED_COLUMNS = {"cuda_api": ("start_ns", "end_ns", "name")}

# A slice: the rows of its portions (positions in the group's portions) and the span
# they cover; ``None`` for the one slice of a group small enough to take whole.
TimeSlice = tuple[np.ndarray, Span | None]


def time_slices(portions: pl.DataFrame, size: int | None = None) -> Iterator[TimeSlice]:
    """The group's ``portions`` (``start_ns, end_ns``) in slices of ``size`` by start.

    Each portion is in one slice; a slice's span runs from its first start to its
    latest end. One slice without a span when there are no more than ``size``.
    """
    size = size or SLICE_PORTIONS
    if portions.height <= size:
        yield np.arange(portions.height), None
        return
    start = portions["start_ns"].to_numpy()
    end = portions["end_ns"].to_numpy()
    order = np.argsort(start, kind="stable")
    for first in range(0, len(order), size):
        rows = np.sort(order[first : first + size])
        yield rows, (int(start[order[first]]), int(end[rows].max()))


# Ranges per block of RangeRuns.block_end: a slice looks for the ranges still open at
# its start among the blocks that end after it, not among every range begun before.
_RANGE_BLOCK: Final = 256


@dataclass(frozen=True)
class RangeRuns:
    """A group's NVTX ranges as arrays, found per slice by binary search.

    ``threads``: each thread's run ``[a, b)`` of the ranges (sorted by thread, then
    start); ``depths``: per thread, the ranges of each of its depths, in start order;
    ``block_end``: the latest end of each block of :data:`_RANGE_BLOCK` ranges.
    """

    start: np.ndarray
    end: np.ndarray
    threads: list[tuple[int, int]]
    depths: list[list[np.ndarray]]
    block_end: np.ndarray


def range_runs(ranges: pl.DataFrame) -> RangeRuns:
    """:class:`RangeRuns` of :func:`~nsysan.analyze.host_timeline.nvtx_ranges`."""
    thread = ranges[THREAD_NUMBER].to_numpy()
    depth = ranges["_depth"].to_numpy()
    cuts = [0, *(np.flatnonzero(thread[1:] != thread[:-1]) + 1), len(thread)]
    runs = list(itertools.pairwise(cuts))
    row_type = position_type(len(thread))
    depths = []
    for a, b in runs:
        # Stable: each depth's ranges stay in start order.
        order = (a + np.argsort(depth[a:b], kind="stable")).astype(row_type)
        d = depth[order]
        edges = [0, *(np.flatnonzero(d[1:] != d[:-1]) + 1), len(d)]
        depths.append([order[lo:hi] for lo, hi in itertools.pairwise(edges)])
    end = ranges["_range_end"].to_numpy()
    block_end = (
        np.maximum.reduceat(end, np.arange(0, len(end), _RANGE_BLOCK))
        if len(end)
        else np.zeros(0, dtype=np.int64)
    )
    return RangeRuns(ranges["start_ns"].to_numpy(), end, runs, depths, block_end)


def ranges_in_slice(ranges: pl.DataFrame, runs: RangeRuns, lo: int, hi: int) -> pl.DataFrame:
    """The NVTX ``ranges`` a slice spanning ``[lo, hi)`` needs, in their order.

    ``ranges``: :func:`~nsysan.analyze.host_timeline.nvtx_ranges` (``_th, start_ns,
    _range_end, text, _depth``, sorted by thread and start), ``runs`` their
    :func:`range_runs`. Those overlapping the span, and of those started before it,
    the last of each thread and the last of each thread and depth (the module
    docstring says why).

    A slice costs about the ranges it keeps, not the group's: a pass over every range
    begun before each slice (a mask of the group's ranges, say) grows with the square
    of the trace, over a main thread's millions of ranges and dozens of slices.
    """
    start, end = runs.start, runs.end
    rows = []
    for (a, b), depth_rows in zip(runs.threads, runs.depths, strict=True):
        before, below = a + np.searchsorted(start[a:b], [lo, hi])
        # Begun before the span: those still open, the thread's last, each depth's last.
        earlier = [_still_open(end, runs.block_end, _RANGE_BLOCK, a, before, lo)]
        if before > a:
            earlier.append(np.array([before - 1]))
        for at_depth in depth_rows:
            last = _last_started_before(start, at_depth, lo)
            if last >= 0:
                earlier.append(at_depth[last : last + 1])
        rows.append(np.unique(np.concatenate(earlier)))
        rows.append(np.arange(before, below))  # begun inside the span (none is empty)
    return ranges[np.concatenate(rows)] if rows else ranges.clear()


@compiled
def _still_open(end, block_end, block, a, before, lo):  # type: ignore[no-untyped-def]
    """The rows of ``[a, before)`` that end after ``lo``, in order; whole blocks that
    all end by then are skipped."""
    found = np.empty(0, dtype=np.int64)
    for write in range(2):  # count, then fill
        count = 0
        i = a
        while i < before:
            if i % block == 0 and i + block <= before and block_end[i // block] <= lo:
                i += block
                continue
            if end[i] > lo:
                if write:
                    found[count] = i
                count += 1
            i += 1
        if not write:
            found = np.empty(count, dtype=np.int64)
    return found


@compiled
def _last_started_before(start, rows, lo):  # type: ignore[no-untyped-def]
    """The last position in ``rows`` (ranges in start order) whose start is before
    ``lo``; -1 if none (``np.searchsorted(start[rows], lo) - 1`` without the gather)."""
    below, above = -1, len(rows)
    while above - below > 1:
        middle = (below + above) // 2
        if start[rows[middle]] < lo:
            below = middle
        else:
            above = middle
    return below


def thread_group_time(
    trace: Trace,
    threads: pl.DataFrame,
    signature: pl.DataFrame,
    portions: pl.DataFrame,
    pieces: pl.DataFrame | None,
    text_keys: pl.Series | None = None,
) -> tuple[dict[str, np.ndarray], pl.DataFrame]:
    """The host causes' time of the ``portions`` on ``threads``, and their NVTX texts' time.

    Per portion, in their order: :func:`cause_time_per_gap` less the time under
    transfers (``pieces``, of the same gaps), in :func:`portion_time_type`'s integers,
    without ``_nvtx_ns`` and without the causes that have no time in any of them; and
    :func:`text_time_per_gap`. A group of more than :data:`SLICE_PORTIONS` portions is
    cut in time slices; the results are the same.

    With ``text_keys`` (each gap's GPU, say), a slice's texts are summed per key and
    text as it is attributed (:func:`text_time_per_key`): the texts are then these
    sums, one table per slice side by side, so that what reads them sums them again.
    Per gap, a group's texts grow with its portions (~2.7 rows a portion on the scale8
    workload, 0.24 GB a group at 20M kernels); their sums do not.
    """
    # NVTX ranges are numbered and nested over the whole group (read from the trace
    # by nvtx_ranges). The descheduled time too is found once for the group; a slice
    # takes the part that overlaps it, not all of it (with a context switch every few
    # ms, a main thread of a long run has millions).
    ranges = nvtx_ranges(trace, threads)
    descheduled = descheduled_intervals(rows_on_threads(trace.sched, threads))
    group = trace
    slices = list(time_slices(portions))
    runs = None
    if len(slices) > 1:
        runs = range_runs(ranges)
        # Tables in memory are cut to the group's threads once, not once per slice.
        group = dataclasses.replace(
            group,
            **{
                name: on_threads(group.table(name), threads)
                for name in _SLICED_TABLES
                if isinstance(group.table(name), pl.DataFrame)
            },
        )
    # A piece's slot is its gap's place among the portions (they are in gap order).
    gaps = portions["_gap"].to_numpy()
    piece_slot = (
        np.searchsorted(gaps, pieces["_gap"].to_numpy())
        if pieces is not None and pieces.height
        else None
    )
    spent: dict[str, np.ndarray] = {}
    spent_type = portion_time_type(portions)
    texts = []
    for rows, span in slices:
        part = portions if span is None else portions[rows]
        part_ranges = (
            ranges if runs is None or span is None else ranges_in_slice(ranges, runs, *span)
        )
        part_spent = _slice_time(
            with_rows_on_threads(group, threads, _SLICED_TABLES, span, _SLICED_COLUMNS),
            threads,
            signature,
            part,
            part_ranges,
            _slice_pieces(pieces, piece_slot, rows),
            descheduled if span is None else descheduled.filter(overlapping(span)),
            text_keys,
        )
        for name, values in part_spent[0].items():
            # A cause without time here stays unwritten: its zeros take no memory, or
            # it is left out when no slice has any.
            if values.any():
                spent.setdefault(name, np.zeros(portions.height, dtype=spent_type))[rows] = values
        texts.append(part_spent[1])
    return spent, pl.concat(texts) if len(texts) > 1 else texts[0]


def _slice_pieces(
    pieces: pl.DataFrame | None, slot: np.ndarray | None, rows: np.ndarray
) -> pl.DataFrame | None:
    """The ``pieces`` of the portions at ``rows`` (sorted), their ``_gap`` set to the
    portion's place among ``rows`` (``slot``: each piece's portion among the group's)."""
    if pieces is None or slot is None:
        return None
    # A binary search per piece, not an array of the group's portions per slice.
    local = np.minimum(np.searchsorted(rows, slot), max(len(rows) - 1, 0))
    kept = rows[local] == slot if len(rows) else np.zeros(len(slot), dtype=bool)
    return pieces.filter(kept).with_columns(
        pl.Series("_gap", local[kept]).cast(pieces.schema["_gap"])
    )


def _slice_time(
    rows: Trace,
    threads: pl.DataFrame,
    signature: pl.DataFrame,
    portions: pl.DataFrame,
    ranges: pl.DataFrame,
    pieces: pl.DataFrame | None,
    descheduled: pl.DataFrame,
    text_keys: pl.Series | None = None,
) -> tuple[dict[str, np.ndarray], pl.DataFrame]:
    """:func:`thread_group_time` of one slice: ``rows`` hold its host rows (and
    ``descheduled`` its descheduled time), ``pieces`` are numbered by their portion's row
    in ``portions``."""
    streams = edge_streams(rows, threads, signature, ranges, portions, descheduled)
    # The host rows read from disk are not held while the timelines are cut: only
    # their edges are read from here on.
    del rows
    segments = streams_cut(streams, ranges, with_portions=True, merge=True)
    del streams
    # Each portion writes to its own slot (its row), not to its gap's: the arrays
    # follow these portions, not every gap of the trace.
    slots = pl.int_range(pl.len(), dtype=portions["_gap"].dtype).alias("_gap")
    spent = cause_time_per_gap(portions.with_columns(slots), segments, portions.height)
    if pieces is not None and pieces.height:
        for name, values in cause_time_per_gap(pieces, segments, portions.height).items():
            spent[name] = spent.get(name, np.zeros(portions.height, dtype=np.int64)) - values
    # Only portions with time inside NVTX ranges need the costlier interval join.
    in_ranges = portions.filter(spent.pop("_nvtx_ns") > 0)
    if text_keys is not None:
        return spent, text_time_per_key(in_ranges, segments, ranges, text_keys)
    return spent, text_time_per_gap(in_ranges, segments, ranges)
