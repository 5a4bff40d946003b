"""What each GPU got through: throughput, transfer time, and kernel time by name.

The numbers a before/after comparison (``nsysan diff``) and a batch table need and
the per-analysis results do not hold: per GPU the kernel count and kernel time, the
throughput (kernels/s, and steps/s when iterations were found), the share of the
window with a memory copy in flight (union of copies, so 0..1); for the whole run
the kernel time per kernel name (docs/metrics/workload.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from nsysan.intervals import clip_to_windows, total_length

# Kernel names kept in the per-name table, longest total time first. Past this the
# table is cut (``kernels_truncated``); a real trace rarely has more distinct names.
MAX_KERNEL_NAMES = 2000
NS_PER_S = 1_000_000_000


@dataclass(frozen=True)
class Workload:
    """``per_gpu``: gpu, window_ns, kernel_count, kernel_ns, kernels_per_s, steps,
    steps_per_s, transfer_ns, transfer_share. ``kernels``: name, count, total_ns
    (all GPUs), longest first."""

    per_gpu: pl.DataFrame
    kernels: pl.DataFrame
    kernels_truncated: bool
    step_source: str | None


def measure_workload(
    kernels: pl.DataFrame,
    memcpy: pl.DataFrame,
    windows: pl.DataFrame,
    steps_per_gpu: pl.DataFrame | None = None,
    step_source: str | None = None,
) -> Workload:
    """``windows``: gpu, window_start_ns, window_end_ns (the analysis windows).

    ``steps_per_gpu``: gpu, iterations (pipeline-bubble analysis), when iterations
    were found.
    """
    gpu = windows["gpu"].dtype
    span = windows.select(
        "gpu", (pl.col("window_end_ns") - pl.col("window_start_ns")).alias("window_ns")
    )
    inside = clip_to_windows(kernels.select("gpu", "start_ns", "end_ns"), windows, by="gpu")
    per_kernel = inside.group_by("gpu").agg(
        pl.len().cast(pl.Int64).alias("kernel_count"),
        (pl.col("end_ns") - pl.col("start_ns")).sum().cast(pl.Int64).alias("kernel_ns"),
    )
    copies = clip_to_windows(memcpy.select("gpu", "start_ns", "end_ns"), windows, by="gpu")
    transfer = total_length(copies, by="gpu", name="transfer_ns")
    per_gpu = (
        span.join(per_kernel.with_columns(pl.col("gpu").cast(gpu)), on="gpu", how="left")
        .join(transfer.with_columns(pl.col("gpu").cast(gpu)), on="gpu", how="left")
        .with_columns(pl.col("kernel_count", "kernel_ns", "transfer_ns").fill_null(0))
    )
    if steps_per_gpu is not None and not steps_per_gpu.is_empty():
        steps = steps_per_gpu.select(
            pl.col("gpu").cast(gpu), pl.col("iterations").cast(pl.Int64).alias("steps")
        )
        per_gpu = per_gpu.join(steps, on="gpu", how="left")
    else:
        per_gpu = per_gpu.with_columns(pl.lit(None, pl.Int64).alias("steps"))
    seconds = pl.col("window_ns") / NS_PER_S
    per_gpu = per_gpu.with_columns(
        pl.when(pl.col("window_ns") > 0)
        .then(pl.col("kernel_count") / seconds)
        .alias("kernels_per_s"),
        pl.when((pl.col("window_ns") > 0) & (pl.col("steps") > 0))
        .then(pl.col("steps") / seconds)
        .alias("steps_per_s"),
        pl.when(pl.col("window_ns") > 0)
        .then(pl.col("transfer_ns") / pl.col("window_ns"))
        .alias("transfer_share"),
    ).sort("gpu")
    by_name = (
        # Grouped by the categorical name; only the few distinct names become text.
        kernels.group_by("name")
        .agg(
            pl.len().cast(pl.Int64).alias("count"),
            (pl.col("end_ns") - pl.col("start_ns")).sum().cast(pl.Int64).alias("total_ns"),
        )
        .with_columns(pl.col("name").cast(pl.String).fill_null("(unnamed)"))
        .sort(["total_ns", "name"], descending=[True, False])
    )
    return Workload(
        per_gpu=per_gpu.select(
            "gpu",
            "window_ns",
            "kernel_count",
            "kernel_ns",
            "kernels_per_s",
            "steps",
            "steps_per_s",
            "transfer_ns",
            "transfer_share",
        ),
        kernels=by_name.head(MAX_KERNEL_NAMES),
        kernels_truncated=by_name.height > MAX_KERNEL_NAMES,
        step_source=step_source if steps_per_gpu is not None else None,
    )
