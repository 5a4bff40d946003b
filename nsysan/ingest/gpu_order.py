"""Which GPU each file's devices are, and the kernels in the trace's GPU order.

The trace numbers its GPUs once over every file (:func:`number_gpus`) and keeps the
kernels in (gpu, start, end) order, stably. A file's kernels are put in that order
as they are read, numbered as a run of that file alone numbers them
(:func:`in_gpu_order`): the table cache then keeps them so, and a cached run checks
the order in one pass (:func:`in_kernel_order`) instead of sorting every kernel
(20M kernels: 1.2 GB).
"""

from __future__ import annotations

import polars as pl

from nsysan import model
from nsysan.packing import looked_up

__all__ = ["in_gpu_order", "in_kernel_order", "number_gpus"]


def in_gpu_order(kernels: pl.DataFrame, devices: pl.DataFrame) -> pl.DataFrame:
    """One file's ``kernels`` in the trace's order for a run of that file alone (by GPU,
    start and end, stably; :func:`nsysan.ingest._assemble`), as the table cache then keeps them: a
    cached run finds them in order and need not sort them (20M kernels: 0.3–1.3 s and
    +0.5 GB), a run of several files has each file's in order before its sort."""
    if kernels.is_empty():
        return kernels
    _, device_gpu = number_gpus([devices])
    gpu = looked_up(kernels, device_gpu, ["source", "pid", "device_id"], "gpu")
    return (
        kernels.with_columns(gpu.alias("_gpu"))
        .sort("_gpu", "start_ns", "end_ns", maintain_order=True)
        .drop("_gpu")
    )


def in_kernel_order(kernels: pl.DataFrame) -> bool:
    """Whether ``kernels`` (no nulls in the keys) are in (gpu, start, end) order."""
    keys = ["gpu", "start_ns", "end_ns"]
    if kernels.select(pl.col(keys).null_count().sum()).sum_horizontal().item():
        return False
    g, s, e = (pl.col(c) for c in keys)
    same_gpu = g == g.shift(1)
    later = (s > s.shift(1)) | ((s == s.shift(1)) & (e >= e.shift(1)))
    return bool(kernels.select(((g > g.shift(1)) | (same_gpu & later)).slice(1).all()).item())


def number_gpus(device_tables: list[pl.DataFrame]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The trace's GPUs (``model.GPUS``), numbered in (source, PCI bus, device, process)
    order of their first device, and each file's (source, pid, device_id) -> ``gpu``."""
    devices = pl.concat(device_tables, how="vertical_relaxed")
    if devices.is_empty():
        return model.empty_frame(model.GPUS), pl.DataFrame(
            schema={"source": pl.Int32, "pid": pl.Int32, "device_id": pl.Int32, "gpu": pl.Int32}
        )
    first = (
        devices.sort("source", "pci_bus", "device_id", "pid", nulls_last=True)
        .unique("gpu_key", keep="first", maintain_order=True)
        .with_row_index("gpu")
        .with_columns(pl.col("gpu").cast(pl.Int32))
    )
    gpus = first.with_columns(
        pl.when(pl.col("compute_major").is_not_null())
        .then(
            pl.col("compute_major").cast(pl.String) + "." + pl.col("compute_minor").cast(pl.String)
        )
        .alias("compute_capability")
    )
    device_gpu = devices.join(first.select("gpu_key", "gpu"), on="gpu_key").select(
        pl.col("source").cast(pl.Int32),
        "pid",
        pl.col("device_id").cast(pl.Int32),
        "gpu",
    )
    return gpus, device_gpu
