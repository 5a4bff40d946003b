"""Busy time: when a GPU is doing work, as the union of its operation intervals.

Definition (docs/metrics/gaps.md#busy):

* ``kernels`` mode (default): busy is the union, over all streams and processes,
  of the kernel intervals on one physical GPU. Overlapping kernels count once.
* ``nvidia`` mode: exactly the busy set of Nsight Systems' ``gpu_gaps`` and
  ``gpu_time_util`` rules, kept per process and CUDA device
  (``source, pid, device_id``): kernels, memcpys and memsets whose start is after
  0 in their file's clock, plus the profiler's CUDA overhead ranges
  (PROFILER_OVERHEAD rows named in ``NVIDIA_OVERHEAD_NAMES``) of the same
  process, each added to every device of that process whose first→last operation
  range strictly contains it. Overhead never widens a window.

Busy time is measured inside the analysis window (:mod:`nsysan.window`):
``busy_ns`` is the length of the union clipped to the window, ``kernel_ns`` the
same for kernels alone, so ``kernel_active_share = kernel_ns / window_ns`` equals
``busy_share`` in ``kernels`` mode and can be lower in ``nvidia`` mode.

:func:`nvidia_gpu_time_util` reproduces the ``gpu_time_util`` rule (windows cut into
equal chunks; a chunk's in-use % is the *sum* of its operations' overlaps, so it
can exceed 100%).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from nsysan.intervals import clip_to_windows, union_intervals
from nsysan.model import Trace
from nsysan.settings import BusyMode, Settings
from nsysan.window import (
    GPU_KEYS,
    OPERATION_COLUMNS,
    PROCESS_KEYS,
    gpu_operations,
    resolve_process_windows,
    resolve_windows,
)

__all__ = [
    "BusyResult",
    "NVIDIA_OVERHEAD_NAMES",
    "busy_keys",
    "measure_busy",
    "nvidia_operations",
    "nvidia_gpu_time_util",
]

# The PROFILER_OVERHEAD names Nsight Systems' GPU rules count as busy (gpustats.py,
# nsys 2022.4; same rule text in 2024.2). Newer exports name flushes differently
# ("CUDA profiling data flush on process exit"); the rule does not count those.
NVIDIA_OVERHEAD_NAMES = frozenset(
    {
        "CUDA profiling data flush overhead",
        "CUDA profiling stop overhead",
        "CUDA profiling overhead",
    }
)
# gpu_time_util defaults (nsys analyze -r gpu_time_util).
NVIDIA_UTIL_CHUNKS = 30
NVIDIA_UTIL_THRESHOLD_PCT = 50
# nsys rounds the merged chunks' in-use percentage to one decimal.
NVIDIA_UTIL_DECIMALS = 1


def busy_keys(busy_mode: BusyMode) -> tuple[str, ...]:
    """The columns that identify one measured unit: a GPU, or (in nvidia mode) a process-device."""
    return GPU_KEYS if busy_mode == "kernels" else PROCESS_KEYS


@dataclass(frozen=True)
class BusyResult:
    """Busy time per GPU (``kernels`` mode) or per process-device (``nvidia`` mode)."""

    busy_mode: BusyMode
    keys: tuple[str, ...]
    #: keys + window_start_ns, window_end_ns
    windows: pl.DataFrame
    #: keys + start_ns, end_ns: the busy union, clipped to the window, disjoint
    intervals: pl.DataFrame
    #: keys + window_start_ns, window_end_ns, window_ns, busy_ns, kernel_ns,
    #: busy_share, kernel_active_share (shares null for a zero-length window)
    summary: pl.DataFrame


def _range_context(ops: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    # SQLite hands the rules' "range" a bare contextId from the row that last set
    # min(start)/max(end); on real traces that is the last-ending operation.
    return ops.group_by(keys).agg(
        pl.col("start_ns").min().alias("_first"),
        pl.col("end_ns").max().alias("_last"),
        pl.col("context_id").sort_by("end_ns", "context_id").last().alias("_context"),
    )


def nvidia_operations(trace: Trace) -> pl.DataFrame:
    """The operations NVIDIA's ``gpu_gaps``/``gpu_time_util`` rules count, per process-device.

    Columns: ``OPERATION_COLUMNS`` (``kind`` is kernel, memcpy, memset or overhead).
    An overhead row carries the context id of its process-device's last-ending
    operation, as the rules report it.
    """
    ops = gpu_operations(trace, "nvidia")
    keys = list(PROCESS_KEYS)
    ranges = _range_context(ops, keys)
    overhead = (
        trace.overhead.filter(pl.col("name").is_in(list(NVIDIA_OVERHEAD_NAMES)))
        .select("source", "pid", "start_ns", "end_ns")
        .join(ranges, on=["source", "pid"], how="inner")
        .filter((pl.col("start_ns") > pl.col("_first")) & (pl.col("end_ns") < pl.col("_last")))
        .select(
            "source",
            "pid",
            "device_id",
            "gpu",
            pl.col("_context").alias("context_id"),
            "start_ns",
            "end_ns",
            pl.lit("overhead").alias("kind"),
        )
    )
    return pl.concat([ops, overhead.select(OPERATION_COLUMNS)], how="vertical_relaxed")


def _summary(
    windows: pl.DataFrame, busy: pl.DataFrame, kernel: pl.DataFrame, keys: list[str]
) -> pl.DataFrame:
    def length(df: pl.DataFrame) -> pl.DataFrame:
        return df.group_by(keys).agg((pl.col("end_ns") - pl.col("start_ns")).sum().alias("_ns"))

    busy_ns = length(busy)
    kernel_ns = busy_ns if kernel is busy else length(kernel)
    window_ns = pl.col("window_end_ns") - pl.col("window_start_ns")

    def share(col: str) -> pl.Expr:
        return pl.when(pl.col("window_ns") > 0).then(pl.col(col) / pl.col("window_ns"))

    return (
        windows.with_columns(window_ns.alias("window_ns"))
        .join(busy_ns.rename({"_ns": "busy_ns"}), on=keys, how="left")
        .join(kernel_ns.rename({"_ns": "kernel_ns"}), on=keys, how="left")
        .with_columns(pl.col("busy_ns").fill_null(0), pl.col("kernel_ns").fill_null(0))
        .with_columns(
            share("busy_ns").alias("busy_share"),
            share("kernel_ns").alias("kernel_active_share"),
        )
        .sort(keys)
    )


def measure_busy(trace: Trace, settings: Settings) -> BusyResult:
    """Busy intervals and per-unit busy time inside the windows ``settings`` select."""
    mode = settings.busy_mode
    keys = list(busy_keys(mode))
    if mode == "kernels":
        windows = resolve_windows(trace, settings.window, mode)
        ops = gpu_operations(trace, mode)
    else:
        windows = resolve_process_windows(trace, settings.window, mode)
        ops = nvidia_operations(trace)

    # Windows from each GPU's own first and last kernel (or the span of all GPUs)
    # hold every kernel: clipping to them would change nothing.
    spec = settings.window
    holds_all = mode == "kernels" and spec.kind in ("per_gpu", "common") and not spec.skip_warmup_ns

    def busy_of(df: pl.DataFrame) -> pl.DataFrame:
        return union_intervals(df if holds_all else clip_to_windows(df, windows, keys), keys)

    busy = busy_of(ops)
    kernel = busy if mode == "kernels" else busy_of(ops.filter(pl.col("kind") == "kernel"))
    return BusyResult(
        busy_mode=mode,
        keys=tuple(keys),
        windows=windows,
        intervals=busy,
        summary=_summary(windows, busy, kernel, keys),
    )


def nvidia_gpu_time_util(
    ops: pl.DataFrame,
    chunks: int = NVIDIA_UTIL_CHUNKS,
    threshold_pct: float = NVIDIA_UTIL_THRESHOLD_PCT,
) -> pl.DataFrame:
    """Nsight Systems' ``gpu_time_util`` rule on ``ops`` (from :func:`nvidia_operations`).

    Per process-device, the range from its first to its last operation is cut into
    ``chunks`` chunks of ``ceil(range / chunks)`` ns (the last one cut at the
    range's end); a chunk's in-use % is the sum over operations of their overlap
    with it, over its length, times 100 (operations on concurrent streams add up).
    Chunks under ``threshold_pct`` are kept, runs of consecutive ones merged with
    a length-weighted mean rounded to one decimal (half away from zero).

    Columns: ``row`` (NVIDIA's Row#: by in-use %, then duration), ``in_use_pct``,
    ``duration_ns``, ``start_ns``, the process keys and ``context_id``.
    """
    if not 1 <= chunks <= 1000:
        raise ValueError(f"chunks must be between 1 and 1000 (got {chunks})")
    keys = list(PROCESS_KEYS)
    ranges = _range_context(ops, keys).with_columns(
        # The rule divides in floating point and rounds the chunk size up.
        ((pl.col("_last") - pl.col("_first")).cast(pl.Float64) / chunks).ceil().alias("_size")
    )
    grid = ranges.join(
        pl.DataFrame({"_chunk": pl.int_range(chunks, eager=True, dtype=pl.Int64)}), how="cross"
    ).with_columns((pl.col("_chunk") * pl.col("_size") + pl.col("_first")).alias("_cstart"))
    grid = grid.with_columns(
        pl.min_horizontal(
            pl.col("_cstart") + pl.col("_size"), pl.col("_last").cast(pl.Float64)
        ).alias("_cend")
    ).filter(pl.col("_cstart") < pl.col("_cend"))
    # Each operation overlaps a contiguous run of chunks: expand it over those (one
    # spare chunk each side absorbs float rounding; the exact test follows).
    spans = (
        ops.join(ranges.select(*keys, "_first", "_size"), on=keys)
        .with_columns(
            ((pl.col("start_ns") - pl.col("_first")) / pl.col("_size"))
            .floor()
            .cast(pl.Int64)
            .alias("_c0"),
            ((pl.col("end_ns") - pl.col("_first")) / pl.col("_size"))
            .ceil()
            .cast(pl.Int64)
            .alias("_c1"),
        )
        .with_columns(
            pl.int_ranges(
                (pl.col("_c0") - 1).clip(0, chunks), (pl.col("_c1") + 1).clip(0, chunks)
            ).alias("_chunk")
        )
        .explode("_chunk")
        .select(*keys, "_chunk", "start_ns", "end_ns")
    )
    used = (
        spans.join(grid.select(*keys, "_chunk", "_cstart", "_cend"), on=[*keys, "_chunk"])
        .filter((pl.col("start_ns") < pl.col("_cend")) & (pl.col("end_ns") > pl.col("_cstart")))
        .group_by(*keys, "_chunk")
        .agg(
            (
                pl.min_horizontal(pl.col("end_ns").cast(pl.Float64), "_cend")
                - pl.max_horizontal(pl.col("start_ns").cast(pl.Float64), "_cstart")
            )
            .sum()
            .alias("_used")
        )
    )
    size = pl.col("_cend") - pl.col("_cstart")
    low = (
        grid.join(used, on=[*keys, "_chunk"], how="left")
        .with_columns(
            (pl.col("_used").fill_null(0.0) / size * 100).alias("_pct"), size.alias("_len")
        )
        .filter(pl.col("_pct") < threshold_pct)
        .sort(*keys, "_chunk")
        .with_columns(
            (pl.col("_chunk") - pl.int_range(pl.len()).over(keys)).alias("_run"),
        )
    )
    merged = low.group_by(*keys, "_run").agg(
        pl.col("_cstart").min().alias("start_ns"),
        (pl.col("_cend").max() - pl.col("_cstart").min()).alias("duration_ns"),
        ((pl.col("_len") * pl.col("_pct")).sum() / pl.col("_len").sum())
        .round(NVIDIA_UTIL_DECIMALS, mode="half_away_from_zero")
        .alias("in_use_pct"),
        pl.col("_context").first().alias("context_id"),
    )
    return (
        merged.with_columns(pl.col("start_ns").cast(pl.Int64), pl.col("duration_ns").cast(pl.Int64))
        .sort("in_use_pct", "duration_ns", "start_ns", *keys)
        .with_row_index("row", offset=1)
        .select("row", "in_use_pct", "duration_ns", "start_ns", *keys, "context_id")
    )
