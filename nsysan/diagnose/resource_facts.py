"""Facts about launches, host CPUs and device memory, for the rules of issue 11.

Kept beside :mod:`nsysan.diagnose.facts` so that module stays about gaps, balance and
communication; :class:`ResourceFacts` is one field of ``Facts``. ``None`` is "not
measured", never zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from nsysan.analysis import Analysis


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
class ResourceFacts:
    launch: tuple[LaunchFacts, ...] = ()
    configs: tuple[ConfigFact, ...] = ()  # only configurations with a flag set
    sm_count: dict[int, int] | None = None


def gather_resource_facts(analysis: Analysis) -> ResourceFacts:
    values: dict[str, object] = {}
    sm = analysis.trace.gpus.select("gpu", "sm_count").drop_nulls()
    values["sm_count"] = {int(g): int(n) for g, n in sm.iter_rows()}
    if analysis.launch is not None:
        values.update(_launch_facts(analysis))
    return ResourceFacts(**values)  # type: ignore[arg-type]


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
