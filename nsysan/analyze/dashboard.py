"""Dashboard view vs timeline view: what nvidia-smi would show, next to the gaps.

Definition (docs/metrics/dashboard.md):

* **Dashboard utilization** follows NVML's ``nvmlUtilization_t.gpu``: "percent of
  time over the past sample period during which one or more kernels was executing
  on the GPU". Each GPU's window is cut into consecutive sample periods of
  ``period_ns`` starting at the window start; a period's ``util_share`` is the
  length of the kernel union inside it over its length. The dashboard number
  (``dashboard_util_share``) is the mean over *complete* periods, what a poller
  that read every finished period would average; a trailing fragment is listed
  (``complete=False``) but not averaged. ``period_ns`` is
  ``settings.dashboard_period_ns`` (1 s) unless the longest window holds fewer than
  :data:`MIN_DASHBOARD_PERIODS` of them; then it is ``longest window //
  MIN_DASHBOARD_PERIODS`` and ``period_note`` says so.
* **Timeline view**: ``busy_share`` (kernel union / window) and ``gap_share =
  1 - busy_share`` at full resolution. Because the periods tile the window, the
  dashboard mean equals ``busy_share`` over the complete periods exactly; the
  ``dashboard_minus_busy_share`` delta comes only from the fragment. What the
  dashboard loses is *when*: each period hides where its gaps lie.
* **Balance across GPUs** (two or more GPUs): ``dashboard_spread_share`` and
  ``busy_spread_share`` are max - min over GPUs of the two per-GPU means. Over the
  common span (the time all windows overlap), ``period_spread_share`` is the mean
  over complete common periods of the max - min of the GPUs' period utilization,
  and ``timeline_spread_share`` the same statistic as periods shrink to zero: the
  share of the common span during which at least one GPU runs a kernel and another
  runs none. Staggered gaps give a small period spread and a large timeline spread
  ("false balance"); aligned gaps give both small.
* **Hardware counters** (when GPU metrics exist): ``gr_active_share`` and
  ``sm_active_share`` are the window means of "GR Active" (the graphics/compute
  engine has work; DCGM's graphics engine activity) and "SM Active" (share of SMs
  with a warp resident) from :mod:`nsysan.analyze.contention`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import polars as pl

from nsysan.intervals import clip_to_windows, union_one_unit
from nsysan.settings import Settings

__all__ = [
    "MIN_DASHBOARD_PERIODS",
    "PERIODS_SCHEMA",
    "PER_GPU_SCHEMA",
    "DashboardResult",
    "dashboard_period",
    "measure_dashboard",
]

# A dashboard series needs enough samples to be a series; shorter traces get
# proportionally shorter periods.
MIN_DASHBOARD_PERIODS = 20
# GPU-metrics keys shown next to the dashboard (nsysan.analyze.contention).
ACTIVITY_KEYS = {"gr_active": "gr_active_share", "sm_active": "sm_active_share"}

PER_GPU_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "gpu": pl.Int32,
    "window_start_ns": pl.Int64,
    "window_end_ns": pl.Int64,
    "window_ns": pl.Int64,
    "busy_ns": pl.Int64,
    "busy_share": pl.Float64,
    "gap_share": pl.Float64,
    "period_count": pl.Int64,
    "dashboard_util_share": pl.Float64,
    "dashboard_min_share": pl.Float64,
    "dashboard_max_share": pl.Float64,
    "dashboard_minus_busy_share": pl.Float64,
    "gr_active_share": pl.Float64,
    "sm_active_share": pl.Float64,
}
PERIODS_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "gpu": pl.Int32,
    "period_start_ns": pl.Int64,
    "period_end_ns": pl.Int64,
    "busy_ns": pl.Int64,
    "util_share": pl.Float64,
    "complete": pl.Boolean,
}


# Plans here are sorts over millions of rows; the in-memory engine runs them faster
# than the streaming one (polars' default).
_ENGINE: Final = "in-memory"


@dataclass(frozen=True)
class DashboardResult:
    """NVML-style utilization per GPU next to the timeline's busy and gap shares."""

    period_ns: int
    configured_period_ns: int
    #: why ``period_ns`` differs from the configured period (None when it does not)
    period_note: str | None
    #: one row per GPU with a window; see PER_GPU_SCHEMA
    per_gpu: pl.DataFrame
    #: the dashboard series: gpu, period_start_ns, period_end_ns, busy_ns, util_share, complete
    periods: pl.DataFrame
    common_start_ns: int | None
    common_end_ns: int | None
    common_period_count: int
    #: max - min over GPUs of dashboard_util_share ("dashboard balance")
    dashboard_spread_share: float | None
    #: max - min over GPUs of busy_share
    busy_spread_share: float | None
    #: mean over complete common periods of the max - min of period utilization
    period_spread_share: float | None
    #: share of the common span with some GPU busy and another idle ("timeline balance")
    timeline_spread_share: float | None
    notes: tuple[str, ...] = ()


def dashboard_period(windows: pl.DataFrame, configured_ns: int) -> tuple[int, str | None]:
    """The sample period used for ``windows``, and a note when it is not ``configured_ns``."""
    if configured_ns <= 0:
        raise ValueError(f"dashboard_period_ns must be positive (got {configured_ns})")
    lengths = windows.select(pl.col("window_end_ns") - pl.col("window_start_ns")).to_series()
    longest = int(lengths.max() or 0)  # type: ignore[arg-type]
    if longest >= MIN_DASHBOARD_PERIODS * configured_ns or longest <= 0:
        return configured_ns, None
    period = max(longest // MIN_DASHBOARD_PERIODS, 1)
    note = (
        f"the longest window ({longest} ns) holds fewer than {MIN_DASHBOARD_PERIODS} "
        f"dashboard periods of {configured_ns} ns; periods of {period} ns "
        f"(1/{MIN_DASHBOARD_PERIODS} of it) are used instead"
    )
    return period, note


def _busy_by_gpu(kernels: pl.DataFrame, windows: pl.DataFrame) -> dict[int, pl.DataFrame]:
    """Per GPU of ``windows``, the union of its kernels inside its window (``_union``).

    The intervals of ``union_intervals(clip_to_windows(kernels, windows, "gpu"), "gpu")``,
    one GPU at a time: no join and no grouping over millions of kernels.
    """
    # The library's checks (bounds in order, one valid window per GPU) run on the only
    # rows that can fail them.
    clip_to_windows(kernels.filter(pl.col("end_ns") < pl.col("start_ns")), windows, "gpu")
    return {
        gpu: union_one_unit(
            kernels.filter(
                (pl.col("gpu") == gpu) & (pl.col("end_ns") >= start) & (pl.col("start_ns") <= end)
            ).select(
                pl.col("start_ns").clip(lower_bound=start), pl.col("end_ns").clip(upper_bound=end)
            )
        )
        for gpu, start, end in windows.iter_rows()
    }


def _found(
    cells: pl.DataFrame, at: str, busy: dict[int, pl.DataFrame], suffix: str
) -> pl.DataFrame:
    """``cells`` with the last busy interval starting at or before instant ``at``.

    Its columns get ``suffix``; rows come out grouped by GPU. ``at`` must be in time
    order within each GPU, and ``busy`` must hold every GPU of ``cells``.
    """
    names = {"start_ns": f"_s{suffix}", "end_ns": f"_e{suffix}", "_before": f"_before{suffix}"}
    return pl.concat(
        cells.filter(pl.col("gpu") == gpu).join_asof(
            table.rename(names),
            left_on=at,
            right_on=names["start_ns"],
            strategy="backward",
            check_sortedness=False,
        )
        for gpu, table in busy.items()
    )


def _busy_before(at: str, suffix: str) -> pl.Expr:
    """Busy time of the GPU before instant ``at``, from the interval ``_found`` for it."""
    s, e, before = (pl.col(f"{c}{suffix}") for c in ("_s", "_e", "_before"))
    return (before + pl.min_horizontal(pl.col(at) - s, e - s)).fill_null(0)


def _with_busy(cells: pl.DataFrame, busy: dict[int, pl.DataFrame]) -> pl.DataFrame:
    """``cells`` (disjoint, in time order within each GPU) with ``busy_ns`` inside each."""
    found = _found(_found(cells, "start_ns", busy, "0"), "end_ns", busy, "1")
    return found.select(
        *cells.columns,
        (_busy_before("end_ns", "1") - _busy_before("start_ns", "0")).alias("busy_ns"),
    )


def _grid(windows: pl.DataFrame, period_ns: int) -> pl.DataFrame:
    """Consecutive periods from each window's start; the last one may be a fragment."""
    n = (pl.col("window_end_ns") - pl.col("window_start_ns") + period_ns - 1) // period_ns
    return (
        windows.with_columns(pl.int_ranges(0, n).alias("_i"))
        .explode("_i")
        .drop_nulls("_i")
        .with_columns((pl.col("window_start_ns") + pl.col("_i") * period_ns).alias("start_ns"))
        .with_columns(
            pl.min_horizontal(pl.col("start_ns") + period_ns, "window_end_ns").alias("end_ns")
        )
        .select("gpu", "start_ns", "end_ns")
    )


def _periods(windows: pl.DataFrame, busy: dict[int, pl.DataFrame], period_ns: int) -> pl.DataFrame:
    grid = _grid(windows, period_ns)
    if grid.is_empty():
        return pl.DataFrame(schema=PERIODS_SCHEMA)
    length = pl.col("end_ns") - pl.col("start_ns")
    return (
        _with_busy(grid, busy)
        .select(
            "gpu",
            pl.col("start_ns").alias("period_start_ns"),
            pl.col("end_ns").alias("period_end_ns"),
            "busy_ns",
            (pl.col("busy_ns") / length).alias("util_share"),
            (length == period_ns).alias("complete"),
        )
        .sort("gpu", "period_start_ns")
        .cast(PERIODS_SCHEMA)  # type: ignore[arg-type]
    )


def _activity(activity: pl.DataFrame | None) -> pl.DataFrame:
    schema = {"gpu": pl.Int32, **{col: pl.Float64 for col in ACTIVITY_KEYS.values()}}
    if activity is None or activity.is_empty():
        return pl.DataFrame(schema=schema)
    wide = (
        activity.filter(pl.col("key").is_in(list(ACTIVITY_KEYS)))
        .select(pl.col("gpu").cast(pl.Int32), "key", "window_mean")
        .pivot(on="key", index="gpu", values="window_mean")
        .rename({k: v for k, v in ACTIVITY_KEYS.items()}, strict=False)
    )
    for col in ACTIVITY_KEYS.values():
        if col not in wide.columns:
            wide = wide.with_columns(pl.lit(None, dtype=pl.Float64).alias(col))
    return wide.select(list(schema)).cast(schema)  # type: ignore[arg-type]


def _per_gpu(
    windows: pl.DataFrame,
    busy: dict[int, pl.DataFrame],
    periods: pl.DataFrame,
    activity: pl.DataFrame,
) -> pl.DataFrame:
    window_ns = pl.col("window_end_ns") - pl.col("window_start_ns")
    busy_ns = pl.DataFrame(
        [
            (gpu, table.select((pl.col("end_ns") - pl.col("start_ns")).sum()).item())
            for gpu, table in busy.items()
        ],
        schema={"gpu": pl.Int32, "busy_ns": pl.Int64},
        orient="row",
    )
    full = (
        periods.filter(pl.col("complete"))
        .group_by("gpu")
        .agg(
            pl.len().cast(pl.Int64).alias("period_count"),
            pl.col("util_share").mean().alias("dashboard_util_share"),
            pl.col("util_share").min().alias("dashboard_min_share"),
            pl.col("util_share").max().alias("dashboard_max_share"),
        )
    )
    return (
        windows.with_columns(window_ns.alias("window_ns"))
        .join(busy_ns, on="gpu", how="left")
        .with_columns(pl.col("busy_ns").fill_null(0))
        .with_columns(
            pl.when(pl.col("window_ns") > 0)
            .then(pl.col("busy_ns") / pl.col("window_ns"))
            .alias("busy_share")
        )
        .with_columns((1.0 - pl.col("busy_share")).alias("gap_share"))
        .join(full, on="gpu", how="left")
        .with_columns(
            pl.col("period_count").fill_null(0),
            (pl.col("dashboard_util_share") - pl.col("busy_share")).alias(
                "dashboard_minus_busy_share"
            ),
        )
        .join(activity, on="gpu", how="left")
        .sort("gpu")
        .select(list(PER_GPU_SCHEMA))
        .cast(PER_GPU_SCHEMA)  # type: ignore[arg-type]
    )


def _spread(values: pl.Series) -> float | None:
    present = values.drop_nulls().cast(pl.Float64)
    if present.len() < 2:
        return None
    return float(present.to_frame().select(pl.all().max() - pl.all().min()).item())


def _disagreement_ns(
    busy: dict[int, pl.DataFrame], start_ns: int, end_ns: int, gpu_count: int
) -> int:
    """Time in ``[start_ns, end_ns)`` during which some but not all GPUs run a kernel."""
    events = []
    for union in busy.values():
        inside = (
            union.lazy()
            .select(
                pl.col("start_ns").clip(start_ns, end_ns), pl.col("end_ns").clip(start_ns, end_ns)
            )
            .filter(pl.col("end_ns") > pl.col("start_ns"))
        )
        events += [
            inside.select(pl.col("start_ns").alias("t"), pl.lit(1, pl.Int32).alias("d")),
            inside.select(pl.col("end_ns").alias("t"), pl.lit(-1, pl.Int32).alias("d")),
        ]
    if not events:
        return 0
    # The busy unions are disjoint per GPU, so the running sum of +1/-1 events is
    # the number of GPUs running a kernel.
    running = (
        pl.concat(events)
        .sort("t")
        .with_columns(
            pl.col("d").cum_sum().alias("busy_gpus"),
            (pl.col("t").shift(-1) - pl.col("t")).alias("dt"),
        )
    )
    mixed = (pl.col("busy_gpus") > 0) & (pl.col("busy_gpus") < gpu_count)
    return int(running.select(pl.col("dt").filter(mixed).sum()).collect(engine=_ENGINE).item() or 0)


def _common(
    windows: pl.DataFrame, busy: dict[int, pl.DataFrame], period_ns: int
) -> tuple[int | None, int | None, int, float | None, float | None, list[str]]:
    measured = windows.filter(pl.col("window_end_ns") > pl.col("window_start_ns"))
    if measured.height < 2:
        return None, None, 0, None, None, ["balance across GPUs needs at least two measured GPUs"]
    start = int(measured.get_column("window_start_ns").max())  # type: ignore[arg-type]
    end = int(measured.get_column("window_end_ns").min())  # type: ignore[arg-type]
    if end <= start:
        return (
            None,
            None,
            0,
            None,
            None,
            ["the GPUs' windows do not overlap: no common span for period and timeline spread"],
        )
    notes: list[str] = []
    gpus = measured.select("gpu")
    count = (end - start) // period_ns
    period_spread = None
    if count == 0:
        notes.append("the common span is shorter than one dashboard period: no period spread")
    else:
        common = gpus.with_columns(
            pl.lit(start, pl.Int64).alias("window_start_ns"),
            pl.lit(start + count * period_ns, pl.Int64).alias("window_end_ns"),
        )
        per_period = (
            _periods(common, busy, period_ns)
            .group_by("period_start_ns")
            .agg((pl.col("util_share").max() - pl.col("util_share").min()).alias("_spread"))
        )
        period_spread = float(per_period.get_column("_spread").mean())  # type: ignore[arg-type]
    disagree = _disagreement_ns(busy, start, end, gpus.height)
    return start, end, int(count), period_spread, disagree / (end - start), notes


def measure_dashboard(
    kernels: pl.DataFrame,
    windows: pl.DataFrame,
    settings: Settings,
    activity: pl.DataFrame | None = None,
) -> DashboardResult:
    """NVML-style utilization per GPU and sample period, next to busy and gap share.

    :param kernels: kernel intervals or their union (``gpu, start_ns, end_ns``);
        NVML counts kernels only, so pass kernels, not a memcpy-inclusive busy set.
    :param windows: ``gpu, window_start_ns, window_end_ns`` (``nsysan.window``).
    :param activity: ``ContentionResult.summary`` (``gpu, key, window_mean``) for the
        GR Active / SM Active columns; None leaves them null.
    """
    windows = windows.select(pl.col("gpu").cast(pl.Int32), "window_start_ns", "window_end_ns")
    busy = _busy_by_gpu(kernels.select(pl.col("gpu").cast(pl.Int32), "start_ns", "end_ns"), windows)
    period_ns, period_note = dashboard_period(windows, settings.dashboard_period_ns)
    periods = _periods(windows, busy, period_ns)
    per_gpu = _per_gpu(windows, busy, periods, _activity(activity))
    notes = [period_note] if period_note else []
    short = per_gpu.filter((pl.col("period_count") == 0) & (pl.col("window_ns") > 0)).height
    if short:
        notes.append(
            f"{short} GPU window(s) shorter than one period of {period_ns} ns "
            "have no dashboard value"
        )
    start, end, count, period_spread, timeline_spread, common_notes = _common(
        windows, busy, period_ns
    )
    notes.extend(common_notes)
    return DashboardResult(
        period_ns=period_ns,
        configured_period_ns=settings.dashboard_period_ns,
        period_note=period_note,
        per_gpu=per_gpu,
        periods=periods,
        common_start_ns=start,
        common_end_ns=end,
        common_period_count=count,
        dashboard_spread_share=_spread(per_gpu.get_column("dashboard_util_share")),
        busy_spread_share=_spread(per_gpu.get_column("busy_share")),
        period_spread_share=period_spread,
        timeline_spread_share=timeline_spread,
        notes=tuple(notes),
    )
