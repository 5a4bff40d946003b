"""The ``serving-graphs`` scenario: TP=8 LLM serving whose decode steps are CUDA-graph replays.

Eight processes, one per GPU, as vLLM or SGLang run tensor parallelism. Every step the
engine's scheduler decides the batch (an NVTX ``schedule`` range on every worker's feeding
thread; now and then it is late), then each worker either replays the captured decode
graph (one ``cudaGraphLaunch``: the step's kernels, all-reduces included, run back to back
with sub-microsecond spacing) or, for a prefill step, launches the same kernels eagerly
(NCCL all-reduce through the extended launch API), copies the sampled tokens back and
synchronizes.

The same run (same seed, same draws) is written two ways, as Nsight Systems records it:

* ``graph`` level (``--cuda-graph-trace=graph``, the default): one
  ``CUPTI_ACTIVITY_KIND_GRAPH_TRACE`` row per replay, from its first node's start to its
  last node's end, and none of its kernels;
* ``node`` level (``--cuda-graph-trace=node``): every node's kernel, with its
  ``graphNodeId`` and the ``cudaGraphLaunch``'s correlation id.

Ground truth per GPU (``GpuTruth`` and ``extra``): busy and gap share at that level (a
graph execution is busy from its start to its end), and ``schedule_share``, the share of
gap time the feeding thread spent in the scheduler's range.
"""

from __future__ import annotations

from collections.abc import Sequence

from nsysan.simulate import kernels as k
from nsysan.simulate import truth
from nsysan.simulate.engine import KERNEL_SPACING_NS, LAUNCH_LATENCY_NS, Rank, d2h, h2d
from nsysan.simulate.hardware import A100_SXM
from nsysan.simulate.scenarios_common import (
    INPUT_BYTES,
    STEP_JITTER,
    TOKEN_BYTES,
    Context,
    Outcome,
    forward,
    mean,
)
from nsysan.simulate.workload import Op, decode_step, rescaled

SERVING_GPUS = 8
SERVING_LAYERS = 2
SERVING_STEPS = 300
DECODE_SCALE = 0.2  # ~6.5 ms of kernels per decode step
PREFILL_FACTOR = 3.0  # a prefill step's kernels run this much longer than decode's
PREFILL_EVERY = 8  # one step in eight is a prefill (eager)
ALLREDUCE_US = 40.0  # NVLink all-reduce of one decode step's activations
PREFILL_ALLREDUCE_US = 120.0
SCHEDULE_US = 300.0
LATE_SCHEDULE_US = 2_500.0
LATE_PROBABILITY = 0.2
SCHEDULE_RANGE = "schedule"
DECODE_RANGE = "decode"
# Two captured batch sizes, replayed by graph id (graphExecId = graphId + EXEC_ID_OFFSET).
GRAPH_IDS = (3, 5)
EXEC_ID_OFFSET = 100
GRAPH_NODE_ID_BASE = 1_000
GRAPH_LAUNCH_API = "cudaGraphLaunch_v10000"
GRAPH_LAUNCH_CALL_NS = (9_000, 18_000)
GRAPH_NODE_SPACING_NS = (150, 450)  # inside a replay the GPU front end chains the nodes
COLLECTIVE_END_SPREAD_NS = 2_500
GRAPH_LEVELS = ("graph", "node")
# The workers of one engine start together (the first step is a collective).
WORKER_START_SPREAD_NS = 100_000


class _Replay:
    """One rank's replay of a graph: its nodes as (node id, op, start, end)."""

    def __init__(self, rank: Rank, corr: int, graph_id: int) -> None:
        self.rank = rank
        self.corr = corr
        self.graph_id = graph_id
        self.nodes: list[tuple[int, Op, int, int]] = []


def _replay(ctx: Context, ranks: Sequence[Rank], ops: Sequence[Op], graph_id: int) -> list[_Replay]:
    """Launch the decode graph on every rank; run its nodes (collectives couple the ranks)."""
    rng, b = ctx.rng, ctx.builder
    replays, at = [], {}
    for r in ranks:
        call_end = r.host + rng.randint(*GRAPH_LAUNCH_CALL_NS)
        corr = b.runtime(r.pid, r.tid, GRAPH_LAUNCH_API, r.host, call_end)
        at[r.index] = max(r.host + LAUNCH_LATENCY_NS, r.gpu_free + rng.randint(*KERNEL_SPACING_NS))
        b.nvtx_range(r.pid, r.tid, DECODE_RANGE, r.host, call_end)
        r.host = call_end
        replays.append(_Replay(r, corr, graph_id))
    factor = ctx.jitter(STEP_JITTER)
    for i, op in enumerate(ops):
        node = GRAPH_NODE_ID_BASE * graph_id + i
        if op.part == "comm":
            done = max(at.values()) + ctx.ns(ALLREDUCE_US)
            ends = {r.index: done + rng.randint(0, COLLECTIVE_END_SPREAD_NS) for r in ranks}
        else:
            ends = {r.index: at[r.index] + max(ctx.ns(op.us * factor), 1_000) for r in ranks}
        for rep in replays:
            idx = rep.rank.index
            rep.nodes.append((node, op, at[idx], ends[idx]))
            at[idx] = ends[idx] + rng.randint(*GRAPH_NODE_SPACING_NS)
    for rep in replays:
        rep.rank.gpu_free = rep.nodes[-1][3]
    return replays


def _write(ctx: Context, replays: list[_Replay], level: str) -> None:
    b = ctx.builder
    for rep in replays:
        r = rep.rank
        if level == "node":
            for node, op, start, end in rep.nodes:
                b.kernel(r.pid, r.gpu, op.kernel, start, end, rep.corr, graph_node=node)
        else:
            label = k.renamed(k.FILL, f"CUDA graph {rep.graph_id}")
            start, end = rep.nodes[0][2], rep.nodes[-1][3]
            exec_id = rep.graph_id + EXEC_ID_OFFSET
            b.graph_execution(r.pid, r.gpu, rep.graph_id, exec_id, start, end, rep.corr, label)


def serving_graphs(ctx: Context, level: str = "graph") -> Outcome:
    """TP=8 serving: decode as CUDA-graph replays, prefill eager, a sometimes-late scheduler."""
    if level not in GRAPH_LEVELS:
        raise ValueError(f"unknown graph trace level {level!r}; choose one of {GRAPH_LEVELS}")
    ranks = ctx.setup(A100_SXM, SERVING_GPUS, "tp rank {}", spread_ns=WORKER_START_SPREAD_NS)
    decode = ctx.program(rescaled(decode_step(SERVING_LAYERS, tensor_parallel=True), DECODE_SCALE))
    prefill = rescaled(decode, PREFILL_FACTOR)
    engine = ctx.engine
    replays = prefills = late = 0
    for step in range(ctx.count(SERVING_STEPS)):
        is_late = ctx.rng.random() < LATE_PROBABILITY
        late += is_late
        schedule_ns = ctx.ns(LATE_SCHEDULE_US if is_late else SCHEDULE_US, 0.1)
        for r in ranks:
            engine.host_range(r, SCHEDULE_RANGE, schedule_ns + ctx.rng.randint(0, 20_000))
        if step % PREFILL_EVERY == 0:
            for r in ranks:
                h2d(engine, r, INPUT_BYTES)
            forward(ctx, ranks, prefill, transfer_us=PREFILL_ALLREDUCE_US)
            prefills += 1
        else:
            graph_id = GRAPH_IDS[ctx.rng.randrange(len(GRAPH_IDS))]
            _write(ctx, _replay(ctx, ranks, decode, graph_id), level)
            replays += 1
        for r in ranks:
            d2h(engine, r, TOKEN_BYTES)
            engine.sync(r)
    extra = _schedule_shares(ctx)
    busy = truth.busy_by_gpu(ctx.builder.kernel_runs)
    busy_shares = {g: truth.total(iv) / (iv[-1][1] - iv[0][0]) for g, iv in busy.items()}
    for g, share in busy_shares.items():
        extra[g]["busy_share"] = share
    numbers = {
        "graph_replays": float(replays),
        "prefill_steps": float(prefills),
        "late_schedules": float(late),
        "busy_share_mean": mean(list(busy_shares.values())),
        "schedule_share_mean": mean([e["schedule_share"] for e in extra.values()]),
    }
    return Outcome(numbers, gpu_extra=extra)


def _schedule_shares(ctx: Context) -> dict[int, dict[str, float]]:
    """Per GPU, the share of its gap time its feeding thread was in the scheduler's range."""
    busy = truth.busy_by_gpu(ctx.builder.kernel_runs)
    out = {}
    for rank in ctx.ranks:
        iv = busy[rank.gpu]
        gaps = truth.gaps(iv, iv[0][0], iv[-1][1])
        spans = truth.union(
            (s.start, s.end)
            for s in ctx.builder.host_spans
            if (s.pid, s.tid, s.kind, s.name) == (rank.pid, rank.tid, "nvtx", SCHEDULE_RANGE)
        )
        gap_ns = truth.total(gaps)
        out[rank.gpu] = {"schedule_share": truth.overlap(gaps, spans) / gap_ns if gap_ns else 0.0}
    return out
