"""The normalized trace model: one set of polars tables, whatever the export version.

Every ingest path (any nsys export version, one file or many) produces a :class:`Trace`
whose tables have exactly the columns and dtypes declared here. Analyses only ever
see these names; version differences are absorbed in ``nsysan.ingest``.

Conventions (see docs/model.md):

* Times are ``Int64`` nanoseconds named ``*_ns`` on the *trace timeline*. For one
  file that is the export's own session-relative time, unchanged (so numbers can be
  compared with ``nsys stats``). For several files, each file's times are shifted by
  ``its UTC session start - the earliest UTC session start``, so all ranks share one
  clock (clock skew between hosts is not corrected).
* ``source`` is the index of the input file (0-based, in the order files are ranked
  by UTC session start). ``pid``/``tid`` are OS ids decoded from globalPid/globalTid;
  a process is identified by ``(source, pid)``.
* ``gpu`` is the index of a *physical* GPU in :attr:`Trace.gpus` (host + UUID or PCI
  bus), never the per-process CUDA ordinal, which is kept as ``device_id``.
* Strings from StringIds are resolved to text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar

import polars as pl

from nsysan.stored import HostTable

Schema = dict[str, pl.DataType | type[pl.DataType]]
FrameT = TypeVar("FrameT", pl.DataFrame, pl.LazyFrame)

KERNELS: Schema = {
    "source": pl.Int32,
    "pid": pl.Int32,
    "gpu": pl.Int32,
    "device_id": pl.Int32,
    "context_id": pl.Int64,
    "stream_id": pl.Int64,
    "correlation_id": pl.Int64,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "short_name": pl.Categorical(),
    "name": pl.Categorical(),  # demangled name, as nsys stats reports it
    "grid_x": pl.Int32,
    "grid_y": pl.Int32,
    "grid_z": pl.Int32,
    "block_x": pl.Int32,
    "block_y": pl.Int32,
    "block_z": pl.Int32,
    # A green context (CUDA 12.4+ SM partition of a context); null without one, and then
    # a constant column that takes no memory.
    "green_context_id": pl.Int32,
}

MEMCPY: Schema = {
    "source": pl.Int32,
    "pid": pl.Int32,
    "gpu": pl.Int32,
    "device_id": pl.Int32,
    "context_id": pl.Int64,
    "stream_id": pl.Int64,
    "correlation_id": pl.Int64,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "bytes": pl.Int64,
    "copy_kind": pl.String,  # HtoD, DtoH, DtoD, PtoP, ... (ENUM_CUDA_MEMCPY_OPER labels)
}

MEMSET: Schema = {
    "source": pl.Int32,
    "pid": pl.Int32,
    "gpu": pl.Int32,
    "device_id": pl.Int32,
    "context_id": pl.Int64,
    "stream_id": pl.Int64,
    "correlation_id": pl.Int64,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "bytes": pl.Int64,
}

# CUDA graph executions (CUPTI_ACTIVITY_KIND_GRAPH_TRACE, ``--cuda-graph-trace=graph``):
# one row per replay of a graph, whose kernels are then absent from ``kernels``.
# ``correlation_id`` is that of the cudaGraphLaunch/cuGraphLaunch call.
GRAPHS: Schema = {
    "source": pl.Int32,
    "pid": pl.Int32,
    "gpu": pl.Int32,
    "device_id": pl.Int32,
    "context_id": pl.Int64,
    "green_context_id": pl.Int64,
    "stream_id": pl.Int64,
    "correlation_id": pl.Int64,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "graph_id": pl.Int64,
    "graph_exec_id": pl.Int64,
}

# A CUDA call and the GPU work it launched share these keys (CUPTI's correlation id is
# per process).
CALL_KEYS = ["source", "pid", "correlation_id"]

# CUDA runtime and driver API calls. ``name`` has the ``_v<N>`` suffix stripped.
CUDA_API: Schema = {
    "source": pl.Int32,
    "pid": pl.Int32,
    "tid": pl.Int32,
    "correlation_id": pl.Int64,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "name": pl.Categorical(),
}

# NVTX ranges and marks (``end_ns`` is null for marks); domain definitions and other
# bookkeeping events are left out at ingest.
NVTX: Schema = {
    "source": pl.Int32,
    "pid": pl.Int32,
    "tid": pl.Int32,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "text": pl.Categorical(),
    "domain": pl.Categorical(),
}

OSRT: Schema = {
    "source": pl.Int32,
    "pid": pl.Int32,
    "tid": pl.Int32,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "name": pl.Categorical(),
    "nesting_level": pl.Int32,
}

# Thread scheduling (SCHED_EVENTS): one row per switch in or out of a CPU.
SCHED: Schema = {
    "source": pl.Int32,
    "pid": pl.Int32,
    "tid": pl.Int32,
    "time_ns": pl.Int64,
    "cpu": pl.Int32,
    "is_sched_in": pl.Boolean,
}

# Kernel launches aggregated per (process, device, kernel name, grid, block), in SQL
# (nsysan.ingest.resources): ``launches`` and their ``total_ns`` of kernel time.
LAUNCH_CONFIGS: Schema = {
    "source": pl.Int32,
    "pid": pl.Int32,
    "gpu": pl.Int32,
    "device_id": pl.Int32,
    "short_name": pl.String,
    "grid_x": pl.Int32,
    "grid_y": pl.Int32,
    "grid_z": pl.Int32,
    "block_x": pl.Int32,
    "block_y": pl.Int32,
    "block_z": pl.Int32,
    "launches": pl.Int64,
    "total_ns": pl.Int64,
}

# Device-memory allocations and frees (CUDA_GPU_MEMORY_USAGE_EVENTS, captured with
# --cuda-memory-usage=true): ``bytes_delta`` is + for an allocation, − for a free.
MEMORY_USAGE: Schema = {
    "source": pl.Int32,
    "pid": pl.Int32,
    "gpu": pl.Int32,
    "device_id": pl.Int32,
    "time_ns": pl.Int64,
    "bytes_delta": pl.Int64,
}

# The profiler's own overhead ranges (PROFILER_OVERHEAD), e.g. "CUDA profiling data
# flush"; NVIDIA's gpu_gaps rule counts them as busy time of the process's GPUs.
OVERHEAD: Schema = {
    "source": pl.Int32,
    "pid": pl.Int32,
    "tid": pl.Int32,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "name": pl.String,
}

THREADS: Schema = {
    "source": pl.Int32,
    "pid": pl.Int32,
    "tid": pl.Int32,
    "name": pl.String,
}

PROCESSES: Schema = {
    "source": pl.Int32,
    "pid": pl.Int32,
    "name": pl.String,
}

# GPU metrics samples (GPU_METRICS joined to TARGET_INFO_GPU_METRICS by name, or the
# older GENERIC_EVENTS form). ``gpu`` is null when the sampled GPU could not be
# mapped to a physical GPU of the trace; ``metric`` is NVIDIA's name
# ("SM Active", "GPC Clock Frequency", ...), ``value`` as stored: percent of peak
# for throughput/activity metrics; clocks as the export stores them (Hz in the exports we
# have; nsysan.analyze.contention normalises clocks to MHz).
GPU_METRICS: Schema = {
    "source": pl.Int32,
    "gpu": pl.Int32,
    "type_id": pl.Int64,
    "time_ns": pl.Int64,
    "metric": pl.String,
    "value": pl.Float64,
}

# One row per physical GPU that ran work (or, when none did, none). ``gpu_key`` is
# the identity: "<host>/<uuid>" when the export has a UUID, else "<host>/<pci bus>",
# else "<host>/source<N>/device<D>" (named as unknown identity in ``identity``).
GPUS: Schema = {
    "gpu": pl.Int32,
    "gpu_key": pl.String,
    "identity": pl.String,  # "uuid", "pci_bus" or "ordinal" (how gpu_key was built)
    "host": pl.String,
    "name": pl.String,
    "uuid": pl.String,
    "pci_bus": pl.String,
    "sm_count": pl.Int32,
    "memory_bandwidth_bps": pl.Int64,
    "clock_rate_hz": pl.Int64,
    "total_memory_bytes": pl.Int64,
    "compute_capability": pl.String,
}

# One row per input file.
SOURCES: Schema = {
    "source": pl.Int32,
    "path": pl.String,
    "host": pl.String,
    "export_version": pl.String,  # e.g. "2024.5.1.113"; "pre-2021" when no metadata table
    "schema_version": pl.String,
    "capture_version_hint": pl.String,  # from TargetInstallDir, when present
    "utc_start_ns": pl.Int64,  # session start, UTC epoch ns (null if the export lacks it)
    "offset_ns": pl.Int64,  # added to this file's times to put them on the trace timeline
    "capture_start_ns": pl.Int64,  # ANALYSIS_DETAILS start/stop, file time base
    "capture_end_ns": pl.Int64,
    "cpu_cores": pl.Int32,  # TARGET_INFO_SYSTEM_ENV CpuCores: the host's logical CPUs
}

TABLE_SCHEMAS: dict[str, Schema] = {
    "kernels": KERNELS,
    "memcpy": MEMCPY,
    "memset": MEMSET,
    "graphs": GRAPHS,
    "cuda_api": CUDA_API,
    "nvtx": NVTX,
    "osrt": OSRT,
    "sched": SCHED,
    "overhead": OVERHEAD,
    "threads": THREADS,
    "processes": PROCESSES,
    "gpu_metrics": GPU_METRICS,
    "launch_configs": LAUNCH_CONFIGS,
    "memory_usage": MEMORY_USAGE,
    "gpus": GPUS,
    "sources": SOURCES,
}

# Event tables whose absence limits what can be analysed; see Capabilities.
EVENT_TABLES = (
    "kernels",
    "graphs",
    "memcpy",
    "memset",
    "cuda_api",
    "nvtx",
    "osrt",
    "sched",
    "overhead",
    "gpu_metrics",
    "memory_usage",
)


def empty_frame(schema: Schema) -> pl.DataFrame:
    """An empty table with the given schema."""
    return pl.DataFrame(schema=schema)


def conform(df: FrameT, schema: Schema) -> FrameT:
    """Select and cast ``df`` to exactly ``schema``; missing columns become nulls."""
    columns = df.collect_schema().names()
    exprs = []
    for name, dtype in schema.items():
        if name in columns:
            exprs.append(pl.col(name).cast(dtype))
        else:
            exprs.append(pl.lit(None, dtype=dtype).alias(name))
    return df.select(exprs)


def check_schema(df: pl.DataFrame, schema: Schema) -> None:
    """Raise ``TypeError`` if ``df`` does not have exactly ``schema`` (a model invariant)."""
    expected = pl.Schema(schema)
    if df.schema != expected:
        raise TypeError(f"table schema {dict(df.schema)} does not match model {dict(expected)}")


@dataclass(frozen=True)
class Capabilities:
    """What the trace holds, by event table: rows present, table absent or empty.

    ``present[t]`` is True when table ``t`` has at least one row in at least one file.
    ``missing`` names, in words a user understands, what cannot be analysed and why.
    """

    present: dict[str, bool]
    missing: tuple[str, ...]

    def has(self, table: str) -> bool:
        return self.present.get(table, False)


@dataclass(frozen=True)
class Trace:
    """All tables of one analysis (one file, or several ranks on one timeline)."""

    kernels: pl.DataFrame
    memcpy: pl.DataFrame
    memset: pl.DataFrame
    # Host event tables: a big trace's may be left on disk (nsysan.stored).
    cuda_api: HostTable
    nvtx: HostTable
    osrt: HostTable
    sched: HostTable
    overhead: pl.DataFrame
    threads: pl.DataFrame
    processes: pl.DataFrame
    gpu_metrics: pl.DataFrame
    gpus: pl.DataFrame
    sources: pl.DataFrame
    capabilities: Capabilities
    notes: tuple[str, ...] = field(default=())
    graphs: pl.DataFrame = field(default_factory=lambda: empty_frame(GRAPHS))
    launch_configs: pl.DataFrame = field(default_factory=lambda: empty_frame(LAUNCH_CONFIGS))
    memory_usage: pl.DataFrame = field(default_factory=lambda: empty_frame(MEMORY_USAGE))
    # The CUDA API rows that share their (source, pid, correlation id) with a GPU
    # operation (kernel, graph execution, memcpy or memset): a third of a big trace's
    # calls, which the table cache keeps apart (nsysan.ingest.operation_calls).
    # Any subset of ``cuda_api`` that holds those rows will do; None: ``cuda_api``.
    operation_calls: HostTable | None = None

    def table(self, name: str) -> HostTable:
        return getattr(self, name)  # type: ignore[no-any-return]

    def calls_of_operations(self) -> HostTable:
        """The CUDA API rows to look a GPU operation's launch call up in: every row with
        the key of an operation (:attr:`operation_calls`, or the whole ``cuda_api``)."""
        return self.cuda_api if self.operation_calls is None else self.operation_calls

    @property
    def gpu_count(self) -> int:
        return self.gpus.height

    @property
    def has_gpu_work(self) -> bool:
        return (
            self.kernels.height > 0
            or self.graphs.height > 0
            or self.memcpy.height > 0
            or self.memset.height > 0
        )
