"""Imbalance across GPUs: per-GPU load, the kernels behind the skew, drift, pipeline bubbles.

Definition (docs/metrics/balance.md):

* **Per GPU**, inside its analysis window: ``busy_ns`` (the busy union handed in,
  :mod:`nsysan.analyze.busy`), ``compute_ns`` (union of non-NCCL kernels),
  ``nccl_ns`` (union of NCCL kernels), ``kernel_ns`` (sum of kernel durations,
  overlaps counted twice). A kernel is NCCL when its ``short_name`` contains
  ``nccl`` (case-insensitive, :data:`NCCL_NAME_PATTERN`).
* **Load-balance efficiency** = mean / max over GPUs; **max/mean** its companion
  skew (1.12 is the seed's 12% TP skew), for busy and for compute time.
* **Kernel diff**: most and least loaded GPU by ``compute_ns``; per kernel name
  (demangled), the summed non-NCCL kernel time on each, their difference and its
  share of the total difference; the top :data:`KERNEL_DIFF_TOP_N` by absolute
  difference, the rest as one ``(other kernels)`` row, so the rows sum to the total.
* **Drift**: the span from the earliest window start to the latest window end cut
  into ``settings.drift_windows`` (>= :data:`MIN_DRIFT_WINDOWS`) equal windows;
  busy share per GPU per window, per window the spread (max - min share) and the
  leading GPU, how often the leader changes, and per-GPU linear trend of the
  busy share across the span.
* **Pipeline bubbles**: iteration boundaries from a repeated NVTX range (else a
  repeated kernel sequence); per iteration and GPU the idle share, the fill bubble
  (idle from the iteration start to the GPU's first busy instant) and the drain
  bubble (idle from its last busy instant to the iteration end). Not applicable,
  with the reason, when no boundaries are found.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import polars as pl

from nsysan.errors import SettingsError
from nsysan.intervals import (
    clip_to_windows,
    is_union_inside,
    union_intervals,
    union_length,
    union_one_unit,
)
from nsysan.model import Trace
from nsysan.names import is_one_of, values_matching
from nsysan.settings import Settings

__all__ = [
    "ITERATION_MIN_COUNT",
    "ITERATION_MIN_COVERAGE_SHARE",
    "KERNEL_DIFF_TOP_N",
    "MIN_DRIFT_WINDOWS",
    "NCCL_NAME_PATTERN",
    "PERIOD_MIN_MATCH_SHARE",
    "ImbalanceResult",
    "IterationSource",
    "find_iterations",
    "measure_imbalance",
]

NCCL_NAME_PATTERN = "(?i)nccl"
KERNEL_DIFF_TOP_N = 10
OTHER_KERNELS = "(other kernels)"
MIN_DRIFT_WINDOWS = 20

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

GPU = "gpu"
START = "start_ns"
END = "end_ns"
WINDOW_START = "window_start_ns"
WINDOW_END = "window_end_ns"
_BUBBLES = {
    "iteration": pl.Int64,
    GPU: pl.Int32,
    START: pl.Int64,
    END: pl.Int64,
    "iteration_ns": pl.Int64,
    "busy_ns": pl.Int64,
    "idle_ns": pl.Int64,
    "fill_ns": pl.Int64,
    "drain_ns": pl.Int64,
}
_BUBBLE_SUMS = {
    GPU: pl.Int32,
    "iterations": pl.Int64,
    "iteration_ns": pl.Int64,
    "busy_ns": pl.Int64,
    "idle_ns": pl.Int64,
    "fill_ns": pl.Int64,
    "drain_ns": pl.Int64,
}
_NO_KERNELS = pl.DataFrame(
    schema={
        "name": pl.Categorical,
        "short_name": pl.Categorical,
        START: pl.Int64,
        END: pl.Int64,
        "duration_ns": pl.Int64,
        "nccl": pl.Boolean,
    }
)


@dataclass(frozen=True)
class ImbalanceResult:
    """Load per GPU, the kernels behind the skew, drift over time and pipeline bubbles.

    ``per_gpu``: gpu, window bounds, ``window_ns``, ``busy_ns``, ``busy_share``,
    ``compute_ns``, ``compute_share``, ``nccl_ns``, ``kernel_ns``, ``kernel_count``,
    ``busy_share_trend`` (fitted change of the drift busy share over the span).
    ``kernel_diff``: ``name``, ``short_name``, ``most_ns``, ``least_ns``,
    ``most_count``, ``least_count``, ``diff_ns``, ``diff_share``.
    ``drift``: one row per (window, gpu): ``window``, ``start_ns``, ``end_ns``,
    ``gpu``, ``busy_ns``, ``busy_share``. ``drift_windows``: per window
    ``mean_share``, ``min_share``, ``max_share``, ``spread_share``, ``efficiency``,
    ``leader_gpu``.
    ``iterations``: ``iteration``, ``start_ns``, ``end_ns``. ``bubbles``: per
    (iteration, gpu) ``iteration_ns``, ``busy_ns``, ``idle_ns``, ``fill_ns``,
    ``drain_ns`` and their shares. ``bubbles_per_gpu``: the same summed per GPU.
    """

    per_gpu: pl.DataFrame
    busy_efficiency: float | None
    busy_max_over_mean: float | None
    compute_efficiency: float | None
    compute_max_over_mean: float | None
    most_loaded_gpu: int | None
    least_loaded_gpu: int | None
    compute_diff_ns: int
    kernel_diff_total_ns: int
    kernel_diff: pl.DataFrame
    drift: pl.DataFrame
    drift_windows: pl.DataFrame
    drift_spread_mean: float | None
    drift_spread_max: float | None
    spread_trend: float | None
    leader_changes: int
    leaders: tuple[int, ...]
    iterations: pl.DataFrame
    iteration_source: IterationSource | None
    iteration_label: str | None
    bubbles: pl.DataFrame
    bubbles_per_gpu: pl.DataFrame
    bubble_share: float | None
    fill_share: float | None
    drain_share: float | None
    bubble_reason: str


def _gpu_windows(windows: pl.DataFrame) -> pl.DataFrame:
    """One window per GPU; process-device windows (nvidia busy mode) merge into their hull."""
    return (
        windows.group_by(GPU)
        .agg(pl.col(WINDOW_START).min(), pl.col(WINDOW_END).max())
        .select(
            pl.col(GPU).cast(pl.Int32),
            pl.col(WINDOW_START).cast(pl.Int64),
            pl.col(WINDOW_END).cast(pl.Int64),
        )
        .sort(GPU)
    )


def _union_ns(union: pl.DataFrame) -> int:
    return int(union.select((pl.col(END) - pl.col(START)).sum()).item())


def _busy_by_gpu(busy: pl.DataFrame, windows: pl.DataFrame) -> dict[int, pl.DataFrame]:
    """Per GPU of ``windows``, the union of its busy intervals inside its window (``_union``).

    The intervals of ``union_intervals(clip_to_windows(busy, windows, "gpu"), "gpu")``,
    one GPU at a time: no join and no grouping over millions of intervals. A busy union
    handed in (``BusyResult.intervals``) is taken as it is.
    """
    # The library's checks (bounds in order, valid windows) run on the only rows that
    # can fail them.
    clip_to_windows(busy.filter(pl.col(END) < pl.col(START)), windows, by=GPU)
    unions = {}
    for gpu, start, end in windows.iter_rows():
        own = busy.filter(pl.col(GPU) == gpu).select(START, END)
        if is_union_inside(own, start, end):
            length = pl.col(END) - pl.col(START)
            unions[gpu] = own.with_columns((length.cum_sum() - length).alias("_before"))
        else:
            unions[gpu] = union_one_unit(
                own.filter((pl.col(END) >= start) & (pl.col(START) <= end)).select(
                    pl.col(START).clip(lower_bound=start), pl.col(END).clip(upper_bound=end)
                )
            )
    return unions


def _lookup(
    cells: pl.DataFrame,
    at: str,
    busy: pl.DataFrame,
    strategy: Literal["backward", "forward"],
    suffix: str,
) -> pl.DataFrame:
    """``cells`` with the interval of one GPU's ``busy`` union an as-of join finds for ``at``.

    Its columns get ``suffix``; ``at`` must be in time order.
    """
    names = {START: f"_s{suffix}", END: f"_e{suffix}", "_before": f"_before{suffix}"}
    return cells.join_asof(
        busy.rename(names),
        left_on=at,
        right_on=names[START],
        strategy=strategy,
        check_sortedness=False,
    )


def _found(
    cells: pl.DataFrame,
    at: str,
    busy: dict[int, pl.DataFrame],
    strategy: Literal["backward", "forward"],
    suffix: str,
) -> pl.DataFrame:
    """``_lookup`` for cells of several GPUs; rows come out grouped by GPU.

    ``at`` must be in time order within each GPU, and ``busy`` must hold every GPU of
    ``cells``.
    """
    return pl.concat(
        _lookup(cells.filter(pl.col(GPU) == gpu), at, table, strategy, suffix)
        for gpu, table in busy.items()
    )


def _busy_before(at: str, suffix: str) -> pl.Expr:
    """Busy time of the GPU before instant ``at``, from the interval ``_found`` for it."""
    s, e, before = (pl.col(f"{c}{suffix}") for c in ("_s", "_e", "_before"))
    return (before + pl.min_horizontal(pl.col(at) - s, e - s)).fill_null(0)


def _with_busy(cells: pl.DataFrame, busy: dict[int, pl.DataFrame]) -> pl.DataFrame:
    """``cells`` (disjoint, in time order within each GPU) with ``busy_ns`` inside each."""
    found = _found(_found(cells, START, busy, "backward", "0"), END, busy, "backward", "1")
    return found.select(
        *cells.columns, (_busy_before(END, "1") - _busy_before(START, "0")).alias("busy_ns")
    )


def _nccl_names(kernels: pl.DataFrame) -> pl.Series:
    """The distinct ``short_name`` values that mark NCCL kernels (:data:`NCCL_NAME_PATTERN`)."""
    names = kernels.get_column("short_name").unique().cast(pl.String)
    return names.filter(names.fill_null("").str.contains(NCCL_NAME_PATTERN))


def _kernels_in_windows(kernels: pl.DataFrame, windows: pl.DataFrame) -> dict[int, pl.DataFrame]:
    """Per GPU of ``windows``, its kernels clipped to its window (rows outside dropped)."""
    # A trace has millions of kernels but few distinct names: match each name once.
    nccl = is_one_of(pl.col("short_name"), _nccl_names(kernels).drop_nulls().sort().to_list())
    return {
        gpu: kernels.filter((pl.col(GPU) == gpu) & (pl.col(END) >= start) & (pl.col(START) <= end))
        .select(
            "name",
            "short_name",
            pl.col(START).clip(lower_bound=start),
            pl.col(END).clip(upper_bound=end),
            nccl.alias("nccl"),
        )
        .with_columns((pl.col(END) - pl.col(START)).alias("duration_ns"))
        .select("name", "short_name", START, END, "duration_ns", "nccl")
        for gpu, start, end in windows.iter_rows()
    }


def _kernel_sums(kernels: pl.DataFrame) -> tuple[int, int, int, int]:
    """One GPU's compute union, NCCL union, summed duration and count of its ``kernels``."""
    bounds = kernels.select(START, END, "nccl", "duration_ns")
    if not bounds.get_column(START).is_sorted():
        bounds = bounds.sort(START)
    s, e, duration = pl.col(START), pl.col(END), pl.col("duration_ns")
    compute, nccl = ~pl.col("nccl"), pl.col("nccl")
    # Kernels that never overlap (each starts where or after the one before it ends, as
    # on a GPU running one stream) add up to their union.
    if bounds.select((s >= e.shift(1)).all()).item():
        sums = bounds.select(
            duration.filter(compute).sum().alias("c"), duration.filter(nccl).sum().alias("n")
        )
    else:
        sums = bounds.select(
            union_length(s.filter(compute), e.filter(compute)).alias("c"),
            union_length(s.filter(nccl), e.filter(nccl)).alias("n"),
        )
    compute_ns, nccl_ns = sums.row(0)
    return (
        int(compute_ns),
        int(nccl_ns),
        int(kernels.get_column("duration_ns").sum()),
        kernels.height,
    )


def _per_gpu(
    windows: pl.DataFrame, busy: dict[int, pl.DataFrame], kernels: dict[int, pl.DataFrame]
) -> pl.DataFrame:
    window_ns = pl.col(WINDOW_END) - pl.col(WINDOW_START)

    def share(col: str) -> pl.Expr:
        return pl.when(pl.col("window_ns") > 0).then(pl.col(col) / pl.col("window_ns"))

    # The library's check (bounds in order) on the only kernels that can fail it, in
    # the order the unions below meet them: compute kernels first.
    for nccl in (False, True):
        inverted = [
            own.filter((pl.col("nccl") == nccl) & (pl.col(END) < pl.col(START)))
            for own in kernels.values()
        ]
        union_intervals(pl.concat([_NO_KERNELS, *inverted]).select(START, END))
    rows = [(gpu, _union_ns(busy[gpu]), *_kernel_sums(own)) for gpu, own in kernels.items()]
    sums = pl.DataFrame(
        rows,
        schema={
            GPU: pl.Int32,
            "busy_ns": pl.Int64,
            "compute_ns": pl.Int64,
            "nccl_ns": pl.Int64,
            "kernel_ns": pl.Int64,
            "kernel_count": pl.Int64,
        },
        orient="row",
    )
    return (
        windows.with_columns(window_ns.alias("window_ns"))
        .join(sums, on=GPU, how="left")
        .with_columns(
            share("busy_ns").alias("busy_share"), share("compute_ns").alias("compute_share")
        )
        .select(
            GPU,
            WINDOW_START,
            WINDOW_END,
            "window_ns",
            "busy_ns",
            "busy_share",
            "compute_ns",
            "compute_share",
            "nccl_ns",
            "kernel_ns",
            "kernel_count",
        )
        .sort(GPU)
    )


def _efficiency(values: pl.Series) -> tuple[float | None, float | None]:
    """(mean / max, max / mean) of per-GPU times; None when undefined."""
    if values.is_empty():
        return None, None
    mean = float(values.mean())  # type: ignore[arg-type]
    top = float(values.max())  # type: ignore[arg-type]
    if top <= 0:
        return None, None
    return mean / top, top / mean


def _kernel_diff(
    kernels: dict[int, pl.DataFrame], most: int, least: int
) -> tuple[pl.DataFrame, int]:
    def side(gpu: int, label: str) -> pl.DataFrame:
        own = kernels.get(gpu, _NO_KERNELS)
        return (
            own.filter(~pl.col("nccl"))
            .group_by("name")
            .agg(
                pl.col("short_name").first().alias(f"_short_{label}"),
                pl.col("duration_ns").sum().alias(f"{label}_ns"),
                pl.len().cast(pl.Int64).alias(f"{label}_count"),
            )
        )

    table = (
        side(most, "most")
        .join(side(least, "least"), on="name", how="full", coalesce=True)
        .with_columns(
            pl.coalesce("_short_most", "_short_least").alias("short_name"),
            pl.col("most_ns", "least_ns", "most_count", "least_count").fill_null(0),
        )
        .with_columns((pl.col("most_ns") - pl.col("least_ns")).alias("diff_ns"))
        .sort([pl.col("diff_ns").abs(), pl.col("name")], descending=[True, False])
        .select("name", "short_name", "most_ns", "least_ns", "most_count", "least_count", "diff_ns")
        .with_columns(pl.col("name", "short_name").cast(pl.String))
    )
    total = int(table.get_column("diff_ns").sum())
    top = table.head(KERNEL_DIFF_TOP_N)
    rest = table.slice(KERNEL_DIFF_TOP_N)
    if not rest.is_empty():
        other = rest.select(
            pl.lit(OTHER_KERNELS).alias("name"),
            pl.lit(OTHER_KERNELS).alias("short_name"),
            *[
                pl.col(c).sum()
                for c in ("most_ns", "least_ns", "most_count", "least_count", "diff_ns")
            ],
        )
        top = pl.concat([top, other.cast(top.schema)])
    share = pl.when(pl.lit(total) != 0).then(pl.col("diff_ns") / pl.lit(total))
    return top.with_columns(share.alias("diff_share")), total


def _drift_edges(windows: pl.DataFrame, count: int) -> pl.DataFrame:
    start = int(windows.get_column(WINDOW_START).min())  # type: ignore[arg-type]
    end = int(windows.get_column(WINDOW_END).max())  # type: ignore[arg-type]
    index = pl.int_range(count, eager=True, dtype=pl.Int64)
    span = end - start
    return pl.DataFrame({"window": index}).with_columns(
        (start + (pl.col("window") * span) // count).alias(START),
        (start + ((pl.col("window") + 1) * span) // count).alias(END),
    )


def _slope(x: pl.Expr, y: pl.Expr) -> pl.Expr:
    """Least-squares slope of ``y`` on ``x`` (null when ``x`` is constant)."""
    dx = x - x.mean()
    var = (dx * dx).sum()
    return pl.when(var > 0).then((dx * (y - y.mean())).sum() / var)


def _drift(
    windows: pl.DataFrame, busy: dict[int, pl.DataFrame], count: int
) -> tuple[pl.DataFrame, pl.DataFrame]:
    edges = _drift_edges(windows, count)
    cells = edges.join(windows.select(GPU), how="cross")
    busy_in = _with_busy(cells, busy)
    length = pl.col(END) - pl.col(START)
    drift = busy_in.with_columns(
        pl.when(length > 0).then(pl.col("busy_ns") / length).alias("busy_share")
    ).sort("window", GPU)
    share = pl.col("busy_share")
    per_window = (
        drift.group_by("window", START, END)
        .agg(
            share.mean().alias("mean_share"),
            share.min().alias("min_share"),
            share.max().alias("max_share"),
            pl.col(GPU)
            .sort_by([share, pl.col(GPU)], descending=[True, False])
            .first()
            .alias("leader_gpu"),
        )
        .with_columns(
            (pl.col("max_share") - pl.col("min_share")).alias("spread_share"),
            pl.when(pl.col("max_share") > 0)
            .then(pl.col("mean_share") / pl.col("max_share"))
            .alias("efficiency"),
            # A window where no GPU is busy has no leader.
            pl.when(pl.col("max_share") > 0).then(pl.col("leader_gpu")).alias("leader_gpu"),
        )
        .sort("window")
        .select(
            "window",
            START,
            END,
            "mean_share",
            "min_share",
            "max_share",
            "spread_share",
            "efficiency",
            "leader_gpu",
        )
    )
    return drift, per_window


def _drift_summary(
    drift: pl.DataFrame, per_window: pl.DataFrame, count: int
) -> tuple[pl.DataFrame, dict[str, object]]:
    # Position of each window on the span, 0 at the first and 1 at the last, so a
    # slope reads as "change of busy share from start to end".
    position = pl.col("window").cast(pl.Float64) / max(count - 1, 1)
    trend = drift.group_by(GPU).agg(
        _slope(position, pl.col("busy_share")).alias("busy_share_trend")
    )
    leaders = per_window.get_column("leader_gpu").drop_nulls()
    changes = int((leaders != leaders.shift(1)).fill_null(False).sum()) if leaders.len() else 0
    spread = per_window.get_column("spread_share")
    summary: dict[str, object] = {
        "drift_spread_mean": spread.mean(),
        "drift_spread_max": spread.max(),
        "spread_trend": per_window.select(_slope(position, pl.col("spread_share"))).item(),
        "leader_changes": changes,
        "leaders": tuple(int(g) for g in leaders.unique().sort()),
    }
    return trend, summary


# --- iteration boundaries -------------------------------------------------------------


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
    domains = trace.nvtx.get_column("domain").drop_nulls().unique().cast(pl.String)
    library_domains = domains.filter(domains.str.to_lowercase().is_in(list(LIBRARY_NVTX_DOMAINS)))
    nccl_texts = values_matching(trace.nvtx.get_column("text"), NCCL_NAME_PATTERN)
    ranges = trace.nvtx.filter(
        pl.col("end_ns").is_not_null()
        & (pl.col(END) > pl.col(START))
        & pl.col("text").is_not_null()
        & ~is_one_of(pl.col("domain"), library_domains.to_list())
        & ~is_one_of(pl.col("text"), nccl_texts)
    ).select("source", "pid", "text", START, END)
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
    launch call (matched by correlation id); empty without a CUDA API trace.
    """
    launches = (
        trace.kernels.select("source", "pid", "correlation_id", START, END)
        .join(
            trace.cuda_api.select(
                "source", "pid", "correlation_id", pl.col(START).alias("launch_ns")
            ),
            on=["source", "pid", "correlation_id"],
            how="inner",
        )
        .drop_nulls("launch_ns")
        .sort("launch_ns")
    )
    if launches.is_empty():
        return pl.DataFrame(schema={"ordinal": pl.Int64, START: pl.Int64, END: pl.Int64})
    spans = ranges.select(
        "source", "pid", "ordinal", pl.col(START).alias("_rs"), pl.col(END).alias("_re")
    ).sort("_rs")
    return (
        launches.join_asof(
            spans,
            left_on="launch_ns",
            right_on="_rs",
            by=["source", "pid"],
            strategy="backward",
            check_sortedness=False,
        )
        .filter(pl.col("launch_ns") < pl.col("_re"))
        .group_by("ordinal")
        .agg(pl.col(START).min(), pl.col(END).max())
        .sort("ordinal")
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
    w = _gpu_windows(windows)
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


# --- pipeline bubbles -------------------------------------------------------------------


def _iteration_busy(iterations: pl.DataFrame, union: pl.DataFrame) -> pl.DataFrame:
    """Per iteration (``start_ns``, ``end_ns``, in time order): ``busy_ns``, ``fill_ns`` and
    ``drain_ns`` against one GPU's busy ``union``."""
    length = pl.col(END) - pl.col(START)
    if union.is_empty():
        return iterations.select(
            pl.lit(0, pl.Int64).alias("busy_ns"),
            length.alias("fill_ns"),
            pl.lit(0, pl.Int64).alias("drain_ns"),
        )
    # Found: the busy interval holding (or last before) the iteration start, with the
    # start of the one after it, and the last one starting before the iteration end.
    # A busy interval starting exactly at the end adds nothing before it, so the one
    # found for ``end - 1`` gives the busy time before the end as well.
    found = _lookup(
        _lookup(
            iterations,
            START,
            union.with_columns(pl.col(START).shift(-1).alias("_next")),
            "backward",
            "0",
        ).with_columns((pl.col(END) - 1).alias("_probe")),
        "_probe",
        union,
        "backward",
        "2",
    )
    busy_ns = _busy_before(END, "2") - _busy_before(START, "0")
    # Union intervals start in strictly increasing order, so the first one starting at
    # or after the iteration start is the one found for it, or the next.
    after = (
        pl.when(pl.col("_s0").is_null())
        .then(pl.lit(union.item(0, START)))
        .when(pl.col("_s0") == pl.col(START))
        .then(pl.col(START))
        .otherwise(pl.col("_next"))
    )
    first_busy = pl.when(pl.col("_e0") > pl.col(START)).then(pl.col(START)).otherwise(after)
    has_busy = first_busy.is_not_null() & (first_busy < pl.col(END))
    last_busy = pl.min_horizontal(pl.col("_e2"), pl.col(END))
    return found.select(
        busy_ns.alias("busy_ns"),
        pl.when(has_busy).then(first_busy - pl.col(START)).otherwise(length).alias("fill_ns"),
        pl.when(has_busy).then(pl.col(END) - last_busy).otherwise(0).alias("drain_ns"),
    )


def _bubbles(
    iterations: pl.DataFrame, busy: dict[int, pl.DataFrame], rows: bool = True
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Per (iteration, GPU of ``busy``) the busy, idle, fill and drain time; their sums per GPU.

    Without ``rows``, only the sums: the per-iteration table comes back empty (a GPU's
    rows are summed and dropped before the next GPU's are made).
    """
    # The iterations are contiguous, so their starts and ends are each in time order,
    # as the as-of joins need.
    bounds = iterations.select(START, END)
    length = pl.col(END) - pl.col(START)
    times = ("iteration_ns", "busy_ns", "idle_ns", "fill_ns", "drain_ns")
    frames, sums = [], []
    for gpu, table in busy.items():
        frame = pl.concat(
            [iterations.select("iteration", START, END), _iteration_busy(bounds, table)],
            how="horizontal",
        ).select(
            "iteration",
            pl.lit(gpu, pl.Int32).alias(GPU),
            START,
            END,
            length.alias("iteration_ns"),
            "busy_ns",
            (length - pl.col("busy_ns")).alias("idle_ns"),
            "fill_ns",
            "drain_ns",
        )
        sums.append(
            frame.select(
                pl.lit(gpu, pl.Int32).alias(GPU),
                pl.len().cast(pl.Int64).alias("iterations"),
                *[pl.col(c).sum() for c in times],
            )
        )
        if rows:
            frames.append(frame)
    # The schemas first, for a trace without GPUs. Iteration by iteration, the GPUs in
    # ascending order (``busy``): row k of GPU g goes to k * GPUs + g.
    bubbles = pl.concat([pl.DataFrame(schema=_BUBBLES), *frames])
    numbers = iterations.get_column("iteration")
    if frames and (numbers.diff().drop_nulls() > 0).all():
        bubbles = bubbles[np.arange(bubbles.height).reshape(len(frames), -1).T.ravel()]
    else:
        bubbles = bubbles.sort("iteration", maintain_order=True)
    per_gpu = pl.concat([pl.DataFrame(schema=_BUBBLE_SUMS), *sums])
    return _with_bubble_shares(bubbles), _with_bubble_shares(per_gpu).sort(GPU)


def _with_bubble_shares(df: pl.DataFrame) -> pl.DataFrame:
    def share(col: str) -> pl.Expr:
        return pl.when(pl.col("iteration_ns") > 0).then(pl.col(col) / pl.col("iteration_ns"))

    return df.with_columns(
        share("idle_ns").alias("idle_share"),
        share("fill_ns").alias("fill_share"),
        share("drain_ns").alias("drain_share"),
        pl.when(pl.col("iteration_ns") > 0)
        .then((pl.col("fill_ns") + pl.col("drain_ns")) / pl.col("iteration_ns"))
        .alias("bubble_share"),
    )


def measure_imbalance(
    trace: Trace,
    busy: pl.DataFrame,
    windows: pl.DataFrame,
    settings: Settings | None = None,
    per_iteration_table: bool = True,
) -> ImbalanceResult:
    """Busy and compute time per GPU, their skew, the kernels behind it, drift and bubbles.

    :param busy: busy intervals (``gpu``, ``start_ns``, ``end_ns``; further key
        columns, as in ``nvidia`` busy mode, are merged per GPU), e.g.
        ``BusyResult.intervals``.
    :param windows: ``gpu``, ``window_start_ns``, ``window_end_ns`` (several rows of
        one GPU merge into their hull), e.g. ``BusyResult.windows``.
    :param per_iteration_table: keep ``bubbles``, a row per GPU and iteration; without
        it ``bubbles`` is empty and every other field the same.
    """
    settings = settings or Settings()
    if settings.drift_windows < MIN_DRIFT_WINDOWS:
        raise SettingsError(
            f"drift_windows must be at least {MIN_DRIFT_WINDOWS} (got {settings.drift_windows})"
        )
    w = _gpu_windows(windows)
    busy_by_gpu = _busy_by_gpu(busy.select(pl.col(GPU).cast(pl.Int32), START, END), w)
    kernels = _kernels_in_windows(trace.kernels, w)
    per_gpu = _per_gpu(w, busy_by_gpu, kernels)
    busy_eff, busy_skew = _efficiency(per_gpu.get_column("busy_ns"))
    compute_eff, compute_skew = _efficiency(per_gpu.get_column("compute_ns"))

    ranked = per_gpu.sort(["compute_ns", GPU], descending=[True, False])
    if ranked.height:
        most, least = int(ranked.item(0, GPU)), int(ranked.item(ranked.height - 1, GPU))
        kernel_diff, diff_total = _kernel_diff(kernels, most, least)
        compute_diff = int(ranked.item(0, "compute_ns")) - int(
            ranked.item(ranked.height - 1, "compute_ns")
        )
    else:
        most = least = None
        kernel_diff, diff_total = _kernel_diff(kernels, -1, -1)
        compute_diff = 0

    if w.is_empty():
        drift = pl.DataFrame(
            schema={
                "window": pl.Int64,
                START: pl.Int64,
                END: pl.Int64,
                GPU: pl.Int32,
                "busy_ns": pl.Int64,
                "busy_share": pl.Float64,
            }
        )
        drift_windows = drift.select("window", START, END)
        trend = pl.DataFrame(schema={GPU: pl.Int32, "busy_share_trend": pl.Float64})
        summary: dict[str, object] = {
            "drift_spread_mean": None,
            "drift_spread_max": None,
            "spread_trend": None,
            "leader_changes": 0,
            "leaders": (),
        }
    else:
        drift, drift_windows = _drift(w, busy_by_gpu, settings.drift_windows)
        trend, summary = _drift_summary(drift, drift_windows, settings.drift_windows)
    per_gpu = per_gpu.join(trend, on=GPU, how="left")

    iterations, source, label = find_iterations(trace, w)
    if iterations.is_empty():
        bubbles, per_gpu_bubbles = _bubbles(iterations, {})
        reason = (
            "not applicable: no iteration boundaries (no NVTX range repeats at least "
            f"{ITERATION_MIN_COUNT} times covering {ITERATION_MIN_COVERAGE_SHARE:.0%} of the "
            "GPU time span, and no GPU runs a repeating kernel sequence)"
        )
    else:
        bubbles, per_gpu_bubbles = _bubbles(iterations, busy_by_gpu, rows=per_iteration_table)
        reason = ""
    totals = per_gpu_bubbles.select(pl.col("iteration_ns", "fill_ns", "drain_ns").sum())
    length = int(totals.item(0, "iteration_ns") or 0)

    def total_share(col: str) -> float | None:
        return int(totals.item(0, col)) / length if length else None

    fill_share, drain_share = total_share("fill_ns"), total_share("drain_ns")
    return ImbalanceResult(
        per_gpu=per_gpu,
        busy_efficiency=busy_eff,
        busy_max_over_mean=busy_skew,
        compute_efficiency=compute_eff,
        compute_max_over_mean=compute_skew,
        most_loaded_gpu=most,
        least_loaded_gpu=least,
        compute_diff_ns=compute_diff,
        kernel_diff_total_ns=diff_total,
        kernel_diff=kernel_diff,
        drift=drift,
        drift_windows=drift_windows,
        drift_spread_mean=summary["drift_spread_mean"],  # type: ignore[arg-type]
        drift_spread_max=summary["drift_spread_max"],  # type: ignore[arg-type]
        spread_trend=summary["spread_trend"],  # type: ignore[arg-type]
        leader_changes=summary["leader_changes"],  # type: ignore[arg-type]
        leaders=summary["leaders"],  # type: ignore[arg-type]
        iterations=iterations,
        iteration_source=source,
        iteration_label=label,
        bubbles=bubbles,
        bubbles_per_gpu=per_gpu_bubbles,
        bubble_share=(fill_share + drain_share)
        if fill_share is not None and drain_share is not None
        else None,
        fill_share=fill_share,
        drain_share=drain_share,
        bubble_reason=reason,
    )
