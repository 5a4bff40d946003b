"""Several contexts on one physical GPU: MPS clients, several processes, green contexts.

A GPU is always the physical device (nsysan.ingest.identity): kernels of several
processes (MPS or time-slicing), several CUDA contexts of one process, or several green
contexts (CUDA 12.4+ SM partitions, ``greenContextId``) all count towards that one
GPU's busy time, gaps and window. This module shows the split, for the GPUs where there
is more than one context (docs/metrics/contexts.md):

* a **context** is ``(source, pid, context_id, green_context_id)``;
* per context: ``kernels`` (count), ``kernel_ns`` (sum of durations), ``busy_ns`` (the
  union of its kernels, clipped to the GPU's window) and ``busy_share`` (of the GPU's
  busy time; the shares add up to more than 1 when contexts ran at the same time),
  ``first_ns``/``last_ns``.
"""

from __future__ import annotations

import polars as pl

from nsysan.intervals import clip_to_windows, union_intervals

__all__ = ["CONTEXT_KEYS", "context_split"]

CONTEXT_KEYS = ("source", "pid", "context_id", "green_context_id")

_SCHEMA = {
    "gpu": pl.Int32,
    "source": pl.Int32,
    "pid": pl.Int32,
    "context_id": pl.Int64,
    "green_context_id": pl.Int32,
    "kernels": pl.Int64,
    "kernel_ns": pl.Int64,
    "busy_ns": pl.Int64,
    "busy_share": pl.Float64,
    "first_ns": pl.Int64,
    "last_ns": pl.Int64,
}


def context_split(kernels: pl.DataFrame, windows: pl.DataFrame, busy: pl.DataFrame) -> pl.DataFrame:
    """Per GPU with more than one context, one row per context (see the module docstring).

    ``kernels`` is the kernels table (graph executions included), ``windows`` and
    ``busy`` the kernels-mode windows and per-GPU busy summary (``gpu, busy_ns``).
    """
    keys = ["gpu", *CONTEXT_KEYS]
    # The distinct contexts per GPU: a small group-by; most traces stop here.
    contexts = kernels.select(keys).unique()
    shared = contexts.group_by("gpu").len().filter(pl.col("len") > 1).select("gpu")
    if shared.is_empty():
        return pl.DataFrame(schema=_SCHEMA)
    rows = kernels.join(shared, on="gpu", how="semi").filter(
        pl.col("start_ns").is_not_null()
        & pl.col("end_ns").is_not_null()
        & (pl.col("end_ns") >= pl.col("start_ns"))
    )
    counted = rows.group_by(keys).agg(
        pl.len().cast(pl.Int64).alias("kernels"),
        (pl.col("end_ns") - pl.col("start_ns")).sum().cast(pl.Int64).alias("kernel_ns"),
        pl.col("start_ns").min().alias("first_ns"),
        pl.col("end_ns").max().alias("last_ns"),
    )
    # One unit per context: its id columns packed into a row number, for the interval algebra.
    numbered = counted.select(keys).with_row_index("_ctx")
    spans = rows.join(numbered, on=keys, how="inner", nulls_equal=True).select(
        "_ctx", "gpu", "start_ns", "end_ns"
    )
    ctx_windows = numbered.select("_ctx", "gpu").join(
        windows.select(pl.col("gpu").cast(pl.Int32), "window_start_ns", "window_end_ns"),
        on="gpu",
    )
    clipped = clip_to_windows(
        spans.select("_ctx", "start_ns", "end_ns"), ctx_windows.drop("gpu"), "_ctx"
    )
    busy_ctx = (
        union_intervals(clipped, "_ctx")
        .group_by("_ctx")
        .agg((pl.col("end_ns") - pl.col("start_ns")).sum().cast(pl.Int64).alias("busy_ns"))
    )
    gpu_busy = busy.select(pl.col("gpu").cast(pl.Int32), pl.col("busy_ns").alias("_gpu_busy"))
    return (
        counted.join(numbered, on=keys, how="inner", nulls_equal=True)
        .join(busy_ctx, on="_ctx", how="left")
        .join(gpu_busy, on="gpu", how="left")
        .with_columns(pl.col("busy_ns").fill_null(0))
        .with_columns(
            pl.when(pl.col("_gpu_busy") > 0)
            .then(pl.col("busy_ns") / pl.col("_gpu_busy"))
            .alias("busy_share")
        )
        .select(list(_SCHEMA))
        .cast(_SCHEMA)  # type: ignore[arg-type]
        .sort("gpu", "source", "pid", "context_id", "green_context_id", nulls_last=True)
    )
