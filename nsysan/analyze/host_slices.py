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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final

import numpy as np
import polars as pl

from nsysan.analyze.host_tables import (
    THREAD_NUMBER,
    Span,
    on_threads,
    portion_time_type,
    with_rows_on_threads,
)
from nsysan.analyze.host_timeline import (
    cause_time_per_gap,
    edge_streams,
    nvtx_ranges,
    streams_cut,
    text_time_per_gap,
)
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
# The tables a slice reads for its span (NVTX and scheduling rows are the group's).
_SLICED_TABLES = ("cuda_api", "osrt")

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


@dataclass(frozen=True)
class RangeRuns:
    """A group's NVTX ranges as arrays, found per slice by binary search.

    ``threads``: each thread's run ``[a, b)`` of the ranges (sorted by thread, then
    start); ``depths``: the ranges of each thread and depth, in start order.
    """

    start: np.ndarray
    end: np.ndarray
    threads: list[tuple[int, int]]
    depths: list[np.ndarray]


def range_runs(ranges: pl.DataFrame) -> RangeRuns:
    """:class:`RangeRuns` of :func:`~nsysan.analyze.host_timeline.nvtx_ranges`."""
    thread = ranges[THREAD_NUMBER].to_numpy()
    depth = ranges["_depth"].to_numpy()
    cuts = [0, *(np.flatnonzero(thread[1:] != thread[:-1]) + 1), len(thread)]
    runs = list(itertools.pairwise(cuts))
    depths = []
    for a, b in runs:
        # Stable: each depth's ranges stay in start order.
        order = a + np.argsort(depth[a:b], kind="stable")
        d = depth[order]
        edges = [0, *(np.flatnonzero(d[1:] != d[:-1]) + 1), len(d)]
        depths.extend(order[lo:hi] for lo, hi in itertools.pairwise(edges))
    return RangeRuns(ranges["start_ns"].to_numpy(), ranges["_range_end"].to_numpy(), runs, depths)


def ranges_in_slice(ranges: pl.DataFrame, runs: RangeRuns, lo: int, hi: int) -> pl.DataFrame:
    """The NVTX ``ranges`` a slice spanning ``[lo, hi)`` needs, in their order.

    ``ranges``: :func:`~nsysan.analyze.host_timeline.nvtx_ranges` (``_th, start_ns,
    _range_end, text, _depth``, sorted by thread and start), ``runs`` their
    :func:`range_runs`. Those overlapping the span, and of those started before it,
    the last of each thread and the last of each thread and depth (the module
    docstring says why).
    """
    start, end = runs.start, runs.end
    keep = np.zeros(len(start), dtype=bool)
    for a, b in runs.threads:
        before, below = a + np.searchsorted(start[a:b], [lo, hi])
        keep[before:below] = True  # started inside the span (ranges are not empty)
        keep[a:before] = end[a:before] > lo  # started before it, still open
        if before > a:
            keep[before - 1] = True
    for rows in runs.depths:
        last = np.searchsorted(start[rows], lo) - 1
        if last >= 0:
            keep[rows[last]] = True
    return ranges.filter(keep)


def thread_group_time(
    trace: Trace,
    threads: pl.DataFrame,
    signature: pl.DataFrame,
    portions: pl.DataFrame,
    pieces: pl.DataFrame | None,
    summed_texts: Callable[[pl.DataFrame], pl.DataFrame] | None = None,
) -> tuple[dict[str, np.ndarray], pl.DataFrame]:
    """The host causes' time of the ``portions`` on ``threads``, and their NVTX texts' time.

    Per portion, in their order: :func:`cause_time_per_gap` less the time under
    transfers (``pieces``, of the same gaps), in :func:`portion_time_type`'s integers,
    without ``_nvtx_ns`` and without the causes that have no time in any of them; and
    :func:`text_time_per_gap`. A group of more than :data:`SLICE_PORTIONS` portions is
    cut in time slices; the results are the same.

    ``summed_texts``, when given, sums a slice's texts as soon as the slice is done
    (per GPU, say): the texts are then these sums, one table per slice side by side,
    so that what reads them sums them again. Per gap, a group's texts grow with its
    portions (~2.7 rows a portion on the scale8 workload, 0.24 GB a group at 20M
    kernels); their sums do not.
    """
    # NVTX ranges are numbered and nested over the whole group (read from the trace
    # by nvtx_ranges); only the scheduling rows (and ranges) of the group stay read
    # beside the slices.
    ranges = nvtx_ranges(trace, threads)
    group = with_rows_on_threads(trace, threads, ("sched",))
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
            with_rows_on_threads(group, threads, _SLICED_TABLES, span),
            threads,
            signature,
            part,
            part_ranges,
            _slice_pieces(pieces, piece_slot, rows, portions.height),
        )
        for name, values in part_spent[0].items():
            # A cause without time here stays unwritten: its zeros take no memory, or
            # it is left out when no slice has any.
            if values.any():
                spent.setdefault(name, np.zeros(portions.height, dtype=spent_type))[rows] = values
        texts.append(part_spent[1] if summed_texts is None else summed_texts(part_spent[1]))
    return spent, pl.concat(texts) if len(texts) > 1 else texts[0]


def _slice_pieces(
    pieces: pl.DataFrame | None, slot: np.ndarray | None, rows: np.ndarray, portions: int
) -> pl.DataFrame | None:
    """The ``pieces`` of the portions at ``rows``, their ``_gap`` set to the portion's
    place among ``rows`` (``slot``: each piece's portion among all ``portions``)."""
    if pieces is None or slot is None:
        return None
    place = np.full(portions, -1, dtype=np.int64)
    place[rows] = np.arange(len(rows))
    local = place[slot]
    kept = local >= 0
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
) -> tuple[dict[str, np.ndarray], pl.DataFrame]:
    """:func:`thread_group_time` of one slice: ``rows`` hold its host rows, ``pieces`` are
    numbered by their portion's row in ``portions``."""
    streams = edge_streams(rows, threads, signature, ranges, portions)
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
    return spent, text_time_per_gap(in_ranges, segments, ranges)
