"""Load one or several Nsight Systems exports as one :class:`nsysan.model.Trace`.

Several files (one per rank or node) become one analysis: they are ranked by their
UTC session start (``TARGET_INFO_SESSION_START_TIME.utcEpochNs``) and each file's
times are shifted onto the earliest file's clock. GPUs are physical devices
(``nsysan.ingest.identity``); the same GPU seen from two files is one GPU.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import re
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from nsysan import model
from nsysan.errors import InputNotFoundError
from nsysan.ingest import (
    cache,
    graphs,
    identity,
    nsys,
    nsys_host,
    nsys_targets,
    nsysrep,
    resources,
    validate,
)
from nsysan.ingest.assembly import shifted, stored_assembled, without_inverted
from nsysan.ingest.census import CensusMode, TableCensus
from nsysan.ingest.gpu_numbers import number_gpus
from nsysan.ingest.operation_calls import operation_calls
from nsysan.ingest.sqlite import ExportDB, check_distinct_files, open_export
from nsysan.names import distinct, is_one_of, values_matching
from nsysan.packing import looked_up
from nsysan.stored import STORED_TABLES, HostTable, StoredTable

__all__ = ["load_trace", "load_census", "kernel_launch_calls", "MISSING_MESSAGES"]

# What a user loses when a table has no rows, in the words the report and `info` use.
MISSING_MESSAGES = {
    "kernels": "no GPU kernel records: compute, gaps and NCCL analyses unavailable",
    "cuda_api": "no CUDA API trace: host-side attribution of gaps unavailable",
    "nvtx": "no NVTX ranges: gaps cannot be tied to named phases (tokenizer, sampling, "
    "data loading) and iteration boundaries are unknown",
    "osrt": "no OS runtime trace: blocking-call attribution (locks, condition waits, "
    "the GIL signature) unavailable",
    "sched": "no thread scheduling events: descheduling attribution unavailable",
    "gpu_metrics": "no GPU metrics: SM activity, clocks and bandwidth unavailable",
    "memcpy": "no memory copy records",
    "overhead": "no profiler overhead records",
}

_INSTALL_DIR_VERSION = re.compile(r"/(20\d\d\.\d+\.\d+)[^/]*/")


@dataclass(frozen=True)
class _SourceInfo:
    path: Path
    host: str | None
    export_version: str
    schema_version: str
    capture_version_hint: str | None
    utc_start_ns: int | None
    capture_start_ns: int | None
    capture_end_ns: int | None
    cpu_cores: int | None = None


def _source_info(db: ExportDB) -> _SourceInfo:
    meta = nsys_targets.read_metadata(db)
    env = nsys_targets.read_system_env(db, ["Hostname", "TargetInstallDir", "CpuCores"])
    hint_match = _INSTALL_DIR_VERSION.search(env.get("TargetInstallDir", "") + "/")
    start, stop = nsys_targets.read_capture_window(db)
    return _SourceInfo(
        path=db.path,
        host=env.get("Hostname") or None,
        export_version=meta.get("EXPORT_PRODUCT_VERSION", "pre-2021" if not meta else "unknown"),
        schema_version=meta.get("EXPORT_SCHEMA_VERSION", ""),
        capture_version_hint=hint_match.group(1) if hint_match else None,
        utc_start_ns=nsys_targets.read_session_start(db),
        capture_start_ns=start,
        capture_end_ns=stop,
        cpu_cores=_cpu_cores(env.get("CpuCores")),
    )


def _cpu_cores(text: str | None) -> int | None:
    """TARGET_INFO_SYSTEM_ENV's CpuCores (text), when it is a plausible count."""
    value = int(text) if text and text.strip().isdigit() else None
    return validate.integer_value(value, 1, 1 << 20)


@dataclass(frozen=True)
class _FileTables:
    tables: dict[str, HostTable]
    devices: pl.DataFrame  # used (pid, device_id) with identity and properties
    metrics_target: pl.DataFrame  # type_id -> target_id for GPU metrics
    # Tables counted in SQL instead of read (census mode); their frames are empty.
    census: dict[str, TableCensus] = dataclasses.field(default_factory=dict)


# Table reads are independent and spend their time in SQLite and Arrow (C code that
# releases the GIL), so two at a time use both cores of a small machine.
READ_THREADS = 2
_LAUNCH_DIMS = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")
# The GPU operations whose launch calls are looked up: graph executions join the
# kernels (nsysan.ingest.graphs.with_graph_work).
_OPERATION_TABLES = ("kernels", "graphs", "memcpy", "memset")


def _read_file(
    db: ExportDB,
    source: int,
    host: str | None,
    launch_config: bool,
    census: CensusMode | None = None,
    store_host: bool = False,
) -> _FileTables:
    """One export's tables: from the table cache when it holds them, else from SQLite.

    Census reads (``nsysan info``) are cheap and not cached. ``store_host``: the big
    host tables are left in the cache entry's files (:mod:`nsysan.stored`).
    """
    key = None if census or cache.root() is None else cache.entry_key(db.path, source, host)
    on_disk = [f"{_TABLE_PREFIX}{n}" for n in (*STORED_TABLES, _OPERATION_CALLS)]
    # The operations' calls stand in for CUDA calls on disk, never for calls in memory.
    unread = [] if store_host else [f"{_TABLE_PREFIX}{_OPERATION_CALLS}"]
    hit = cache.lookup(key, on_disk if store_host else (), unread) if key else None
    if hit is not None:
        db.notes.extend(hit.notes)
        read = _from_frames(hit.frames)
    else:
        notes_before = len(db.notes)
        with cache.EntryWriter(key, db.path) as entry:
            read = _read_tables(db, source, host, census, entry, in_place=store_host)
            entry.finish(_as_frames(read), db.notes[notes_before:])
    if not launch_config:
        read.tables["kernels"] = read.tables["kernels"].drop(_LAUNCH_DIMS, strict=False)
    return read


# A cache entry's frames: the tables under this prefix, then devices and metrics_target.
_TABLE_PREFIX = "table."
# The table of the CUDA calls keyed like a GPU operation (nsysan.ingest.operation_calls).
_OPERATION_CALLS = "operation_calls"


def _as_frames(read: _FileTables) -> dict[str, pl.DataFrame]:
    frames = {f"{_TABLE_PREFIX}{name}": table for name, table in read.tables.items()}
    return {**frames, "devices": read.devices, "metrics_target": read.metrics_target}


def _from_frames(frames: dict[str, pl.DataFrame]) -> _FileTables:
    tables = {
        name.removeprefix(_TABLE_PREFIX): frame
        for name, frame in frames.items()
        if name.startswith(_TABLE_PREFIX)
    }
    return _FileTables(
        tables=tables, devices=frames["devices"], metrics_target=frames["metrics_target"]
    )


def _read_tables(
    db: ExportDB,
    source: int,
    host: str | None,
    census: CensusMode | None,
    entry: cache.EntryWriter | None = None,
    in_place: bool = False,
) -> _FileTables:
    """The export's tables, each big host table written to the cache ``entry`` as soon
    as it is read, and with ``in_place`` then read from those files (see
    :class:`~nsysan.ingest.cache.EntryWriter`)."""
    lookups = _StringLookups(db)
    names, api_names = lookups.names, lookups.api_names
    readers: dict[str, Callable[[], HostTable | TableCensus]] = {
        # The three big tables take about as long each (5M kernels: 3.3 API and 2 NVTX
        # rows per kernel). NVTX is read in one piece (its domain names are gathered
        # in row order as it goes), so it starts first, on one reader; the CUDA API
        # calls and then the kernels are read in row-id halves side by side on the
        # other: the reads end together, instead of NVTX alone on one core for the
        # last third. The CUDA API table, the largest, comes first: written to the
        # cache entry and read in place from there (_written), it has left memory
        # before NVTX and the kernels are done (5M kernels: a first run peaked 0.3-0.4
        # GB lower than with the kernels first).
        "nvtx": lambda: nsys_host.read_nvtx(db, names(), source),
        "cuda_api": lambda: nsys_host.read_cuda_api(db, api_names(), source, parts=READ_THREADS),
        # Grid/block are read for the launch-configuration aggregate (then dropped).
        "kernels": lambda: nsys.read_kernels(
            db, names(), source, launch_config=True, parts=READ_THREADS
        ),
        "osrt": lambda: nsys_host.read_osrt(db, names(), source),
        "sched": lambda: nsys_host.read_sched(db, source),
        "gpu_metrics": lambda: nsys_targets.read_gpu_metrics(db, source),
        "memcpy": lambda: nsys.read_memcpy(db, source),
        "memset": lambda: nsys.read_memset(db, source),
        "graphs": lambda: graphs.read_graph_executions(db, source),
        "overhead": lambda: nsys_host.read_overhead(db, names(), source),
        "threads": lambda: nsys_host.read_threads(db, names(), source),
        "processes": lambda: nsys_targets.read_processes(db, source),
        "memory_usage": lambda: resources.read_memory_usage(db, source),
    }
    if census:
        readers.update(nsys_host.census_readers(db, api_names, source, exact=census == "exact"))
    if census == "stored":  # info shows no thread; nothing then reads the string pool
        readers["threads"] = lambda: model.empty_frame(model.THREADS)
    if entry is not None:
        for name in STORED_TABLES:
            readers[name] = functools.partial(_written, entry, name, readers[name], in_place)
    with ThreadPoolExecutor(max_workers=READ_THREADS) as pool:
        futures = {name: pool.submit(read) for name, read in readers.items()}
        results = {name: future.result() for name, future in futures.items()}
    counted = {n: r for n, r in results.items() if isinstance(r, TableCensus)}
    if _launches_needed(results):
        # No GPU activity: whether kernels were launched decides what is missing.
        counted["cuda_api"] = nsys_host.launch_census(db, api_names())
    tables = {n: r for n, r in results.items() if not isinstance(r, TableCensus)}
    tables.update({n: model.empty_frame(model.TABLE_SCHEMAS[n]) for n in counted})
    if entry is not None and isinstance(tables.get("cuda_api"), StoredTable):
        # In the calls' order: a launch call's tie-break is the first in the table.
        tables[_OPERATION_CALLS] = entry.write(
            f"{_TABLE_PREFIX}{_OPERATION_CALLS}",
            operation_calls(
                tables["cuda_api"], [tables[t] for t in _OPERATION_TABLES], threads=READ_THREADS
            ),
            by_thread=True,
            in_place=True,
            thread_order=False,
        )
    tables["launch_configs"] = resources.launch_configs(tables["kernels"])
    counted_groups = [c.groups for c in counted.values() if c.groups is not None]
    used = (
        pl.concat(
            [
                frame.select("pid", pl.col("device_id").cast(pl.Int64))
                # GPUs are those that ran work; a sync record alone does not make one.
                for frame in [
                    *(tables[t] for t in ("kernels", "graphs", "memcpy", "memset")),
                    *counted_groups,
                ]
            ]
        )
        .unique()
        .sort("pid", "device_id")
    )
    target_gpus = nsys_targets.read_target_gpus(db)
    devices = identity.map_devices(
        used, target_gpus, nsys_targets.read_cuda_gpus(db), nsys_targets.read_cuda_device_map(db)
    )
    devices = identity.gpu_keys(devices, host, source)
    metrics_target = _metrics_targets(tables["gpu_metrics"], target_gpus)
    return _FileTables(
        tables=tables, devices=devices, metrics_target=metrics_target, census=counted
    )


def _written(
    entry: cache.EntryWriter,
    name: str,
    read: Callable[[], HostTable | TableCensus],
    in_place: bool,
) -> HostTable | TableCensus:
    """The host table ``name`` (``read()``), written to ``entry`` as soon as it is read."""
    table = read()
    if not isinstance(table, pl.DataFrame):
        return table
    return entry.write(f"{_TABLE_PREFIX}{name}", table, by_thread=True, in_place=in_place)


class _StringLookups:
    """The export's string pool as name lookups, read once, by the first reader that asks."""

    def __init__(self, db: ExportDB) -> None:
        self._db = db
        self._lock = threading.Lock()
        self._lookups: tuple[pl.DataFrame, pl.DataFrame] | None = None

    def _read(self) -> tuple[pl.DataFrame, pl.DataFrame]:
        with self._lock:
            if self._lookups is None:
                strings = nsys.read_string_ids(self._db)
                self._lookups = (nsys.name_lookup(strings), nsys.api_name_lookup(strings))
            return self._lookups

    def names(self) -> pl.DataFrame:
        return self._read()[0]

    def api_names(self) -> pl.DataFrame:
        return self._read()[1]


def _launches_needed(results: dict[str, pl.DataFrame | TableCensus]) -> bool:
    """A file without kernels or graphs whose CUDA API rows were only stored, not counted."""
    api = results.get("cuda_api")

    def rows(name: str) -> int:
        r = results[name]
        return r.rows if isinstance(r, TableCensus) else r.height

    return (
        isinstance(api, TableCensus)
        and api.launch_calls is None
        and rows("kernels") == 0
        and rows("graphs") == 0
    )


def _metrics_targets(metrics: pl.DataFrame, target_gpus: pl.DataFrame) -> pl.DataFrame:
    """Which TARGET_INFO_GPU row each GPU-metrics source samples.

    The low byte of ``typeId`` is the GPU's TARGET_INFO_GPU id (e.g. typeId
    ``(1<<48)|(1<<32)|0`` samples GPU 0).
    """
    type_ids = metrics.select("type_id").unique()
    return type_ids.with_columns((pl.col("type_id") % 256).alias("target_id")).join(
        target_gpus.select("target_id", "uuid", "pci_bus"), on="target_id", how="inner"
    )


def load_trace(
    paths: str | Path | Sequence[str | Path],
    launch_config: bool = True,
    nsys_path: str | Path | None = None,
    store_host_tables: bool = False,
) -> model.Trace:
    """Load exports (one file, or one per rank/node) as one trace on one timeline.

    ``launch_config=False`` leaves the kernels' grid/block sizes out (null); only the
    Nsight Compute join needs them, and they are a quarter of a kernel row. Nsight
    Systems reports (``.nsys-rep``, ``.qdrep``) are exported first, with ``nsys_path``
    or the nsys on PATH (:mod:`nsysan.ingest.nsysrep`). ``store_host_tables``: a file's
    CUDA API, NVTX, OS-runtime or scheduling table of at least
    :data:`nsysan.stored.STORE_MIN_ROWS` rows stays in the table cache's files, read by
    each analysis as it needs it (:class:`nsysan.stored.StoredTable`); without the cache,
    every table is in memory.
    """
    trace, _ = _load(
        paths,
        launch_config=launch_config,
        census=None,
        nsys_path=nsys_path,
        store_host=store_host_tables,
    )
    return trace


def load_census(
    paths: str | Path | Sequence[str | Path],
    nsys_path: str | Path | None = None,
    exact: bool = False,
) -> tuple[model.Trace, dict[str, TableCensus]]:
    """What ``nsysan info`` needs, without reading the host-side event tables.

    The trace holds the GPU activity, processes, threads and identities as
    :func:`load_trace` reads them; the CUDA API, NVTX, OS-runtime, scheduling and
    overhead tables are empty and counted instead (:mod:`nsysan.ingest.census`).
    ``exact``: per table, the rows a full read would keep and their span on the
    trace's timeline, with the notes of what it would drop (a scan of each table);
    otherwise the rows each table stores, without span (no scan). Capabilities and
    refusals are those of :func:`load_trace` either way.
    """
    mode: CensusMode = "exact" if exact else "stored"
    return _load(paths, launch_config=False, census=mode, nsys_path=nsys_path)


def _load(
    paths: str | Path | Sequence[str | Path],
    *,
    launch_config: bool,
    census: CensusMode | None,
    nsys_path: str | Path | None,
    store_host: bool = False,
) -> tuple[model.Trace, dict[str, TableCensus]]:
    if isinstance(paths, (str, Path)):
        paths = [paths]
    if not paths:
        raise InputNotFoundError("no trace files given")
    check_distinct_files([Path(p) for p in paths])
    paths, exported = nsysrep.resolve_inputs([Path(p) for p in paths], nsys_path)
    dbs: list[ExportDB] = []
    try:
        for p in paths:
            dbs.append(open_export(Path(p)))
        infos = [_source_info(db) for db in dbs]
        order = sorted(
            range(len(dbs)),
            key=lambda i: (
                infos[i].utc_start_ns is None,
                infos[i].utc_start_ns or 0,
                str(infos[i].path),
            ),
        )
        files = [
            _read_file(dbs[i], src, infos[i].host, launch_config, census, store_host)
            for src, i in enumerate(order)
        ]
    finally:
        for db in dbs:
            db.close()
    ordered_infos = [infos[i] for i in order]
    trace, counted = _assemble(ordered_infos, files, sort_kernels=census is None)
    del files
    _return_freed_memory()
    # What ingest validation dropped or truncated (nsysan.ingest.validate).
    checked = [f"{db.path.name}: {note}" for i in order for db in [dbs[i]] for note in db.notes]
    notes = (*exported, *checked)
    if notes:
        trace = dataclasses.replace(trace, notes=(*notes, *trace.notes))
    return trace, counted


def _return_freed_memory() -> None:
    # The SQLite driver's Arrow buffers come from the C library's allocator, which
    # keeps freed pages for later mallocs; once the tables are read, give them back.
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def _offsets(infos: list[_SourceInfo]) -> tuple[list[int], list[str]]:
    starts, notes = validate.check_session_starts([i.utc_start_ns for i in infos])
    if len(infos) > 1 and any(s is None for s in starts):
        notes.append(
            "some files lack a UTC session start: their times were not aligned "
            "(each file keeps its own session-relative clock)"
        )
        return [0] * len(infos), notes
    known = [s for s in starts if s is not None]
    base = min(known) if known else 0
    return [(s - base) if s is not None else 0 for s in starts], notes


def _assemble(
    infos: list[_SourceInfo], files: list[_FileTables], *, sort_kernels: bool = True
) -> tuple[model.Trace, dict[str, TableCensus]]:
    offsets, notes = _offsets(infos)
    gpus, device_gpu = number_gpus([f.devices for f in files])
    offset_df = pl.DataFrame(
        {"source": list(range(len(files))), "offset_ns": offsets},
        schema={"source": pl.Int32, "offset_ns": pl.Int64},
    )
    tables: dict[str, HostTable] = {}
    calls_of_operations = _calls_of_operations(files, offset_df)
    for name, schema in model.TABLE_SCHEMAS.items():
        if name in ("gpus", "sources"):
            continue
        # Taken out of the files' tables: each file's frame is freed once the whole
        # table no longer needs it, not held beside it to the end.
        parts = [f.tables.pop(name) for f in files]
        if any(isinstance(p, StoredTable) for p in parts):
            tables[name], dropped = stored_assembled(parts, offset_df, schema)
            if dropped:
                notes.append(f"{dropped} {name} row(s) ending before they start were ignored")
            continue
        df = pl.concat(parts, how="vertical_relaxed") if parts else model.empty_frame(schema)
        if name in ("kernels", "graphs", "memcpy", "memset", "launch_configs", "memory_usage"):
            df = df.with_columns(looked_up(df, device_gpu, ["source", "pid", "device_id"], "gpu"))
        if name == "gpu_metrics":
            df = _attach_metric_gpus(df, files, gpus)
        df = shifted(df, offset_df, len(files))
        df, dropped = without_inverted(df)
        dropped += sum(f.census[name].inverted for f in files if name in f.census)
        if dropped:
            notes.append(f"{dropped} {name} row(s) ending before they start were ignored")
        tables[name] = model.conform(df, schema)
    if sort_kernels and tables["kernels"].height:  # a census only counts them
        tables["kernels"] = tables["kernels"].sort("gpu", "start_ns", "end_ns", maintain_order=True)
    sources = pl.DataFrame(
        {
            "source": list(range(len(infos))),
            "path": [str(i.path) for i in infos],
            "host": [i.host for i in infos],
            "export_version": [i.export_version for i in infos],
            "schema_version": [i.schema_version for i in infos],
            "capture_version_hint": [i.capture_version_hint for i in infos],
            "utc_start_ns": [i.utc_start_ns for i in infos],
            "offset_ns": offsets,
            "capture_start_ns": [i.capture_start_ns for i in infos],
            "capture_end_ns": [i.capture_end_ns for i in infos],
            "cpu_cores": [i.cpu_cores for i in infos],
        },
        schema=model.SOURCES,
    )
    notes.extend(_identity_notes(files))
    counted = _merged_census(files, offsets, device_gpu)
    capabilities = _capabilities(tables, counted)
    trace = model.Trace(
        **tables,
        operation_calls=calls_of_operations,
        gpus=model.conform(gpus, model.GPUS),
        sources=sources,
        capabilities=capabilities,
        notes=tuple(notes),
    )
    return trace, counted


def _merged_census(
    files: list[_FileTables], offsets: list[int], device_gpu: pl.DataFrame
) -> dict[str, TableCensus]:
    """Per counted table, the files' censuses added up on the trace's timeline; counted
    groups of a process and device get their ``gpu``."""
    merged: dict[str, TableCensus] = {}
    for f, offset in zip(files, offsets, strict=True):
        for name, c in f.census.items():
            shifted = dataclasses.replace(
                c,
                start_ns=None if c.start_ns is None else c.start_ns + offset,
                end_ns=None if c.end_ns is None else c.end_ns + offset,
                groups=None
                if c.groups is None
                else c.groups.with_columns(pl.col("first_ns", "last_ns") + offset),
            )
            merged[name] = merged[name] + shifted if name in merged else shifted
    for name, c in merged.items():
        if c.groups is not None:
            groups = c.groups.join(
                device_gpu, on=["source", "pid", "device_id"], how="left", maintain_order="left"
            )
            merged[name] = dataclasses.replace(c, groups=groups)
    return merged


def _attach_metric_gpus(
    metrics: pl.DataFrame, files: list[_FileTables], gpus: pl.DataFrame
) -> pl.DataFrame:
    if metrics.is_empty():
        return metrics
    keyed = []
    for src, f in enumerate(files):
        m = identity.gpu_keys(
            f.metrics_target.with_columns(
                identity.normalize_bus(pl.col("pci_bus")).alias("pci_bus"),
                pl.lit(None, dtype=pl.Int32).alias("pid"),
                pl.lit(None, dtype=pl.Int64).alias("device_id"),
            ),
            _host_of(f),
            src,
        ).select(pl.lit(src, dtype=pl.Int32).alias("source"), "type_id", "gpu_key")
        keyed.append(m)
    lookup = pl.concat(keyed).join(gpus.select("gpu_key", "gpu"), on="gpu_key", how="inner")
    return metrics.drop("gpu").join(
        lookup.select("source", "type_id", "gpu"), on=["source", "type_id"], how="left"
    )


def _host_of(f: _FileTables) -> str | None:
    hosts = f.devices.get_column("host").drop_nulls() if f.devices.height else pl.Series([])
    return str(hosts[0]) if len(hosts) else None


def _calls_of_operations(files: list[_FileTables], offsets: pl.DataFrame) -> StoredTable | None:
    """The CUDA calls keyed like a GPU operation of every file, on the trace's timeline:
    a file's own (:mod:`nsysan.ingest.operation_calls`), or its CUDA calls where it has
    none (all of them hold every such row); None where no file has its own."""
    if not any(_OPERATION_CALLS in f.tables for f in files):
        return None
    parts = [f.tables.pop(_OPERATION_CALLS, None) for f in files]
    parts = [f.tables["cuda_api"] if p is None else p for f, p in zip(files, parts, strict=True)]
    # The rows the CUDA calls drop (inverted) are dropped alike; the calls' note says so.
    return stored_assembled(parts, offsets, model.CUDA_API)[0]


def _identity_notes(files: list[_FileTables]) -> list[str]:
    devices = pl.concat([f.devices for f in files], how="vertical_relaxed")
    if devices.is_empty():
        return []
    notes = []
    by_ordinal = devices.filter(pl.col("via") == "ordinal")
    if by_ordinal.height:
        notes.append(
            "GPU identity from the CUDA ordinal (the export has no per-process device map): "
            "correct unless the process ran with CUDA_VISIBLE_DEVICES remapping"
        )
    unmatched = devices.filter(pl.col("via") == "unmatched")
    if unmatched.height:
        notes.append(
            f"{unmatched.height} (process, CUDA device) pair(s) not found in TARGET_INFO_GPU: "
            "identified by process and ordinal only"
        )
    return notes


def kernel_launch_calls(cuda_api: HostTable) -> int:
    """CUDA API calls whose name contains ``Launch`` (kernel and graph launches)."""
    calls = cuda_api.lazy()
    names = values_matching(distinct(calls, "name"), "Launch")
    return int(calls.filter(is_one_of(pl.col("name"), names)).select(pl.len()).collect().item())


def _capabilities(
    tables: dict[str, HostTable], counted: dict[str, TableCensus]
) -> model.Capabilities:
    present = {
        t: tables[t].height > 0 or (t in counted and counted[t].rows > 0)
        for t in model.EVENT_TABLES
    }
    missing: list[str] = []
    if not present["kernels"] and not present["graphs"]:
        api = counted.get("cuda_api")
        launches = api.launch_calls if api else kernel_launch_calls(tables["cuda_api"])
        if launches:
            missing.append(
                f"CUDA API present ({launches} kernel launch calls) but no GPU activity "
                "records: kernels were launched but GPU activity was not traced"
            )
        elif not present["memcpy"] and not present["memset"]:
            missing.append("no GPU activity at all: a CPU-only trace")
        else:
            missing.append(MISSING_MESSAGES["kernels"])
    for t in ("cuda_api", "nvtx", "osrt", "sched", "gpu_metrics"):
        if not present[t]:
            missing.append(MISSING_MESSAGES[t])
    return model.Capabilities(present=present, missing=tuple(missing))
