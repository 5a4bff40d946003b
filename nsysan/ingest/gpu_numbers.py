"""Which GPU each file's devices are: the trace numbers its GPUs once over every file."""

from __future__ import annotations

import polars as pl

from nsysan import model

__all__ = ["number_gpus"]


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
