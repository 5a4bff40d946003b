"""In-memory rows of one synthetic export, table by table, in the modelled schema's column order.

:class:`TraceBuilder` interns strings into ``StringIds``, encodes globalPid/globalTid
(``(vm << 48) | (pid << 24) | tid``), numbers correlation and grid ids per process, and
keeps each GPU's kernels for the ground truth. It knows nothing about timing; see
:mod:`nsysan.simulate.engine`.
"""

from __future__ import annotations

from dataclasses import dataclass

from nsysan.simulate import schema
from nsysan.simulate.kernels import Kernel

Row = tuple[object, ...]

THREAD_PRIORITY = 20
CONTEXT_ID = 1
# The legacy default stream of context 1, where PyTorch launches unless told otherwise.
DEFAULT_STREAM = 7
ETIMEDOUT = 110


def global_pid(pid: int) -> int:
    return (schema.VM_ID << 48) | (pid << 24)


def global_tid(pid: int, tid: int) -> int:
    return global_pid(pid) | tid


@dataclass(frozen=True)
class KernelRun:
    """One executed kernel, as the ground truth sees it."""

    gpu: int
    start: int
    end: int
    kernel: Kernel
    pid: int


@dataclass(frozen=True)
class CopyRun:
    """One executed memory copy."""

    gpu: int
    start: int
    end: int


@dataclass(frozen=True)
class HostSpan:
    """A host-side interval of a thread: an NVTX range or a blocking OS call."""

    pid: int
    tid: int
    start: int
    end: int
    kind: str  # "nvtx" or "osrt"
    name: str


class TraceBuilder:
    """Accumulates the rows of every table of one export."""

    def __init__(self) -> None:
        self.rows: dict[str, list[Row]] = {table: [] for table in schema.DDL}
        self._strings: dict[str, int] = {}
        self._correlation: dict[int, int] = {}
        self._grid: dict[int, int] = {}
        self.kernel_runs: list[KernelRun] = []
        self.copy_runs: list[CopyRun] = []
        self.last_metric_ns = 0
        self.host_spans: list[HostSpan] = []
        # TARGET_INFO_SYSTEM_ENV CpuCores, when a scenario models a smaller host.
        self.cpu_cores: int | None = None

    def string_id(self, value: str) -> int:
        """The StringIds id of ``value``, adding it on first use."""
        sid = self._strings.get(value)
        if sid is None:
            sid = len(self._strings) + 1
            self._strings[value] = sid
            self.rows["StringIds"].append((sid, value))
        return sid

    def next_correlation(self, pid: int) -> int:
        value = self._correlation.get(pid, 0) + 1
        self._correlation[pid] = value
        return value

    def add_process(self, pid: int, name: str) -> None:
        self.rows["PROCESSES"].append((global_pid(pid), pid, name))

    def add_thread(self, pid: int, tid: int, name: str) -> int:
        gtid = global_tid(pid, tid)
        self.rows["ThreadNames"].append((self.string_id(name), THREAD_PRIORITY, gtid))
        return gtid

    def runtime(self, pid: int, tid: int, name: str, start: int, end: int) -> int:
        """A CUDA runtime API call; returns its correlation id."""
        corr = self.next_correlation(pid)
        self.rows["CUPTI_ACTIVITY_KIND_RUNTIME"].append(
            (start, end, schema.CLASS_CUDA_RUNTIME, global_tid(pid, tid), corr,
             self.string_id(name), 0, None)
        )  # fmt: skip
        return corr

    def kernel(
        self, pid: int, gpu: int, kernel: Kernel, start: int, end: int, corr: int,
        stream: int = DEFAULT_STREAM, graph_node: int | None = None,
    ) -> None:  # fmt: skip
        grid_id = self._grid.get(pid, 0) + 1
        self._grid[pid] = grid_id
        self.rows["CUPTI_ACTIVITY_KIND_KERNEL"].append(
            (start, end, gpu, CONTEXT_ID, None, stream, corr, global_pid(pid),
             self.string_id(kernel.demangled), self.string_id(kernel.short),
             self.string_id(kernel.mangled), schema.LAUNCH_REGULAR, schema.CACHE_PREFER_NONE,
             kernel.registers, *kernel.grid, *kernel.block, kernel.static_smem,
             kernel.dynamic_smem, 0, 0, grid_id,
             kernel.static_smem + kernel.dynamic_smem, graph_node, schema.SHMEM_LIMIT_DEFAULT)
        )  # fmt: skip
        self.kernel_runs.append(KernelRun(gpu, start, end, kernel, pid))

    def graph_execution(
        self, pid: int, gpu: int, graph_id: int, exec_id: int, start: int, end: int, corr: int,
        label: Kernel, stream: int = DEFAULT_STREAM,
    ) -> None:  # fmt: skip
        """One graph-level replay (``--cuda-graph-trace=graph``); ``label`` names it in the
        ground truth, where it counts as one unit of GPU work."""
        self.rows["CUPTI_ACTIVITY_KIND_GRAPH_TRACE"].append(
            (start, end, gpu, CONTEXT_ID, None, stream, corr, global_pid(pid), graph_id, exec_id)
        )
        self.kernel_runs.append(KernelRun(gpu, start, end, label, pid))

    def memcpy(
        self, pid: int, gpu: int, kind: int, nbytes: int, start: int, end: int, corr: int
    ) -> None:
        src, dst = (
            (schema.MEM_PINNED, schema.MEM_DEVICE)
            if kind == schema.MEMCPY_HTOD
            else (schema.MEM_DEVICE, schema.MEM_PINNED)
        )
        self.rows["CUPTI_ACTIVITY_KIND_MEMCPY"].append(
            (start, end, gpu, CONTEXT_ID, None, DEFAULT_STREAM, corr, global_pid(pid), nbytes,
             kind, None, src, dst, None, None, None, None, None, None, None)
        )  # fmt: skip
        self.copy_runs.append(CopyRun(gpu, start, end))

    def nvtx_range(self, pid: int, tid: int, text: str, start: int, end: int) -> None:
        """A push/pop range (thread-local, text inline)."""
        self.rows["NVTX_EVENTS"].append(
            (start, end, schema.NVTX_PUSH_POP, None, None, None, text, global_tid(pid, tid),
             None, None, 0, None, None, None, None, None, None, None, None)
        )  # fmt: skip
        self.host_spans.append(HostSpan(pid, tid, start, end, "nvtx", text))

    def nvtx_start_end(
        self, pid: int, tid: int, text: str, start: int, end: int, range_id: int
    ) -> None:
        """A start/end range (may outlive the call that opened it), e.g. one request."""
        gtid = global_tid(pid, tid)
        self.rows["NVTX_EVENTS"].append(
            (start, end, schema.NVTX_START_END, range_id, None, None, text, gtid, gtid,
             None, 0, None, None, None, None, None, None, None, None)
        )  # fmt: skip

    def osrt(
        self, pid: int, tid: int, name: str, start: int, end: int, ret: int = 0,
        callchain: int = 0,
    ) -> None:  # fmt: skip
        """A traced OS runtime call; ``callchain`` 0 means no backtrace."""
        self.rows["OSRT_API"].append(
            (start, end, schema.CLASS_OSRT, global_tid(pid, tid), self.string_id(name), ret, 0,
             callchain)
        )  # fmt: skip
        self.host_spans.append(HostSpan(pid, tid, start, end, "osrt", name))

    def device_memory(self, pid: int, gpu: int, t: int, address: int, nbytes: int, op: int) -> None:
        """A cudaMalloc (``op`` 0) or cudaFree (1) of device memory (memKind Device)."""
        self.rows["CUDA_GPU_MEMORY_USAGE_EVENTS"].append(
            (t, global_pid(pid), gpu, CONTEXT_ID, address, 0x7F00_0000, nbytes, schema.MEM_DEVICE,
             op, None, None)
        )  # fmt: skip

    def on_cpu(self, pid: int, tid: int, cpu: int, start: int, end: int) -> None:
        """A thread on ``cpu`` from ``start`` to ``end``: a switch-in and a switch-out row."""
        gtid = global_tid(pid, tid)
        self.rows["SCHED_EVENTS"].append((start, cpu, 1, gtid))
        self.rows["SCHED_EVENTS"].append((end, cpu, 0, gtid))

    def callchain(self, chain_id: int, frames: tuple[tuple[str, str], ...]) -> None:
        """One OSRT backtrace: (symbol, module) pairs, innermost first."""
        for depth, (symbol, module) in enumerate(frames):
            self.rows["OSRT_CALLCHAINS"].append(
                (chain_id, self.string_id(symbol), self.string_id(module), 0, 0, 0, 0,
                 0x7F3A_0000_0000 + chain_id * 0x10000 + depth * 0x40, None, depth)
            )  # fmt: skip
