"""Reading one Nsight Systems export: the string pool and the GPU activity tables.

One reader per model table. Each asks the export which columns it has (they come and
go between versions, see ../shared/docs/nsys-schema-notes.md), selects what exists
under the model's names, and leaves what is absent as nulls. A table the export does
not have is an empty table: lazy exports leave out tables that would be empty.

The readers return tables in the file's own time base with ``gpu`` still unset;
``nsysan.ingest.load_trace`` maps GPUs to physical identities and shifts times.
This module holds the string-id look-ups and name resolution the readers share and
the GPU activity readers (kernels, memcpy, memset); the host-side thread events are
read by :mod:`nsysan.ingest.nsys_host`, the targets and metadata by
:mod:`nsysan.ingest.nsys_targets`.
"""

from __future__ import annotations

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

_PID_MASK = 0xFFFFFF


def pid_of(global_id: pl.Expr) -> pl.Expr:
    """OS process id from a globalPid or globalTid: ``(v >> 24) & 0xFFFFFF``."""
    return ((global_id // (1 << 24)) % (1 << 24)).cast(pl.Int32)


def tid_of(global_tid: pl.Expr) -> pl.Expr:
    """OS thread id from a globalTid: ``v & 0xFFFFFF``."""
    return (global_tid % (1 << 24)).cast(pl.Int32)


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


def strip_api_version(name: pl.Expr) -> pl.Expr:
    """``cudaLaunchKernel_v7000`` → ``cudaLaunchKernel`` (driver API names have no suffix)."""
    return name.str.replace(r"_v\d+$", "")


def api_name_lookup(strings: pl.DataFrame) -> pl.DataFrame:
    """:func:`name_lookup` with the API version suffix stripped (once per string, not per call)."""
    return name_lookup(strings, strip_api_version(pl.col("value")))


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


def resolve(df: pl.DataFrame, names: pl.DataFrame, id_col: str, out: str) -> pl.DataFrame:
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


def read_table(
    db: ExportDB,
    table: str,
    wanted: dict[str, str],
    convert: Convert | None = None,
    parts: int = 1,
) -> pl.DataFrame | None:
    # Rows failing validation are dropped there, with a note on db.notes; ``convert``
    # runs on each slice of rows as it is read.
    return db.read_checked(table, wanted, convert, parts)


def with_source(df: pl.DataFrame, source: int) -> pl.DataFrame:
    return df.with_columns(pl.lit(source, dtype=pl.Int32).alias("source"))


def unsourced(schema: model.Schema) -> model.Schema:
    """``schema`` less ``source``: slices of a read are converted to this
    (see ``nsysan.ingest.nsys_host._thread_table``)."""
    return {name: dtype for name, dtype in schema.items() if name != "source"}


GPU_ACTIVITY_COLUMNS = {
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
    db: ExportDB, names: pl.DataFrame, source: int, launch_config: bool = True, parts: int = 1
) -> pl.DataFrame:
    """Kernels; grid/block (24 bytes a row) only with ``launch_config``; ``parts``: row-id
    ranges read side by side."""
    wanted = dict(GPU_ACTIVITY_COLUMNS)
    wanted.update(
        short_name_id="shortName", name_id="demangledName", green_context_id="greenContextId"
    )
    if launch_config:
        wanted.update(_LAUNCH_CONFIG_COLUMNS)

    def convert(df: pl.DataFrame) -> pl.DataFrame:
        return _kernel_rows(df, names)

    df = read_table(db, "CUPTI_ACTIVITY_KIND_KERNEL", wanted, convert, parts)
    if df is None:
        return _empty_with_global_pid(model.KERNELS)
    # Source is one constant column of the whole table (no memory).
    return _keep_global_pid(with_source(df, source), model.KERNELS)


def _kernel_rows(df: pl.DataFrame, names: pl.DataFrame) -> pl.DataFrame:
    """A slice of kernel rows in the model's columns but ``source`` (names resolved, pid)."""
    df = resolve(df, names, "short_name_id", "short_name")
    df = resolve(df, names, "name_id", "name")
    # The placeholder takes the names' dtype (String, or Categorical ids).
    unnamed_name = pl.lit(validate.UNNAMED_KERNEL).cast(df.schema["name"])
    unnamed = pl.col("short_name").is_null() & pl.col("name").is_null()
    if df.select(pl.col("name").is_null().any()).item():
        df = df.with_columns(
            pl.when(unnamed).then(unnamed_name).otherwise("short_name").alias("short_name"),
            pl.coalesce("name", "short_name", unnamed_name).alias("name"),
        )
    return _keep_global_pid(_gpu_activity(df), unsourced(model.KERNELS))


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
    wanted = {k: GPU_ACTIVITY_COLUMNS[k] for k in ("start_ns", "end_ns", "device_id", "global_pid")}
    df = read_table(db, "CUPTI_ACTIVITY_KIND_KERNEL", wanted, _kernel_slice_groups, parts)
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
        .pipe(with_source, source)
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
    wanted = dict(GPU_ACTIVITY_COLUMNS)
    wanted.update(bytes="bytes", copy_kind_id="copyKind")
    df = read_table(db, "CUPTI_ACTIVITY_KIND_MEMCPY", wanted)
    if df is None:
        return _empty_with_global_pid(model.MEMCPY)
    df = df.with_columns(
        pl.col("copy_kind_id")
        .cast(pl.Int64)
        .replace_strict(MEMCPY_KINDS, default="Unknown", return_dtype=pl.String)
        .alias("copy_kind")
    )
    return _keep_global_pid(with_source(_gpu_activity(df), source), model.MEMCPY)


def read_memset(db: ExportDB, source: int) -> pl.DataFrame:
    wanted = dict(GPU_ACTIVITY_COLUMNS)
    wanted.update(bytes="bytes")
    df = read_table(db, "CUPTI_ACTIVITY_KIND_MEMSET", wanted)
    if df is None:
        return _empty_with_global_pid(model.MEMSET)
    return _keep_global_pid(with_source(_gpu_activity(df), source), model.MEMSET)


def _empty_with_global_pid(schema: model.Schema) -> pl.DataFrame:
    return model.empty_frame({**schema, "global_pid": pl.Int64})


def _keep_global_pid(df: pl.DataFrame, schema: model.Schema) -> pl.DataFrame:
    # global_pid travels with the GPU tables until identity mapping, then is dropped.
    return model.conform(df, {**schema, "global_pid": pl.Int64})
