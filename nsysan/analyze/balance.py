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

import polars as pl

from nsysan.analyze.balance_bubbles import bubble_table
from nsysan.analyze.balance_iterations import (
    ITERATION_MIN_COUNT,
    ITERATION_MIN_COVERAGE_SHARE,
    PERIOD_MIN_MATCH_SHARE,
    IterationSource,
    find_iterations,
)
from nsysan.analyze.balance_tables import (
    END,
    GPU,
    NCCL_NAME_PATTERN,
    START,
    WINDOW_END,
    WINDOW_START,
    busy_per_gpu,
    gpu_windows,
    with_busy_before,
)
from nsysan.errors import SettingsError
from nsysan.intervals import union_intervals, union_length
from nsysan.model import Trace
from nsysan.names import is_one_of
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

KERNEL_DIFF_TOP_N = 10
OTHER_KERNELS = "(other kernels)"
MIN_DRIFT_WINDOWS = 20

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


def _union_ns(union: pl.DataFrame) -> int:
    return int(union.select((pl.col(END) - pl.col(START)).sum()).item())


def _nccl_names(kernels: pl.DataFrame) -> pl.Series:
    """The distinct ``short_name`` values that mark NCCL kernels (:data:`NCCL_NAME_PATTERN`)."""
    names = kernels.get_column("short_name").unique().cast(pl.String)
    return names.filter(names.fill_null("").str.contains(NCCL_NAME_PATTERN))


def _kernels_in_window(
    kernels: pl.DataFrame, gpu: int, start: int, end: int, nccl: pl.Expr
) -> pl.DataFrame:
    """GPU ``gpu``'s kernels clipped to its window ``[start, end]`` (rows outside dropped)."""
    return (
        kernels.filter((pl.col(GPU) == gpu) & (pl.col(END) >= start) & (pl.col(START) <= end))
        .select(
            "name",
            "short_name",
            pl.col(START).clip(lower_bound=start),
            pl.col(END).clip(upper_bound=end),
            nccl.alias("nccl"),
        )
        .with_columns((pl.col(END) - pl.col(START)).alias("duration_ns"))
        .select("name", "short_name", START, END, "duration_ns", "nccl")
    )


@dataclass(frozen=True)
class _KernelTally:
    """Per GPU of the windows: :func:`_kernel_sums` of its kernels in its window, and
    their time and count per name (:func:`_time_by_name`)."""

    sums: dict[int, tuple[int, int, int, int]]
    by_name: dict[int, pl.DataFrame]


def _kernel_tally(kernels: pl.DataFrame, windows: pl.DataFrame) -> _KernelTally:
    """:class:`_KernelTally` of ``kernels``, one GPU at a time: every GPU's clipped
    kernels held at once were +0.78 GB at 20M kernels, one GPU's are an eighth of that."""
    # A trace has millions of kernels but few distinct names: match each name once.
    nccl = is_one_of(pl.col("short_name"), _nccl_names(kernels).drop_nulls().sort().to_list())
    sums, by_name = {}, {}
    inverted: dict[bool, list[pl.DataFrame]] = {False: [], True: []}
    for gpu, start, end in windows.iter_rows():
        own = _kernels_in_window(kernels, gpu, start, end, nccl)
        bad = own.filter(pl.col(END) < pl.col(START))
        for is_nccl in (False, True):
            inverted[is_nccl].append(bad.filter(pl.col("nccl") == is_nccl))
        if bad.is_empty():  # else the check below fails
            sums[gpu] = _kernel_sums(own)
            by_name[gpu] = _time_by_name(own)
    # The library's check (bounds in order) on the only kernels that can fail it, in
    # the order the unions meet them: compute kernels first.
    for is_nccl in (False, True):
        union_intervals(pl.concat([_NO_KERNELS, *inverted[is_nccl]]).select(START, END))
    return _KernelTally(sums, by_name)


def _time_by_name(kernels: pl.DataFrame) -> pl.DataFrame:
    """Per name of one GPU's compute (not NCCL) ``kernels``: its first ``_short`` name,
    ``duration_ns`` summed and ``count``."""
    return (
        kernels.filter(~pl.col("nccl"))
        .group_by("name")
        .agg(
            pl.col("short_name").first().alias("_short"),
            pl.col("duration_ns").sum(),
            pl.len().cast(pl.Int64).alias("count"),
        )
    )


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
    windows: pl.DataFrame, busy: dict[int, pl.DataFrame], kernels: _KernelTally
) -> pl.DataFrame:
    window_ns = pl.col(WINDOW_END) - pl.col(WINDOW_START)

    def share(col: str) -> pl.Expr:
        return pl.when(pl.col("window_ns") > 0).then(pl.col(col) / pl.col("window_ns"))

    rows = [(gpu, _union_ns(busy[gpu]), *sums) for gpu, sums in kernels.sums.items()]
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


def _kernel_diff(kernels: _KernelTally, most: int, least: int) -> tuple[pl.DataFrame, int]:
    def side(gpu: int, label: str) -> pl.DataFrame:
        own = kernels.by_name.get(gpu)
        own = _time_by_name(_NO_KERNELS) if own is None else own
        return own.rename(
            {"_short": f"_short_{label}", "duration_ns": f"{label}_ns", "count": f"{label}_count"}
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
    busy_in = with_busy_before(cells, busy)
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
    w = gpu_windows(windows)
    busy_by_gpu = busy_per_gpu(busy.select(pl.col(GPU).cast(pl.Int32), START, END), w)
    kernels = _kernel_tally(trace.kernels, w)
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
        bubbles, per_gpu_bubbles = bubble_table(iterations, {})
        reason = (
            "not applicable: no iteration boundaries (no NVTX range repeats at least "
            f"{ITERATION_MIN_COUNT} times covering {ITERATION_MIN_COVERAGE_SHARE:.0%} of the "
            "GPU time span, and no GPU runs a repeating kernel sequence)"
        )
    else:
        bubbles, per_gpu_bubbles = bubble_table(iterations, busy_by_gpu, rows=per_iteration_table)
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
