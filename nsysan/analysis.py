"""Run every analysis on a trace, in dependency order, into one :class:`Analysis`.

The analyze modules never import each other; this module hands one analysis's
tables to the next (gaps to stagger and host attribution, busy to NCCL, GPU metrics
to the dashboard view). Each analysis needs certain tables; when they are missing,
its result is ``None`` and ``unavailable[name]`` says why, in words the report shows.

Per-GPU analyses always use the per-physical-GPU busy union of kernels and CUDA graph
executions (the ``kernels`` busy mode); gap time with a memcpy or memset running is its
own host-attribution cause. With ``Settings.busy_mode == "nvidia"``, ``gaps`` and
``busy`` are additionally computed with Nsight Systems' own gpu_gaps definition (per
process and CUDA device, kernel table only) in ``nvidia_busy``/``nvidia_gaps``, so they
can be compared with ``nsys analyze``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import polars as pl

from nsysan.analyze.balance import ImbalanceResult, measure_imbalance
from nsysan.analyze.bound import BoundResult, classify_kernels, measure_bound
from nsysan.analyze.busy import BusyResult, measure_busy
from nsysan.analyze.contention import ContentionResult, measure_contention
from nsysan.analyze.cpu import CpuResult, measure_cpu
from nsysan.analyze.dashboard import DashboardResult, measure_dashboard
from nsysan.analyze.dominant import DominantResult, measure_dominant
from nsysan.analyze.gaps import GapsResult, measure_gaps
from nsysan.analyze.host import HostResult, attribute_gaps
from nsysan.analyze.launch import LaunchResult, measure_launch
from nsysan.analyze.load import LoadResult, measure_load
from nsysan.analyze.memory import MemoryResult, measure_memory
from nsysan.analyze.nccl import NcclResult, measure_nccl
from nsysan.analyze.stagger import StaggerResult, measure_stagger
from nsysan.analyze.steps import StepsResult, measure_steps
from nsysan.analyze.transfers import TransferResult, measure_transfers, transfer_intervals
from nsysan.ingest.graphs import with_graph_work
from nsysan.model import Trace
from nsysan.settings import Settings
from nsysan.stored import collected

R = TypeVar("R")

NO_GPU_WORK = "the trace has no GPU kernels"
NO_STEPS = (
    "no steps: no NVTX range repeats around each step and no GPU runs a repeating kernel "
    "sequence; wrap each step in an NVTX range (e.g. 'decode_step') for step latency"
)
NO_MEMORY = (
    "no CUDA memory usage events: capture with --cuda-memory-usage=true to see device "
    "memory in use per GPU (KV-cache pressure)"
)
NO_SCHED = (
    "no thread scheduling events: capture with --cpuctxsw=process-tree (the default with "
    "--sample=cpu) to tell saturated host CPUs from blocked feeding threads"
)
# Analyses run at once after busy time and gaps (see analyze()); more threads than cores
# only overlap their memory peaks (on 2 cores, 2 threads were 5-10% faster than 4 at 5M
# kernels, benchmarks/README.md).
ANALYSIS_THREADS = max(1, min(4, os.cpu_count() or 1))
# Per-event tables that only the full JSON document shows (neither the report nor the
# diagnosis reads them): without detail_tables they are emptied as soon as their
# analysis ends, not held while host attribution runs (at 5M kernels, ~0.2 GB).
_UNREAD_EVENT_TABLES = {"nccl": ("instances", "instance_kernels")}


@dataclass(frozen=True)
class Analysis:
    """All results of one run. A ``None`` result is named in ``unavailable``."""

    trace: Trace
    settings: Settings
    busy: BusyResult | None
    gaps: GapsResult | None
    stagger: StaggerResult | None
    imbalance: ImbalanceResult | None
    nccl: NcclResult | None
    host: HostResult | None
    dashboard: DashboardResult | None
    contention: ContentionResult | None
    bound: BoundResult | None
    nvidia_busy: BusyResult | None = None
    nvidia_gaps: GapsResult | None = None
    ncu_path: Path | None = None
    unavailable: dict[str, str] = field(default_factory=dict)
    # The dominant gap, start-up and steady state; stagger over steady state when a
    # start-up was detected (see _dominant, _steady_stagger).
    dominant: DominantResult | None = None
    steady_stagger: StaggerResult | None = None
    # Memcpys and memsets per GPU (None without any on a GPU with a window).
    transfers: TransferResult | None = None
    # Launch overhead and configuration (docs/metrics/launch.md).
    launch: LaunchResult | None = None
    # Host CPUs during gaps: saturated or blocked (docs/metrics/cpu.md).
    cpu: CpuResult | None = None
    # Device memory in use per GPU (docs/metrics/memory.md).
    memory: MemoryResult | None = None
    # Step and request latency, throughput (docs/metrics/steps.md).
    steps: StepsResult | None = None
    # Load over time: bursts, starvation (docs/metrics/load.md).
    load: LoadResult | None = None
    # Per GPU, the host attribution's gap time in the steady state, per cause
    # (HostResult.steady): the diagnosis reads its shares.
    steady_causes: pl.DataFrame | None = None

    @property
    def results(self) -> dict[str, object]:
        """The analysis results by name (``None`` for unavailable ones)."""
        skip = {
            "trace",
            "settings",
            "unavailable",
            "ncu_path",
            "dominant",
            "steady_stagger",
            "steady_causes",
        }
        return {
            f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in skip
        }


def _device_views(
    trace: Trace, busy: BusyResult, settings: Settings
) -> tuple[ContentionResult, DashboardResult]:
    """Contention signals from GPU metrics, then the dashboard view that reads them."""
    contention = measure_contention(
        trace.gpu_metrics,
        busy.windows,
        settings,
        busy=busy.intervals,
        gpus=trace.gpus,
        capabilities=trace.capabilities,
    )
    dashboard = measure_dashboard(
        trace.kernels,
        busy.windows,
        settings,
        activity=contention.summary if contention.available else None,
    )
    return contention, dashboard


def analyze(
    trace: Trace,
    settings: Settings | None = None,
    ncu: pl.DataFrame | None = None,
    ncu_path: Path | None = None,
    detail_tables: bool = True,
) -> Analysis:
    """Every analysis of ``trace``; ``ncu`` is a :func:`nsysan.ingest.ncu.read_ncu_csv` table.

    ``detail_tables=False`` leaves out (empties) the per-event tables that only the full
    JSON document shows and nothing else reads: the stagger's per-gap table, a row per
    gap; the imbalance's bubbles, a row per GPU and iteration; the NCCL instances and
    their kernels; the steps; and the host attribution's per-gap table, once the CPU
    and load analyses have read it (hundreds of MB on millions of kernels). Every other
    result is the same.
    """
    settings = settings or Settings()
    unavailable: dict[str, str] = {}
    # CUDA graph executions are GPU work (nsysan.ingest.graphs); NVIDIA's own rules,
    # reproduced by the nvidia busy mode, read the kernel table alone.
    kernels_only, trace = trace, with_graph_work(trace)
    if trace.kernels.is_empty():
        reason = trace.capabilities.missing[0] if trace.capabilities.missing else NO_GPU_WORK
        for name in (
            "busy",
            "gaps",
            "stagger",
            "imbalance",
            "nccl",
            "host",
            "dashboard",
            "contention",
            "bound",
            "transfers",
            "launch",
            "cpu",
            "memory",
            "steps",
            "load",
        ):
            unavailable[name] = reason
        return Analysis(
            trace=trace,
            settings=settings,
            busy=None,
            gaps=None,
            stagger=None,
            imbalance=None,
            nccl=None,
            host=None,
            dashboard=None,
            contention=None,
            bound=None,
            ncu_path=ncu_path,
            unavailable=unavailable,
        )

    kernel_settings = dataclasses.replace(settings, busy_mode="kernels")
    busy = measure_busy(trace, kernel_settings)
    gaps = measure_gaps(busy.intervals, busy.summary, busy.keys)
    windows = busy.windows

    nvidia_busy = nvidia_gaps = None
    if settings.busy_mode == "nvidia":
        nvidia_busy = measure_busy(kernels_only, settings)
        nvidia_gaps = measure_gaps(nvidia_busy.intervals, nvidia_busy.summary, nvidia_busy.keys)

    # The analyses below read the same inputs and never each other's results (but the
    # dashboard, which reads the contention's activity): they run side by side. Polars
    # and numpy release the GIL, so on several cores they overlap.
    with ThreadPoolExecutor(max_workers=ANALYSIS_THREADS) as pool:
        # First in the queue: host attribution waits for it once its groups are done.
        dominant_job = pool.submit(_dominant, gaps, windows, settings)
        stagger_job = (
            pool.submit(measure_stagger, gaps.gaps, windows, per_gap_table=detail_tables)
            if windows.height >= 2
            else None
        )
        # Gap time with a memcpy/memset running is its own cause ("GPU busy with a transfer").
        copies = transfer_intervals(trace)
        host_job = pool.submit(
            attribute_gaps,
            trace,
            gaps.gaps,
            settings,
            keys=gaps.keys,
            transfers=copies,
            per_gap_detail=detail_tables,
            pool=pool,
            steady_starts=lambda: dominant_job.result().per_gpu,
        )
        transfers_job = pool.submit(measure_transfers, trace, windows, busy.intervals)
        imbalance_job = pool.submit(
            measure_imbalance,
            trace,
            busy.intervals,
            windows,
            settings,
            per_iteration_table=detail_tables,
        )
        nccl_job = pool.submit(
            _measured,
            "nccl",
            detail_tables,
            measure_nccl,
            trace.kernels,
            busy.intervals,
            windows,
            detail_tables,  # ordered_kernels: only the full detail shows them
        )
        views_job = pool.submit(_device_views, trace, busy, settings)
        launch_job = pool.submit(
            measure_launch, trace.kernels, gaps.gaps, windows, trace.launch_configs
        )
        stagger = stagger_job.result() if stagger_job else None
        imbalance, launch = imbalance_job.result(), launch_job.result()
        # Host attribution takes longest: what needs neither it nor the jobs still
        # running goes on beside it.
        dominant = dominant_job.result()
        steady_job = pool.submit(_steady_stagger, gaps, windows, dominant)
        steps_job = pool.submit(
            measure_steps,
            trace.nvtx,
            _gpu_processes(trace),
            windows,
            launch.per_gpu if launch is not None else None,
            imbalance.iterations if imbalance is not None else None,
            imbalance.iteration_source if imbalance is not None else None,
            imbalance.iteration_label if imbalance is not None else None,
            detail_tables,  # step_table: only the full detail shows the steps
        )
        memory_job = (
            pool.submit(measure_memory, trace.memory_usage, trace.gpus, windows, gaps.gaps)
            if trace.memory_usage.height
            else None
        )
        nccl = nccl_job.result()
        contention, dashboard = views_job.result()
        transfers: TransferResult | None = transfers_job.result()
        steady_stagger = steady_job.result()
        steps = steps_job.result()
        memory: MemoryResult | None = memory_job.result() if memory_job else None
        host = host_job.result()
        del host_job  # it would hold the per-gap table that is emptied below
    if transfers is not None and not transfers.available:
        transfers = None
        unavailable["transfers"] = "no memory copies or memsets on the GPUs"
    if stagger is None:
        unavailable["stagger"] = "one GPU ran work: stagger compares the gaps of two or more GPUs"
    if not contention.available:
        unavailable["contention"] = contention.reason or "no GPU metrics"
    steady_causes = host.steady if host is not None else None
    bound: BoundResult | None = None
    if ncu is not None:
        bound = measure_bound(trace.kernels, classify_kernels(ncu))
    else:
        unavailable["bound"] = (
            "no Nsight Compute data: give --ncu kernels.csv for the memory- vs compute-bound view"
        )
    cpu: CpuResult | None = None
    if trace.sched.height:
        cpu = measure_cpu(
            collected(trace.sched),
            trace.sources,
            _gpu_sources(trace),
            windows,
            gaps.gaps,
            host.gaps if host is not None else None,
        )
    else:
        unavailable["cpu"] = NO_SCHED
    if not steps.per_gpu["steps"].sum():
        unavailable["steps"] = NO_STEPS
    load = measure_load(
        busy.intervals,
        windows,
        trace.kernels,
        steps.requests,
        host.gaps if host is not None else None,
    )
    if memory is None:
        unavailable["memory"] = NO_MEMORY
    if host is not None and not detail_tables:
        # Read above (CPU, load, steady-state causes); the summary omits it.
        host = dataclasses.replace(host, gaps=host.gaps.clear())
    return Analysis(
        trace=trace,
        settings=settings,
        dominant=dominant,
        steady_stagger=steady_stagger,
        busy=busy,
        gaps=gaps,
        stagger=stagger,
        imbalance=imbalance,
        nccl=nccl,
        host=host,
        dashboard=dashboard,
        contention=contention,
        bound=bound,
        nvidia_busy=nvidia_busy,
        nvidia_gaps=nvidia_gaps,
        ncu_path=ncu_path,
        unavailable=unavailable,
        transfers=transfers,
        launch=launch,
        cpu=cpu,
        memory=memory,
        steps=steps,
        load=load,
        steady_causes=steady_causes,
    )


def _measured(name: str, detail_tables: bool, measure: Callable[..., R], *args: object) -> R:
    """``measure(*args)``, without its :data:`_UNREAD_EVENT_TABLES` unless ``detail_tables``."""
    result = measure(*args)
    if detail_tables or result is None:
        return result
    unread = _UNREAD_EVENT_TABLES[name]
    return dataclasses.replace(result, **{f: getattr(result, f).clear() for f in unread})  # type: ignore[type-var]


def _gpu_processes(trace: Trace) -> pl.DataFrame:
    """The processes that ran kernels on each GPU: ``gpu, source, pid``."""
    table = trace.launch_configs if trace.launch_configs.height else trace.kernels
    return table.select("gpu", "source", "pid").drop_nulls().unique()


def _gpu_sources(trace: Trace) -> pl.DataFrame:
    """Which file's processes ran kernels on each GPU (from the small launch aggregate)."""
    table = trace.launch_configs if trace.launch_configs.height else trace.kernels
    return table.select("gpu", "source").drop_nulls().unique()


def _dominant(gaps: GapsResult, windows: pl.DataFrame, settings: Settings) -> DominantResult:
    """The dominant gap per GPU, its start-up and steady state.

    Start-up detection is off when the user chose where the windows start
    (``--start``, ``--skip-warmup``, an NVTX range).
    """
    w = settings.window
    detect = w.skip_warmup_ns == 0 and w.start_ns is None and w.kind in ("per_gpu", "common")
    return measure_dominant(gaps.gaps, gaps.summary, windows, detect=detect)


def _steady_stagger(
    gaps: GapsResult, windows: pl.DataFrame, dominant: DominantResult
) -> StaggerResult | None:
    """Stagger over steady state, when a start-up was found."""
    if not dominant.any_warmup or windows.height < 2:
        return None
    steady = windows.join(
        dominant.per_gpu.select(pl.col("gpu").cast(windows["gpu"].dtype), "steady_start_ns"),
        on="gpu",
    ).select("gpu", pl.col("steady_start_ns").alias("window_start_ns"), "window_end_ns")
    # A filter on each gap's own window start, not a join: no copy of every gap.
    steady_start = pl.col("gpu").replace_strict(
        steady["gpu"], steady["window_start_ns"], default=None
    )
    clipped = gaps.gaps.select("gpu", "start_ns", "end_ns").filter(
        pl.col("start_ns") >= steady_start
    )
    return measure_stagger(clipped, steady)
