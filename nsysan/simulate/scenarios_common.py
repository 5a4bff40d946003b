"""What every scenario shares: the context it runs in, the outcome it reports, building blocks.

A scenario function takes a :class:`Context` (seeded RNG, builder, engine, scale) and
returns an :class:`Outcome` with the scenario-level ground truth. The building blocks
drive the engine (a forward pass in lock step, the host phase, metrics samples); the
measures compute the numbers scenarios report (kernel time, skew, collective skew, the
host causes of gaps). The scenarios themselves live in :mod:`nsysan.simulate.scenarios`,
:mod:`nsysan.simulate.scenarios_parallel` and :mod:`nsysan.simulate.scenarios_resources`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from nsysan.simulate import kernels as k
from nsysan.simulate import truth
from nsysan.simulate.engine import GIL_WAIT_CALL, QUEUE_WAIT_CALL, Engine, Rank
from nsysan.simulate.hardware import A100_BOOST_CLOCK_HZ, Gpu, GpuModel, make_gpus
from nsysan.simulate.metrics import SAMPLE_PERIOD_NS, ClockFn, DashboardFn, add_gpu_metrics
from nsysan.simulate.trace import KernelRun, TraceBuilder
from nsysan.simulate.workload import Op, with_kernel

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


@dataclass
class Request:
    """One request of the request-driven scenarios (dp-long-tail, request-burst)."""

    rid: int
    arrival: int
    tokens: int
    prompt: int
    left: int = 0
    admitted: bool = False


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
