"""Scenarios where every GPU gets the same work yet runs below its speed, with ground truth.

The seed chapter's case study (host work serialized under the GIL starves every GPU in
turn, and the same service after the fix), memory-bound kernels (with an Nsight Compute
CSV) and thermal throttling. They use the :class:`Context` and building blocks of
:mod:`nsysan.simulate.scenarios_common`. docs/scenarios.md describes each one.
"""

from __future__ import annotations

import heapq
from dataclasses import replace
from functools import partial

from nsysan.simulate import kernels as k
from nsysan.simulate import truth
from nsysan.simulate.engine import Rank, d2h, h2d
from nsysan.simulate.hardware import A100_BOOST_CLOCK_HZ, A100_SXM
from nsysan.simulate.metrics import SAMPLE_PERIOD_NS, DashboardFn
from nsysan.simulate.scenarios_common import (
    INPUT_BYTES,
    LOGITS_BYTES,
    START_NS,
    STEP_JITTER,
    TOKEN_BYTES,
    Context,
    Outcome,
    close_step,
    flat_clock,
    forward,
    host_causes,
    host_phase,
    mean,
    sample_metrics,
)
from nsysan.simulate.trace import KernelRun
from nsysan.simulate.workload import Op, decode_step, rescaled, with_kernel

# --- 4.5 case study: false balance ---------------------------------------------------------

CASE_GPUS = 4
CASE_LAYERS = 2
CASE_STEPS = 200  # ~10 s at ~50 ms per step
CASE_FIXED_STEPS = 280  # the same ~10 s after the fix (~35 ms per step)
# Host work per step (sampling + tokenizer) through the shared GIL-bound front end;
# four ranks x 12.5 ms saturates it at a ~50 ms cycle, i.e. ~35% GPU gaps.
CASE_HOST_MS = 12.5
CASE_FIXED_HOST_MS = 2.8
CASE_SAMPLING_SHARE = 0.36
CASE_HOST_JITTER = 0.12
CASE_START_SPREAD_NS = 40_000_000  # independent services: any phase within a step
DASHBOARD_MEAN_PCT = 87.5
DASHBOARD_SD_PCT = 2.0


def case_study(ctx: Context) -> Outcome:
    """4xA100, DP=4: host work serialized under the GIL starves every GPU in turn."""
    return _case(ctx, fixed=False)


def case_study_fixed(ctx: Context) -> Outcome:
    """The same service after moving the tokenizer to C++ and giving it cores."""
    return _case(ctx, fixed=True)


def _case(ctx: Context, *, fixed: bool) -> Outcome:
    ranks = ctx.setup(A100_SXM, CASE_GPUS, "dp rank {}", CASE_START_SPREAD_NS)
    ops = ctx.program(decode_step(CASE_LAYERS))
    n_steps = ctx.count(CASE_FIXED_STEPS if fixed else CASE_STEPS)
    host_ms = CASE_FIXED_HOST_MS if fixed else CASE_HOST_MS
    engine = ctx.engine

    def run_forward(rank: Rank) -> int:
        start = rank.host
        h2d(engine, rank, INPUT_BYTES)
        forward(ctx, [rank], ops, factor=ctx.jitter(STEP_JITTER))
        d2h(engine, rank, LOGITS_BYTES)
        engine.sync(rank)
        return start

    step_start = {r.index: run_forward(r) for r in ranks}
    done = dict.fromkeys(step_start, 0)
    queue = [(r.host, r.index) for r in ranks]
    heapq.heapify(queue)
    front_end_free = 0
    while queue:
        _, i = heapq.heappop(queue)
        rank = ranks[i]
        if not fixed and front_end_free > rank.host:
            engine.wait_gil(rank, front_end_free)
        hold = round(host_ms * 1e6 * ctx.jitter(CASE_HOST_JITTER))
        sampling = round(hold * CASE_SAMPLING_SHARE)
        host_phase(ctx, rank, sampling, hold - sampling)
        front_end_free = rank.host
        close_step(ctx, rank, step_start[i])
        done[i] += 1
        if done[i] < n_steps:
            step_start[i] = run_forward(rank)
            heapq.heappush(queue, (rank.host, i))

    busy = truth.busy_by_gpu(ctx.builder.kernel_runs)
    windows = {gpu: (iv[0][0], iv[-1][1]) for gpu, iv in busy.items()}
    dashboard: DashboardFn | None = None
    if not fixed:
        rng = ctx.rng

        def dashboard(gpu: int, t: int, busy_share: float) -> float:
            lo, hi = windows[gpu]
            if lo + SAMPLE_PERIOD_NS <= t <= hi:
                return rng.gauss(DASHBOARD_MEAN_PCT, DASHBOARD_SD_PCT)
            return busy_share * 100

    sample_metrics(ctx, flat_clock(ctx), dashboard=dashboard)

    shares = []
    for gpu, iv in busy.items():
        lo, hi = windows[gpu]
        shares.append(1 - truth.total(iv) / (hi - lo))
    causes = host_causes(ctx)
    cycle_s = [(windows[r.gpu][1] - windows[r.gpu][0]) / 1e9 / max(1, n_steps - 1) for r in ranks]
    numbers = {
        "gap_share_mean": mean(shares),
        "gap_share_min": min(shares),
        "gap_share_max": max(shares),
        "throughput_vs_gapless": 1 - mean(shares),
        "step_ms_mean": mean(cycle_s) * 1_000,
        "steps_per_gpu": float(n_steps),
        **truth.stagger(busy),
    }
    for key in ("gil_wait_share", "sampling_share", "tokenizer_share"):
        numbers[key] = mean([c[key] for c in causes.values()])
    return Outcome(
        numbers,
        flagged_gpus=() if fixed else tuple(g.index for g in ctx.gpus),
        gpu_extra={gpu: dict(c) for gpu, c in causes.items()},
    )


# --- 4.4 memory-bound kernels, with an Nsight Compute CSV ----------------------------------

MB_GPUS = 4
MB_STEPS = 200
MB_LAYERS = 2
MB_ATTENTION_FACTOR = 2.6  # 32k-token contexts: attention streams a large KV cache
MB_STEP_SCALE = 0.38
MB_PREFILL_EVERY = 4  # chunked prefill: one compute-bound GEMM every few steps
MB_PREFILL_US = 7_000.0
NCU_LAUNCHES_PER_KERNEL = 3
# ncu was run with a kernel filter that skipped the sampling kernels.
NCU_SKIPPED = frozenset({k.SOFTMAX.short, k.FILL.short})
SOL_THRESHOLD_PCT = 60.0


def bound_class(kernel: k.Kernel) -> str:
    """The class docs/scenarios.md assigns: the higher SOL unit if it reaches 60%.

    Profiles keep clear of the boundaries, so the CSV's noise (see ncu.py) never flips it.
    """
    if max(kernel.sm_pct, kernel.mem_pct) < SOL_THRESHOLD_PCT:
        return "other"
    return "memory" if kernel.mem_pct > kernel.sm_pct else "compute"


def memory_bound(ctx: Context) -> Outcome:
    """Long-context decode: busy GPUs whose kernels mostly wait on DRAM."""
    ranks = ctx.setup(A100_SXM, MB_GPUS, "dp rank {}")
    engine = ctx.engine
    ops = decode_step(MB_LAYERS)
    for dense in (k.GEMM_LARGE, k.GEMM_MEDIUM, k.GEMM_LM_HEAD):
        ops = with_kernel(ops, dense, k.GEMM_SKINNY)
    ops = [replace(op, us=op.us * MB_ATTENTION_FACTOR) if op.kernel == k.ATTENTION else op
           for op in ops]  # fmt: skip
    ops = ctx.program(rescaled(ops, MB_STEP_SCALE))
    for r in ranks:
        for step_no in range(ctx.count(MB_STEPS)):
            start = r.host
            h2d(engine, r, INPUT_BYTES)
            if step_no % MB_PREFILL_EVERY == 0:
                engine.launch(r, k.GEMM_LARGE, ctx.ns(MB_PREFILL_US))
            forward(ctx, [r], ops, factor=ctx.jitter(STEP_JITTER))
            d2h(engine, r, TOKEN_BYTES)
            engine.sync(r)
            host_phase(ctx, r, ctx.ns(300, 0.1), ctx.ns(200, 0.1))
            close_step(ctx, r, start)
    sample_metrics(ctx, flat_clock(ctx))

    runs = ctx.builder.kernel_runs
    profiled: list[KernelRun] = []
    seen: dict[str, int] = {}
    for run in sorted((x for x in runs if x.gpu == ranks[0].gpu), key=lambda x: x.start):
        name = run.kernel.demangled
        if run.kernel.short in NCU_SKIPPED or seen.get(name, 0) >= NCU_LAUNCHES_PER_KERNEL:
            continue
        seen[name] = seen.get(name, 0) + 1
        profiled.append(run)
    in_csv = {x.kernel.demangled for x in profiled}
    extra: dict[int, dict[str, float]] = {}
    for g in ctx.gpus:
        mine = [x for x in runs if x.gpu == g.index]
        total_ns = sum(x.end - x.start for x in mine)
        share = dict.fromkeys(("memory", "compute", "other", "unclassified"), 0.0)
        for x in mine:
            cls = bound_class(x.kernel) if x.kernel.demangled in in_csv else "unclassified"
            share[cls] += (x.end - x.start) / total_ns
        extra[g.index] = {f"{cls}_bound_share": v for cls, v in share.items()}
    numbers = {key: mean([e[key] for e in extra.values()]) for key in next(iter(extra.values()))}
    return Outcome(
        numbers, flagged_gpus=tuple(g.index for g in ctx.gpus), gpu_extra=extra,
        ncu_runs=profiled,
    )  # fmt: skip


# --- 4.4 power/thermal: clocks fall on some GPUs -------------------------------------------

TH_GPUS = 8
TH_HOT_GPUS = (5, 6, 7)
TH_DURATION_S = 3.0
TH_LAYERS = 2
TH_STEP_SCALE = 0.6
TH_THROTTLE_START = 0.2  # share of the capture before clocks start to fall
TH_THROTTLE_FULL = 0.5
TH_THROTTLED_HZ = 1_100_000_000
CLOCK_NOISE_HZ = 6_000_000


def _clock_slowdown(slow: float, _rank: Rank, op: Op) -> float:
    """Run time at a clock ``slow`` times below boost: only the clock-bound share stretches."""
    return op.kernel.clock_bound * slow + 1 - op.kernel.clock_bound


def throttled(ctx: Context) -> Outcome:
    """DP=8 fully loaded; GPUs 5-7 heat up and drop from ~1.41 to ~1.10 GHz."""
    ranks = ctx.setup(A100_SXM, TH_GPUS, "dp rank {}")
    engine = ctx.engine
    ops = ctx.program(rescaled(decode_step(TH_LAYERS), TH_STEP_SCALE))
    duration = round(TH_DURATION_S * 1e9 * ctx.scale)
    t0 = START_NS + round(duration * TH_THROTTLE_START)
    t1 = START_NS + round(duration * TH_THROTTLE_FULL)
    rng = ctx.rng

    def target_hz(gpu: int, t: int) -> float:
        if gpu not in TH_HOT_GPUS or t <= t0:
            return A100_BOOST_CLOCK_HZ
        frac = min(1.0, (t - t0) / (t1 - t0))
        return A100_BOOST_CLOCK_HZ - frac * (A100_BOOST_CLOCK_HZ - TH_THROTTLED_HZ)

    def clock(gpu: int, t: int) -> int:
        return round(target_hz(gpu, t) - rng.uniform(0, CLOCK_NOISE_HZ))

    steps: dict[int, list[tuple[int, int]]] = {r.gpu: [] for r in ranks}
    for r in ranks:
        while r.host < START_NS + duration:
            start = r.host
            h2d(engine, r, INPUT_BYTES)
            slow = A100_BOOST_CLOCK_HZ / target_hz(r.gpu, r.gpu_free)
            first = len(ctx.builder.kernel_runs)
            forward(
                ctx, [r], ops, factor=ctx.jitter(STEP_JITTER), speed=partial(_clock_slowdown, slow)
            )
            mine = ctx.builder.kernel_runs[first:]
            steps[r.gpu].append((mine[0].start, mine[-1].end))
            d2h(engine, r, TOKEN_BYTES)
            engine.sync(r)
            host_phase(ctx, r, ctx.ns(300, 0.1), ctx.ns(200, 0.1))
            close_step(ctx, r, start)
    sample_metrics(ctx, clock)

    extra = {}
    for r in ranks:
        early = [e - s for s, e in steps[r.gpu] if e <= t0]
        late = [e - s for s, e in steps[r.gpu] if s >= t1]
        extra[r.gpu] = {
            "steps": float(len(steps[r.gpu])),
            "clock_mhz_late": target_hz(r.gpu, t1) / 1e6,
            "step_slowdown": mean(late) / mean(early),
        }
    hot = [extra[g] for g in TH_HOT_GPUS]
    cool = [e for g, e in extra.items() if g not in TH_HOT_GPUS]
    numbers = {
        "clock_mhz_start": A100_BOOST_CLOCK_HZ / 1e6,
        "clock_mhz_throttled": TH_THROTTLED_HZ / 1e6,
        "step_slowdown_throttled": mean([e["step_slowdown"] for e in hot]),
        "step_slowdown_others": mean([e["step_slowdown"] for e in cool]),
        "steps_throttled_vs_others": mean([e["steps"] for e in hot])
        / mean([e["steps"] for e in cool]),
        "throttle_start_ns": float(t0),
        "throttle_full_ns": float(t1),
    }
    return Outcome(numbers, flagged_gpus=TH_HOT_GPUS, gpu_extra=extra)
