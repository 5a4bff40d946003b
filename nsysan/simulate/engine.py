"""Host and GPU timelines of the processes that feed GPUs, and the rows they leave.

Each :class:`Rank` is one process driving one GPU from one feeding thread. Launches are
asynchronous, as in CUDA: the thread pays a few microseconds per launch and runs ahead;
a kernel starts when its launch has reached the GPU *and* the stream is free. So a GPU
gap opens exactly when the host falls behind (launching late) or has nothing to launch,
and a synchronizing call blocks the thread until the stream drains. Collectives start
on each GPU when that rank's launch arrives and end together once the last rank has
arrived, so early ranks wait inside the NCCL kernel.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from nsysan.simulate import schema
from nsysan.simulate.kernels import Kernel
from nsysan.simulate.trace import ETIMEDOUT, TraceBuilder

LAUNCH_API = "cudaLaunchKernel_v7000"
# NCCL 2.19+ launches its kernels through the extended launch API.
LAUNCH_EX_API = "cudaLaunchKernelExC_v11060"
MEMCPY_API = "cudaMemcpyAsync_v3020"
SYNC_API = "cudaStreamSynchronize_v3020"
GIL_WAIT_CALL = "pthread_cond_timedwait"
QUEUE_WAIT_CALL = "pthread_cond_wait"

# Timing of the CUDA runtime and driver, in ns (ranges are uniform draws).
LAUNCH_CALL_NS = (2_500, 6_500)
LAUNCH_EX_CALL_NS = (7_000, 14_000)
LAUNCH_LATENCY_NS = 4_500  # launch call start -> earliest kernel start on an idle stream
KERNEL_SPACING_NS = (900, 2_600)  # back-to-back kernels on one stream
PYTHON_OVERHEAD_NS = (5_000, 14_000)  # eager-mode Python between two launches
COLLECTIVE_END_SPREAD_NS = 2_500
MEMCPY_CALL_NS = (4_000, 9_000)
MEMCPY_SETUP_NS = 1_400
SYNC_RETURN_NS = (3_000, 9_000)  # stream drained -> synchronize call returns
SYNC_MIN_NS = 1_500
OS_CALL_SPACING_NS = (1_500, 6_000)
# CPython's switch interval: a thread waiting for the GIL sleeps in
# pthread_cond_timedwait for 5 ms at a time (take_gil), then asks the holder to drop it.
GIL_SLICE_NS = 5_000_000
GIL_CALLCHAIN = 1
GIL_FRAMES = (
    ("pthread_cond_timedwait", "libc.so.6"),
    ("take_gil", "libpython3.10.so.1.0"),
    ("PyEval_RestoreThread", "libpython3.10.so.1.0"),
    ("THPModule_synchronize", "libtorch_python.so"),
)


@dataclass
class Rank:
    """One process feeding one GPU: its clocks and identity."""

    index: int
    gpu: int  # TARGET_INFO_GPU.id, also the kernels' deviceId (no CUDA_VISIBLE_DEVICES)
    pid: int
    tid: int  # the feeding thread (the process's main thread)
    host: int  # where the feeding thread is, ns
    gpu_free: int  # when the GPU stream finishes its queued work, ns


class Engine:
    """Advances ranks' host and GPU clocks and records what happened."""

    def __init__(self, builder: TraceBuilder, rng: random.Random) -> None:
        self.b = builder
        self.rng = rng
        self._gil_chain = False
        # Each collective instance: (gpu, start, end) per participating rank.
        self.collectives: list[tuple[tuple[int, int, int], ...]] = []

    def _draw(self, bounds: tuple[int, int]) -> int:
        return self.rng.randint(*bounds)

    def launch(self, rank: Rank, kernel: Kernel, duration_ns: int) -> tuple[int, int]:
        """Launch ``kernel`` from the feeding thread; returns its GPU (start, end)."""
        call_end = rank.host + self._draw(LAUNCH_CALL_NS)
        corr = self.b.runtime(rank.pid, rank.tid, LAUNCH_API, rank.host, call_end)
        start = max(rank.host + LAUNCH_LATENCY_NS, rank.gpu_free + self._draw(KERNEL_SPACING_NS))
        end = start + max(duration_ns, 1_000)
        self.b.kernel(rank.pid, rank.gpu, kernel, start, end, corr)
        rank.gpu_free = end
        rank.host = call_end + self._draw(PYTHON_OVERHEAD_NS)
        return start, end

    def collective(self, ranks: Sequence[Rank], kernel: Kernel, transfer_ns: int) -> None:
        """One NCCL collective instance across ``ranks``, launched where each host is."""
        arrivals = []
        for rank in ranks:
            arrivals.append(
                max(rank.host + LAUNCH_LATENCY_NS, rank.gpu_free + self._draw(KERNEL_SPACING_NS))
            )
        done = max(arrivals) + transfer_ns
        instance = []
        for rank, start in zip(ranks, arrivals, strict=True):
            call_end = rank.host + self._draw(LAUNCH_EX_CALL_NS)
            corr = self.b.runtime(rank.pid, rank.tid, LAUNCH_EX_API, rank.host, call_end)
            end = done + self.rng.randint(0, COLLECTIVE_END_SPREAD_NS)
            self.b.kernel(rank.pid, rank.gpu, kernel, start, end, corr)
            instance.append((rank.gpu, start, end))
            rank.gpu_free = end
            rank.host = call_end + self._draw(PYTHON_OVERHEAD_NS)
        self.collectives.append(tuple(instance))

    def p2p(self, sender: Rank, receiver: Rank, kernel: Kernel, transfer_ns: int) -> None:
        """A send/recv pair; the receiver's host posts the recv just before the data leaves."""
        leaves = max(sender.host + LAUNCH_LATENCY_NS, sender.gpu_free + KERNEL_SPACING_NS[0])
        receiver.host = max(receiver.host, leaves - LAUNCH_LATENCY_NS)
        self.collective((sender, receiver), kernel, transfer_ns)

    def memcpy(self, rank: Rank, kind: int, nbytes: int, bytes_per_us: int) -> None:
        """An async copy on the rank's stream (pinned host memory)."""
        call_end = rank.host + self._draw(MEMCPY_CALL_NS)
        corr = self.b.runtime(rank.pid, rank.tid, MEMCPY_API, rank.host, call_end)
        start = max(rank.host + LAUNCH_LATENCY_NS, rank.gpu_free + self._draw(KERNEL_SPACING_NS))
        end = start + MEMCPY_SETUP_NS + nbytes * 1_000 // bytes_per_us
        self.b.memcpy(rank.pid, rank.gpu, kind, nbytes, start, end, corr)
        rank.gpu_free = end
        rank.host = call_end + self._draw(PYTHON_OVERHEAD_NS)

    def sync(self, rank: Rank) -> None:
        """cudaStreamSynchronize: the thread blocks until the stream has drained."""
        end = max(rank.host + SYNC_MIN_NS, rank.gpu_free + self._draw(SYNC_RETURN_NS))
        self.b.runtime(rank.pid, rank.tid, SYNC_API, rank.host, end)
        rank.host = end

    def host_range(self, rank: Rank, text: str, duration_ns: int) -> None:
        """CPU work on the feeding thread inside an NVTX push/pop range."""
        self.b.nvtx_range(rank.pid, rank.tid, text, rank.host, rank.host + duration_ns)
        rank.host += duration_ns

    def wait_gil(self, rank: Rank, until: int) -> None:
        """Block in CPython's take_gil until ``until``: 5 ms timed waits, the last one woken."""
        if not self._gil_chain:
            self.b.callchain(GIL_CALLCHAIN, GIL_FRAMES)
            self._gil_chain = True
        self._timed_waits(rank, until, GIL_WAIT_CALL, GIL_SLICE_NS, GIL_CALLCHAIN)

    def wait_queue(self, rank: Rank, until: int) -> None:
        """Block on an empty request queue (condition variable) until ``until``."""
        if until > rank.host:
            self.b.osrt(rank.pid, rank.tid, QUEUE_WAIT_CALL, rank.host, until)
            rank.host = until + self._draw(OS_CALL_SPACING_NS)

    def _timed_waits(self, rank: Rank, until: int, call: str, slice_ns: int, chain: int) -> None:
        t = rank.host
        while until - t > slice_ns:
            self.b.osrt(rank.pid, rank.tid, call, t, t + slice_ns, ETIMEDOUT, chain)
            t += slice_ns + self._draw(OS_CALL_SPACING_NS)
        if until > t:
            self.b.osrt(rank.pid, rank.tid, call, t, until, 0, chain)
            t = until
        rank.host = t + self._draw(OS_CALL_SPACING_NS)


def h2d(engine: Engine, rank: Rank, nbytes: int) -> None:
    """Copy a step's inputs to the GPU (PCIe 4.0, pinned)."""
    engine.memcpy(rank, schema.MEMCPY_HTOD, nbytes, PCIE_BYTES_PER_US)


def d2h(engine: Engine, rank: Rank, nbytes: int) -> None:
    """Copy a step's outputs back to the host."""
    engine.memcpy(rank, schema.MEMCPY_DTOH, nbytes, PCIE_BYTES_PER_US)


PCIE_BYTES_PER_US = 20_000  # ~20 GB/s effective, PCIe 4.0 x16 pinned
