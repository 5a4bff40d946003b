"""Reading one Nsight Systems export: its targets and metadata.

The processes, the GPU metrics samples, the GPUs of the node and of each process
(TARGET_INFO_GPU, TARGET_INFO_CUDA_GPU, TARGET_INFO_CUDA_DEVICE), and the export's
metadata, environment, session start and capture window. Shared reading is in
:mod:`nsysan.ingest.nsys`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import polars as pl

from nsysan import model
from nsysan.ingest import validate
from nsysan.ingest.nsys import read_table, with_source
from nsysan.ingest.sqlite import ExportDB

GENERIC_KEY_SAMPLE_ROWS = 64


def _select(db: ExportDB, table: str, wanted: dict[str, str]) -> str:
    """``SELECT src AS dst, ...`` over the columns of ``wanted`` that ``table`` has, each
    checked for the storage class and range nsys writes (``nsysan.ingest.validate``)."""
    return db.select_sql(table, wanted)


def read_processes(db: ExportDB, source: int) -> pl.DataFrame:
    df = read_table(db, "PROCESSES", {"pid": "pid", "name": "name"})
    if df is None:
        return model.empty_frame(model.PROCESSES)
    df = with_source(df, source)
    return model.conform(
        df.unique(subset=["pid"], keep="first", maintain_order=True), model.PROCESSES
    )


def read_gpu_metrics(db: ExportDB, source: int) -> pl.DataFrame:
    """GPU metrics samples with the metric *name*, from GPU_METRICS or GENERIC_EVENTS.

    The first sample of a session has a negative timestamp and garbage values
    (nsys-schema-notes §6); samples before the session start are dropped.
    """
    if db.has("GPU_METRICS") and db.has("TARGET_INFO_GPU_METRICS") and db.has_rows("GPU_METRICS"):
        df = db.read(validate.gpu_metrics_sql(db.bounds))
    elif db.has("GENERIC_EVENTS") and db.has_rows("GENERIC_EVENTS"):
        df = _read_generic_gpu_metrics(db)
    else:
        return model.empty_frame(model.GPU_METRICS)
    df = validate.drop_bad_samples(db, df)
    df = with_source(df, source).filter(pl.col("time_ns") >= 0)
    return model.conform(df, model.GPU_METRICS)


def _read_generic_gpu_metrics(db: ExportDB) -> pl.DataFrame:
    """The pre-GPU_METRICS form: one JSON object of ``{metric name: "value"}`` per sample."""
    cols = set(db.columns("GENERIC_EVENTS"))
    time_col = "COALESCE(timestamp, rawTimestamp)" if "timestamp" in cols else "rawTimestamp"
    time_col = validate.checked_time(time_col, db.bounds)
    sources = ""
    if db.has("GENERIC_EVENT_SOURCES"):
        sources = (
            ' WHERE typeId IN (SELECT t.typeId FROM "GENERIC_EVENT_TYPES" t JOIN '
            '"GENERIC_EVENT_SOURCES" s ON t.sourceId = s.sourceId '
            "WHERE s.data LIKE '%GpuMetrics%')"
        )
    raw = db.read(
        f"SELECT {time_col} AS time_ns, typeId AS type_id, {validate.JSON_OBJECT_SQL} AS data "
        f'FROM "GENERIC_EVENTS"{sources}'
    )
    raw = validate.drop_bad_json(db, raw)
    if raw.is_empty():
        return pl.DataFrame(
            schema={
                "time_ns": pl.Int64,
                "type_id": pl.Int64,
                "metric": pl.String,
                "value": pl.Float64,
            }
        )
    # Every sample of a source carries the same metric names; read them from a few rows
    # so polars can decode the JSON into a struct of strings without guessing types.
    keys: dict[str, None] = {}
    for text in raw["data"].head(GENERIC_KEY_SAMPLE_ROWS).to_list():
        keys.update(dict.fromkeys(json.loads(text)))
    struct = pl.Struct({key: pl.String for key in keys})
    try:
        decoded = raw.with_columns(pl.col("data").str.json_decode(dtype=struct)).unnest("data")
    except pl.exceptions.PolarsError:  # objects of another shape than the first rows'
        db.notes.append("GENERIC_EVENTS GPU metrics of an unexpected JSON shape: ignored")
        return (
            raw.clear()
            .select("time_ns", "type_id")
            .with_columns(
                pl.lit(None, pl.String).alias("metric"), pl.lit(None, pl.Float64).alias("value")
            )
        )
    metric_cols = [c for c in decoded.columns if c not in ("time_ns", "type_id")]
    return decoded.unpivot(
        index=["time_ns", "type_id"], on=metric_cols, variable_name="metric", value_name="value"
    ).with_columns(pl.col("value").cast(pl.Float64, strict=False))


def read_target_gpus(db: ExportDB) -> pl.DataFrame:
    """TARGET_INFO_GPU (every GPU of the node), normalized across versions."""
    schema: model.Schema = {
        "target_id": pl.Int64,
        "name": pl.String,
        "pci_bus": pl.String,
        "uuid": pl.String,
        "cu_device": pl.Int64,
        "sm_count": pl.Int64,
        "memory_bandwidth_bps": pl.Int64,
        "clock_rate_hz": pl.Int64,
        "total_memory_bytes": pl.Int64,
        "compute_major": pl.Int64,
        "compute_minor": pl.Int64,
    }
    if not db.has("TARGET_INFO_GPU"):
        return pl.DataFrame(schema=schema)
    cols = set(db.columns("TARGET_INFO_GPU"))
    id_col = "id" if "id" in cols else "deviceId"
    wanted = {
        "target_id": id_col,
        "name": "name",
        "pci_bus": "busLocation",
        "uuid": "uuid",
        "cu_device": "cuDevice",
        "sm_count": "smCount",
        "memory_bandwidth_bps": "memoryBandwidth",
        "clock_rate_hz": "clockRate",
        "total_memory_bytes": "totalMemory",
        "compute_major": "computeMajor",
        "compute_minor": "computeMinor",
    }
    df = db.read(_select(db, "TARGET_INFO_GPU", wanted))
    return model.conform(df, schema)


def read_cuda_gpus(db: ExportDB) -> pl.DataFrame:
    """Pre-2021 TARGET_INFO_CUDA_GPU: the GPUs each process saw, by CUDA ordinal."""
    schema: model.Schema = {
        "pid": pl.Int64,
        "device_id": pl.Int64,
        "name": pl.String,
        "pci_bus": pl.String,
        "sm_count": pl.Int64,
        "memory_bandwidth_bps": pl.Int64,
        "clock_rate_hz": pl.Int64,
        "total_memory_bytes": pl.Int64,
        "compute_major": pl.Int64,
        "compute_minor": pl.Int64,
    }
    if not db.has("TARGET_INFO_CUDA_GPU"):
        return pl.DataFrame(schema=schema)
    wanted = {
        "pid": "pid",
        "device_id": "deviceId",
        "name": "name",
        "pci_bus": "pciBusId",
        "sm_count": "numMultiprocessors",
        "bandwidth_kbps": "globalMemoryBandwidth",
        "clock_khz": "coreClockRate",
        "total_memory_bytes": "globalMemorySize",
        "compute_major": "computeCapabilityMajor",
        "compute_minor": "computeCapabilityMinor",
    }
    df = db.read(_select(db, "TARGET_INFO_CUDA_GPU", wanted))
    # This older table gives bandwidth in kB/s and the clock in kHz.
    df = df.with_columns(
        (pl.col("bandwidth_kbps").cast(pl.Int64) * 1000).alias("memory_bandwidth_bps")
        if "bandwidth_kbps" in df.columns
        else pl.lit(None, dtype=pl.Int64).alias("memory_bandwidth_bps"),
        (pl.col("clock_khz").cast(pl.Int64) * 1000).alias("clock_rate_hz")
        if "clock_khz" in df.columns
        else pl.lit(None, dtype=pl.Int64).alias("clock_rate_hz"),
    )
    return model.conform(df, schema)


def read_cuda_device_map(db: ExportDB) -> pl.DataFrame:
    """2025.1+ TARGET_INFO_CUDA_DEVICE: (pid, CUDA ordinal) → TARGET_INFO_GPU.id."""
    schema: model.Schema = {"pid": pl.Int64, "device_id": pl.Int64, "target_id": pl.Int64}
    if not db.has("TARGET_INFO_CUDA_DEVICE"):
        return pl.DataFrame(schema=schema)
    df = db.read(
        _select(
            db,
            "TARGET_INFO_CUDA_DEVICE",
            {"pid": "pid", "device_id": "cudaId", "target_id": "gpuId"},
        )
    )
    return model.conform(df, schema)


def _cell_text(value: object) -> str:
    """A key/value cell as text: a BLOB is decoded (never shown as ``b'...'``)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", errors="replace").rstrip("\x00")
    return str(value)


def read_metadata(db: ExportDB) -> dict[str, str]:
    """Export metadata key/values (META_DATA_EXPORT, else EXPORT_META_DATA, else {})."""
    for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        if db.has(table):
            rows = db.rows(f'SELECT name, value FROM "{table}"')
            return {_cell_text(k): _cell_text(v) for k, v in rows}
    return {}


def read_system_env(db: ExportDB, names: Sequence[str]) -> dict[str, str]:
    if not db.has("TARGET_INFO_SYSTEM_ENV") or "name" not in db.columns("TARGET_INFO_SYSTEM_ENV"):
        return {}
    quoted = ", ".join("'" + n.replace("'", "''") + "'" for n in names)
    rows = db.rows(f'SELECT name, value FROM "TARGET_INFO_SYSTEM_ENV" WHERE name IN ({quoted})')
    return {_cell_text(k): _cell_text(v) for k, v in rows}


def read_session_start(db: ExportDB) -> int | None:
    if not db.has("TARGET_INFO_SESSION_START_TIME"):
        return None
    value = db.scalar('SELECT utcEpochNs FROM "TARGET_INFO_SESSION_START_TIME" LIMIT 1')
    return validate.integer_value(value, 0)


def read_capture_window(db: ExportDB) -> tuple[int | None, int | None]:
    if not db.has("ANALYSIS_DETAILS"):
        return None, None
    cols = set(db.columns("ANALYSIS_DETAILS"))
    if not {"startTime", "stopTime"} <= cols:
        return None, None
    rows = db.rows('SELECT MIN(startTime), MAX(stopTime) FROM "ANALYSIS_DETAILS"')
    start, stop = rows[0] if rows else (None, None)
    return validate.integer_value(start), validate.integer_value(stop)
