"""Physical GPU identity: which real device a (process, CUDA ordinal) pair ran on.

``deviceId`` in the CUPTI tables is the CUDA ordinal *as the process saw it* (after
``CUDA_VISIBLE_DEVICES``); it repeats across processes and nodes. A GPU is identified
by its UUID when the export has one (globally unique), else by host + PCI bus. The
ordinal is mapped to a TARGET_INFO_GPU row, in order of preference, by:

1. ``TARGET_INFO_CUDA_DEVICE(gpuId, cudaId, pid)`` (exports 2025.1+): exact.
2. ``TARGET_INFO_CUDA_GPU(pid, deviceId, pciBusId)`` (pre-2021 exports), when the bus
   id is known: exact.
3. ``TARGET_INFO_GPU.id == deviceId``: right when the process saw every GPU of the
   node (no ``CUDA_VISIBLE_DEVICES`` remapping); flagged ``via = "ordinal"``.

GPUs are counted from the activity that ran, never from TARGET_INFO_GPU, which lists
every GPU of the node.
"""

from __future__ import annotations

import polars as pl

_UNKNOWN_BUS_MARKERS = ("unknown", "<")


def normalize_bus(bus: pl.Expr) -> pl.Expr:
    """PCI bus ids compare case-insensitively; unknown markers become null."""
    low = bus.str.to_lowercase().str.strip_chars()
    unknown = pl.any_horizontal([low.str.contains(m, literal=True) for m in _UNKNOWN_BUS_MARKERS])
    return pl.when(unknown | (low == "")).then(None).otherwise(low)


def map_devices(
    used: pl.DataFrame,
    target_gpus: pl.DataFrame,
    cuda_gpus: pl.DataFrame,
    cuda_device_map: pl.DataFrame,
) -> pl.DataFrame:
    """For each used ``(pid, device_id)`` of one export, the TARGET_INFO_GPU row it ran on.

    Returns ``used``'s rows with ``target_id`` (null when no row matches), ``via``
    (how it was matched) and the GPU properties (from TARGET_INFO_GPU, or from the
    pre-2021 TARGET_INFO_CUDA_GPU when that is all there is).
    """
    targets = target_gpus.with_columns(normalize_bus(pl.col("pci_bus")).alias("bus_key"))
    by_map = used.join(cuda_device_map, on=["pid", "device_id"], how="left").rename(
        {"target_id": "id_from_map"}
    )
    cuda = cuda_gpus.with_columns(normalize_bus(pl.col("pci_bus")).alias("bus_key")).select(
        "pid", "device_id", pl.col("bus_key").alias("cuda_bus_key")
    )
    by_bus = by_map.join(cuda.unique(["pid", "device_id"]), on=["pid", "device_id"], how="left")
    bus_to_id = (
        targets.filter(pl.col("bus_key").is_not_null())
        .select(pl.col("bus_key").alias("cuda_bus_key"), pl.col("target_id").alias("id_from_bus"))
        .unique("cuda_bus_key")
    )
    by_bus = by_bus.join(bus_to_id, on="cuda_bus_key", how="left")
    known_ids = targets.select(pl.col("target_id").alias("id_from_ordinal")).with_columns(
        pl.col("id_from_ordinal").alias("device_id_key")
    )
    resolved = by_bus.with_columns(pl.col("device_id").cast(pl.Int64).alias("device_id_key")).join(
        known_ids, on="device_id_key", how="left"
    )
    resolved = resolved.with_columns(
        pl.coalesce("id_from_map", "id_from_bus", "id_from_ordinal").alias("target_id"),
        pl.when(pl.col("id_from_map").is_not_null())
        .then(pl.lit("cuda_device_table"))
        .when(pl.col("id_from_bus").is_not_null())
        .then(pl.lit("pci_bus"))
        .when(pl.col("id_from_ordinal").is_not_null())
        .then(pl.lit("ordinal"))
        .otherwise(pl.lit("unmatched"))
        .alias("via"),
    ).select("pid", "device_id", "target_id", "via")
    props = resolved.join(targets.drop("bus_key"), on="target_id", how="left")
    # Pre-2021 exports keep the CUDA properties per (pid, ordinal) instead.
    cuda_props = cuda_gpus.rename(
        {c: f"cuda_{c}" for c in cuda_gpus.columns if c not in ("pid", "device_id")}
    )
    props = props.join(cuda_props.unique(["pid", "device_id"]), on=["pid", "device_id"], how="left")
    fill = [
        "name",
        "pci_bus",
        "sm_count",
        "memory_bandwidth_bps",
        "clock_rate_hz",
        "total_memory_bytes",
        "compute_major",
        "compute_minor",
    ]
    return (
        props.with_columns([pl.coalesce(pl.col(c), pl.col(f"cuda_{c}")).alias(c) for c in fill])
        .with_columns(normalize_bus(pl.col("pci_bus")).alias("pci_bus"))
        .drop([f"cuda_{c}" for c in cuda_gpus.columns if c not in ("pid", "device_id")])
    )


def gpu_keys(devices: pl.DataFrame, host: str | None, source: int) -> pl.DataFrame:
    """Identity key per mapped device: UUID, else host + PCI bus, else the ordinal."""
    host_label = host or f"source{source}"
    uuid = pl.col("uuid").str.strip_chars()
    # Some exports (e.g. virtualised GPUs) store an all-zero UUID: not an identity.
    has_uuid = uuid.is_not_null() & (uuid != "") & ~uuid.str.contains(r"^[0-]+$")
    return devices.with_columns(
        pl.when(has_uuid)
        .then(pl.lit("uuid:") + uuid)
        .when(pl.col("pci_bus").is_not_null())
        .then(pl.lit(f"{host_label}/pci:") + pl.col("pci_bus"))
        .otherwise(
            pl.lit(f"{host_label}/pid{''}")
            + pl.col("pid").cast(pl.String)
            + pl.lit("/cuda")
            + pl.col("device_id").cast(pl.String)
        )
        .alias("gpu_key"),
        pl.when(has_uuid)
        .then(pl.lit("uuid"))
        .when(pl.col("pci_bus").is_not_null())
        .then(pl.lit("pci_bus"))
        .otherwise(pl.lit("ordinal"))
        .alias("identity"),
        pl.lit(host, dtype=pl.String).alias("host"),
        pl.lit(source, dtype=pl.Int32).alias("source"),
    )
