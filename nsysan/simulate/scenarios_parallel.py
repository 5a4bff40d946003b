"""Scenarios of parallel layouts: how the work is split across GPUs, with their ground truth.

Tensor parallel (uneven heads; all-reduce over PCIe; a balanced control), pipeline
parallel (fill/drain bubbles), expert parallel (a hot expert) and data parallel
(round-robin meets long generations). They use the :class:`Context` and building
blocks of :mod:`nsysan.simulate.scenarios_common`. docs/scenarios.md describes each one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

from nsysan.simulate import kernels as k
from nsysan.simulate import truth
from nsysan.simulate.engine import Rank, d2h, h2d
from nsysan.simulate.hardware import A100_PCIE, A100_SXM
from nsysan.simulate.scenarios_common import (
    FORWARD_RANGE,
    INPUT_BYTES,
    REQUEST_RANGE,
    START_NS,
    STEP_JITTER,
    TOKEN_BYTES,
    Context,
    Outcome,
    Request,
    close_step,
    collective_skew,
    compute_time,
    flat_clock,
    forward,
    host_phase,
    kernel_diff,
    kernel_time,
    mean,
    sample_metrics,
    skew,
)
from nsysan.simulate.workload import Op, compute_us, decode_step, rescaled

# --- 4.1 tensor parallel: 80 heads on 8 GPUs ------------------------------------------------

TP_HEADS = (13, 13, 9, 9, 9, 9, 9, 9)  # 8 x 9 = 72, the other 8 go to the first two ranks
TP_LAYERS = 3
TP_STEPS = 100
TP_ATTN_SHARE = 0.4  # attention's share of a balanced rank's compute -> 1.12 skew
TP_STEP_SCALE = 0.45
NVLINK_ALLREDUCE_US = 150.0
TP_HOST_SAMPLING_US = 500.0
TP_HOST_TOKENIZER_US = 300.0


def _tp_program(ctx: Context, layers: int, attn_share: float, scale: float) -> list[Op]:
    ops = decode_step(layers, tensor_parallel=True)
    attn = sum(op.us for op in ops if op.part == "attn")
    other = compute_us(ops) - attn
    ops = rescaled(ops, attn_share / (1 - attn_share) * other / attn, ("attn",))
    return ctx.program(rescaled(ops, scale))


def _tp_steps(
    ctx: Context, ranks: list[Rank], ops: Sequence[Op], n_steps: int,
    speed: Callable[[Rank, Op], float] | None, transfer_us: float,
) -> None:  # fmt: skip
    engine = ctx.engine
    for _ in range(n_steps):
        starts = {r.index: r.host for r in ranks}
        for r in ranks:
            h2d(engine, r, INPUT_BYTES)
        forward(
            ctx, ranks, ops, factor=ctx.jitter(STEP_JITTER), speed=speed, transfer_us=transfer_us
        )
        for r in ranks:
            d2h(engine, r, TOKEN_BYTES)
            engine.sync(r)
            host_phase(ctx, r, ctx.ns(TP_HOST_SAMPLING_US, 0.1), ctx.ns(TP_HOST_TOKENIZER_US, 0.1))
            close_step(ctx, r, starts[r.index])


def tp_heads(ctx: Context) -> Outcome:
    """TP=8 with 80 attention heads: ranks 0 and 1 hold 13 heads, the others 9."""
    ranks = ctx.setup(A100_SXM, len(TP_HEADS), "tp rank {}")
    ops = _tp_program(ctx, TP_LAYERS, TP_ATTN_SHARE, TP_STEP_SCALE)
    heads_mean = sum(TP_HEADS) / len(TP_HEADS)

    def speed(r: Rank, op: Op) -> float:
        return TP_HEADS[r.index] / heads_mean if op.part == "attn" else 1.0

    _tp_steps(ctx, ranks, ops, ctx.count(TP_STEPS), speed, NVLINK_ALLREDUCE_US)
    runs = ctx.builder.kernel_runs
    compute = compute_time(ctx)
    nccl = {g: kernel_time(runs, g, lambda kern: kern.nccl) for g in compute}
    hi = max(compute, key=lambda g: (compute[g], -g))
    lo = min(compute, key=lambda g: (compute[g], g))
    diffs = kernel_diff(runs, hi, lo)
    total_diff = sum(d for _, d in diffs)
    top = tuple(name for name, d in diffs if d > 0.05 * total_diff)
    light = [g for g in compute if TP_HEADS[g] < max(TP_HEADS)]
    heavy = [g for g in compute if TP_HEADS[g] == max(TP_HEADS)]
    numbers = {
        "compute_skew": skew(list(compute.values())),
        "compute_skew_intended": max(TP_HEADS) / heads_mean * TP_ATTN_SHARE + 1 - TP_ATTN_SHARE,
        "heavy_vs_light_compute": mean([compute[g] for g in heavy])
        / mean([compute[g] for g in light]),
        "nccl_ns_light_vs_heavy": mean([nccl[g] for g in light]) / mean([nccl[g] for g in heavy]),
        "skew_explained_by_flagged": sum(d for n, d in diffs if n in top) / total_diff,
        **collective_skew(ctx.engine),
    }
    return Outcome(numbers, flagged_gpus=tuple(sorted(heavy)), flagged_kernels=top)


# --- 4.4 communication: TP=8 over PCIe -----------------------------------------------------

COMM_LAYERS = 3
COMM_STEPS = 100
COMM_NCCL_SHARE = 0.38  # NCCL share of busy time the transfer time is chosen for
COMM_PCIE_PCT = 72.0


def comm_bound(ctx: Context) -> Outcome:
    """TP=8 on PCIe A100s: all-reduces take ~38% of every GPU's busy time."""
    ranks = ctx.setup(A100_PCIE, 8, "tp rank {}")
    ops = _tp_program(ctx, COMM_LAYERS, 0.45, TP_STEP_SCALE)
    n_comm = sum(1 for op in ops if op.part == "comm")
    transfer_us = COMM_NCCL_SHARE / (1 - COMM_NCCL_SHARE) * compute_us(ops) / n_comm
    _tp_steps(ctx, ranks, ops, ctx.count(COMM_STEPS), None, transfer_us)
    sample_metrics(ctx, flat_clock(ctx), nccl_pcie_pct=COMM_PCIE_PCT)
    runs = ctx.builder.kernel_runs
    busy = truth.busy_by_gpu(runs)
    extra = {}
    for g, iv in busy.items():
        nccl = kernel_time(runs, g, lambda kern: kern.nccl)
        extra[g] = {
            "nccl_share": nccl / truth.total(iv),
            "nccl_share_of_window": nccl / (iv[-1][1] - iv[0][0]),
        }
    numbers = {
        "nccl_share_mean": mean([e["nccl_share"] for e in extra.values()]),
        "nccl_share_min": min(e["nccl_share"] for e in extra.values()),
        "compute_skew": skew(list(compute_time(ctx).values())),
        **collective_skew(ctx.engine),
    }
    return Outcome(
        numbers,
        flagged_gpus=tuple(g.index for g in ctx.gpus),
        flagged_kernels=(k.NCCL_ALLREDUCE.short,),
        gpu_extra=extra,
    )


# --- 4.1 pipeline parallel: fill/drain bubbles ----------------------------------------------

PP_STAGES = 4
PP_MICROBATCHES = 4
PP_BATCHES = 60
PP_LAYERS_PER_STAGE = 2
PP_STAGE_SCALE = 0.14  # ~4 ms per micro-batch per stage
ACTIVATION_US = 45.0  # NVLink send/recv of one micro-batch's activations


def pp_bubble(ctx: Context) -> Outcome:
    """PP=4, 4 micro-batches per batch: each stage idles while the pipeline fills and drains."""
    ranks = ctx.setup(A100_SXM, PP_STAGES, "pp stage {}")
    engine = ctx.engine
    layers = decode_step(PP_LAYERS_PER_STAGE)
    pre, post = layers[:1], layers[-4:]
    body = layers[1:-4]
    stage_ops = []
    for s in range(PP_STAGES):
        ops = (pre if s == 0 else []) + body + (post if s == PP_STAGES - 1 else [])
        stage_ops.append(ctx.program(rescaled(ops, PP_STAGE_SCALE)))
    batch_spans: list[tuple[int, int]] = []
    stage_spans: dict[int, list[tuple[int, int]]] = {r.gpu: [] for r in ranks}
    n_batches = ctx.count(PP_BATCHES)
    last = ranks[-1]
    for _ in range(n_batches):
        # The next batch's tokens come from the last stage's sampling.
        for r in ranks:
            r.host = max(r.host, last.host)
        starts = {r.index: r.host for r in ranks}
        first_kernel = len(ctx.builder.kernel_runs)
        h2d(engine, ranks[0], INPUT_BYTES)
        for m in range(PP_MICROBATCHES):
            for s, r in enumerate(ranks):
                if s > 0:
                    engine.p2p(ranks[s - 1], r, k.NCCL_SENDRECV, ctx.ns(ACTIVATION_US, 0.1))
                mb_start = r.host
                step = ctx.jitter(STEP_JITTER)
                for op in stage_ops[s]:
                    engine.launch(r, op.kernel, ctx.ns(op.us * step))
                ctx.builder.nvtx_range(r.pid, r.tid, f"{FORWARD_RANGE} mb{m}", mb_start, r.host)
        d2h(engine, last, TOKEN_BYTES)
        for r in ranks:
            engine.sync(r)
        host_phase(ctx, last, ctx.ns(400, 0.1), ctx.ns(250, 0.1))
        for r in ranks:
            close_step(ctx, r, starts[r.index])
        batch_runs = ctx.builder.kernel_runs[first_kernel:]
        batch_spans.append((min(x.start for x in batch_runs), max(x.end for x in batch_runs)))
        for r in ranks:
            mine = [x for x in batch_runs if x.gpu == r.gpu]
            stage_spans[r.gpu].append((min(x.start for x in mine), max(x.end for x in mine)))

    busy = truth.busy_by_gpu(ctx.builder.kernel_runs)
    span_total = sum(e - s for s, e in batch_spans)
    extra = {}
    for r in ranks:
        inside = sum(truth.total(truth.clip(busy[r.gpu], s, e)) for s, e in batch_spans)
        fill = sum(
            ss - bs for (bs, _), (ss, _) in zip(batch_spans, stage_spans[r.gpu], strict=True)
        )
        drain = sum(
            be - se for (_, be), (_, se) in zip(batch_spans, stage_spans[r.gpu], strict=True)
        )
        extra[r.gpu] = {
            "bubble_share": 1 - inside / span_total,
            "fill_share": fill / span_total,
            "drain_share": drain / span_total,
        }
    numbers = {
        "bubble_share_mean": mean([e["bubble_share"] for e in extra.values()]),
        "bubble_share_ideal": (PP_STAGES - 1) / (PP_STAGES + PP_MICROBATCHES - 1),
        "stages": float(PP_STAGES),
        "microbatches": float(PP_MICROBATCHES),
        "batches": float(n_batches),
    }
    return Outcome(numbers, flagged_gpus=tuple(r.gpu for r in ranks), gpu_extra=extra)


# --- 4.1 expert parallel: one hot expert ---------------------------------------------------

MOE_GPUS = 8
MOE_HOT_GPU = 5
MOE_HOT_LOAD = 3.5  # tokens routed to the hot GPU's experts / to any other GPU's
MOE_LOAD_JITTER = 0.1
MOE_LAYERS = 2
MOE_STEPS = 100
MOE_STEP_SCALE = 0.3
ALL_TO_ALL_US = 160.0


def _expert_load(load: dict[int, float], rank: Rank, op: Op) -> float:
    return load[rank.index] if op.part == "expert" else 1.0


def moe_hot_expert(ctx: Context) -> Outcome:
    """EP=8: GPU 5 holds the popular expert and gets ~3.5x the tokens of any other GPU."""
    ranks = ctx.setup(A100_SXM, MOE_GPUS, "ep rank {}")
    ops = ctx.program(rescaled(decode_step(MOE_LAYERS, moe=True), MOE_STEP_SCALE))
    engine = ctx.engine
    for _ in range(ctx.count(MOE_STEPS)):
        load = {
            r.index: (MOE_HOT_LOAD if r.gpu == MOE_HOT_GPU else 1.0) * ctx.jitter(MOE_LOAD_JITTER)
            for r in ranks
        }
        starts = {r.index: r.host for r in ranks}
        for r in ranks:
            h2d(engine, r, INPUT_BYTES)
        forward(
            ctx, ranks, ops, factor=ctx.jitter(STEP_JITTER), speed=partial(_expert_load, load),
            transfer_us=ALL_TO_ALL_US,
        )  # fmt: skip
        for r in ranks:
            d2h(engine, r, TOKEN_BYTES)
            engine.sync(r)
            host_phase(ctx, r, ctx.ns(TP_HOST_SAMPLING_US, 0.1), ctx.ns(TP_HOST_TOKENIZER_US, 0.1))
            close_step(ctx, r, starts[r.index])
    runs = ctx.builder.kernel_runs
    expert = {
        g.index: kernel_time(runs, g.index, lambda kern: kern.short == k.MOE_EXPERT.short)
        for g in ctx.gpus
    }
    others = [v for g, v in expert.items() if g != MOE_HOT_GPU]
    numbers = {
        "expert_skew": skew(list(expert.values())),
        "hot_expert_ratio": expert[MOE_HOT_GPU] / mean(others),
        "compute_skew": skew(list(compute_time(ctx).values())),
        **collective_skew(engine),
    }
    return Outcome(
        numbers,
        flagged_gpus=(MOE_HOT_GPU,),
        flagged_kernels=(k.MOE_EXPERT.short,),
        gpu_extra={g: {"expert_ns": float(v)} for g, v in expert.items()},
    )


# --- 4.2/4.3 data parallel: round-robin meets long generations -----------------------------

LT_GPUS = 4
LT_LONG_RANK = 2  # every 4th request is a long one, and round-robin sends it here
LT_DURATION_S = 6.0
LT_ARRIVAL_END_SHARE = 0.5  # requests stop arriving halfway through the capture
LT_GROUP_INTERVAL_MS = 250.0
LT_SHORT_TOKENS = (12, 48)
LT_LONG_TOKENS = (400, 900)
LT_PROMPT_TOKENS = (200, 1200)
LT_STEP_SCALE = 0.33  # a batch-of-one decode step is ~6 ms
LT_PER_REQUEST = 0.035  # each request in the batch adds this share to the step
LT_PREFILL_US_PER_TOKEN = 2.5
LT_QUARTERS = 4


def dp_long_tail(ctx: Context) -> Outcome:
    """DP=4 with round-robin: rank 2 collects the long generations and never catches up."""
    ranks = ctx.setup(A100_SXM, LT_GPUS, "dp rank {}")
    engine = ctx.engine
    base = ctx.program(rescaled(decode_step(1), LT_STEP_SCALE))
    prefill = k.GEMM_LARGE
    duration = round(LT_DURATION_S * 1e9 * ctx.scale)
    end = START_NS + duration
    queues: dict[int, list[Request]] = {r.index: [] for r in ranks}
    t = START_NS
    rid = 0
    while t < START_NS + duration * LT_ARRIVAL_END_SHARE:
        for slot in range(LT_GPUS):
            rid += 1
            long = slot == LT_LONG_RANK
            tokens = ctx.rng.randint(*(LT_LONG_TOKENS if long else LT_SHORT_TOKENS))
            prompt = ctx.rng.randint(*LT_PROMPT_TOKENS)
            queues[slot].append(Request(rid, t + slot * 50_000, tokens, prompt, tokens))
        t += round(ctx.rng.expovariate(1 / LT_GROUP_INTERVAL_MS) * 1e6)

    latencies: dict[int, list[float]] = {r.gpu: [] for r in ranks}
    for r in ranks:
        pending = queues[r.index]
        active: list[Request] = []
        while r.host < end and (pending or active):
            while pending and pending[0].arrival <= r.host:
                active.append(pending.pop(0))
            if not active:
                engine.wait_queue(r, pending[0].arrival)
                continue
            start = r.host
            h2d(engine, r, INPUT_BYTES)
            for req in active:
                if not req.admitted:
                    req.admitted = True
                    engine.launch(r, prefill, ctx.ns(req.prompt * LT_PREFILL_US_PER_TOKEN))
            factor = ctx.jitter(STEP_JITTER) * (1 + LT_PER_REQUEST * len(active))
            forward(ctx, [r], base, factor=factor)
            d2h(engine, r, TOKEN_BYTES)
            engine.sync(r)
            host_phase(ctx, r, ctx.ns(300, 0.1), ctx.ns(200, 0.1))
            close_step(ctx, r, start)
            for req in active:
                req.left -= 1
            for req in [q for q in active if q.left == 0]:
                active.remove(req)
                ctx.builder.nvtx_start_end(
                    r.pid, r.tid, REQUEST_RANGE, req.arrival, r.host, req.rid
                )
                latencies[r.gpu].append((r.host - req.arrival) / 1e6)

    busy = truth.busy_by_gpu(ctx.builder.kernel_runs)
    lo = min(iv[0][0] for iv in busy.values())
    hi = max(iv[-1][1] for iv in busy.values())
    quarter = (hi - lo) / LT_QUARTERS
    extra: dict[int, dict[str, float]] = {}
    for gpu, iv in busy.items():
        e = {}
        for q in range(LT_QUARTERS):
            a, b = round(lo + q * quarter), round(lo + (q + 1) * quarter)
            e[f"busy_share_q{q + 1}"] = truth.total(truth.clip(iv, a, b)) / (b - a)
        others = truth.union(x for g, other in busy.items() if g != gpu for x in other)
        idle = truth.gaps(iv, lo, hi)
        e["idle_while_others_busy_share"] = truth.overlap(idle, others) / (hi - lo)
        e["requests_done"] = float(len(latencies[gpu]))
        e["request_latency_p50_ms"] = truth.percentile(latencies[gpu], 50)
        e["request_latency_p99_ms"] = truth.percentile(latencies[gpu], 99)
        extra[gpu] = e
    last = f"busy_share_q{LT_QUARTERS}"
    rest = [e for g, e in extra.items() if g != LT_LONG_RANK]
    numbers = {
        "long_rank_busy_last_quarter": extra[LT_LONG_RANK][last],
        "other_busy_last_quarter_mean": mean([e[last] for e in rest]),
        "long_rank_busy_first_quarter": extra[LT_LONG_RANK]["busy_share_q1"],
        "other_busy_first_quarter_mean": mean([e["busy_share_q1"] for e in rest]),
        "other_idle_while_others_busy_mean": mean(
            [e["idle_while_others_busy_share"] for e in rest]
        ),
    }
    return Outcome(numbers, flagged_gpus=(LT_LONG_RANK,), gpu_extra=extra)


# --- control: a healthy TP=4 service --------------------------------------------------------

BAL_GPUS = 4
BAL_LAYERS = 2
BAL_STEPS = 150
BAL_STEP_SCALE = 0.5
BAL_ALLREDUCE_US = 330.0


def balanced(ctx: Context) -> Outcome:
    """TP=4 over NVLink, fast host, steady clocks: nothing to find."""
    ranks = ctx.setup(A100_SXM, BAL_GPUS, "tp rank {}")
    ops = ctx.program(rescaled(decode_step(BAL_LAYERS, tensor_parallel=True), BAL_STEP_SCALE))
    _tp_steps(ctx, ranks, ops, ctx.count(BAL_STEPS), None, BAL_ALLREDUCE_US)
    sample_metrics(ctx, flat_clock(ctx))
    runs = ctx.builder.kernel_runs
    busy = truth.busy_by_gpu(runs)
    gap_shares = [1 - truth.total(iv) / (iv[-1][1] - iv[0][0]) for iv in busy.values()]
    nccl_shares = [
        kernel_time(runs, g, lambda kern: kern.nccl) / truth.total(iv) for g, iv in busy.items()
    ]
    numbers = {
        "gap_share_max": max(gap_shares),
        "compute_skew": skew(list(compute_time(ctx).values())),
        "nccl_share_mean": mean(nccl_shares),
        **collective_skew(ctx.engine),
    }
    return Outcome(numbers)
