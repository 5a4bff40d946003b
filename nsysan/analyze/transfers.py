"""Memory transfers and memsets per GPU: time, bytes, direction, and their share of the window.

Definitions (docs/metrics/transfers.md):

* **Operations**: every memcpy (``trace.memcpy``) and memset (``trace.memset``) on a
  physical GPU. ``operation`` is NVIDIA's label, as ``nsys stats``
  ``cuda_gpu_mem_time_sum`` prints it (``[CUDA memcpy Host-to-Device]``, ...,
  ``[CUDA memset]``); ``direction`` the short form (``HtoD``, ..., ``memset``).
* **Per GPU and operation** (``per_operation``): over the whole trace, ``count``,
  ``bytes``, ``total_ns`` (sum of durations), ``min_ns``, ``max_ns``: per process these
  equal ``cuda_gpu_mem_time_sum``; ``window_ns`` is the same sum clipped to the GPU's
  analysis window.
* **Per GPU** (``per_gpu``): ``count``, ``bytes``, ``total_ns`` as above;
  ``transfer_ns``, the union of the GPU's transfers inside its window (overlapping
  copies count once), ``transfer_share = transfer_ns / window_ns``; ``exposed_ns``, the
  part of that union during which the GPU ran no kernel (the transfers in its gaps),
  and ``exposed_share`` of the window.
* **Intervals** (``intervals``): the union of each GPU's transfers, ``gpu, start_ns,
  end_ns``, for host attribution ("GPU busy with a transfer") and the timeline.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from nsysan.intervals import union_intervals
from nsysan.model import Trace

__all__ = ["TransferResult", "measure_transfers", "transfer_intervals", "transfer_operations"]

# NVIDIA's operation labels (cuda_gpu_mem_time_sum), by the model's copy_kind.
OPERATION_LABELS = {
    "HtoD": "[CUDA memcpy Host-to-Device]",
    "DtoH": "[CUDA memcpy Device-to-Host]",
    "DtoD": "[CUDA memcpy Device-to-Device]",
    "HtoH": "[CUDA memcpy Host-to-Host]",
    "PtoP": "[CUDA memcpy Peer-to-Peer]",
    "HtoA": "[CUDA memcpy Host-to-Array]",
    "AtoH": "[CUDA memcpy Array-to-Host]",
    "AtoA": "[CUDA memcpy Array-to-Array]",
    "AtoD": "[CUDA memcpy Array-to-Device]",
    "DtoA": "[CUDA memcpy Device-to-Array]",
    "UVM HtoD": "[CUDA Unified Memory memcpy HtoD]",
    "UVM DtoH": "[CUDA Unified Memory memcpy DtoH]",
    "UVM DtoD": "[CUDA Unified Memory memcpy DtoD]",
    "Unknown": "[CUDA memcpy Unknown]",
    "memset": "[CUDA memset]",
}
_COLUMNS = ["source", "pid", "gpu", "start_ns", "end_ns", "bytes", "direction"]


def transfer_operations(trace: Trace) -> pl.DataFrame:
    """Memcpys and memsets on a GPU: ``source, pid, gpu, start_ns, end_ns, bytes,
    direction, operation`` (rows without a GPU or a bound, or inverted, left out)."""
    copies = trace.memcpy.select(
        *_COLUMNS[:-1], pl.col("copy_kind").fill_null("Unknown").alias("direction")
    )
    sets = trace.memset.select(*_COLUMNS[:-1], pl.lit("memset").alias("direction"))
    ops = pl.concat([copies, sets]).filter(
        pl.col("gpu").is_not_null()
        & pl.col("start_ns").is_not_null()
        & pl.col("end_ns").is_not_null()
        & (pl.col("end_ns") >= pl.col("start_ns"))
    )
    return ops.with_columns(
        pl.col("direction")
        .replace_strict(OPERATION_LABELS, default=None, return_dtype=pl.String)
        .fill_null(pl.concat_str(pl.lit("[CUDA memcpy "), "direction", pl.lit("]")))
        .alias("operation")
    )


def transfer_intervals(trace: Trace) -> pl.DataFrame:
    """The union of each GPU's memcpys and memsets: ``gpu, start_ns, end_ns``."""
    ops = transfer_operations(trace).select(pl.col("gpu").cast(pl.Int32), "start_ns", "end_ns")
    return union_intervals(ops, "gpu")


@dataclass(frozen=True)
class TransferResult:
    """Transfers per GPU and operation, per GPU, and as intervals (see the module docstring)."""

    per_operation: pl.DataFrame
    per_gpu: pl.DataFrame
    intervals: pl.DataFrame

    @property
    def available(self) -> bool:
        return self.per_gpu.height > 0


def measure_transfers(trace: Trace, windows: pl.DataFrame, busy: pl.DataFrame) -> TransferResult:
    """Transfers of every GPU with a window; ``busy`` is the kernels-mode busy union."""
    ops = transfer_operations(trace).with_columns(pl.col("gpu").cast(pl.Int32))
    windows = windows.select(pl.col("gpu").cast(pl.Int32), "window_start_ns", "window_end_ns")
    duration = pl.col("end_ns") - pl.col("start_ns")
    clipped = (
        ops.join(windows, on="gpu", how="inner")
        .select(
            "gpu",
            "direction",
            pl.max_horizontal("start_ns", "window_start_ns").alias("start_ns"),
            pl.min_horizontal("end_ns", "window_end_ns").alias("end_ns"),
        )
        .filter(pl.col("end_ns") >= pl.col("start_ns"))
    )
    in_window = clipped.group_by("gpu", "direction").agg(duration.sum().alias("window_ns"))
    per_operation = (
        ops.group_by("gpu", "direction", "operation")
        .agg(
            pl.len().cast(pl.Int64).alias("count"),
            pl.col("bytes").sum().cast(pl.Int64).alias("bytes"),
            duration.sum().cast(pl.Int64).alias("total_ns"),
            duration.min().cast(pl.Int64).alias("min_ns"),
            duration.max().cast(pl.Int64).alias("max_ns"),
        )
        .join(in_window, on=["gpu", "direction"], how="left")
        .with_columns(pl.col("window_ns").fill_null(0).cast(pl.Int64))
        .sort("gpu", "total_ns", "direction", descending=[False, True, False])
    )
    intervals = union_intervals(ops.select("gpu", "start_ns", "end_ns"), "gpu")
    inside = union_intervals(clipped.select("gpu", "start_ns", "end_ns"), "gpu")
    hidden = _covered_by(inside, busy.select(pl.col("gpu").cast(pl.Int32), "start_ns", "end_ns"))

    def length(df: pl.DataFrame, name: str) -> pl.DataFrame:
        return df.group_by("gpu").agg(duration.sum().cast(pl.Int64).alias(name))

    totals = ops.group_by("gpu").agg(
        pl.len().cast(pl.Int64).alias("count"),
        pl.col("bytes").sum().cast(pl.Int64).alias("bytes"),
        duration.sum().cast(pl.Int64).alias("total_ns"),
    )
    window_ns = pl.col("window_end_ns") - pl.col("window_start_ns")

    def share(col: str) -> pl.Expr:
        return pl.when(pl.col("window_ns") > 0).then(pl.col(col) / pl.col("window_ns"))

    per_gpu = (
        windows.with_columns(window_ns.alias("window_ns"))
        .join(totals, on="gpu", how="inner")
        .join(length(inside, "transfer_ns"), on="gpu", how="left")
        .join(hidden, on="gpu", how="left")
        .with_columns(pl.col("transfer_ns", "_hidden_ns").fill_null(0))
        .with_columns((pl.col("transfer_ns") - pl.col("_hidden_ns")).alias("exposed_ns"))
        .with_columns(
            share("transfer_ns").alias("transfer_share"),
            share("exposed_ns").alias("exposed_share"),
        )
        .select(
            "gpu",
            "count",
            "bytes",
            "total_ns",
            "window_ns",
            "transfer_ns",
            "transfer_share",
            "exposed_ns",
            "exposed_share",
        )
        .sort("gpu")
    )
    return TransferResult(per_operation=per_operation, per_gpu=per_gpu, intervals=intervals)


def _covered_up_to(
    at: np.ndarray, starts: np.ndarray, ends: np.ndarray, before: np.ndarray
) -> np.ndarray:
    """Length of sorted disjoint intervals ``[starts, ends)`` before each instant of ``at``;
    ``before[i]`` is the length of the intervals before interval ``i``."""
    i = np.searchsorted(starts, at, side="right") - 1
    j = np.clip(i, 0, None)
    inside = np.clip(np.minimum(at, ends[j]) - starts[j], 0, None)
    return np.where(i >= 0, before[j] + inside, 0)


def _covered_by(intervals: pl.DataFrame, busy: pl.DataFrame) -> pl.DataFrame:
    """Per GPU, how much of ``intervals`` (disjoint) the disjoint ``busy`` intervals cover.

    Covered length up to an instant is a running sum over the sorted busy intervals
    read by binary search, so the cost follows the few transfers, not the millions of
    busy intervals. Columns ``gpu, _hidden_ns``.
    """
    out: dict[str, list[int]] = {"gpu": [], "_hidden_ns": []}
    wanted = intervals.partition_by("gpu", as_dict=True)
    mine = busy.filter(pl.col("gpu").is_in(pl.Series([k[0] for k in wanted]).implode()))
    for key, part in mine.partition_by("gpu", as_dict=True).items():
        if key not in wanted:
            continue
        order = part.sort("start_ns")
        starts = order["start_ns"].to_numpy()
        ends = order["end_ns"].to_numpy()
        before = np.concatenate(([0], np.cumsum(ends - starts)))
        iv = wanted[key]
        a, b = iv["start_ns"].to_numpy(), iv["end_ns"].to_numpy()
        covered = _covered_up_to(b, starts, ends, before) - _covered_up_to(a, starts, ends, before)
        out["gpu"].append(int(key[0]))
        out["_hidden_ns"].append(int(covered.sum()))
    return pl.DataFrame(out, schema={"gpu": pl.Int32, "_hidden_ns": pl.Int64})
