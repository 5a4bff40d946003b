"""Readers for launch configuration and device memory, kept small at the source.

* **Launch configurations** are aggregated in SQL: one row per (process, CUDA device,
  kernel name, grid, block) with the launch count and total kernel time. The launch
  view names the configurations of the top kernels; carrying six integers on every
  kernel row (a quarter of it) only for that would cost memory on million-kernel
  traces, so the per-row grid/block stay reserved for the Nsight Compute join.
* **Device memory** comes from ``CUDA_GPU_MEMORY_USAGE_EVENTS`` (captured with
  ``nsys profile --cuda-memory-usage=true``): one row per allocation or free, its
  size signed (+ allocated, − freed). Exports list the table only when it has rows
  (lazy export) or leave it empty; both read as "not captured".

Both go through :meth:`ExportDB.select_sql`, so every column is checked the way the
other readers check theirs (``nsysan.ingest.validate``).
"""

from __future__ import annotations

import polars as pl

from nsysan import model
from nsysan.ingest import validate
from nsysan.ingest.sqlite import ExportDB

__all__ = ["DEVICE_MEMORY_KINDS", "read_launch_configs", "read_memory_usage"]

_KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
_LAUNCH_COLUMNS = {
    "start_ns": "start",
    "end_ns": "end",
    "device_id": "deviceId",
    "global_pid": "globalPid",
    "short_name_id": "shortName",
    "grid_x": "gridX",
    "grid_y": "gridY",
    "grid_z": "gridZ",
    "block_x": "blockX",
    "block_y": "blockY",
    "block_z": "blockZ",
}
_CONFIG_KEYS = ("global_pid", "device_id", "short_name_id", "grid_x", "grid_y", "grid_z",
                "block_x", "block_y", "block_z")  # fmt: skip

# memKind is nsys's CUDA_MEMOPR_MEMORY_KIND (ENUM_CUDA_MEM_KIND in 2024.5 exports: 0
# Pageable, 1 Pinned, 2 Device, 3 Array, 4 Managed, 5 Device Static, 6 Managed Static,
# 7 Unknown): the kinds that live in device memory. Host memory and managed memory
# (resident where it was last touched) are left out of "device memory in use".
DEVICE_MEMORY_KINDS = (2, 3, 5)  # Device, Array, Device Static
_MEMORY_TABLE = "CUDA_GPU_MEMORY_USAGE_EVENTS"


def read_launch_configs(db: ExportDB, names: pl.DataFrame, source: int) -> pl.DataFrame:
    """Launches per (process, device, kernel, grid, block): ``launches``, ``total_ns``."""
    have = {c.lower() for c in db.columns(_KERNEL_TABLE)}
    if not db.has(_KERNEL_TABLE) or not {"gridx", "blockx", "shortname"} <= have:
        return _empty(model.LAUNCH_CONFIGS)
    inner = db.select_sql(_KERNEL_TABLE, _LAUNCH_COLUMNS)
    keys = [k for k in _CONFIG_KEYS if k in _present(db, _LAUNCH_COLUMNS)]
    cols = ", ".join(validate.quote_ident(k) for k in keys)
    sql = (
        f"SELECT {cols}, COUNT(*) AS launches, SUM(end_ns - start_ns) AS total_ns "
        f"FROM ({inner}) WHERE start_ns IS NOT NULL AND end_ns >= start_ns "
        f"AND device_id IS NOT NULL GROUP BY {cols}"
    )
    df = db.read(sql)
    if df.is_empty():
        return _empty(model.LAUNCH_CONFIGS)
    pid = ((pl.col("global_pid") // (1 << 24)) % (1 << 24)).cast(pl.Int64)
    lookup = names.select(
        pl.col("id").alias("short_name_id"), pl.col("value").cast(pl.String).alias("short_name")
    )
    df = (
        df.with_columns(pl.col("short_name_id").cast(pl.Int64), pid.alias("pid"))
        .join(lookup, on="short_name_id", how="left")
        .with_columns(
            pl.col("short_name").fill_null(validate.UNNAMED_KERNEL),
            pl.lit(source, dtype=pl.Int32).alias("source"),
        )
    )
    return model.conform(df, model.LAUNCH_CONFIGS)


def read_memory_usage(db: ExportDB, source: int) -> pl.DataFrame:
    """Device-memory allocations and frees: ``time_ns``, ``bytes_delta`` (+ alloc, − free)."""
    if not db.has(_MEMORY_TABLE):
        return _empty(model.MEMORY_USAGE)
    wanted = {
        "time_ns": "start",
        "global_pid": "globalPid",
        "device_id": "deviceId",
        "bytes": "bytes",
        "mem_kind": "memKind",
        "operation": "memoryOperationType",
    }
    if not {"time_ns", "device_id", "bytes", "operation"} <= _present(db, wanted):
        return _empty(model.MEMORY_USAGE)
    inner = db.select_sql(_MEMORY_TABLE, wanted)
    kinds = ", ".join(str(k) for k in DEVICE_MEMORY_KINDS)
    kind_filter = f" AND mem_kind IN ({kinds})" if "mem_kind" in _present(db, wanted) else ""
    sql = (
        f"SELECT * FROM ({inner}) WHERE time_ns IS NOT NULL AND device_id IS NOT NULL "
        f"AND bytes IS NOT NULL AND operation IN (0, 1){kind_filter}"
    )
    df = db.read(sql)
    if df.is_empty():
        return _empty(model.MEMORY_USAGE)
    pid = ((pl.col("global_pid") // (1 << 24)) % (1 << 24)).cast(pl.Int64)
    delta = pl.when(pl.col("operation") == 0).then(pl.col("bytes")).otherwise(-pl.col("bytes"))
    df = df.with_columns(
        pid.alias("pid"),
        delta.cast(pl.Int64).alias("bytes_delta"),
        pl.lit(source, dtype=pl.Int32).alias("source"),
    )
    return model.conform(df, model.MEMORY_USAGE)


def _present(db: ExportDB, wanted: dict[str, str]) -> set[str]:
    table = _KERNEL_TABLE if "short_name_id" in wanted else _MEMORY_TABLE
    return set(validate.resolve_columns(db.columns(table), wanted))


def _empty(schema: model.Schema) -> pl.DataFrame:
    return model.empty_frame(schema)
