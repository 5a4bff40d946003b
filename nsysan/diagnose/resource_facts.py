"""Facts about launches, host CPUs and device memory, for the rules of issue 11.

Kept beside :mod:`nsysan.diagnose.facts` so that module stays about gaps, balance and
communication; :class:`ResourceFacts` is one field of ``Facts``. ``None`` is "not
measured", never zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from nsysan.analysis import Analysis
from nsysan.diagnose.load_facts import BurstFact, StarvedFact, TailFact, load_facts


@dataclass(frozen=True)
class LaunchFacts:
    gpu: int
    kernels: int
    launch_rate: float | None  # kernels per second of window
    kernel_p50_ns: int | None
    small_kernel_share: float | None
    short_gap_share: float | None  # window share in gaps < SHORT_GAP_NS
    launch_bound: bool


@dataclass(frozen=True)
class ConfigFact:
    """One (kernel name, grid, block) of a GPU's top kernels with a notable shape."""

    gpu: int
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    launches: int
    time_share: float  # of the GPU's kernel time
    one_thread_blocks: bool
    sub_warp_blocks: bool
    single_block: bool


@dataclass(frozen=True)
class CpuHostFacts:
    """One host's CPU verdict during GPU gaps (nsysan.analyze.cpu)."""

    host: str
    gpus: tuple[int, ...]
    cores: int | None
    gap_share: float  # the union of its GPUs' gaps / its window
    busy_cores_gap_mean: float | None
    saturated_gap_share: float | None
    waiting_share: float | None
    descheduled_share: float | None
    running_share: float | None
    verdict: str
    osrt_traced: bool  # the trace has OS runtime calls (blocking calls are visible)


@dataclass(frozen=True)
class MemoryFacts:
    """One GPU's device memory in use (nsysan.analyze.memory)."""

    gpu: int
    capacity_bytes: int | None
    peak_bytes: int
    peak_ns: int
    peak_share: float | None
    near_full_share: float | None  # window share with in use >= 90% of capacity
    near_full_gap_share: float | None  # gap time in gaps starting near full


@dataclass(frozen=True)
class ResourceFacts:
    launch: tuple[LaunchFacts, ...] = ()
    configs: tuple[ConfigFact, ...] = ()  # only configurations with a flag set
    sm_count: dict[int, int] | None = None
    cpu: tuple[CpuHostFacts, ...] = ()
    memory: tuple[MemoryFacts, ...] = ()
    bursts: tuple[BurstFact, ...] = ()
    starved: tuple[StarvedFact, ...] = ()
    tails: tuple[TailFact, ...] = ()


def gather_resource_facts(analysis: Analysis) -> ResourceFacts:
    values: dict[str, object] = {}
    sm = analysis.trace.gpus.select("gpu", "sm_count").drop_nulls()
    values["sm_count"] = {int(g): int(n) for g, n in sm.iter_rows()}
    if analysis.launch is not None:
        values.update(_launch_facts(analysis))
    if analysis.cpu is not None:
        values["cpu"] = _cpu_facts(analysis)
    if analysis.memory is not None:
        values["memory"] = tuple(
            MemoryFacts(
                gpu=int(r["gpu"]),
                capacity_bytes=r["capacity_bytes"],
                peak_bytes=int(r["peak_bytes"]),
                peak_ns=int(r["peak_ns"]),
                peak_share=r["peak_share"],
                near_full_share=r["near_full_share"],
                near_full_gap_share=r["near_full_gap_share"],
            )
            for r in analysis.memory.per_gpu.iter_rows(named=True)
        )
    values.update(load_facts(analysis))
    return ResourceFacts(**values)  # type: ignore[arg-type]


def _cpu_facts(analysis: Analysis) -> tuple[CpuHostFacts, ...]:
    cpu = analysis.cpu
    assert cpu is not None
    gpus_of = {
        str(h): tuple(sorted({int(g) for g in part["gpu"].to_list()}))
        for (h,), part in cpu.threads.group_by(["host"])
    }
    return tuple(
        CpuHostFacts(
            host=str(r["host"]),
            gpus=gpus_of.get(str(r["host"]), ()),
            cores=r["cores"],
            gap_share=float(r["gap_ns"] or 0) / r["window_ns"] if r["window_ns"] else 0.0,
            busy_cores_gap_mean=r["busy_cores_gap_mean"],
            saturated_gap_share=r["saturated_gap_share"],
            waiting_share=r["feeding_waiting_share"],
            descheduled_share=r["feeding_descheduled_share"],
            running_share=r["feeding_running_share"],
            verdict=str(r["verdict"]),
            osrt_traced=analysis.trace.capabilities.has("osrt"),
        )
        for r in cpu.hosts.iter_rows(named=True)
    )


def _launch_facts(analysis: Analysis) -> dict[str, object]:
    launch = analysis.launch
    assert launch is not None
    per = tuple(
        LaunchFacts(
            gpu=int(r["gpu"]),
            kernels=int(r["kernels"] or 0),
            launch_rate=r["launch_rate"],
            kernel_p50_ns=r["kernel_p50_ns"],
            small_kernel_share=r["small_kernel_share"],
            short_gap_share=r["short_gap_share"],
            launch_bound=bool(r["launch_bound"]),
        )
        for r in launch.per_gpu.iter_rows(named=True)
    )
    flagged = launch.configs.filter(
        pl.col("one_thread_blocks") | pl.col("sub_warp_blocks") | pl.col("single_block")
    )
    configs = tuple(
        ConfigFact(
            gpu=int(r["gpu"]),
            kernel=str(r["short_name"]),
            grid=(int(r["grid_x"] or 0), int(r["grid_y"] or 0), int(r["grid_z"] or 0)),
            block=(int(r["block_x"] or 0), int(r["block_y"] or 0), int(r["block_z"] or 0)),
            launches=int(r["launches"] or 0),
            time_share=float(r["time_share"] or 0.0),
            one_thread_blocks=bool(r["one_thread_blocks"]),
            sub_warp_blocks=bool(r["sub_warp_blocks"]),
            single_block=bool(r["single_block"]),
        )
        for r in flagged.iter_rows(named=True)
    )
    return {"launch": per, "configs": configs}
