"""Scenarios of launch overhead, host CPUs and device memory, with their ground truth.

Kept apart from :mod:`nsysan.simulate.scenarios` (the chapter's balance scenarios);
they use the same :class:`Context` and engine. docs/scenarios.md describes each one.
"""

from __future__ import annotations

from nsysan.simulate import kernels as k
from nsysan.simulate import truth
from nsysan.simulate.engine import (
    KERNEL_SPACING_NS,
    LAUNCH_API,
    LAUNCH_CALL_NS,
    LAUNCH_LATENCY_NS,
    Rank,
)
from nsysan.simulate.hardware import A100_SXM
from nsysan.simulate.scenarios import STEP_RANGE, Context, Outcome, mean
from nsysan.simulate.workload import decode_step, rescaled

# --- 4.4 launch-bound decode ------------------------------------------------------------

LAUNCH_GPUS = 1
LAUNCH_LAYERS = 4
LAUNCH_STEPS = 400
# A small model at batch 1: every kernel of the reference step shrinks to a few µs.
LAUNCH_STEP_SCALE = 0.0015
LAUNCH_MIN_KERNEL_NS = 1_200
LAUNCH_CALL_SPACING_NS = (300, 900)  # a C++ launcher between two launch calls
LAUNCH_STEP_HOST_NS = (25_000, 40_000)  # sampling and scheduling between steps
SMALL_KERNEL_NS = 10_000  # the launch metrics' thresholds (docs/metrics/launch.md)
SHORT_GAP_NS = 10_000


def _launch(ctx: Context, rank: Rank, kernel: k.Kernel, duration_ns: int) -> None:
    """One launch from a C++ loop: the call, then the next call almost at once."""
    b, rng = ctx.builder, ctx.rng
    call_end = rank.host + rng.randint(*LAUNCH_CALL_NS)
    corr = b.runtime(rank.pid, rank.tid, LAUNCH_API, rank.host, call_end)
    start = max(rank.host + LAUNCH_LATENCY_NS, rank.gpu_free + rng.randint(*KERNEL_SPACING_NS))
    end = start + max(duration_ns, LAUNCH_MIN_KERNEL_NS)
    b.kernel(rank.pid, rank.gpu, kernel, start, end, corr)
    rank.gpu_free = end
    rank.host = call_end + rng.randint(*LAUNCH_CALL_SPACING_NS)


def launch_bound(ctx: Context) -> Outcome:
    """Decode of a small model at batch 1 on one GPU: µs kernels, the GPU waits on launches."""
    ranks = ctx.setup(A100_SXM, LAUNCH_GPUS, "decode rank {}")
    ops = ctx.program(rescaled(decode_step(LAUNCH_LAYERS), LAUNCH_STEP_SCALE))
    for _ in range(ctx.count(LAUNCH_STEPS)):
        for r in ranks:
            start = r.host
            for op in ops:
                _launch(ctx, r, op.kernel, ctx.ns(op.us))
            ctx.engine.sync(r)
            r.host += ctx.rng.randint(*LAUNCH_STEP_HOST_NS)
            ctx.builder.nvtx_range(r.pid, r.tid, STEP_RANGE, start, r.host)
    return Outcome(
        launch_truth(ctx), flagged_gpus=tuple(r.gpu for r in ranks), gpu_extra=_launch_extra(ctx)
    )


def _launch_extra(ctx: Context) -> dict[int, dict[str, float]]:
    busy = truth.busy_by_gpu(ctx.builder.kernel_runs)
    extra: dict[int, dict[str, float]] = {}
    for gpu, iv in busy.items():
        lo, hi = iv[0][0], iv[-1][1]
        durations = sorted(r.end - r.start for r in ctx.builder.kernel_runs if r.gpu == gpu)
        idle = truth.gaps(iv, lo, hi)
        short = [e - s for s, e in idle if e - s < SHORT_GAP_NS]
        n = len(durations)
        extra[gpu] = {
            "kernels": float(n),
            "launch_rate": n / ((hi - lo) / 1e9),
            "kernel_p50_ns": float(durations[(n + 1) // 2 - 1]),  # nearest rank
            "small_kernel_share": sum(d < SMALL_KERNEL_NS for d in durations) / n,
            "short_gap_count": float(len(short)),
            "short_gap_share": sum(short) / (hi - lo),
        }
    return extra


def launch_truth(ctx: Context) -> dict[str, float]:
    extra = _launch_extra(ctx)
    return {
        "small_kernel_share_min": min(e["small_kernel_share"] for e in extra.values()),
        "short_gap_share_min": min(e["short_gap_share"] for e in extra.values()),
        "launch_rate_mean": mean([e["launch_rate"] for e in extra.values()]),
    }
