"""Reading one Nsight Systems export into the normalized model's tables.

One reader per model table. Each asks the export which columns it has (they come and
go between versions, see ../shared/docs/nsys-schema-notes.md), selects what exists
under the model's names, and leaves what is absent as nulls. A table the export does
not have is an empty table: lazy exports leave out tables that would be empty.

The readers return tables in the file's own time base with ``gpu`` still unset;
``nsysan.ingest.load_trace`` maps GPUs to physical identities and shifts times.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

import polars as pl

from nsysan import model
from nsysan.ingest import census, validate
from nsysan.ingest.sqlite import Convert, ExportDB

# Enum labels, hard-coded because exports before schema 3.0 carry no ENUM_* tables
# (the numbers are the same in every version).
MEMCPY_KINDS = {
    0: "Unknown",
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
    11: "UVM HtoD",
    12: "UVM DtoH",
    13: "UVM DtoD",
}
NVTX_EVENT_TYPES = {
    33: "NvtxCategory",
    34: "NvtxMark",
    35: "NvtxPushRange",
    36: "NvtxPopRange",
    37: "NvtxStartRange",
    38: "NvtxEndRange",
    39: "NvtxThread",
    59: "NvtxPushPopRange",
    60: "NvtxStartEndRange",
    75: "NvtxDomainCreate",
    76: "NvtxDomainDestroy",
}
NVTX_DOMAIN_CREATE = 75

_PID_MASK = 0xFFFFFF
GENERIC_KEY_SAMPLE_ROWS = 64


def pid_of(global_id: pl.Expr) -> pl.Expr:
    """OS process id from a globalPid or globalTid: ``(v >> 24) & 0xFFFFFF``."""
    return ((global_id // (1 << 24)) % (1 << 24)).cast(pl.Int32)


def tid_of(global_tid: pl.Expr) -> pl.Expr:
    """OS thread id from a globalTid: ``v & 0xFFFFFF``."""
    return (global_tid % (1 << 24)).cast(pl.Int32)


def _select(db: ExportDB, table: str, wanted: dict[str, str]) -> str:
    """``SELECT src AS dst, ...`` over the columns of ``wanted`` that ``table`` has, each
    checked for the storage class and range nsys writes (``nsysan.ingest.validate``)."""
    return db.select_sql(table, wanted)


def read_string_ids(db: ExportDB) -> pl.DataFrame:
    if not db.has("StringIds"):
        return pl.DataFrame(schema={"id": pl.Int64, "value": pl.String})
    df = db.read_checked("StringIds", {"id": "id", "value": "value"})
    if df is None or "id" not in df.columns:
        return pl.DataFrame(schema={"id": pl.Int64, "value": pl.String})
    return validate.unique_string_ids(db, model.conform(df, {"id": pl.Int64, "value": pl.String}))


def name_lookup(strings: pl.DataFrame, clean: pl.Expr | None = None) -> pl.DataFrame:
    """StringIds as ``id`` → categorical ``value`` (optionally cleaned, e.g. version-stripped).

    Names stay integer ids in SQL and are joined to this small table, so each of
    millions of rows carries a 4-byte category, never its own copy of the text.
    """
    value = pl.col("value") if clean is None else clean
    return strings.select("id", value.cast(pl.Categorical).alias("value"))


# StringIds ids are dense (0..n): up to this many slots per string, a look-up table
# indexed by id replaces a join (a third of the time, no per-row hash table).
_DENSE_SLOTS_PER_STRING = 4


def _names_of(ids: pl.Series, lookup: pl.DataFrame, out: str) -> pl.Series:
    """The text of each id (null where ``lookup`` lacks it)."""
    id_col = lookup.columns[0]
    top = lookup[id_col].max() if lookup.height else None
    dense = (
        top is not None
        and lookup[id_col].min() >= 0  # type: ignore[operator]
        and top < _DENSE_SLOTS_PER_STRING * lookup.height + 1_000_000  # type: ignore[operator]
    )
    if not dense:
        # Only the id column goes through the join: joining the whole table would copy
        # every column of millions of rows to add one.
        return ids.to_frame().join(lookup, on=id_col, how="left", maintain_order="left")[out]
    slots = pl.DataFrame({id_col: pl.int_range(0, top + 1, eager=True)})  # type: ignore[operator]
    by_id = slots.join(lookup, on=id_col, how="left", maintain_order="left")[out]
    at = pl.select(
        pl.when(pl.lit(ids).is_between(0, top)).then(pl.lit(ids)).cast(pl.UInt32)
    ).to_series()
    return by_id.gather(at).alias(out)


def _resolve(df: pl.DataFrame, names: pl.DataFrame, id_col: str, out: str) -> pl.DataFrame:
    """Replace an integer StringIds reference column by its (categorical) text."""
    if id_col not in df.columns:
        return df.with_columns(pl.lit(None, dtype=pl.Categorical).alias(out))
    lookup = names.rename({"id": id_col, "value": out})
    ids = df.get_column(id_col).cast(pl.Int64)
    joined = df.with_columns(ids, _names_of(ids, lookup, out))
    # An id StringIds lacks keeps a visible placeholder rather than a null name. The
    # check is one pass; the placeholder text is built only on exports that need it.
    unresolved = pl.col(out).is_null() & pl.col(id_col).is_not_null()
    if joined.select(unresolved.any()).item():
        joined = joined.with_columns(
            validate.unresolved_string(pl.col(id_col), pl.col(out))
            .cast(lookup.schema[out])
            .alias(out)
        )
    return joined.drop(id_col) if id_col != out else joined


def _read_table(
    db: ExportDB,
    table: str,
    wanted: dict[str, str],
    convert: Convert | None = None,
    parts: int = 1,
) -> pl.DataFrame | None:
    # Rows failing validation are dropped there, with a note on db.notes; ``convert``
    # runs on each slice of rows as it is read.
    return db.read_checked(table, wanted, convert, parts)


def _with_source(df: pl.DataFrame, source: int) -> pl.DataFrame:
    return df.with_columns(pl.lit(source, dtype=pl.Int32).alias("source"))


_GPU_ACTIVITY_COLUMNS = {
    "start_ns": "start",
    "end_ns": "end",
    "device_id": "deviceId",
    "context_id": "contextId",
    "stream_id": "streamId",
    "correlation_id": "correlationId",
    "global_pid": "globalPid",
}


def _gpu_activity(df: pl.DataFrame) -> pl.DataFrame:
    return df.with_columns(pid_of(pl.col("global_pid")).alias("pid"))


_LAUNCH_CONFIG_COLUMNS = {
    "grid_x": "gridX",
    "grid_y": "gridY",
    "grid_z": "gridZ",
    "block_x": "blockX",
    "block_y": "blockY",
    "block_z": "blockZ",
}


def read_kernels(
    db: ExportDB, names: pl.DataFrame, source: int, launch_config: bool = True
) -> pl.DataFrame:
    """Kernels; grid/block (24 bytes a row) only with ``launch_config``."""
    wanted = dict(_GPU_ACTIVITY_COLUMNS)
    wanted.update(
        short_name_id="shortName", name_id="demangledName", green_context_id="greenContextId"
    )
    if launch_config:
        wanted.update(_LAUNCH_CONFIG_COLUMNS)

    def convert(df: pl.DataFrame) -> pl.DataFrame:
        return _kernel_rows(df, names)

    df = _read_table(db, "CUPTI_ACTIVITY_KIND_KERNEL", wanted, convert)
    if df is None:
        return _empty_with_global_pid(model.KERNELS)
    # Source is one constant column of the whole table (no memory).
    return _keep_global_pid(_with_source(df, source), model.KERNELS)


def _kernel_rows(df: pl.DataFrame, names: pl.DataFrame) -> pl.DataFrame:
    """A slice of kernel rows in the model's columns but ``source`` (names resolved, pid)."""
    df = _resolve(df, names, "short_name_id", "short_name")
    df = _resolve(df, names, "name_id", "name")
    # The placeholder takes the names' dtype (String, or Categorical ids).
    unnamed_name = pl.lit(validate.UNNAMED_KERNEL).cast(df.schema["name"])
    unnamed = pl.col("short_name").is_null() & pl.col("name").is_null()
    if df.select(pl.col("name").is_null().any()).item():
        df = df.with_columns(
            pl.when(unnamed).then(unnamed_name).otherwise("short_name").alias("short_name"),
            pl.coalesce("name", "short_name", unnamed_name).alias("name"),
        )
    return _keep_global_pid(_gpu_activity(df), _unsourced(model.KERNELS))


#: per file, process and device: the kernels :func:`read_kernel_groups` counts
KERNEL_GROUPS: model.Schema = {
    "source": pl.Int32,
    "pid": pl.Int32,
    "device_id": pl.Int32,
    "kernels": pl.Int64,
    "inverted": pl.Int64,
    "kernel_time_ns": pl.Int64,
    "first_ns": pl.Int64,
    "last_ns": pl.Int64,
}


def read_kernel_groups(db: ExportDB, source: int, parts: int = 1) -> census.TableCensus:
    """The kernels a full read keeps, counted per process and device (``nsysan info``).

    Each slice of rows is grouped as it is read, so no kernel row is held beyond its
    slice: per (pid, device) the kept kernels, their summed duration, first start and
    last end, and the rows ending before they start (which a full read drops).
    ``parts``: row-id ranges read side by side.
    """
    wanted = {
        k: _GPU_ACTIVITY_COLUMNS[k] for k in ("start_ns", "end_ns", "device_id", "global_pid")
    }
    df = _read_table(db, "CUPTI_ACTIVITY_KIND_KERNEL", wanted, _kernel_slice_groups, parts)
    groups = (
        model.empty_frame(KERNEL_GROUPS)
        if df is None
        else df.group_by("global_pid", "device_id")
        .agg(
            pl.col("kernels", "inverted", "kernel_time_ns").sum(),
            pl.col("first_ns").min(),
            pl.col("last_ns").max(),
        )
        .with_columns(pid_of(pl.col("global_pid")).alias("pid"))
        .pipe(_with_source, source)
        .pipe(model.conform, KERNEL_GROUPS)
    )
    kept = groups.filter(pl.col("kernels") > 0)
    return census.TableCensus(
        rows=int(kept["kernels"].sum()),
        inverted=int(groups["inverted"].sum()),
        start_ns=kept["first_ns"].min(),  # type: ignore[arg-type]
        end_ns=kept["last_ns"].max(),  # type: ignore[arg-type]
        groups=kept,
    )


def _kernel_slice_groups(df: pl.DataFrame) -> pl.DataFrame:
    inverted = pl.col("end_ns") < pl.col("start_ns")
    kept = pl.when(~inverted)
    return df.group_by("global_pid", "device_id").agg(
        (~inverted).sum().cast(pl.Int64).alias("kernels"),
        inverted.sum().cast(pl.Int64).alias("inverted"),
        kept.then(pl.col("end_ns") - pl.col("start_ns"))
        .sum()
        .cast(pl.Int64)
        .alias("kernel_time_ns"),
        kept.then(pl.col("start_ns")).min().cast(pl.Int64).alias("first_ns"),
        kept.then(pl.col("end_ns")).max().cast(pl.Int64).alias("last_ns"),
    )


def read_memcpy(db: ExportDB, source: int) -> pl.DataFrame:
    wanted = dict(_GPU_ACTIVITY_COLUMNS)
    wanted.update(bytes="bytes", copy_kind_id="copyKind")
    df = _read_table(db, "CUPTI_ACTIVITY_KIND_MEMCPY", wanted)
    if df is None:
        return _empty_with_global_pid(model.MEMCPY)
    df = df.with_columns(
        pl.col("copy_kind_id")
        .cast(pl.Int64)
        .replace_strict(MEMCPY_KINDS, default="Unknown", return_dtype=pl.String)
        .alias("copy_kind")
    )
    return _keep_global_pid(_with_source(_gpu_activity(df), source), model.MEMCPY)


def read_memset(db: ExportDB, source: int) -> pl.DataFrame:
    wanted = dict(_GPU_ACTIVITY_COLUMNS)
    wanted.update(bytes="bytes")
    df = _read_table(db, "CUPTI_ACTIVITY_KIND_MEMSET", wanted)
    if df is None:
        return _empty_with_global_pid(model.MEMSET)
    return _keep_global_pid(_with_source(_gpu_activity(df), source), model.MEMSET)


def _empty_with_global_pid(schema: model.Schema) -> pl.DataFrame:
    return model.empty_frame({**schema, "global_pid": pl.Int64})


def _keep_global_pid(df: pl.DataFrame, schema: model.Schema) -> pl.DataFrame:
    # global_pid travels with the GPU tables until identity mapping, then is dropped.
    return model.conform(df, {**schema, "global_pid": pl.Int64})


def _thread_table(
    db: ExportDB,
    table: str,
    wanted: dict[str, str],
    source: int,
    convert: Convert | None = None,
) -> pl.DataFrame | None:
    """A table of events on threads: ``pid`` and ``tid`` added to each slice, then ``convert``
    (without ``source``, which is added to the whole table as one constant column)."""

    def rows(df: pl.DataFrame) -> pl.DataFrame:
        df = df.with_columns(
            pid_of(pl.col("global_tid")).alias("pid"), tid_of(pl.col("global_tid")).alias("tid")
        )
        return convert(df) if convert else df

    df = _read_table(db, table, {**wanted, "global_tid": "globalTid"}, rows)
    return None if df is None else _with_source(df, source)


def _unsourced(schema: model.Schema) -> model.Schema:
    """``schema`` less ``source``: slices of a read are converted to this (see _thread_table)."""
    return {name: dtype for name, dtype in schema.items() if name != "source"}


def strip_api_version(name: pl.Expr) -> pl.Expr:
    """``cudaLaunchKernel_v7000`` → ``cudaLaunchKernel`` (driver API names have no suffix)."""
    return name.str.replace(r"_v\d+$", "")


def api_name_lookup(strings: pl.DataFrame) -> pl.DataFrame:
    """:func:`name_lookup` with the API version suffix stripped (once per string, not per call)."""
    return name_lookup(strings, strip_api_version(pl.col("value")))


_API_COLUMNS = {
    "start_ns": "start",
    "end_ns": "end",
    "correlation_id": "correlationId",
    "name_id": "nameId",
}


def read_cuda_api(db: ExportDB, api_names: pl.DataFrame, source: int) -> pl.DataFrame:
    """CUDA API calls; ``api_names`` is :func:`api_name_lookup` of the file's StringIds."""

    def convert(df: pl.DataFrame) -> pl.DataFrame:
        resolved = _resolve(df, api_names, "name_id", "name")
        return model.conform(resolved, _unsourced(model.CUDA_API))

    table = "CUPTI_ACTIVITY_KIND_RUNTIME"
    df = _thread_table(db, table, _API_COLUMNS, source, convert)
    return model.empty_frame(model.CUDA_API) if df is None else model.conform(df, model.CUDA_API)


# Bookkeeping events that are neither ranges nor marks (category and thread naming,
# domain creation and destruction); domain creation rows name the domains.
_NVTX_BOOKKEEPING = (33, 39, 75, 76)


_NVTX_COLUMNS = {
    "start_ns": "start",
    "end_ns": "end",
    "event_type_id": "eventType",
    "inline_text": "text",
    "text_id": "textId",
    "domain_id": "domainId",
}


def read_nvtx(db: ExportDB, names: pl.DataFrame, source: int) -> pl.DataFrame:
    domain_rows: list[pl.DataFrame] = []

    def convert(df: pl.DataFrame) -> pl.DataFrame:
        for col, dtype in (
            ("text_id", pl.Int64),
            ("domain_id", pl.Int64),
            ("inline_text", pl.String),
        ):
            if col not in df.columns:
                df = df.with_columns(pl.lit(None, dtype=dtype).alias(col))
        df = _resolve(df, names, "text_id", "registered_text")
        df = df.with_columns(
            pl.coalesce(
                pl.col("inline_text").cast(pl.String).cast(pl.Categorical),
                pl.col("registered_text"),
            ).alias("text")
        )
        # Domain names come from the process's NvtxDomainCreate rows (domainId 0 = default).
        # A fast read given up part way leaves the same rows of its first slices here
        # again: the first of each key is the same row either way.
        domain_rows.append(
            df.filter(pl.col("event_type_id") == NVTX_DOMAIN_CREATE).select(
                "pid", "domain_id", pl.col("text").alias("domain")
            )
        )
        events = df.filter(~pl.col("event_type_id").is_in(_NVTX_BOOKKEEPING))
        kept = {**_unsourced(model.NVTX), "domain_id": pl.Int64}
        del kept["domain"]  # joined to the whole table below, or a constant null column
        return model.conform(events, kept)

    df = _thread_table(db, "NVTX_EVENTS", _NVTX_COLUMNS, source, convert)
    if df is None:
        return model.empty_frame(model.NVTX)
    domains = pl.concat(domain_rows).unique(subset=["pid", "domain_id"], keep="first")
    if domains.height:
        df = df.join(domains, on=["pid", "domain_id"], how="left", maintain_order="left")
    return model.conform(df, model.NVTX)


_OSRT_COLUMNS = {
    "start_ns": "start",
    "end_ns": "end",
    "name_id": "nameId",
    "nesting_level": "nestingLevel",
}


def read_osrt(db: ExportDB, names: pl.DataFrame, source: int) -> pl.DataFrame:
    def convert(df: pl.DataFrame) -> pl.DataFrame:
        return model.conform(_resolve(df, names, "name_id", "name"), _unsourced(model.OSRT))

    df = _thread_table(db, "OSRT_API", _OSRT_COLUMNS, source, convert)
    return model.empty_frame(model.OSRT) if df is None else model.conform(df, model.OSRT)


_SCHED_COLUMNS = {"time_ns": "start", "cpu": "cpu", "is_sched_in": "isSchedIn"}


def read_sched(db: ExportDB, source: int) -> pl.DataFrame:
    df = _thread_table(db, "SCHED_EVENTS", _SCHED_COLUMNS, source)
    if df is None:
        return model.empty_frame(model.SCHED)
    return model.conform(df, model.SCHED)


_OVERHEAD_COLUMNS = {"start_ns": "start", "end_ns": "end", "name_id": "nameId"}


def read_overhead(db: ExportDB, names: pl.DataFrame, source: int) -> pl.DataFrame:
    df = _thread_table(db, "PROFILER_OVERHEAD", _OVERHEAD_COLUMNS, source)
    if df is None:
        return model.empty_frame(model.OVERHEAD)
    df = _resolve(df, names, "name_id", "name")
    return model.conform(df, model.OVERHEAD)


def read_threads(db: ExportDB, names: pl.DataFrame, source: int) -> pl.DataFrame:
    df = _thread_table(db, "ThreadNames", {"name_id": "nameId"}, source)
    if df is None:
        return model.empty_frame(model.THREADS)
    df = _resolve(df, names, "name_id", "name")
    return model.conform(
        df.unique(subset=["pid", "tid"], keep="last", maintain_order=True), model.THREADS
    )


# The host-side tables ``nsysan info`` counts: per model table, the export's table and
# the columns its reader reads (each with the thread column).
_THREAD = {"global_tid": "globalTid"}
_COUNTED_TABLES = {
    "cuda_api": ("CUPTI_ACTIVITY_KIND_RUNTIME", {**_API_COLUMNS, **_THREAD}),
    "nvtx": ("NVTX_EVENTS", {**_NVTX_COLUMNS, **_THREAD}),
    "osrt": ("OSRT_API", {**_OSRT_COLUMNS, **_THREAD}),
    "sched": ("SCHED_EVENTS", {**_SCHED_COLUMNS, **_THREAD}),
    "overhead": ("PROFILER_OVERHEAD", {**_OVERHEAD_COLUMNS, **_THREAD}),
}
_NVTX_BOOKKEEPING_IDS = ", ".join(str(t) for t in _NVTX_BOOKKEEPING)


def census_readers(
    db: ExportDB, api_names: Callable[[], pl.DataFrame], source: int, exact: bool
) -> dict[str, Callable[[], pl.DataFrame | census.TableCensus]]:
    """Per host-side event table, a census in place of its reader (``nsysan info``),
    and kernels without their names. ``api_names``: the CUDA API name lookup, read
    when first called.

    ``exact``: each counts what its reader reads (same columns, checks and filters),
    so the counts are the heights a full read would give; otherwise each takes the
    rows the table stores (:func:`nsysan.ingest.census.stored_rows`), and the kernels,
    then read alone, are read in two row ranges side by side.
    """
    readers: dict[str, Callable[[], pl.DataFrame | census.TableCensus]]
    if not exact:
        readers = {
            name: (lambda table=table: census.stored_rows(db, table))  # type: ignore[misc]
            for name, (table, _) in _COUNTED_TABLES.items()
        }
        return {"kernels": lambda: read_kernel_groups(db, source, parts=2), **readers}
    readers = {
        name: (lambda table=table, wanted=wanted: census.census_table(db, table, wanted))  # type: ignore[misc]
        for name, (table, wanted) in _COUNTED_TABLES.items()
    }
    nvtx_table, nvtx_wanted = _COUNTED_TABLES["nvtx"]
    return {
        **readers,
        "kernels": lambda: read_kernel_groups(db, source),
        "cuda_api": lambda: launch_census(db, api_names()),
        "nvtx": lambda: census.census_table(
            db,
            nvtx_table,
            nvtx_wanted,
            keep=("event_type_id", f'"event_type_id" NOT IN ({_NVTX_BOOKKEEPING_IDS})'),
        ),
    }


def launch_census(db: ExportDB, api_names: pl.DataFrame) -> census.TableCensus:
    """The exact census of the CUDA API table, with its kernel launch calls."""
    launch_ids = api_names.filter(pl.col("value").cast(pl.String).str.contains("Launch"))["id"]
    table, wanted = _COUNTED_TABLES["cuda_api"]
    return census.census_table(db, table, wanted, launch_name_ids=launch_ids.to_list())


def read_processes(db: ExportDB, source: int) -> pl.DataFrame:
    df = _read_table(db, "PROCESSES", {"pid": "pid", "name": "name"})
    if df is None:
        return model.empty_frame(model.PROCESSES)
    df = _with_source(df, source)
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
    df = _with_source(df, source).filter(pl.col("time_ns") >= 0)
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
