"""Contention signals from GPU metrics: activity, bandwidth and clocks per GPU (seed 4.4).

Definition (docs/metrics/contention.md):

* **Input**: the trace's GPU metrics samples (Nsight Systems ``--gpu-metrics-devices``),
  one row per (GPU, sample time, metric). Metrics are recognised by *name*, not id,
  through :data:`METRIC_KINDS` (case-insensitive, bracketed unit suffixes ignored);
  every name found is listed in ``metrics_found``, recognised or not. When several
  names map to one key on a GPU, NVIDIA's canonical name is used, else the shortest
  (then alphabetically first) name; ``metrics_found.used`` says which.
* **Units**: activity and throughput metrics are stored as percent of peak and become
  shares (``/ 100``); clock metrics become MHz: a clock series whose median exceeds
  :data:`CLOCK_HZ_MIN` is in Hz (Nsight Systems documents "GPC Clock Frequency" in
  hertz; T028 stores 1.41e9) and is divided by 1e6, otherwise it is already MHz.
  Negative or non-finite values are dropped (and counted in ``notes``).
* **Sample-and-hold**: a sample's value holds from its timestamp until the next
  sample of the same GPU and metric, at most :data:`SAMPLE_HOLD_MAX_STEPS` median
  sample intervals (the last sample holds one median interval). T028 shows the
  timestamp opens the period the value describes: the sample stamped 62 µs before
  the last kernel ends reads GR Active 55%, the next one 1%.
* **Window**: everything is measured inside the analysis window of each GPU (samples
  clipped to it); **busy** is the union of the GPU's kernels (the caller passes
  kernels or a kernels-mode busy union). ``window_mean`` is the time-weighted mean
  over the window, ``busy_mean`` the mean weighted by the busy time inside each
  sample's hold interval.
* **Series** for the report: per GPU and key, the time-weighted mean in bins of one
  width for all GPUs, ``max(ceil(longest window / SERIES_MAX_POINTS), longest median
  sample interval)``, starting at each window's start.
* **Clock drops**: a GPC clock sample is a drop when it is more than
  ``settings.clock_drop_share`` below the *reference clock*: the highest GPC clock
  any GPU of the same model (``gpus.name``) reached anywhere in the trace. Only busy
  time counts (idle GPUs lower their clocks by design): ``drop_busy_share`` = busy
  time under a drop sample / busy time covered by GPC clock samples. Drop intervals
  are maximal runs of drop samples that overlap busy time. The rated clock
  (``gpus.clock_rate_hz``) is reported for context, not used as the reference.
* **Memory-bandwidth pressure**: DRAM throughput = read + write share of peak at the
  same sample time; ``pressure_busy_share`` = busy time with DRAM throughput at or
  above :data:`DRAM_PRESSURE_SHARE` / busy time covered by DRAM samples.
* **No GPU metrics**: the result has ``available=False`` and the reason from the
  trace's capabilities; no table pretends to hold data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import polars as pl

from nsysan.analyze.contention_metrics import (
    CLOCK_HZ_MIN,
    HZ_PER_MHZ,
    METRIC_KINDS,
    METRICS_FOUND_SCHEMA,
    MetricKind,
    metric_key,
    metric_name_table,
    metrics_found,
    normalise_units,
)
from nsysan.intervals import clip_to_windows, overlap_with, union_intervals
from nsysan.model import Capabilities
from nsysan.settings import Settings

__all__ = [
    "CLOCK_HZ_MIN",
    "DRAM_PRESSURE_SHARE",
    "METRIC_KINDS",
    "SAMPLE_HOLD_MAX_STEPS",
    "SERIES_MAX_POINTS",
    "ContentionResult",
    "MetricKind",
    "measure_contention",
    "metric_key",
]


# Derived: DRAM read + write share of peak at one sample time.
DRAM_KEY = "dram"
GPC_CLOCK_KEY = "gpc_clock"

# A pause in sampling is not filled with a stale value beyond this many intervals.
SAMPLE_HOLD_MAX_STEPS = 4
# At most this many bins per GPU and metric in the report's series.
SERIES_MAX_POINTS = 2000
# DRAM throughput (read + write) at or above this share of peak counts as pressure:
# the level from which bandwidth, rather than compute, plausibly limits progress.
DRAM_PRESSURE_SHARE = 0.6

SUMMARY_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "gpu": pl.Int32,
    "key": pl.String,
    "unit": pl.String,
    "samples": pl.Int64,
    "covered_ns": pl.Int64,
    "coverage_share": pl.Float64,
    "window_mean": pl.Float64,
    "busy_covered_ns": pl.Int64,
    "busy_mean": pl.Float64,
    "min": pl.Float64,
    "max": pl.Float64,
}
SERIES_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "gpu": pl.Int32,
    "key": pl.String,
    "unit": pl.String,
    "bin_start_ns": pl.Int64,
    "bin_end_ns": pl.Int64,
    "value": pl.Float64,
}
CLOCKS_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "gpu": pl.Int32,
    "reference_clock_mhz": pl.Float64,
    "own_max_clock_mhz": pl.Float64,
    "rated_clock_mhz": pl.Float64,
    "drop_threshold_mhz": pl.Float64,
    "busy_clock_mean_mhz": pl.Float64,
    "busy_clock_min_mhz": pl.Float64,
    "busy_clock_ns": pl.Int64,
    "drop_busy_ns": pl.Int64,
    "drop_busy_share": pl.Float64,
    "drop_count": pl.Int64,
}
CLOCK_DROPS_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "gpu": pl.Int32,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "busy_ns": pl.Int64,
    "min_clock_mhz": pl.Float64,
}
MEMORY_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "gpu": pl.Int32,
    "busy_dram_ns": pl.Int64,
    "busy_dram_mean_share": pl.Float64,
    "pressure_busy_ns": pl.Int64,
    "pressure_busy_share": pl.Float64,
}

_NO_METRICS = "no GPU metrics: SM activity, clocks and bandwidth unavailable"


@dataclass(frozen=True)
class ContentionResult:
    """GPU-metrics views per GPU; ``available=False`` (with ``reason``) when there are none."""

    available: bool
    reason: str | None
    #: gpu, metric (name as stored), key (null if not recognised), used, stored_unit
    #: ("percent", "Hz", "MHz" or null), samples, first_ns, last_ns
    metrics_found: pl.DataFrame
    #: per gpu and key: unit, samples (overlapping the window), covered_ns,
    #: coverage_share, window_mean, busy_covered_ns, busy_mean, min, max
    summary: pl.DataFrame
    #: gpu, key, unit, bin_start_ns, bin_end_ns, value (time-weighted mean; null if no sample)
    series: pl.DataFrame
    bin_ns: int | None
    #: per gpu (every GPU with a window): reference/own max/rated clock, drop threshold,
    #: busy clock mean/min, busy_clock_ns, drop_busy_ns, drop_busy_share, drop_count
    clocks: pl.DataFrame
    #: gpu, start_ns, end_ns, busy_ns, min_clock_mhz: runs of drop samples with busy time
    clock_drops: pl.DataFrame
    #: per gpu: busy_dram_ns, busy_dram_mean_share, pressure_busy_ns, pressure_busy_share
    memory: pl.DataFrame
    clock_drop_share: float
    dram_pressure_share: float
    notes: tuple[str, ...] = ()

    def value(self, gpu: int, key: str, stat: str = "window_mean") -> float | None:
        """One summary number (e.g. ``value(0, "sm_active")``), or None when absent."""
        row = self.summary.filter((pl.col("gpu") == gpu) & (pl.col("key") == key))
        if row.is_empty():
            return None
        out = row.get_column(stat)[0]
        return None if out is None else float(out)


def _unavailable(
    reason: str, settings: Settings, found: pl.DataFrame | None = None
) -> ContentionResult:
    return ContentionResult(
        available=False,
        reason=reason,
        metrics_found=found if found is not None else pl.DataFrame(schema=METRICS_FOUND_SCHEMA),
        summary=pl.DataFrame(schema=SUMMARY_SCHEMA),
        series=pl.DataFrame(schema=SERIES_SCHEMA),
        bin_ns=None,
        clocks=pl.DataFrame(schema=CLOCKS_SCHEMA),
        clock_drops=pl.DataFrame(schema=CLOCK_DROPS_SCHEMA),
        memory=pl.DataFrame(schema=MEMORY_SCHEMA),
        clock_drop_share=settings.clock_drop_share,
        dram_pressure_share=DRAM_PRESSURE_SHARE,
    )


def _missing_reason(capabilities: Capabilities | None) -> str:
    if capabilities is not None:
        for line in capabilities.missing:
            if line.startswith("no GPU metrics"):
                return line
    return _NO_METRICS


def _with_dram(samples: pl.DataFrame) -> pl.DataFrame:
    parts = samples.filter(pl.col("key").is_in(["dram_read", "dram_write"]))
    if parts.is_empty():
        return samples
    total = (
        parts.group_by("gpu", "time_ns")
        .agg(pl.col("value").sum())
        .select(
            "gpu", pl.lit(DRAM_KEY).alias("key"), pl.lit("share").alias("unit"), "time_ns", "value"
        )
    )
    return pl.concat([samples, total], how="vertical_relaxed")


def _hold_intervals(samples: pl.DataFrame) -> pl.DataFrame:
    """Each sample as ``[time, next time)`` per (gpu, key), capped by the hold rule."""
    keys = ["gpu", "key"]
    s = (
        samples.sort("time_ns")
        .sort(keys, maintain_order=True)
        .unique(subset=[*keys, "time_ns"], keep="first", maintain_order=True)
        .with_columns(pl.col("time_ns").shift(-1).over(keys).alias("_next"))
    )
    step = (pl.col("_next") - pl.col("time_ns")).median().over(keys).round().cast(pl.Int64)
    s = s.with_columns(step.alias("_step"))
    end = pl.min_horizontal(
        pl.col("_next").fill_null(pl.col("time_ns") + pl.col("_step")),
        pl.col("time_ns") + SAMPLE_HOLD_MAX_STEPS * pl.col("_step"),
    )
    return s.select(
        *keys,
        "unit",
        pl.col("time_ns").alias("start_ns"),
        end.fill_null(pl.col("time_ns")).alias("end_ns"),
        "value",
        "_step",
    ).filter(pl.col("end_ns") > pl.col("start_ns"))


def _cumulative(iv: pl.DataFrame) -> pl.DataFrame:
    """Per (gpu, key): area and covered time before each interval, for exact bin means."""
    keys = ["gpu", "key"]
    length = (pl.col("end_ns") - pl.col("start_ns")).alias("_len")
    return (
        iv.sort("start_ns")
        .sort(keys, maintain_order=True)
        .with_columns(length)
        .with_columns((pl.col("value") * pl.col("_len")).alias("_area"))
        .with_columns(
            (pl.col("_len").cum_sum().over(keys) - pl.col("_len")).alias("_cov_before"),
            (pl.col("_area").cum_sum().over(keys) - pl.col("_area")).alias("_int_before"),
        )
        .select(*keys, "start_ns", "_len", "_cov_before", "_int_before", "value")
        .sort("start_ns")
    )


def _integral_at(cum: pl.DataFrame, probes: pl.DataFrame, t: str, suffix: str) -> pl.DataFrame:
    """``probes`` with ``_int<suffix>``/``_cov<suffix>``: area and covered time up to ``t``."""
    # Sorted by time globally, hence within every (gpu, key) group too.
    hit = probes.sort(t).join_asof(
        cum,
        left_on=t,
        right_on="start_ns",
        by=["gpu", "key"],
        strategy="backward",
        check_sortedness=False,
    )
    within = pl.min_horizontal((pl.col(t) - pl.col("start_ns")).clip(lower_bound=0), pl.col("_len"))
    return hit.with_columns(
        (pl.col("_int_before") + pl.col("value") * within).fill_null(0.0).alias(f"_int{suffix}"),
        (pl.col("_cov_before") + within).fill_null(0).alias(f"_cov{suffix}"),
    ).drop("start_ns", "_len", "_cov_before", "_int_before", "value")


def _series(iv: pl.DataFrame, windows: pl.DataFrame) -> tuple[pl.DataFrame, int | None]:
    if iv.is_empty():
        return pl.DataFrame(schema=SERIES_SCHEMA), None
    longest = int(
        windows.select((pl.col("window_end_ns") - pl.col("window_start_ns")).max()).item()
    )
    step = iv.select(pl.col("_step").max().fill_null(0)).item()
    bin_ns = max(math.ceil(longest / SERIES_MAX_POINTS), int(step), 1)
    series_keys = iv.select("gpu", "key", "unit").unique()
    bins = (
        windows.with_columns(
            ((pl.col("window_end_ns") - pl.col("window_start_ns") + bin_ns - 1) // bin_ns).alias(
                "_n"
            )
        )
        .with_columns(pl.int_ranges(0, pl.col("_n")).alias("_i"))
        .explode("_i")
        .drop_nulls("_i")
        .with_columns((pl.col("window_start_ns") + pl.col("_i") * bin_ns).alias("bin_start_ns"))
        .with_columns(
            pl.min_horizontal(pl.col("bin_start_ns") + bin_ns, "window_end_ns").alias("bin_end_ns")
        )
        .select("gpu", "bin_start_ns", "bin_end_ns")
        .join(series_keys, on="gpu", how="inner")
    )
    cum = _cumulative(iv)
    at0 = _integral_at(cum, bins, "bin_start_ns", "0")
    both = _integral_at(cum, at0, "bin_end_ns", "1")
    covered = pl.col("_cov1") - pl.col("_cov0")
    series = both.select(
        "gpu",
        "key",
        "unit",
        "bin_start_ns",
        "bin_end_ns",
        pl.when(covered > 0).then((pl.col("_int1") - pl.col("_int0")) / covered).alias("value"),
    ).sort("gpu", "key", "bin_start_ns")
    return series.cast(SERIES_SCHEMA), bin_ns  # type: ignore[arg-type]


def _summary(iv: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    d = pl.col("end_ns") - pl.col("start_ns")
    busy = pl.col("busy_ns")
    out = (
        iv.group_by("gpu", "key", "unit")
        .agg(
            pl.len().cast(pl.Int64).alias("samples"),
            d.sum().alias("covered_ns"),
            ((pl.col("value") * d).sum() / d.sum()).alias("window_mean"),
            busy.sum().alias("busy_covered_ns"),
            pl.when(busy.sum() > 0)
            .then((pl.col("value") * busy).sum() / busy.sum())
            .alias("busy_mean"),
            pl.col("value").min().alias("min"),
            pl.col("value").max().alias("max"),
        )
        .join(windows, on="gpu", how="left")
        .with_columns(
            (pl.col("covered_ns") / (pl.col("window_end_ns") - pl.col("window_start_ns"))).alias(
                "coverage_share"
            )
        )
    )
    order = {k.key: i for i, k in enumerate(METRIC_KINDS)} | {DRAM_KEY: len(METRIC_KINDS)}
    return (
        out.with_columns(pl.col("key").replace_strict(order, default=len(order)).alias("_o"))
        .sort("gpu", "_o")
        .select(list(SUMMARY_SCHEMA))
        .cast(SUMMARY_SCHEMA)  # type: ignore[arg-type]
    )


def _reference_clocks(
    samples: pl.DataFrame, windows: pl.DataFrame, gpus: pl.DataFrame | None
) -> pl.DataFrame:
    """Per GPU with a window: own max GPC clock, the same model's max, rated clock (MHz)."""
    own = (
        samples.filter(pl.col("key") == GPC_CLOCK_KEY)
        .group_by("gpu")
        .agg(pl.col("value").max().alias("own_max_clock_mhz"))
    )
    if gpus is not None and not gpus.is_empty():
        info = gpus.select(
            pl.col("gpu").cast(pl.Int32),
            pl.col("name").fill_null("").alias("_model"),
            (pl.col("clock_rate_hz") / HZ_PER_MHZ).alias("rated_clock_mhz"),
        )
    else:
        info = pl.DataFrame(
            schema={"gpu": pl.Int32, "_model": pl.String, "rated_clock_mhz": pl.Float64}
        )
    table = (
        windows.select(pl.col("gpu").cast(pl.Int32))
        .join(own, on="gpu", how="left")
        .join(info, on="gpu", how="left")
        .with_columns(pl.col("_model").fill_null(""))
    )
    peers = (
        own.join(info.select("gpu", "_model"), on="gpu", how="left")
        .with_columns(pl.col("_model").fill_null(""))
        .group_by("_model")
        .agg(pl.col("own_max_clock_mhz").max().alias("reference_clock_mhz"))
    )
    return table.join(peers, on="_model", how="left").drop("_model")


def _clocks(
    iv: pl.DataFrame,
    refs: pl.DataFrame,
    busy: pl.DataFrame,
    drop_share: float,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    threshold = pl.col("reference_clock_mhz") * (1.0 - drop_share)
    refs = refs.with_columns(threshold.alias("drop_threshold_mhz"))
    gpc = (
        iv.filter(pl.col("key") == GPC_CLOCK_KEY)
        .join(refs.select("gpu", "drop_threshold_mhz"), on="gpu", how="left")
        .with_columns((pl.col("value") < pl.col("drop_threshold_mhz")).alias("_drop"))
    )
    drop_samples = gpc.filter(pl.col("_drop")).select("gpu", "start_ns", "end_ns", "value")
    runs = union_intervals(drop_samples, "gpu")
    if runs.is_empty():
        drops = pl.DataFrame(schema=CLOCK_DROPS_SCHEMA)
    else:
        runs = overlap_with(runs, busy, by="gpu", name="busy_ns").filter(pl.col("busy_ns") > 0)
        lowest = (
            drop_samples.sort("start_ns")
            .join_asof(
                runs.select("gpu", pl.col("start_ns").alias("_run")).sort("_run"),
                left_on="start_ns",
                right_on="_run",
                by="gpu",
                strategy="backward",
                check_sortedness=False,
            )
            .group_by("gpu", "_run")
            .agg(pl.col("value").min().alias("min_clock_mhz"))
        )
        drops = (
            runs.join(lowest, left_on=["gpu", "start_ns"], right_on=["gpu", "_run"], how="left")
            .sort("gpu", "start_ns")
            .select(list(CLOCK_DROPS_SCHEMA))
            .cast(CLOCK_DROPS_SCHEMA)  # type: ignore[arg-type]
        )
    busy_ns = pl.col("busy_ns")
    per_gpu = gpc.group_by("gpu").agg(
        pl.when(busy_ns.sum() > 0)
        .then((pl.col("value") * busy_ns).sum() / busy_ns.sum())
        .alias("busy_clock_mean_mhz"),
        pl.col("value").filter(busy_ns > 0).min().alias("busy_clock_min_mhz"),
        busy_ns.sum().alias("busy_clock_ns"),
        busy_ns.filter(pl.col("_drop")).sum().alias("drop_busy_ns"),
    )
    counts = drops.group_by("gpu").agg(pl.len().cast(pl.Int64).alias("drop_count"))
    clocks = (
        refs.join(per_gpu, on="gpu", how="left")
        .join(counts, on="gpu", how="left")
        .with_columns(
            pl.when(pl.col("busy_clock_ns") > 0)
            .then(pl.col("drop_busy_ns") / pl.col("busy_clock_ns"))
            .alias("drop_busy_share"),
            pl.when(pl.col("busy_clock_ns").is_not_null())
            .then(pl.col("drop_count").fill_null(0))
            .alias("drop_count"),
        )
        .sort("gpu")
        .select(list(CLOCKS_SCHEMA))
        .cast(CLOCKS_SCHEMA)  # type: ignore[arg-type]
    )
    return clocks, drops


def _memory(iv: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    busy = pl.col("busy_ns")
    dram = (
        iv.filter(pl.col("key") == DRAM_KEY)
        .group_by("gpu")
        .agg(
            busy.sum().alias("busy_dram_ns"),
            pl.when(busy.sum() > 0)
            .then((pl.col("value") * busy).sum() / busy.sum())
            .alias("busy_dram_mean_share"),
            busy.filter(pl.col("value") >= DRAM_PRESSURE_SHARE).sum().alias("pressure_busy_ns"),
        )
    )
    return (
        windows.select(pl.col("gpu").cast(pl.Int32))
        .join(dram, on="gpu", how="left")
        .with_columns(
            pl.when(pl.col("busy_dram_ns") > 0)
            .then(pl.col("pressure_busy_ns") / pl.col("busy_dram_ns"))
            .alias("pressure_busy_share")
        )
        .sort("gpu")
        .select(list(MEMORY_SCHEMA))
        .cast(MEMORY_SCHEMA)  # type: ignore[arg-type]
    )


def measure_contention(
    gpu_metrics: pl.DataFrame,
    windows: pl.DataFrame,
    settings: Settings,
    *,
    busy: pl.DataFrame,
    gpus: pl.DataFrame | None = None,
    capabilities: Capabilities | None = None,
) -> ContentionResult:
    """Activity, bandwidth, clock and clock-drop views from GPU metrics, per GPU.

    :param gpu_metrics: ``Trace.gpu_metrics`` (model.GPU_METRICS).
    :param windows: ``gpu, window_start_ns, window_end_ns`` (``nsysan.window``).
    :param busy: kernel intervals or their union (``gpu, start_ns, end_ns``); only
        busy time counts for clock drops and DRAM pressure.
    :param gpus: ``Trace.gpus`` for the GPU model (peer reference clock) and rated clock.
    :param capabilities: ``Trace.capabilities``, for the reason when metrics are absent.
    """
    if gpu_metrics.is_empty():
        return _unavailable(_missing_reason(capabilities), settings)
    notes: list[str] = []
    names = metric_name_table(
        gpu_metrics.get_column("metric").drop_nulls().unique().sort().to_list()
    )
    windows = windows.select(
        pl.col("gpu").cast(pl.Int32), "window_start_ns", "window_end_ns"
    ).filter(pl.col("window_end_ns") > pl.col("window_start_ns"))
    unmapped = gpu_metrics.filter(pl.col("gpu").is_null()).height
    if unmapped:
        notes.append(f"{unmapped} GPU metrics rows could not be matched to a GPU and were ignored")
    mapped = gpu_metrics.filter(pl.col("gpu").is_not_null())
    with_names = mapped.join(names, on="metric", how="left")
    best = (
        with_names.filter(pl.col("key").is_not_null())
        .group_by("gpu", "key")
        .agg(pl.col("_rank").min().alias("_best"))
    )
    used = with_names.join(best, on=["gpu", "key"], how="inner").filter(
        pl.col("_rank") == pl.col("_best")
    )
    valid = pl.col("value").is_not_null() & pl.col("value").is_finite() & (pl.col("value") >= 0)
    invalid = used.filter(~valid).height
    if invalid:
        notes.append(f"{invalid} GPU metrics samples with a negative or missing value were dropped")
    used = normalise_units(used.filter(valid))
    stored = used.select("gpu", "metric", "stored_unit").unique()
    found = metrics_found(gpu_metrics, names, stored)
    for row in (
        stored.filter(pl.col("stored_unit") == "Hz")
        .select("metric")
        .unique()
        .sort("metric")
        .iter_rows()
    ):
        notes.append(f"{row[0]!r} is stored in Hz; converted to MHz")
    if mapped.is_empty():
        return _unavailable(
            "GPU metrics were sampled but none could be matched to a GPU of the trace",
            settings,
            found,
        )
    if used.is_empty():
        return _unavailable(
            "GPU metrics hold none of the recognised metrics (see metrics_found)", settings, found
        )
    samples = _with_dram(used.select("gpu", "key", "unit", "time_ns", "value"))
    refs = _reference_clocks(samples, windows, gpus)
    intervals = _hold_intervals(samples)
    clipped = (
        intervals.join(windows, on="gpu", how="inner")
        .with_columns(
            pl.max_horizontal("start_ns", "window_start_ns").alias("start_ns"),
            pl.min_horizontal("end_ns", "window_end_ns").alias("end_ns"),
        )
        .filter(pl.col("end_ns") > pl.col("start_ns"))
        .drop("window_start_ns", "window_end_ns")
    )
    busy_union = union_intervals(
        clip_to_windows(
            busy.select(pl.col("gpu").cast(pl.Int32), "start_ns", "end_ns"), windows, "gpu"
        ),
        "gpu",
    )
    clipped = overlap_with(clipped, busy_union, by="gpu", name="busy_ns")
    if clipped.is_empty():
        notes.append("no GPU metrics sample falls inside any analysis window")
    series, bin_ns = _series(clipped, windows)
    clocks, drops = _clocks(clipped, refs, busy_union, settings.clock_drop_share)
    return ContentionResult(
        available=True,
        reason=None,
        metrics_found=found,
        summary=_summary(clipped, windows),
        series=series,
        bin_ns=bin_ns,
        clocks=clocks,
        clock_drops=drops,
        memory=_memory(clipped, windows),
        clock_drop_share=settings.clock_drop_share,
        dram_pressure_share=DRAM_PRESSURE_SHARE,
        notes=tuple(notes),
    )
