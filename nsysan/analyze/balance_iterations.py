"""Iteration boundaries common to all GPUs, for the bubbles in :mod:`nsysan.analyze.balance`.

:func:`find_iterations` takes a repeated NVTX range first, else a repeated kernel
sequence (docs/metrics/balance.md#iterations):

* **NVTX**: the repeated range that covers the most time. It must repeat at least
  :data:`ITERATION_MIN_COUNT` times and cover at least
  :data:`ITERATION_MIN_COVERAGE_SHARE` of its own span and of the GPUs' span, which
  keeps out short API-call ranges that merely repeat; ranges of library NVTX domains
  and NCCL texts mark API calls, never iterations. Per range, the first start and
  last end of the kernels launched inside it: a kernel belongs to the range of its
  process whose span holds the start of its launch call (matched by correlation id).
* **Kernel sequence**: the repeated kernel sequence of the GPU that starts work
  first. A sequence is periodic with period p when :data:`PERIOD_MIN_MATCH_SHARE` of
  kernels have the same name as the kernel p positions later. The iteration starts
  where the GPU waits longest (median, so one long warm-up gap does not decide it):
  after the step's sync or data loading.

Iterations are contiguous, ``[start_k, start_k+1)``, and those outside the GPUs'
windows are dropped.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import polars as pl

from nsysan.analyze.balance_tables import (
    END,
    GPU,
    NCCL_NAME_PATTERN,
    START,
    WINDOW_END,
    WINDOW_START,
    gpu_windows,
)
from nsysan.model import CALL_KEYS, Trace
from nsysan.names import distinct, is_one_of, values_matching
from nsysan.packing import among, bit_widths, packed_key
from nsysan.stored import HostTable

__all__ = [
    "ITERATION_MIN_COUNT",
    "ITERATION_MIN_COVERAGE_SHARE",
    "PERIOD_MIN_MATCH_SHARE",
    "IterationSource",
    "find_iterations",
]

# Iterations: a boundary series must repeat at least this often ...
ITERATION_MIN_COUNT = 3
# ... and an NVTX series must cover at least this share of its own span and of
# the GPUs' span, which keeps out short API-call ranges that merely repeat.
ITERATION_MIN_COVERAGE_SHARE = 0.5
# Candidate NVTX series tried, by time covered, before falling back to kernels.
NVTX_CANDIDATES = 5
# NVTX domains of libraries, whose ranges mark API calls, never iterations.
LIBRARY_NVTX_DOMAINS = ("nccl",)
# A kernel sequence is periodic with period p when this share of kernels has the
# same name as the kernel p positions later.
PERIOD_MIN_MATCH_SHARE = 0.9
# Period candidates per GPU (the most frequent distances between repeats of a
# name) and the kernels per GPU searched, to bound the cost on huge traces.
PERIOD_CANDIDATES = 16
PERIOD_SEARCH_KERNELS = 50_000
# Up to this period, the median gap per phase is taken phase by phase (no grouping).
MEDIAN_LOOP_PHASES = 64

IterationSource = Literal["nvtx", "kernel_sequence"]


def _empty_iterations() -> pl.DataFrame:
    return pl.DataFrame(schema={"iteration": pl.Int64, START: pl.Int64, END: pl.Int64})


def _contiguous(starts: pl.DataFrame, last_end: int | None) -> pl.DataFrame:
    """Iterations ``[start_k, start_k+1)``; the last ends at ``last_end`` (dropped if None)."""
    s = starts.select(pl.col(START).cast(pl.Int64)).drop_nulls()
    if not s.get_column(START).is_sorted():
        s = s.sort(START)
    s = s.filter((pl.col(START) != pl.col(START).shift(1)).fill_null(True))
    out = s.with_columns(pl.col(START).shift(-1).alias(END))
    if last_end is not None:
        out = out.with_columns(pl.col(END).fill_null(pl.lit(last_end, pl.Int64)))
    out = out.drop_nulls(END).filter(pl.col(END) > pl.col(START))
    return out.with_row_index("iteration").with_columns(pl.col("iteration").cast(pl.Int64))


def _nvtx_iterations(trace: Trace, windows: pl.DataFrame) -> tuple[pl.DataFrame, str | None]:
    """Iterations from the repeated NVTX range that covers the most time (see module doc)."""
    hull_start = int(windows.get_column(WINDOW_START).min())  # type: ignore[arg-type]
    hull_end = int(windows.get_column(WINDOW_END).max())  # type: ignore[arg-type]
    # The text tests run over the few distinct domains and texts, not every range.
    nvtx = trace.nvtx.lazy()
    domains = distinct(nvtx, "domain").drop_nulls().cast(pl.String)
    library_domains = domains.filter(domains.str.to_lowercase().is_in(list(LIBRARY_NVTX_DOMAINS)))
    nccl_texts = values_matching(distinct(nvtx, "text"), NCCL_NAME_PATTERN)
    ranges = (
        nvtx.filter(
            pl.col("end_ns").is_not_null()
            & (pl.col(END) > pl.col(START))
            & pl.col("text").is_not_null()
            & ~is_one_of(pl.col("domain"), library_domains.to_list())
            & ~is_one_of(pl.col("text"), nccl_texts)
        )
        .select("source", "pid", "text", START, END)
        .collect()
    )
    if ranges.is_empty() or hull_end <= hull_start:
        return _empty_iterations(), None
    keys = ["source", "pid", "text"]
    series = (
        ranges.sort(*keys, START)
        .with_columns(
            (pl.col(START) < pl.col(END).shift(1).over(keys)).fill_null(False).alias("_overlap")
        )
        .group_by(keys)
        .agg(
            pl.len().alias("count"),
            (pl.col(END) - pl.col(START)).sum().alias("covered_ns"),
            (pl.col(END).max() - pl.col(START).min()).alias("span_ns"),
            pl.col("_overlap").any().alias("overlapping"),
        )
        .filter(
            (pl.col("count") >= ITERATION_MIN_COUNT)
            & ~pl.col("overlapping")
            & (pl.col("covered_ns") >= ITERATION_MIN_COVERAGE_SHARE * pl.col("span_ns"))
        )
    )
    texts = (
        series.group_by("text")
        .agg(pl.col("covered_ns").sum())
        .sort(["covered_ns", "text"], descending=[True, False])
        .head(NVTX_CANDIDATES)
        .get_column("text")
    )
    for text in texts:  # a few candidate series, best first; never a loop over rows
        chosen = (
            series.filter(pl.col("text") == text)
            .select("source", "pid")
            .join(ranges.filter(pl.col("text") == text), on=["source", "pid"])
            .sort("source", "pid", START)
            .with_columns(
                pl.int_range(pl.len()).over("source", "pid").cast(pl.Int64).alias("ordinal")
            )
        )
        gpu_side = _gpu_side_ordinals(trace, chosen)
        if gpu_side.is_empty():
            gpu_side = chosen.group_by("ordinal").agg(pl.col(START).min(), pl.col(END).max())
        final_end = int(gpu_side.sort("ordinal").item(-1, END))
        iterations = _on_gpus(_contiguous(gpu_side.select(START), final_end), windows)
        if iterations.height < ITERATION_MIN_COUNT:
            continue
        # The series' extent on the CPU or the GPU side, whichever is wider: a first
        # iteration may spend long on the host (compilation) before its kernels run.
        first = min(int(chosen[START].min()), int(iterations[START].min()))  # type: ignore[arg-type]
        last = max(int(chosen[END].max()), int(iterations[END].max()))  # type: ignore[arg-type]
        on_gpus = min(last, hull_end) - max(first, hull_start)
        if on_gpus >= ITERATION_MIN_COVERAGE_SHARE * (hull_end - hull_start):
            return iterations, text
    return _empty_iterations(), None


def _gpu_side_ordinals(trace: Trace, ranges: pl.DataFrame) -> pl.DataFrame:
    """Per range ordinal, the first start and last end of the kernels launched inside it.

    A kernel belongs to the range of its process whose span holds the start of its
    launch call (matched by correlation id; every call with that id); empty without a
    CUDA API trace.
    """
    launches = _launch_starts(trace.kernels, trace.calls_of_operations())
    if launches.is_empty():
        return pl.DataFrame(schema={"ordinal": pl.Int64, START: pl.Int64, END: pl.Int64})
    process = ["source", "pid"]
    spans = ranges.select(
        *process, "ordinal", pl.col(START).alias("_rs"), pl.col(END).alias("_re")
    ).sort("_rs")
    return (
        launches.join_asof(
            spans,
            left_on="launch_ns",
            right_on="_rs",
            by=process,
            strategy="backward",
            check_sortedness=False,
        )
        .filter(pl.col("launch_ns") < pl.col("_re"))
        .group_by("ordinal")
        .agg(pl.col(START).min(), pl.col(END).max())
        .sort("ordinal")
    )


def _launch_starts(kernels: pl.DataFrame, cuda_api: HostTable) -> pl.DataFrame:
    """``source, pid, start_ns, end_ns, launch_ns``: each kernel with the start of every
    CUDA call of its (source, pid, correlation id), by launch start.

    The three keys are joined as one packed integer where they fit (nsysan.packing):
    a join on the three columns row-encoded them for every kernel and every call (at
    5M kernels and 16M calls, +1.6 GB and ~2 s).
    """
    rows = cuda_api.lazy()
    if not isinstance(cuda_api, pl.DataFrame):
        # From a table on disk only the calls of the kernels' keys are read: a big
        # trace's CUDA calls are several times its launches (5M kernels: 16M calls).
        rows = among(rows, kernels, CALL_KEYS)
    calls = rows.select(*CALL_KEYS, pl.col(START).alias("launch_ns")).collect()
    widths = bit_widths([kernels, calls], CALL_KEYS)
    if widths is None:
        joined = kernels.select(*CALL_KEYS, START, END).join(calls, on=CALL_KEYS, how="inner")
    else:
        key = packed_key(CALL_KEYS, widths).alias("_call")
        joined = (
            kernels.select("source", "pid", key, START, END)
            .join(calls.select(key, "launch_ns"), on="_call", how="inner")
            .drop("_call")
        )
    return (
        joined.select("source", "pid", START, END, "launch_ns")
        .drop_nulls("launch_ns")
        .sort("launch_ns")
    )


def _in_time_order(kernels: pl.DataFrame) -> bool:
    """Whether one GPU's ``kernels`` are in (start, end) order, as the trace stores them."""
    s, e = pl.col(START), pl.col(END)
    return kernels.get_column(START).is_sorted() and bool(
        kernels.select(((s != s.shift(1)) | (e >= e.shift(1))).all()).item()
    )


def _kernel_sequence(kernels: pl.DataFrame) -> pl.DataFrame:
    """One GPU's kernels with bounds in (start, end) order: ``short_name`` (null as ""),
    ``start_ns``, ``end_ns``."""
    own = kernels.select(pl.col("short_name").fill_null(""), START, END).drop_nulls([START, END])
    if not _in_time_order(own):
        own = own.sort([START, END], maintain_order=True)
    return own


def _period(names: np.ndarray) -> int | None:
    """The smallest period of a kernel-name sequence (names as integer codes), or None.

    Candidates are the most frequent distances between repeats of a name.
    """
    order = np.argsort(names, kind="stable")
    repeats = names[order[1:]] == names[order[:-1]]
    distances, counts = np.unique((order[1:] - order[:-1])[repeats], return_counts=True)
    # The most frequent first, ties to the shorter.
    candidates = distances[np.lexsort((distances, -counts))[:PERIOD_CANDIDATES]]
    for p in sorted(candidates.tolist()):
        if names.size < ITERATION_MIN_COUNT * p:
            continue
        same = names[p:] == names[:-p]
        if int(same.sum()) / same.size >= PERIOD_MIN_MATCH_SHARE and np.unique(names[:p]).size >= 2:
            return p
    return None


def _phase_medians(gaps: pl.Series, period: int) -> list[float | None]:
    """Per phase (position modulo ``period``), the median of ``gaps``."""
    if period <= MEDIAN_LOOP_PHASES:
        return [gaps.gather_every(period, phase).median() for phase in range(period)]  # type: ignore[misc]
    return (
        pl.DataFrame({"phase": pl.int_range(gaps.len(), eager=True) % period, "gap": gaps})
        .group_by("phase")
        .agg(pl.col("gap").median())
        .sort("phase")
        .get_column("gap")
        .to_list()
    )


def _sequence_iterations(kernels: pl.DataFrame) -> tuple[pl.DataFrame, str | None]:
    """Iterations from the repeated kernel sequence of the GPU that starts work first."""
    by_gpu = kernels.filter(pl.col(GPU).is_not_null()).partition_by(GPU, as_dict=True)
    found = []  # (first start, gpu, period, sequence)
    for (gpu,), own in sorted(by_gpu.items()):
        seq = _kernel_sequence(own)
        head = seq.get_column("short_name").head(PERIOD_SEARCH_KERNELS)
        period = _period(head.cast(pl.Categorical).to_physical().to_numpy())
        if period is not None:
            found.append((seq.item(0, START), gpu, period, seq))
    if not found:
        return _empty_iterations(), None
    _, gpu, period, own = min(found, key=lambda f: f[:2])
    gaps = own.select(
        (pl.col(START) - pl.col(END).cum_max().shift(1)).clip(0).alias("gap_before_ns")
    ).to_series()
    # The iteration starts where the GPU waits longest (median, so one long
    # warm-up gap does not decide it): after the step's sync or data loading.
    medians = _phase_medians(gaps, period)
    # The longest median gap, the first such phase on a tie.
    phase = max((p for p, m in enumerate(medians) if m is not None), key=lambda p: (medians[p], -p))
    starts = own.get_column(START).gather_every(period, phase).to_frame()
    names = own.get_column("short_name").slice(phase, period)
    label = f"GPU {gpu}: every {period} kernels from {names[0]} ({' → '.join(names.to_list())})"
    return _contiguous(starts, None), label


def _on_gpus(iterations: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """The iterations that overlap the GPUs' windows, renumbered from 0."""
    start = windows.get_column(WINDOW_START).min()
    end = windows.get_column(WINDOW_END).max()
    return (
        iterations.filter((pl.col(END) > start) & (pl.col(START) < end))
        .drop("iteration")
        .with_row_index("iteration")
        .with_columns(pl.col("iteration").cast(pl.Int64))
    )


def find_iterations(
    trace: Trace, windows: pl.DataFrame
) -> tuple[pl.DataFrame, IterationSource | None, str | None]:
    """Iteration boundaries common to all GPUs: ``iteration, start_ns, end_ns``.

    A repeated NVTX range first, else a repeated kernel sequence; returns the source
    and a label (the NVTX text, or the reference GPU and its period).
    """
    w = gpu_windows(windows)
    if w.is_empty():
        return _empty_iterations(), None, None
    iterations, text = _nvtx_iterations(trace, w)
    if iterations.height >= ITERATION_MIN_COUNT:
        return iterations, "nvtx", text
    iterations, label = _sequence_iterations(
        trace.kernels.filter(pl.col(GPU).is_in(w.get_column(GPU).implode()))
    )
    iterations = _on_gpus(iterations, w)
    if iterations.height >= ITERATION_MIN_COUNT:
        return iterations, "kernel_sequence", label
    return _empty_iterations(), None, None
