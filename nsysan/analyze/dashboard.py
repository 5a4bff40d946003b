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

Method: each GPU's kernel union is a pair of sorted numpy arrays; busy time inside a
period is a difference of cumulative busy time looked up by binary search. The
timeline spread of two GPUs is ``2 * |either busy| - |one| - |other|`` (one merge
of their unions by start); with more GPUs, a sweep counts the busy GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import polars as pl

from nsysan.interval_arrays import clip_disjoint, rows_by_unit, time_units_open
from nsysan.intervals import clip_to_windows
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
# At most this many periods per window (a week of 1 s periods is 604,800).
MAX_DASHBOARD_PERIODS = 20_000
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
    if longest > MAX_DASHBOARD_PERIODS * configured_ns:
        # Bounded whatever the span: the per-period series is an array per GPU.
        period = -(-longest // MAX_DASHBOARD_PERIODS)
        return period, (
            f"the longest window ({longest} ns) would hold more than {MAX_DASHBOARD_PERIODS} "
            f"dashboard periods of {configured_ns} ns; periods of {period} ns are used instead"
        )
    if longest >= MIN_DASHBOARD_PERIODS * configured_ns or longest <= 0:
        return configured_ns, None
    period = max(longest // MIN_DASHBOARD_PERIODS, 1)
    note = (
        f"the longest window ({longest} ns) holds fewer than {MIN_DASHBOARD_PERIODS} "
        f"dashboard periods of {configured_ns} ns; periods of {period} ns "
        f"(1/{MIN_DASHBOARD_PERIODS} of it) are used instead"
    )
    return period, note


@dataclass(frozen=True)
class _Busy:
    """One GPU's kernel union inside its window: disjoint intervals in time order
    (kernels of length 0 apart from others stay as points)."""

    starts: np.ndarray
    ends: np.ndarray

    @cached_property
    def _before(self) -> np.ndarray:
        """``_before[j]``: the busy time of intervals ``0 .. j-1``."""
        before = np.empty(len(self.starts) + 1, dtype=np.int64)
        before[0] = 0
        np.cumsum(self.ends - self.starts, out=before[1:])
        return before

    @property
    def total_ns(self) -> int:
        return int(self._before[-1])

    def busy_before(self, at: np.ndarray) -> np.ndarray:
        """Busy time before each instant of ``at``."""
        last = np.searchsorted(self.starts, at, side="right") - 1  # last interval begun
        begun = last >= 0
        found = last[begun]
        busy = np.zeros(len(at), dtype=np.int64)
        busy[begun] = self._before[found] + np.minimum(
            at[begun] - self.starts[found], self.ends[found] - self.starts[found]
        )
        return busy

    def inside(self, start_ns: int, end_ns: int) -> tuple[np.ndarray, np.ndarray]:
        """The intervals clipped to ``[start_ns, end_ns]`` (points at its edges dropped)."""
        return clip_disjoint(self.starts, self.ends, start_ns, end_ns)


def _union(starts: np.ndarray, ends: np.ndarray, reach: np.ndarray) -> _Busy:
    """The union of intervals sorted by start (``reach``: the running maximum of
    ``ends``); touching intervals merge."""
    if not len(starts):
        return _Busy(starts, ends)
    opens = np.empty(len(starts), dtype=bool)
    opens[0] = True
    np.greater(starts[1:], reach[:-1], out=opens[1:])
    first = np.flatnonzero(opens)
    if len(first) == len(starts):
        # Nothing merges (one stream's kernels): every start is past the ends before it,
        # so each reach is its own end and the union is the kernels, not a copy of them
        # (0.32 GB at 20M kernels).
        return _Busy(starts, ends)
    last = np.empty_like(first)
    last[:-1] = first[1:] - 1
    last[-1] = len(starts) - 1
    return _Busy(starts[first], reach[last])


def _busy_by_gpu(kernels: pl.DataFrame, windows: pl.DataFrame) -> dict[int, _Busy]:
    """Per GPU of ``windows``, the union of its kernels inside its window.

    The intervals of ``union_intervals(clip_to_windows(kernels, windows, "gpu"), "gpu")``,
    one GPU at a time: no join and no grouping over millions of kernels. Kernels
    without bounds are ignored.
    """
    if any(kernels.null_count().row(0)):
        kernels = kernels.drop_nulls()
    gpu, start, end = (kernels.get_column(c).to_numpy() for c in ("gpu", "start_ns", "end_ns"))
    # The library's checks (bounds in order, one valid window per GPU) run on the only
    # rows that can fail them.
    reversed_rows = end < start
    clip_to_windows(
        kernels.filter(pl.Series(reversed_rows)) if reversed_rows.any() else kernels.clear(),
        windows,
        "gpu",
    )
    rows = rows_by_unit(gpu, windows.get_column("gpu").to_list())
    busy = {}
    for g, window_start, window_end in windows.iter_rows():
        s, e = start[rows[g]], end[rows[g]]
        if not np.all(s[1:] >= s[:-1]):
            order = np.argsort(s, kind="stable")
            s, e = s[order], e[order]
        # Sorted by start: the kernels beyond the window's end are the last ones.
        before_end = np.searchsorted(s, window_end, side="right")
        s, e = s[:before_end], e[:before_end]
        reach = np.maximum.accumulate(e)
        if len(s) and (s[0] < window_start or reach[-1] > window_end):
            s, e = np.maximum(s, window_start), np.minimum(e, window_end)
            inside = e >= s
            s, e = s[inside], e[inside]
            reach = np.maximum.accumulate(e)
        busy[g] = _union(s, e, reach)
    return busy


def _periods(windows: pl.DataFrame, busy: dict[int, _Busy], period_ns: int) -> pl.DataFrame:
    """Consecutive periods from each window's start (the last one may be a fragment)
    with the busy time inside each, sorted by GPU and start."""
    columns: dict[str, list[np.ndarray]] = {"gpu": [], "start": [], "end": [], "busy": []}
    for gpu, window_start, window_end in windows.iter_rows():
        starts = np.arange(window_start, window_end, period_ns, dtype=np.int64)
        ends = np.minimum(starts + period_ns, window_end)
        columns["gpu"].append(np.full(len(starts), gpu, dtype=np.int32))
        columns["start"].append(starts)
        columns["end"].append(ends)
        columns["busy"].append(busy[gpu].busy_before(ends) - busy[gpu].busy_before(starts))
    if not columns["gpu"]:
        return pl.DataFrame(schema=PERIODS_SCHEMA)
    gpu, start, end, busy_ns = (np.concatenate(parts) for parts in columns.values())
    length = end - start
    return pl.DataFrame(
        {
            "gpu": gpu,
            "period_start_ns": start,
            "period_end_ns": end,
            "busy_ns": busy_ns,
            "util_share": busy_ns / length,
            "complete": length == period_ns,
        },
        schema=PERIODS_SCHEMA,
    ).sort("gpu", "period_start_ns")  # also marks the frame sorted, as aggregations see it


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
    busy: dict[int, _Busy],
    periods: pl.DataFrame,
    activity: pl.DataFrame,
) -> pl.DataFrame:
    window_ns = pl.col("window_end_ns") - pl.col("window_start_ns")
    busy_ns = pl.DataFrame(
        [(gpu, union.total_ns) for gpu, union in busy.items()],
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


def _disagreement_ns(busy: dict[int, _Busy], start_ns: int, end_ns: int, gpu_count: int) -> int:
    """Time in ``[start_ns, end_ns)`` during which some but not all GPUs run a kernel.

    ``gpu_count``: the GPUs whose window has a positive length; the others' unions
    are empty.
    """
    # Each GPU's union is disjoint and in time order.
    inside = [union.inside(start_ns, end_ns) for union in busy.values()]
    return time_units_open(inside, low=1, high=gpu_count - 1)


def _common(
    windows: pl.DataFrame, busy: dict[int, _Busy], period_ns: int
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
            .group_by("period_start_ns", maintain_order=True)
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
