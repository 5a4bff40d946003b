"""The feeding threads' host timelines, cut into segments of one cause each.

Part of host attribution (:mod:`nsysan.analyze.host`). Every interval that can
explain host time on a feeding thread (CUDA API and OS runtime calls, descheduled
time, NVTX ranges) goes into the edge streams in the layer of its cause
(:data:`~nsysan.analyze.host_causes.HOST_CAUSES`); one compiled sweep
(:func:`~nsysan.analyze.host_loops.cause_segments`) cuts the timelines into
segments of one cause, chosen by precedence, and one innermost NVTX range. Each
gap's host portion then adds up the segments it overlaps: its time per cause
(:func:`cause_time_per_gap`) and per innermost NVTX text (:func:`text_time_per_gap`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import polars as pl

from nsysan.analyze.host_causes import (
    BLOCKING_OS_CALLS,
    CUDA_SYNC_APIS,
    HOST_CAUSES,
    NVTX_CROSSING,
    NVTX_NO_TEXT,
    name_in,
)
from nsysan.analyze.host_gil import GIL_KEYS, gil_family_waits, gil_threads
from nsysan.analyze.host_loops import (
    CROSSING,
    EdgeStreams,
    Segments,
    at_or_before,
    cause_segments,
    time_per_cause,
)
from nsysan.analyze.host_range_order import in_order, range_order
from nsysan.analyze.host_sums import texts_per_gpu
from nsysan.analyze.host_tables import (
    ENGINE,
    THREAD_KEYS,
    THREAD_NUMBER,
    feeding_rows,
    on_threads,
    position_type,
    rows_on_threads,
    thread_numbers,
    with_rows_on_threads,
)
from nsysan.analyze.host_text_loops import time_per_key_and_text, time_per_text
from nsysan.model import Trace
from nsysan.stored import StoredTable

__all__ = [
    "cause_time_per_gap",
    "descheduled_intervals",
    "edge_streams",
    "host_segments",
    "nvtx_ranges",
    "streams_cut",
    "text_time_per_gap",
    "text_time_per_key",
    "timeline_segments",
]

# Per-segment causes as an Enum: a million string literals are slow to build.
_HOST_CAUSE = pl.Enum(HOST_CAUSES)


def _sorted(df: pl.LazyFrame, cols: Sequence[str]) -> pl.LazyFrame:
    # Stable single-column sorts run several times faster than one multi-column sort
    # on millions of unordered rows; sorting the least significant column first gives
    # the same order.
    for col in reversed(cols):
        df = df.sort(col, maintain_order=True)
    return df


def descheduled_intervals(sched: pl.DataFrame) -> pl.DataFrame:
    """Per thread, ``[switch-out, next switch-in)``: ``source, pid, tid, start_ns, end_ns``.

    A switch-out with no later switch-in (thread exit, end of capture) has no known
    end and is left out.
    """
    thread_time = [*THREAD_KEYS, "time_ns"]
    ordered = _sorted(sched.lazy().drop_nulls(["tid", "time_ns", "is_sched_in"]), thread_time)
    # The next row of the same thread, whatever the order of events at one instant.
    same_thread = pl.all_horizontal(pl.col(c).eq_missing(pl.col(c).shift(-1)) for c in THREAD_KEYS)
    return (
        ordered.with_columns(
            pl.col("time_ns").shift(-1).alias("_next_t"),
            (pl.col("is_sched_in").shift(-1) & same_thread).alias("_next_in"),
        )
        .filter(~pl.col("is_sched_in") & pl.col("_next_in").fill_null(False))
        .select(
            *THREAD_KEYS, pl.col("time_ns").alias("start_ns"), pl.col("_next_t").alias("end_ns")
        )
        .collect(engine=ENGINE)
    )


_IS_POSITIVE = (
    pl.col("start_ns").is_not_null()
    & pl.col("end_ns").is_not_null()
    & (pl.col("end_ns") > pl.col("start_ns"))
)


def _positive(df: pl.LazyFrame) -> pl.LazyFrame:
    return df.filter(_IS_POSITIVE)


def _add_table(streams: EdgeStreams, df: pl.DataFrame, thread: pl.Series, layer: pl.Expr) -> None:
    """Adds ``df``'s positive intervals on the feeding threads (``thread`` not null) in ``layer``.

    ``layer`` gives each row's layer number (null: in none).
    """
    layers = df.select(
        pl.when(thread.is_not_null() & _IS_POSITIVE).then(layer).fill_null(-1).cast(pl.Int8)
    ).to_series()
    start, end = df["start_ns"], df["end_ns"]
    kept = layers >= 0
    if kept.sum() < df.height // 2:
        # A few threads of a big table (one group of the feeding threads): copy their
        # rows, so the streams' passes and buffers follow them, not the whole table.
        layers, thread, start, end = (c.filter(kept) for c in (layers, thread, start, end))
    streams.add_rows(
        layers.to_numpy(),
        thread.fill_null(0).to_numpy(),
        start.fill_null(0).to_numpy(),
        end.fill_null(0).to_numpy(),
    )


def _layer_number(cause: str) -> pl.Expr:
    return pl.lit(HOST_CAUSES.index(cause), dtype=pl.Int8)


def _gil_rows(osrt: pl.DataFrame, thread: pl.Series, signature: pl.DataFrame) -> pl.Expr:
    """Whether each row of ``osrt`` is a wait of a GIL signature call (``thread``: its ``_th``)."""
    if signature.is_empty():
        return pl.lit(False)
    feeding = (
        osrt.select(*THREAD_KEYS, "name", "nesting_level", "start_ns", "end_ns")
        .with_row_index("_row")
        .filter(thread.is_not_null() & _IS_POSITIVE)
    )
    # The last wait of a GIL acquisition is woken early, so every slice-or-shorter
    # wait of the signature call counts, not only the ~5 ms ones.
    rows = (
        gil_family_waits(feeding)
        .filter(pl.col("_slice"))
        .join(signature.select(GIL_KEYS), on=list(GIL_KEYS), how="semi")["_row"]
    )
    return pl.int_range(pl.len(), dtype=pl.UInt32).is_in(rows.implode())


def edge_streams(
    trace: Trace,
    threads: pl.DataFrame,
    signature: pl.DataFrame,
    ranges: pl.DataFrame,
    portions: pl.DataFrame | None,
    descheduled: pl.DataFrame | None = None,
) -> EdgeStreams:
    """The edges of every host cause's intervals on the feeding threads (and of ``portions``).

    Each interval is in one layer, numbered by its cause's place in
    :data:`HOST_CAUSES`: a CUDA call is ``cuda_sync`` or ``cuda_api``, an OS call
    ``gil_wait``, ``blocking_os`` or ``os_call`` (a GIL wait is also a blocking call,
    but only the first layer open counts, so it need not be in both). ``ranges`` are
    :func:`nvtx_ranges`, added in their order; ``portions``, if any, are the layer
    after the causes. ``descheduled``: the threads' :func:`descheduled_intervals`, when
    already known (else they are found from the trace's scheduling rows).
    """
    streams = EdgeStreams(threads.height)
    api = trace.cuda_api
    sync = name_in(api["name"], CUDA_SYNC_APIS)
    _add_table(
        streams,
        api,
        thread_numbers(api, threads),
        pl.when(sync).then(_layer_number("cuda_sync")).when(~sync).then(_layer_number("cuda_api")),
    )
    osrt = trace.osrt
    thread = thread_numbers(osrt, threads)
    blocking = name_in(osrt["name"], BLOCKING_OS_CALLS)
    _add_table(
        streams,
        osrt,
        thread,
        pl.when(_gil_rows(osrt, thread, signature))
        .then(_layer_number("gil_wait"))
        .when(blocking)
        .then(_layer_number("blocking_os"))
        .when(~blocking)
        .then(_layer_number("os_call")),
    )
    if descheduled is None:
        descheduled = descheduled_intervals(on_threads(trace.sched, threads))
    _add_table(
        streams,
        descheduled,
        thread_numbers(descheduled, threads),
        _layer_number("descheduled"),
    )
    if ranges.height:
        streams.add_layer(
            HOST_CAUSES.index("nvtx"),
            ranges[THREAD_NUMBER].to_numpy(),
            ranges["start_ns"].to_numpy(),
            ranges["_range_end"].to_numpy(),
        )
    if portions is not None:
        streams.add_layer(
            len(HOST_CAUSES),
            portions[THREAD_NUMBER].to_numpy(),
            portions["start_ns"].to_numpy(),
            portions["end_ns"].to_numpy(),
        )
    return streams


# The NVTX columns nvtx_ranges reads (besides the thread keys).
_RANGE_READ = ("start_ns", "end_ns", "text")


def nvtx_ranges(trace: Trace, threads: pl.DataFrame) -> pl.DataFrame:
    """Feeding-thread NVTX ranges with their nesting depth (1 = outermost).

    Sorted by ``_th``, then start, ranges opened at one instant outermost (longest)
    first. Columns ``_th, start_ns, _range_end, text, _depth``.
    """
    # From a table on disk, only the threads' rows and the columns used are read.
    rows = trace.nvtx
    if isinstance(rows, StoredTable):
        rows = rows_on_threads(rows, threads, columns=_RANGE_READ)
    ranges = (
        _positive(feeding_rows(rows, threads))
        .select(
            THREAD_NUMBER,
            "start_ns",
            pl.col("end_ns").alias("_range_end"),
            pl.col("text").fill_null(NVTX_NO_TEXT),
        )
        .collect(engine=ENGINE)
    )
    del rows
    order = range_order(*(ranges[c].to_numpy() for c in (THREAD_NUMBER, "start_ns", "_range_end")))
    if order is not None:
        ranges = in_order(ranges, order)
    del order
    depth = _nesting_depth(
        ranges[THREAD_NUMBER].to_numpy(),
        ranges["start_ns"].to_numpy(),
        ranges["_range_end"].to_numpy(),
    )
    return ranges.with_columns(pl.Series("_depth", depth))


def _nesting_depth(thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per range (sorted by thread, start), the ranges of its thread open at its start.

    Ranges opened so far (this one included) minus those ended by its start; exact
    for properly nested (push/pop) ranges.
    """
    # A depth is at most a thread's ranges: 32 bits (4 bytes a range less at 20M kernels).
    depth = np.empty(len(thread), dtype=position_type(len(thread)))
    cuts = [0, *(np.flatnonzero(np.diff(thread)) + 1), len(thread)]
    for lo, hi in itertools.pairwise(cuts):
        # Ends come nearly in order (ranges nest): timsort takes them in about one pass.
        ended = np.sort(end[lo:hi], kind="stable")
        # Starts are sorted too: one merge, not a binary search per range.
        depth[lo:hi] = np.arange(1, hi - lo + 1) - at_or_before(ended, start[lo:hi])
    return depth


def timeline_segments(
    trace: Trace,
    threads: pl.DataFrame,
    signature: pl.DataFrame,
    ranges: pl.DataFrame,
    portions: pl.DataFrame | None = None,
    merge: bool = False,
) -> Segments:
    """The feeding threads' timelines cut into segments with one host cause each.

    ``ranges`` are the feeding threads' :func:`nvtx_ranges`. Returns disjoint
    segments where at least one host cause applies, per thread (``_th``) in start
    order: their cause (its position in :data:`HOST_CAUSES`, chosen by precedence)
    and innermost NVTX range (a row of ``ranges``, or
    :data:`~nsysan.analyze.host_loops.CROSSING` / :data:`~nsysan.analyze.host_loops.OUTSIDE`).
    With ``portions`` (``_th, start_ns, end_ns``), only the time inside them: on a
    busy host the whole timeline has several segments per kernel, most of them where
    no gap ever looks. With ``merge``, segments are cut only where the cause or the
    range changes (time sums are the same, and there are fewer segments to store).
    """
    streams = edge_streams(trace, threads, signature, ranges, portions)
    return streams_cut(streams, ranges, portions is not None, merge)


def streams_cut(
    streams: EdgeStreams, ranges: pl.DataFrame, with_portions: bool, merge: bool = False
) -> Segments:
    """:func:`timeline_segments` of edges already gathered by :func:`edge_streams` (the
    host rows they came from need not be held while the timelines are cut)."""
    return cause_segments(
        streams,
        len(HOST_CAUSES),
        HOST_CAUSES.index("nvtx") if ranges.height else -1,
        ranges["_depth"].to_numpy(),
        ranges["_range_end"].to_numpy(),
        len(HOST_CAUSES) if with_portions else -1,
        merge,
    )


def _range_texts(ranges: pl.DataFrame, rows: np.ndarray) -> pl.Series:
    """``nvtx_text`` of range ``rows``: :data:`NVTX_CROSSING` for ``CROSSING``, null for ``OUTSIDE``."""
    if ranges.height and (len(rows) == 0 or rows.min() >= 0):
        # Every row names a range (the usual case): one gather, no per-row choice.
        return ranges["text"].gather(rows).alias("nvtx_text")
    dtype = ranges.schema["text"]
    at = pl.lit(pl.Series(rows))
    text = (
        ranges["text"].gather(np.maximum(rows, 0))
        if ranges.height
        else pl.repeat(None, len(rows), dtype=dtype, eager=True)
    )
    return pl.select(
        pl.when(at >= 0)
        .then(pl.lit(text))
        .when(at == CROSSING)
        .then(pl.lit(NVTX_CROSSING).cast(dtype))
        .alias("nvtx_text")
    ).to_series()


def host_segments(
    trace: Trace, threads: pl.DataFrame, signature: pl.DataFrame | None = None
) -> pl.DataFrame:
    """The feeding threads' timelines cut into segments with one host cause each.

    ``threads`` has ``source, pid, tid, _th``; ``signature`` is :func:`gil_threads`
    of their OS runtime calls (computed when not given). Returns ``_th, start_ns,
    end_ns, cause, nvtx_text``, sorted by ``_th, start_ns``: disjoint segments where
    at least one host cause applies, ``cause`` (an Enum of :data:`HOST_CAUSES`)
    chosen by their precedence, ``nvtx_text`` the innermost NVTX range (null outside
    any range).
    """
    trace = with_rows_on_threads(trace, threads)
    if signature is None:
        signature = gil_threads(on_threads(trace.osrt, threads))
    ranges = nvtx_ranges(trace, threads)
    segments = timeline_segments(trace, threads, signature, ranges)
    numbers = list(range(len(HOST_CAUSES)))
    return pl.DataFrame(
        [
            pl.Series(THREAD_NUMBER, segments.thread(), dtype=threads.schema[THREAD_NUMBER]),
            pl.Series("start_ns", segments.start),
            pl.Series("end_ns", segments.end),
            pl.Series("cause", segments.cause).replace_strict(
                numbers, list(HOST_CAUSES), return_dtype=_HOST_CAUSE
            ),
            _range_texts(ranges, segments.nvtx_range),
        ]
    )


def cause_time_per_gap(
    portions: pl.DataFrame, segments: Segments, gaps: int
) -> dict[str, np.ndarray]:
    """Per gap, its host portion's time in the host causes that occur and in NVTX ranges.

    ``<cause>_ns`` for every cause of :data:`HOST_CAUSES` some segment has (the others
    are 0 everywhere), and ``_nvtx_ns``.

    A portion's time in a cause is its overlap with the ``segments`` of that cause;
    ``_nvtx_ns`` its overlap with segments inside at least one NVTX range. Gaps
    without a portion get 0.
    """
    present, spent = time_per_cause(
        segments,
        len(HOST_CAUSES),
        [portions[c].to_numpy() for c in (THREAD_NUMBER, "start_ns", "end_ns", "_gap")],
        gaps,
    )
    names = [*(f"{HOST_CAUSES[c]}_ns" for c in present), "_nvtx_ns"]
    return dict(zip(names, spent, strict=True))


# The (key, text) table text_time_per_key sums into holds 20 bytes a cell (40 MB at
# most). Text category codes are its columns when they fit (a handful of GPUs and
# of texts, usually); else the slice's distinct texts are numbered first, and past
# that (tens of GPUs fed by one thread, a text per range) the per-gap rows are summed.
_KEY_TEXT_CELLS = 1 << 21


def _crossing_code(ranges: pl.DataFrame) -> int:
    """The category code of :data:`NVTX_CROSSING` among ``ranges``' texts."""
    return int(pl.Series([NVTX_CROSSING]).cast(ranges.schema["text"]).to_physical()[0])


def text_time_per_key(
    portions: pl.DataFrame, segments: Segments, ranges: pl.DataFrame, keys: pl.Series
) -> pl.DataFrame:
    """:func:`text_time_per_gap` summed per key and text, without a row per gap and text.

    ``keys`` holds each gap's key (its GPU, say; row ``_gap``). Returns ``<key>,
    nvtx_text, nvtx_ns, covered_ns``: one row per (key, text) that some portion meets,
    in no particular order (:func:`~nsysan.analyze.host_sums.texts_per_gpu`'s table).
    """
    portion_key = keys.gather(portions["_gap"])
    numbered = None
    if not portion_key.null_count():
        key_values, key_numbers = np.unique(portion_key.to_numpy(), return_inverse=True)
        numbered = _text_numbers(
            ranges["text"].to_physical().to_numpy(), _crossing_code(ranges), len(key_values)
        )
    if numbered is None:
        return texts_per_gpu(text_time_per_gap(portions, segments, ranges), keys)
    key, named_range, covered, nvtx = time_per_key_and_text(
        segments,
        *numbered,
        HOST_CAUSES.index("nvtx"),
        [portions[c].to_numpy() for c in (THREAD_NUMBER, "start_ns", "end_ns")],
        key_numbers,
        len(key_values),
    )
    return pl.DataFrame(
        [
            pl.Series(keys.name, key_values[key], dtype=keys.dtype),
            _range_texts(ranges, named_range),
            pl.Series("nvtx_ns", nvtx),
            pl.Series("covered_ns", covered),
        ]
    )


def _text_numbers(
    codes: np.ndarray, crossing: int, key_count: int
) -> tuple[np.ndarray, int, int] | None:
    """The ranges' texts numbered for a table of ``key_count`` rows: each range's number,
    the crossing ranges' and the count; None when the table would pass
    :data:`_KEY_TEXT_CELLS`. ``codes`` are the ranges' category codes, ``crossing``
    that of :data:`NVTX_CROSSING`: they are the numbers when few enough, else the
    distinct ones among them are numbered in order."""
    count = max(int(codes.max(initial=0)), crossing) + 1
    if key_count * count <= _KEY_TEXT_CELLS:
        return codes.astype(np.int64), crossing, count
    distinct, numbers = np.unique(np.append(codes, crossing), return_inverse=True)
    if key_count * len(distinct) > _KEY_TEXT_CELLS:
        return None
    return numbers[:-1].astype(np.int64), int(numbers[-1]), len(distinct)


def text_time_per_gap(
    portions: pl.DataFrame, segments: Segments, ranges: pl.DataFrame
) -> pl.DataFrame:
    """Per gap and innermost NVTX text: ``covered_ns`` and ``nvtx_ns``.

    ``portions`` (``_gap, _th, start_ns, end_ns``, one per gap) may overlap one
    another; ``segments`` are :func:`timeline_segments` with ``ranges``. ``covered_ns``
    is the portion time inside ranges of that text, any cause; ``nvtx_ns`` the part of
    it attributed to the ``nvtx`` cause.
    """
    # A text is its category code; crossing ranges get the code of their label (that
    # of any range named like them too), so a portion's texts are distinct.
    portion, named_range, covered, nvtx = time_per_text(
        segments,
        ranges["text"].to_physical().to_numpy(),
        _crossing_code(ranges),
        HOST_CAUSES.index("nvtx"),
        [portions[c].to_numpy() for c in (THREAD_NUMBER, "start_ns", "end_ns")],
    )
    return pl.DataFrame(
        [
            portions["_gap"].gather(portion),
            _range_texts(ranges, named_range),
            pl.Series("covered_ns", covered),
            pl.Series("nvtx_ns", nvtx),
        ]
    )
