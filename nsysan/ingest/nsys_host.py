"""Reading one Nsight Systems export: the host-side tables of events on threads.

One reader per model table (CUDA API, NVTX, OS runtime, scheduling, profiler
overhead, thread names), each adding ``pid`` and ``tid`` from the thread column, and
their census in place of the readers for ``nsysan info``. Shared reading and name
resolution are in :mod:`nsysan.ingest.nsys`.
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from nsysan import model
from nsysan.ingest import census
from nsysan.ingest.nsys import (
    pid_of,
    read_kernel_groups,
    read_table,
    resolve,
    tid_of,
    unsourced,
    with_source,
)
from nsysan.ingest.sqlite import Convert, ExportDB
from nsysan.packing import looked_up

# Enum labels, hard-coded because exports before schema 3.0 carry no ENUM_* tables
# (the numbers are the same in every version).
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


def _thread_table(
    db: ExportDB,
    table: str,
    wanted: dict[str, str],
    source: int,
    convert: Convert | None = None,
    parts: int = 1,
) -> pl.DataFrame | None:
    """A table of events on threads: ``pid`` and ``tid`` added to each slice, then ``convert``
    (without ``source``, which is added to the whole table as one constant column).
    ``parts``: row-id ranges read side by side."""

    def rows(df: pl.DataFrame) -> pl.DataFrame:
        df = df.with_columns(
            pid_of(pl.col("global_tid")).alias("pid"), tid_of(pl.col("global_tid")).alias("tid")
        )
        return convert(df) if convert else df

    df = read_table(db, table, {**wanted, "global_tid": "globalTid"}, rows, parts)
    return None if df is None else with_source(df, source)


_API_COLUMNS = {
    "start_ns": "start",
    "end_ns": "end",
    "correlation_id": "correlationId",
    "name_id": "nameId",
}


def read_cuda_api(
    db: ExportDB, api_names: pl.DataFrame, source: int, parts: int = 1
) -> pl.DataFrame:
    """CUDA API calls; ``api_names`` is :func:`nsysan.ingest.nsys.api_name_lookup` of the
    file's StringIds; ``parts``: row-id ranges read side by side."""

    def convert(df: pl.DataFrame) -> pl.DataFrame:
        resolved = resolve(df, api_names, "name_id", "name")
        return model.conform(resolved, unsourced(model.CUDA_API))

    table = "CUPTI_ACTIVITY_KIND_RUNTIME"
    df = _thread_table(db, table, _API_COLUMNS, source, convert, parts)
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
        df = resolve(df, names, "text_id", "registered_text")
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
        kept = {**unsourced(model.NVTX), "domain_id": pl.Int64}
        del kept["domain"]  # joined to the whole table below, or a constant null column
        return model.conform(events, kept)

    df = _thread_table(db, "NVTX_EVENTS", _NVTX_COLUMNS, source, convert)
    if df is None:
        return model.empty_frame(model.NVTX)
    keys = ["pid", "domain_id"]
    domains = pl.concat(domain_rows).unique(subset=keys, keep="first")
    if domains.height:
        df = df.with_columns(looked_up(df, domains, keys, "domain"))
    return model.conform(df, model.NVTX)


_OSRT_COLUMNS = {
    "start_ns": "start",
    "end_ns": "end",
    "name_id": "nameId",
    "nesting_level": "nestingLevel",
}


def read_osrt(db: ExportDB, names: pl.DataFrame, source: int) -> pl.DataFrame:
    def convert(df: pl.DataFrame) -> pl.DataFrame:
        return model.conform(resolve(df, names, "name_id", "name"), unsourced(model.OSRT))

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
    df = resolve(df, names, "name_id", "name")
    return model.conform(df, model.OVERHEAD)


def read_threads(db: ExportDB, names: pl.DataFrame, source: int) -> pl.DataFrame:
    df = _thread_table(db, "ThreadNames", {"name_id": "nameId"}, source)
    if df is None:
        return model.empty_frame(model.THREADS)
    df = resolve(df, names, "name_id", "name")
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
