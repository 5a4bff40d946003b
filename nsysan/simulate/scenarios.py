"""The scenarios: each drives the engine to build one synthetic export and reports its numbers.

A scenario function takes a :class:`Context` (seeded RNG, builder, engine, scale) and
returns an :class:`Outcome` with the scenario-level ground truth. docs/scenarios.md
describes each one and the numbers it should produce.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

from nsysan.simulate import kernels as k
from nsysan.simulate import truth
from nsysan.simulate.engine import GIL_WAIT_CALL, QUEUE_WAIT_CALL, Engine, Rank, d2h, h2d
from nsysan.simulate.hardware import (
    A100_BOOST_CLOCK_HZ,
    A100_PCIE,
    A100_SXM,
    Gpu,
    GpuModel,
    make_gpus,
)
from nsysan.simulate.metrics import SAMPLE_PERIOD_NS, ClockFn, DashboardFn, add_gpu_metrics
from nsysan.simulate.trace import KernelRun, TraceBuilder
from nsysan.simulate.workload import Op, compute_us, decode_step, rescaled, with_kernel

START_NS = 400_000_000  # first activity, after process start-up
RANK_START_SPREAD_NS = 3_000_000
KERNEL_JITTER = 0.03  # lognormal sigma of one kernel's duration
STEP_JITTER = 0.02  # lognormal sigma of a whole step (batch composition)
TRANSFER_JITTER = 0.1
INPUT_BYTES = 64 * 8  # token ids of a batch of 64
TOKEN_BYTES = 64 * 8  # sampled token ids
LOGITS_BYTES = 64 * 32_000 * 2  # fp16 logits, when sampling runs on the CPU
MIN_COUNT = 4
QUEUE_LOCK_CALL = "pthread_mutex_lock"
QUEUE_LOCK_NS = (2_000, 30_000)

STEP_RANGE = "decode_step"
FORWARD_RANGE = "forward"
SAMPLING_RANGE = "sampling"
TOKENIZER_RANGE = "tokenizer"
REQUEST_RANGE = "request"


@dataclass
class Outcome:
    """Scenario-level ground truth, measured by the scenario itself."""

    numbers: dict[str, float]
    flagged_gpus: tuple[int, ...] = ()
    flagged_kernels: tuple[str, ...] = ()
    gpu_extra: dict[int, dict[str, float]] = field(default_factory=dict)
    ncu_runs: list[KernelRun] = field(default_factory=list)


@dataclass
class Context:
    """Everything a scenario function needs."""

    rng: random.Random
    builder: TraceBuilder
    engine: Engine
    scale: float
    hostile: bool
    gpus: tuple[Gpu, ...] = ()
    ranks: list[Rank] = field(default_factory=list)
    roles: dict[int, str] = field(default_factory=dict)

    def count(self, base: int) -> int:
        """``base`` scaled, at least MIN_COUNT."""
        return max(MIN_COUNT, round(base * self.scale))

    def jitter(self, sigma: float) -> float:
        return self.rng.lognormvariate(0.0, sigma)

    def ns(self, us: float, sigma: float = KERNEL_JITTER) -> int:
        return round(us * 1_000 * self.jitter(sigma))

    def setup(
        self, model: GpuModel, n: int, role: str, spread_ns: int = RANK_START_SPREAD_NS
    ) -> list[Rank]:
        """``n`` GPUs, one ``python3`` process per GPU feeding it from its main thread.

        The processes start within ``spread_ns`` of each other, in random order.
        """
        self.gpus = make_gpus(model, n, self.rng)
        base = self.rng.randrange(20_000, 60_000)
        for i, gpu in enumerate(self.gpus):
            pid = base + 13 * i + self.rng.randrange(6)
            self.builder.add_process(pid, "python3")
            self.builder.add_thread(pid, pid, "python3")
            self.builder.add_thread(pid, pid + 7, "cuda-EvtHandlr")
            start = START_NS + self.rng.randrange(spread_ns)
            self.ranks.append(Rank(i, gpu.index, pid, pid, start, start))
            self.roles[gpu.index] = role.format(i)
        return self.ranks

    def program(self, ops: Sequence[Op]) -> list[Op]:
        """``ops``, with the attention kernel renamed when hostile names are asked for."""
        if not self.hostile:
            return list(ops)
        return with_kernel(ops, k.ATTENTION, k.renamed(k.ATTENTION, k.HOSTILE_NAME))

    @property
    def tokenizer(self) -> str:
        return k.HOSTILE_NAME if self.hostile else TOKENIZER_RANGE


Scenario = Callable[[Context], Outcome]


# --- shared building blocks ---------------------------------------------------------------


def forward(
    ctx: Context,
    ranks: Sequence[Rank],
    ops: Sequence[Op],
    *,
    factor: float = 1.0,
    speed: Callable[[Rank, Op], float] | None = None,
    transfer_us: float | None = None,
) -> None:
    """Launch ``ops`` on every rank in lock step (collectives couple them).

    A launch runs ``op.us * factor * speed(rank, op)`` plus jitter; a collective moves
    data for ``transfer_us`` after the last rank has arrived.
    """
    starts = {r.index: r.host for r in ranks}
    for op in ops:
        if op.part == "comm":
            if transfer_us is None:
                raise ValueError("a program with collectives needs a transfer time")
            ctx.engine.collective(ranks, op.kernel, ctx.ns(transfer_us, TRANSFER_JITTER))
            continue
        for r in ranks:
            rank_factor = speed(r, op) if speed else 1.0
            ctx.engine.launch(r, op.kernel, ctx.ns(op.us * factor * rank_factor))
    for r in ranks:
        ctx.builder.nvtx_range(r.pid, r.tid, FORWARD_RANGE, starts[r.index], r.host)


def host_phase(ctx: Context, rank: Rank, sampling_ns: int, tokenizer_ns: int) -> None:
    """Sampling, then the tokenizer, which first takes the request-queue lock."""
    ctx.engine.host_range(rank, SAMPLING_RANGE, sampling_ns)
    lock_ns = ctx.rng.randint(*QUEUE_LOCK_NS)
    ctx.builder.osrt(rank.pid, rank.tid, QUEUE_LOCK_CALL, rank.host, rank.host + lock_ns)
    ctx.engine.host_range(rank, ctx.tokenizer, tokenizer_ns)


def close_step(ctx: Context, rank: Rank, start: int) -> None:
    ctx.builder.nvtx_range(rank.pid, rank.tid, STEP_RANGE, start, rank.host)


def flat_clock(ctx: Context) -> ClockFn:
    """A100 at boost clock, dipping one 15 MHz bin now and then."""
    rng = ctx.rng

    def clock(gpu: int, t: int) -> int:
        dip = 15_000_000 if rng.random() < 0.08 else 0
        return A100_BOOST_CLOCK_HZ - dip - rng.randrange(400_000)

    return clock


def sample_metrics(
    ctx: Context, clock: ClockFn, *, nccl_pcie_pct: float = 2.0,
    dashboard: DashboardFn | None = None,
) -> None:  # fmt: skip
    runs = ctx.builder.kernel_runs
    first = min(r.start for r in runs) // SAMPLE_PERIOD_NS * SAMPLE_PERIOD_NS - SAMPLE_PERIOD_NS
    last = max(r.end for r in runs) + SAMPLE_PERIOD_NS
    gpus = [g.index for g in ctx.gpus]
    add_gpu_metrics(
        ctx.builder, gpus, first, last, clock, nccl_pcie_pct=nccl_pcie_pct, dashboard=dashboard
    )


def kernel_time(runs: Sequence[KernelRun], gpu: int, pred: Callable[[k.Kernel], bool]) -> int:
    return sum(r.end - r.start for r in runs if r.gpu == gpu and pred(r.kernel))


def compute_time(ctx: Context) -> dict[int, int]:
    runs = ctx.builder.kernel_runs
    return {g.index: kernel_time(runs, g.index, lambda kern: not kern.nccl) for g in ctx.gpus}


def skew(values: Sequence[float]) -> float:
    """max / mean."""
    return max(values) / (sum(values) / len(values))


def kernel_diff(runs: Sequence[KernelRun], hi: int, lo: int) -> list[tuple[str, int]]:
    """Per kernel short name: time on GPU ``hi`` minus time on GPU ``lo``, largest first."""
    diff: dict[str, int] = {}
    for r in runs:
        if r.gpu in (hi, lo) and not r.kernel.nccl:
            sign = 1 if r.gpu == hi else -1
            diff[r.kernel.short] = diff.get(r.kernel.short, 0) + sign * (r.end - r.start)
    return sorted(diff.items(), key=lambda kv: (-kv[1], kv[0]))


def collective_skew(engine: Engine) -> dict[str, float]:
    """Mean arrival spread of collective instances and mean wait of the early arrivers, µs."""
    spreads: list[int] = []
    waits: list[int] = []
    for instance in engine.collectives:
        starts = [s for _, s, _ in instance]
        spreads.append(max(starts) - min(starts))
        waits.extend(max(starts) - s for s in starts)
    if not spreads:
        return {}
    return {
        "collective_skew_mean_us": sum(spreads) / len(spreads) / 1_000,
        "collective_wait_mean_us": sum(waits) / len(waits) / 1_000,
        "collective_instances": float(len(spreads)),
    }


def host_causes(ctx: Context) -> dict[int, dict[str, float]]:
    """Share of each GPU's gap time its feeding thread spent in each host activity."""
    busy = truth.busy_by_gpu(ctx.builder.kernel_runs)
    out: dict[int, dict[str, float]] = {}
    for rank in ctx.ranks:
        iv = busy[rank.gpu]
        gaps = truth.gaps(iv, iv[0][0], iv[-1][1])
        gap_ns = truth.total(gaps)
        spans = [s for s in ctx.builder.host_spans if s.pid == rank.pid and s.tid == rank.tid]
        shares = {}
        for key, kind, name in (
            ("gil_wait_share", "osrt", GIL_WAIT_CALL),
            ("queue_wait_share", "osrt", QUEUE_WAIT_CALL),
            ("sampling_share", "nvtx", SAMPLING_RANGE),
            ("tokenizer_share", "nvtx", ctx.tokenizer),
        ):
            chosen = truth.union(
                (s.start, s.end) for s in spans if (s.kind, s.name) == (kind, name)
            )
            shares[key] = truth.overlap(gaps, chosen) / gap_ns if gap_ns else 0.0
        out[rank.gpu] = shares
    return out


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


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


@dataclass
class _Request:
    rid: int
    arrival: int
    tokens: int
    prompt: int
    left: int = 0
    admitted: bool = False


def dp_long_tail(ctx: Context) -> Outcome:
    """DP=4 with round-robin: rank 2 collects the long generations and never catches up."""
    ranks = ctx.setup(A100_SXM, LT_GPUS, "dp rank {}")
    engine = ctx.engine
    base = ctx.program(rescaled(decode_step(1), LT_STEP_SCALE))
    prefill = k.GEMM_LARGE
    duration = round(LT_DURATION_S * 1e9 * ctx.scale)
    end = START_NS + duration
    queues: dict[int, list[_Request]] = {r.index: [] for r in ranks}
    t = START_NS
    rid = 0
    while t < START_NS + duration * LT_ARRIVAL_END_SHARE:
        for slot in range(LT_GPUS):
            rid += 1
            long = slot == LT_LONG_RANK
            tokens = ctx.rng.randint(*(LT_LONG_TOKENS if long else LT_SHORT_TOKENS))
            prompt = ctx.rng.randint(*LT_PROMPT_TOKENS)
            queues[slot].append(_Request(rid, t + slot * 50_000, tokens, prompt, tokens))
        t += round(ctx.rng.expovariate(1 / LT_GROUP_INTERVAL_MS) * 1e6)

    latencies: dict[int, list[float]] = {r.gpu: [] for r in ranks}
    for r in ranks:
        pending = queues[r.index]
        active: list[_Request] = []
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
