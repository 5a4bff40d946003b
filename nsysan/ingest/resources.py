"""Readers for launch configuration and device memory, kept small at the source.

* **Launch configurations**: one row per (process, CUDA device, kernel name, grid,
  block) with the launch count and total kernel time, aggregated from the kernel rows
  as they are read (with their grid/block sizes); the sizes are then dropped from the
  kernel rows unless the Nsight Compute join needs them, so the table held for the run
  stays ~68 bytes a row. (A SQL GROUP BY over the nine keys was measured slower: SQLite
  sorts, 5.3 s at 1M kernels against +1.3 s for reading the six columns.)
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
from nsysan.ingest.nsys import pid_of
from nsysan.ingest.sqlite import ExportDB

__all__ = ["DEVICE_MEMORY_KINDS", "launch_configs", "read_memory_usage"]

# memKind is nsys's CUDA_MEMOPR_MEMORY_KIND (ENUM_CUDA_MEM_KIND in 2024.5 exports: 0
# Pageable, 1 Pinned, 2 Device, 3 Array, 4 Managed, 5 Device Static, 6 Managed Static,
# 7 Unknown): the kinds that live in device memory. Host memory and managed memory
# (resident where it was last touched) are left out of "device memory in use".
DEVICE_MEMORY_KINDS = (2, 3, 5)  # Device, Array, Device Static
_MEMORY_TABLE = "CUDA_GPU_MEMORY_USAGE_EVENTS"


def launch_configs(kernels: pl.DataFrame) -> pl.DataFrame:
    """Launches per (process, device, kernel, grid, block): ``launches``, ``total_ns``.

    ``kernels``: one file's kernels as read with their grid/block sizes; the caller then
    drops those columns unless the Nsight Compute join needs them.
    """
    dims = ["grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"]
    if kernels.is_empty() or not set(dims) <= set(kernels.columns):
        return _empty(model.LAUNCH_CONFIGS)
    if kernels.select(pl.col("grid_x").is_null().all()).item():
        return _empty(model.LAUNCH_CONFIGS)  # an export without launch sizes
    keys = ["source", "pid", "device_id", "short_name", *dims]
    grouped = (
        kernels.filter(pl.col("end_ns") >= pl.col("start_ns"))
        .group_by(keys)
        .agg(
            pl.len().cast(pl.Int64).alias("launches"),
            (pl.col("end_ns") - pl.col("start_ns")).sum().alias("total_ns"),
        )
        .sort(keys)  # a few rows: one order run after run
    )
    return model.conform(grouped, model.LAUNCH_CONFIGS)


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
    pid = pid_of(pl.col("global_pid"))
    delta = pl.when(pl.col("operation") == 0).then(pl.col("bytes")).otherwise(-pl.col("bytes"))
    df = df.with_columns(
        pid.alias("pid"),
        delta.cast(pl.Int64).alias("bytes_delta"),
        pl.lit(source, dtype=pl.Int32).alias("source"),
    )
    return model.conform(df, model.MEMORY_USAGE)


def _present(db: ExportDB, wanted: dict[str, str]) -> set[str]:
    return set(validate.resolve_columns(db.columns(_MEMORY_TABLE), wanted))


def _empty(schema: model.Schema) -> pl.DataFrame:
    return model.empty_frame(schema)
