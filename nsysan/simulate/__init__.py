"""Deterministic synthetic Nsight Systems exports with known ground truth.

``generate(name, path)`` writes one scenario of seed-chapter4 (docs/scenarios.md) as an
SQLite export in the schema of Nsight Systems 2024.2.3.38 (schema 3.11.1) and returns
its :class:`GroundTruth`. The same name, seed, scale and options always give the same
file content. Layout of every scenario: one ``python3`` process per GPU, fed from its
main thread, without ``CUDA_VISIBLE_DEVICES``, so a kernel's ``deviceId`` is the
physical index (``TARGET_INFO_GPU.id`` and ``cuDevice``); each GPU has its own UUID
and PCI bus location.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import MappingProxyType

from nsysan.simulate import scenarios, scenarios_parallel, scenarios_resources, serving
from nsysan.simulate.engine import Engine
from nsysan.simulate.ncu import write_ncu_csv
from nsysan.simulate.scenarios_common import Context, Outcome, Scenario
from nsysan.simulate.trace import TraceBuilder
from nsysan.simulate.truth import GpuTruth, GroundTruth, busy_by_gpu, frozen, total
from nsysan.simulate.writer import add_header, write_sqlite

__all__ = ["FIXTURE_SCALES", "SCENARIOS", "GpuTruth", "GroundTruth", "generate", "ncu_csv_path"]


# Fixture files stay small (a few hundred kB); the long-tail scenario needs more time
# for its long requests to pile up.
FIXTURE_SCALE = 0.1
LONG_TAIL_FIXTURE_SCALE = 0.25


@dataclass(frozen=True)
class _Spec:
    build: Scenario
    description: str
    seed_section: str
    top_finding: str | None
    fixture_scale: float  # scale of the small file in fixtures/
    # Scenarios that write the same run two ways share their random draws.
    same_run_as: str | None = None


_SPECS: dict[str, _Spec] = {
    "case-study": _Spec(
        scenarios.case_study,
        "4xA100, DP=4: dashboard 85-90% busy, yet ~35% of each GPU's time is gaps, "
        "staggered across GPUs; the feeding threads wait for the GIL (tokenizer, sampling)",
        "4.5",
        "false-balance",
        FIXTURE_SCALE,
    ),
    "case-study-fixed": _Spec(
        scenarios.case_study_fixed,
        "the case study after the fix (C++ tokenizer, more cores): gaps ~8%",
        "4.5",
        None,
        FIXTURE_SCALE,
    ),
    "tp-heads": _Spec(
        scenarios_parallel.tp_heads,
        "8xA100, TP=8, 80 heads: ranks 0-1 hold 13 heads, the rest 9; ~12% compute skew",
        "4.1",
        "static-split-skew",
        FIXTURE_SCALE,
    ),
    "pp-bubble": _Spec(
        scenarios_parallel.pp_bubble,
        "4xA100, PP=4 with 4 micro-batches: fill/drain bubbles on every stage",
        "4.1",
        "pipeline-bubble",
        FIXTURE_SCALE,
    ),
    "moe-hot-expert": _Spec(
        scenarios_parallel.moe_hot_expert,
        "8xA100, EP=8: GPU 5's expert kernels take ~3.5x the others'",
        "4.1",
        "moe-hot-expert",
        FIXTURE_SCALE,
    ),
    "dp-long-tail": _Spec(
        scenarios_parallel.dp_long_tail,
        "4xA100, DP=4 round-robin: GPU 2 gets the long generations, the others drift to idle",
        "4.2",
        "dp-long-tail",
        LONG_TAIL_FIXTURE_SCALE,
    ),
    "comm-bound": _Spec(
        scenarios_parallel.comm_bound,
        "8xA100 PCIe, TP=8: NCCL all-reduce takes ~38% of GPU time",
        "4.4",
        "comm-bound",
        FIXTURE_SCALE,
    ),
    "memory-bound": _Spec(
        scenarios.memory_bound,
        "4xA100, long-context decode: busy GPUs running mostly memory-bound kernels "
        "(with an Nsight Compute CSV)",
        "4.4",
        "memory-bound",
        FIXTURE_SCALE,
    ),
    "throttled": _Spec(
        scenarios.throttled,
        "8xA100, DP=8 fully loaded: GPUs 5-7 fall from ~1.41 to ~1.10 GHz",
        "4.4",
        "clock-throttling",
        FIXTURE_SCALE,
    ),
    "serving-graphs": _Spec(
        partial(serving.serving_graphs, level="graph"),
        "8xA100, TP=8 serving: decode steps as CUDA-graph replays (graph-level trace), "
        "prefill eager, NCCL all-reduce, a scheduler that is sometimes late",
        "4.3",
        None,
        FIXTURE_SCALE,
    ),
    "serving-graphs-nodes": _Spec(
        partial(serving.serving_graphs, level="node"),
        "serving-graphs, the same run traced at node level (--cuda-graph-trace=node)",
        "4.3",
        None,
        FIXTURE_SCALE,
        same_run_as="serving-graphs",
    ),
    "launch-bound": _Spec(
        scenarios_resources.launch_bound,
        "1xA100 decode of a small model at batch 1: kernels of a few µs launched from a "
        "C++ loop; the GPU idles in µs gaps between launches",
        "4.4",
        "launch-bound",
        FIXTURE_SCALE,
    ),
    "cpu-saturated": _Spec(
        scenarios_resources.cpu_saturated,
        "2xA100, DP=2 on a 16-core host whose data-loader workers fill every core: the "
        "feeding threads wait for a core before each step",
        "4.4",
        "cpu-saturated",
        FIXTURE_SCALE,
    ),
    "gil-blocked": _Spec(
        scenarios_resources.gil_blocked,
        "2xA100 fed by two threads of one Python process on a 16-core host; a tokenizer "
        "thread holds the GIL, so the feeding threads wait for it while most cores idle",
        "4.5",
        "cpu-blocked",
        FIXTURE_SCALE,
    ),
    "kv-cache-full": _Spec(
        scenarios_resources.kv_cache_full,
        "4xA100, DP=4 decode with device-memory events: GPU 2 serves long contexts, its "
        "KV cache sits above 90% of 80 GB and its scheduler stalls before steps",
        "4.2",
        "memory-pressure",
        FIXTURE_SCALE,
    ),
    "request-burst": _Spec(
        scenarios_resources.request_burst,
        "4xA100, DP=4 behind a router: a burst of 48 requests in 40 ms goes to the GPU that "
        "received the fewest lately; the other GPUs wait on empty queues while it works",
        "4.3",
        "request-burst",
        LONG_TAIL_FIXTURE_SCALE,
    ),
    "balanced": _Spec(
        scenarios_parallel.balanced,
        "4xA100, TP=4 over NVLink, fast host, steady clocks: a healthy control",
        "control",
        None,
        FIXTURE_SCALE,
    ),
}

SCENARIOS: Mapping[str, str] = MappingProxyType(
    {name: spec.description for name, spec in _SPECS.items()}
)
FIXTURE_SCALES: Mapping[str, float] = MappingProxyType(
    {name: spec.fixture_scale for name, spec in _SPECS.items()}
)
NCU_PID_OFFSET = 4_211  # the ncu run is a separate process


def ncu_csv_path(out_path: str | Path) -> Path:
    """Where :func:`generate` puts a scenario's Nsight Compute CSV: ``<stem>.ncu.csv``."""
    path = Path(out_path)
    return path.with_name(f"{path.stem}.ncu.csv")


def generate(
    name: str,
    out_path: str | Path,
    *,
    seed: int = 0,
    scale: float = 1.0,
    hostile_names: bool = False,
) -> GroundTruth:
    """Write scenario ``name`` to ``out_path`` (atomically) and return its ground truth.

    ``scale`` multiplies the number of steps (the trace's length); ``hostile_names``
    renames the attention kernel and the ``tokenizer`` NVTX range to
    ``<script>alert(1)</script>``. Scenarios with an Nsight Compute view also write
    :func:`ncu_csv_path`.
    """
    spec = _SPECS.get(name)
    if spec is None:
        raise ValueError(f"unknown scenario {name!r}; choose one of {', '.join(_SPECS)}")
    if not scale > 0:
        raise ValueError(f"scale must be positive, got {scale}")
    path = Path(out_path)
    rng = random.Random(f"nsysan.simulate/{spec.same_run_as or name}/{seed}")
    builder = TraceBuilder()
    ctx = Context(rng, builder, Engine(builder, rng), scale, hostile_names)
    outcome = spec.build(ctx)
    add_header(builder, ctx.gpus, scenario=name, seed=seed, scale=scale, hostile=hostile_names)
    ncu_name = None
    if outcome.ncu_runs:
        csv_path = ncu_csv_path(path)
        pid = ctx.ranks[0].pid + NCU_PID_OFFSET
        write_ncu_csv(csv_path, outcome.ncu_runs, ctx.gpus, pid, rng)
        ncu_name = csv_path.name
    write_sqlite(builder, path)
    return GroundTruth(
        scenario=name,
        seed=seed,
        scale=scale,
        hostile_names=hostile_names,
        seed_section=spec.seed_section,
        top_finding=spec.top_finding,
        summary=spec.description,
        gpus=_gpu_truths(ctx, outcome),
        numbers=frozen(outcome.numbers),
        flagged_gpus=outcome.flagged_gpus,
        flagged_kernels=outcome.flagged_kernels,
        ncu_csv=ncu_name,
    )


def _gpu_truths(ctx: Context, outcome: Outcome) -> tuple[GpuTruth, ...]:
    runs = ctx.builder.kernel_runs
    busy = busy_by_gpu(runs)
    pid_of = {r.gpu: r.pid for r in ctx.ranks}
    result = []
    for gpu in ctx.gpus:
        iv = busy[gpu.index]
        mine = [r for r in runs if r.gpu == gpu.index]
        nccl = sum(r.end - r.start for r in mine if r.kernel.nccl)
        kernel_ns = sum(r.end - r.start for r in mine)
        lo, hi = iv[0][0], iv[-1][1]
        result.append(
            GpuTruth(
                gpu=gpu.index,
                uuid=gpu.uuid,
                pid=pid_of[gpu.index],
                role=ctx.roles[gpu.index],
                window_start_ns=lo,
                window_end_ns=hi,
                busy_ns=total(iv),
                gap_share=1 - total(iv) / (hi - lo),
                kernels=len(mine),
                kernel_ns=kernel_ns,
                compute_ns=kernel_ns - nccl,
                nccl_ns=nccl,
                extra=frozen(outcome.gpu_extra.get(gpu.index, {})),
            )
        )
    return tuple(result)
