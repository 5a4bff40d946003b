"""Scenarios of launch overhead, host CPUs and device memory, with their ground truth.

Kept apart from :mod:`nsysan.simulate.scenarios` and
:mod:`nsysan.simulate.scenarios_parallel`; they use the same :class:`Context` and engine
(:mod:`nsysan.simulate.scenarios_common`). docs/scenarios.md describes each one.
"""

from __future__ import annotations

from nsysan.simulate import kernels as k
from nsysan.simulate import truth
from nsysan.simulate.engine import (
    GIL_WAIT_CALL,
    KERNEL_SPACING_NS,
    LAUNCH_API,
    LAUNCH_CALL_NS,
    LAUNCH_LATENCY_NS,
    QUEUE_WAIT_CALL,
    SYNC_API,
    Rank,
)
from nsysan.simulate.hardware import A100_SXM, make_gpus
from nsysan.simulate.scenarios_common import (
    RANK_START_SPREAD_NS,
    SAMPLING_RANGE,
    START_NS,
    STEP_JITTER,
    STEP_RANGE,
    Context,
    Outcome,
    Request,
    mean,
)
from nsysan.simulate.trace import global_tid
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
        pid = next(r.pid for r in ctx.ranks if r.gpu == gpu)
        steps = sorted(
            sp.end - sp.start
            for sp in ctx.builder.host_spans
            if sp.pid == pid and sp.kind == "nvtx" and sp.name == STEP_RANGE
        )
        spans = [
            (sp.start, sp.end)
            for sp in ctx.builder.host_spans
            if sp.pid == pid and sp.name == STEP_RANGE
        ]
        m = len(steps)
        extra[gpu] = {
            "steps": float(m),
            "steps_per_s": m / ((max(e for _, e in spans) - min(s for s, _ in spans)) / 1e9),
            "step_p50_ns": float(steps[(m + 1) // 2 - 1]),  # nearest rank
            "step_p99_ns": float(steps[-(-99 * m // 100) - 1]),
            "step_max_ns": float(steps[-1]),
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


# --- 4.4 / 4.5 host CPUs: saturated vs blocked ------------------------------------------

CPU_CORES = 16
CPU_GPUS = 4
CPU_LAYERS = 2
CPU_STEPS = 300
CPU_STEP_SCALE = 0.2  # ~6.5 ms of GPU work per step
CPU_SLICE_NS = 20_000_000  # a busy worker's time slice between two context switches
CPU_SLICE_PAUSE_NS = (20_000, 200_000)  # ... and the pause before its next slice
SATURATED_WORK_NS = (800_000, 1_200_000)  # Python work of the feeding thread per step
PREEMPTED_NS = (1_500_000, 4_000_000)  # the feeding thread waits for a core, per step
GIL_HOLD_NS = (2_000_000, 6_000_000)  # the tokenizer thread's hold before a waiter gets the GIL
GIL_WORK_NS = (1_200_000, 1_800_000)  # Python work of the feeding thread under the GIL
WORKER_THREAD = "pt_data_worker"
TOKENIZER_THREAD = "tokenizer"
SATURATED_CORE_SHARE = 0.9  # the cpu metrics' threshold (docs/metrics/cpu.md)
Interval = tuple[int, int]


def _sliced(ctx: Context, pid: int, tid: int, cpu: int, lo: int, hi: int) -> list[Interval]:
    """A busy thread on ``cpu`` from ``lo`` to ``hi``: 20 ms slices with short pauses."""
    out = []
    t = lo
    while t < hi:
        end = min(t + CPU_SLICE_NS, hi)
        ctx.builder.on_cpu(pid, tid, cpu, t, end)
        out.append((t, end))
        t = end + ctx.rng.randint(*CPU_SLICE_PAUSE_NS)
    return out


def _complement(lo: int, hi: int, off: list[Interval]) -> list[Interval]:
    return truth.gaps(truth.union(off), lo, hi)


def _emit(ctx: Context, pid: int, tid: int, cpu: int, spans: list[Interval]) -> None:
    for s, e in spans:
        if e > s:
            ctx.builder.on_cpu(pid, tid, cpu, s, e)


def _cpu_truth(
    ctx: Context,
    on_cpu: dict[int, list[Interval]],
    feeding_on: dict[int, list[Interval]],
    waiting: dict[int, list[Interval]],
    off: dict[int, list[Interval]],
) -> tuple[dict[str, float], dict[int, dict[str, float]]]:
    """Host and per-GPU CPU numbers with the definitions of docs/metrics/cpu.md.

    ``on_cpu``: per core, its busy intervals; the others per GPU, of its feeding thread.
    """
    busy = truth.busy_by_gpu(ctx.builder.kernel_runs)
    lo = min(iv[0][0] for iv in busy.values())
    hi = max(iv[-1][1] for iv in busy.values())
    per_gpu_gaps = {g: truth.gaps(iv, iv[0][0], iv[-1][1]) for g, iv in busy.items()}
    gap_union = truth.clip(truth.union(x for v in per_gpu_gaps.values() for x in v), lo, hi)
    gap_ns = truth.total(gap_union)
    cores = [truth.clip(truth.union(v), lo, hi) for v in on_cpu.values()]
    in_gaps = sum(truth.overlap(c, gap_union) for c in cores)
    edges = sorted([(s, 1) for c in cores for s, _ in c] + [(e, -1) for c in cores for _, e in c])
    need = -(-int(SATURATED_CORE_SHARE * CPU_CORES * 10) // 10)  # ceil(0.9 * cores)
    full: list[Interval] = []
    level = 0
    for (t, step), nxt in zip(edges, [*edges[1:], (hi, 0)], strict=True):
        level += step
        if level >= need and nxt[0] > t:
            full.append((t, nxt[0]))
    host = {
        "busy_cores_gap_mean": in_gaps / gap_ns,
        "saturated_gap_share": truth.overlap(truth.union(full), gap_union) / gap_ns,
        "cores": float(CPU_CORES),
    }
    extra = {}
    for g, gaps in per_gpu_gaps.items():
        total = truth.total(gaps)
        extra[g] = {
            "running_share": truth.overlap(truth.union(feeding_on[g]), gaps) / total,
            "waiting_share": truth.overlap(truth.union(waiting.get(g, [])), gaps) / total,
            "descheduled_share": truth.overlap(truth.union(off.get(g, [])), gaps) / total,
        }
    return host, extra


def cpu_saturated(ctx: Context) -> Outcome:
    """DP=2 on a 16-core host whose data-loader workers fill every core: the feeding
    threads wait for a core (switched out, outside any call) before each step."""
    ctx.builder.cpu_cores = CPU_CORES
    ranks = ctx.setup(A100_SXM, CPU_GPUS, "dp rank {}")
    ops = ctx.program(rescaled(decode_step(CPU_LAYERS), CPU_STEP_SCALE))
    off: dict[int, list[Interval]] = {r.gpu: [] for r in ranks}
    for _ in range(ctx.count(CPU_STEPS)):
        for r in ranks:
            start = r.host
            work = ctx.rng.randint(*SATURATED_WORK_NS)
            r.host += work // 2
            wait = ctx.rng.randint(*PREEMPTED_NS)
            off[r.gpu].append((r.host, r.host + wait))
            r.host += wait + work - work // 2
            ctx.builder.nvtx_range(r.pid, r.tid, SAMPLING_RANGE, start, r.host)
            for op in ops:
                ctx.engine.launch(r, op.kernel, ctx.ns(op.us))
            ctx.engine.sync(r)
            ctx.builder.nvtx_range(r.pid, r.tid, STEP_RANGE, start, r.host)
    lo = min(s.start for s in ctx.builder.host_spans)
    hi = max(r.host for r in ranks)
    on_cpu: dict[int, list[Interval]] = {c: [] for c in range(CPU_CORES)}
    feeding_on: dict[int, list[Interval]] = {}
    workers_per_rank = (CPU_CORES - CPU_GPUS) // CPU_GPUS
    for i, r in enumerate(ranks):
        mine = _complement(lo, hi, off[r.gpu])
        _emit(ctx, r.pid, r.tid, i, mine)
        feeding_on[r.gpu] = mine
        on_cpu[i] += mine
        # A spare worker takes the feeding thread's core while it is switched out.
        spare = r.pid + 100
        ctx.builder.add_thread(r.pid, spare, WORKER_THREAD)
        _emit(ctx, r.pid, spare, i, truth.union(off[r.gpu]))
        on_cpu[i] += truth.union(off[r.gpu])
        for w in range(workers_per_rank):
            core = CPU_GPUS + i * workers_per_rank + w
            tid = r.pid + 101 + w
            ctx.builder.add_thread(r.pid, tid, WORKER_THREAD)
            on_cpu[core] += _sliced(ctx, r.pid, tid, core, lo, hi)
    host, extra = _cpu_truth(ctx, on_cpu, feeding_on, {}, off)
    return Outcome(host, flagged_gpus=tuple(r.gpu for r in ranks), gpu_extra=extra)


def gil_blocked(ctx: Context) -> Outcome:
    """One Python process feeds 2 GPUs from two threads; a tokenizer thread holds the GIL,
    so the feeding threads wait for it (condition waits, off CPU) while most cores idle."""
    ctx.builder.cpu_cores = CPU_CORES
    ctx.gpus = make_gpus(A100_SXM, CPU_GPUS, ctx.rng)
    pid = ctx.rng.randrange(20_000, 60_000)
    ctx.builder.add_process(pid, "python3")
    for i, gpu in enumerate(ctx.gpus):
        tid = pid + i
        ctx.builder.add_thread(pid, tid, "python3" if i == 0 else f"gpu{i}-feeder")
        start = START_NS + ctx.rng.randrange(RANK_START_SPREAD_NS)
        ctx.ranks.append(Rank(i, gpu.index, pid, tid, start, start))
        ctx.roles[gpu.index] = f"dp rank {i} (thread)"
    tokenizer = pid + 50
    ctx.builder.add_thread(pid, tokenizer, TOKENIZER_THREAD)
    ranks = ctx.ranks
    ops = ctx.program(rescaled(decode_step(CPU_LAYERS), CPU_STEP_SCALE))
    gil_free = min(r.host for r in ranks)
    steps = {r.gpu: 0 for r in ranks}
    n_steps = ctx.count(CPU_STEPS)
    while min(steps.values()) < n_steps:
        r = min((x for x in ranks if steps[x.gpu] < n_steps), key=lambda x: x.host)
        start = r.host
        grant = max(gil_free, r.host) + ctx.rng.randint(*GIL_HOLD_NS)
        ctx.engine.wait_gil(r, grant)
        ctx.engine.host_range(r, SAMPLING_RANGE, ctx.rng.randint(*GIL_WORK_NS))
        gil_free = r.host
        for op in ops:
            ctx.engine.launch(r, op.kernel, ctx.ns(op.us))
        ctx.engine.sync(r)
        ctx.builder.nvtx_range(r.pid, r.tid, STEP_RANGE, start, r.host)
        steps[r.gpu] += 1
    lo = min(s.start for s in ctx.builder.host_spans)
    hi = max(r.host for r in ranks)
    on_cpu: dict[int, list[Interval]] = {c: [] for c in range(CPU_CORES)}
    feeding_on: dict[int, list[Interval]] = {}
    waiting: dict[int, list[Interval]] = {}
    for i, r in enumerate(ranks):
        waits = [
            (s.start, s.end)
            for s in ctx.builder.host_spans
            if (s.pid, s.tid, s.kind, s.name) == (r.pid, r.tid, "osrt", GIL_WAIT_CALL)
        ]
        mine = _complement(lo, hi, waits)
        _emit(ctx, r.pid, r.tid, i, mine)
        feeding_on[r.gpu] = mine
        on_cpu[i] += mine
        syncs = [
            (row[0], row[1])
            for row in ctx.builder.rows["CUPTI_ACTIVITY_KIND_RUNTIME"]
            if row[3] == global_tid(r.pid, r.tid) and row[5] == ctx.builder.string_id(SYNC_API)
        ]
        waiting[r.gpu] = waits + syncs
    on_cpu[CPU_GPUS] += _sliced(ctx, pid, tokenizer, CPU_GPUS, lo, hi)
    host, extra = _cpu_truth(ctx, on_cpu, feeding_on, waiting, {})
    return Outcome(host, flagged_gpus=tuple(r.gpu for r in ranks), gpu_extra=extra)


# --- 4.2 device memory: one GPU's KV cache is full ------------------------------------------

MEM_GPUS = 4
MEM_FULL_GPU = 2
MEM_LAYERS = 2
MEM_STEPS = 400
MEM_STEP_SCALE = 0.15  # ~5 ms of GPU work per step
MEM_STEP_NS = 5_600_000  # every rank serves until the same deadline (no drift)
WEIGHTS_BYTES = 40 << 30
KV_START_SHARE = {"full": 0.85, "room": 0.55}  # in use (weights + KV pool) after warm-up
KV_BLOCK_BYTES = {"full": 512 << 20, "room": 256 << 20}  # KV blocks allocated per step
# KV freed when requests finish: above this share of capacity, a share of the KV in use.
FREE_ABOVE = {"full": 0.97, "room": 0.75}
FREE_SHARE = {"full": 0.06, "room": 0.15}
ADMIT_STALL_NS = (2_000_000, 5_000_000)  # the scheduler cannot admit: it swaps and waits
STEP_HOST_NS = (200_000, 400_000)
NEAR_FULL_SHARE = 0.9  # the memory metrics' threshold (docs/metrics/memory.md)
SCHEDULE_RANGE = "schedule"


def kv_cache_full(ctx: Context) -> Outcome:
    """DP=4 decode; GPU 2 serves long contexts, so its KV cache sits near full and its
    scheduler stalls before steps; the other GPUs keep room."""
    ranks = ctx.setup(A100_SXM, MEM_GPUS, "dp rank {}")
    ops = ctx.program(rescaled(decode_step(MEM_LAYERS), MEM_STEP_SCALE))
    cap = A100_SXM.total_memory
    level: dict[int, int] = {}
    kv: dict[int, list[tuple[int, int]]] = {}  # live KV blocks: (address, bytes)
    for r in ranks:
        kind = "full" if r.gpu == MEM_FULL_GPU else "room"
        ctx.builder.device_memory(r.pid, r.gpu, r.host, 0x7F10_0000_0000, WEIGHTS_BYTES, 0)
        pool = int(KV_START_SHARE[kind] * cap) - WEIGHTS_BYTES
        ctx.builder.device_memory(r.pid, r.gpu, r.host, 0x7F18_0000_0000, pool, 0)
        # The pool stays; the blocks allocated per step come and go with requests.
        level[r.gpu], kv[r.gpu] = WEIGHTS_BYTES + pool, []
    address = 0x7F20_0000_0000
    deadline = max(r.host for r in ranks) + ctx.count(MEM_STEPS) * MEM_STEP_NS
    while any(r.host < deadline for r in ranks):
        for r in ranks:
            if r.host >= deadline:
                continue
            kind = "full" if r.gpu == MEM_FULL_GPU else "room"
            start = r.host
            if level[r.gpu] >= NEAR_FULL_SHARE * cap:
                stall = ctx.rng.randint(*ADMIT_STALL_NS)
                ctx.builder.nvtx_range(r.pid, r.tid, SCHEDULE_RANGE, r.host, r.host + stall)
                r.host += stall
            if level[r.gpu] >= FREE_ABOVE[kind] * cap:
                target = level[r.gpu] - FREE_SHARE[kind] * level[r.gpu]
                while kv[r.gpu] and level[r.gpu] > target:
                    addr, nbytes = kv[r.gpu].pop(0)
                    ctx.builder.device_memory(r.pid, r.gpu, r.host, addr, nbytes, 1)
                    level[r.gpu] -= nbytes
            block = int(KV_BLOCK_BYTES[kind] * ctx.jitter(0.1))
            if level[r.gpu] + block <= cap:
                address += 0x1000_0000
                ctx.builder.device_memory(r.pid, r.gpu, r.host, address, block, 0)
                kv[r.gpu].append((address, block))
                level[r.gpu] += block
            for op in ops:
                ctx.engine.launch(r, op.kernel, ctx.ns(op.us))
            ctx.engine.sync(r)
            r.host += ctx.rng.randint(*STEP_HOST_NS)
            ctx.builder.nvtx_range(r.pid, r.tid, STEP_RANGE, start, r.host)
    extra = _memory_truth(ctx, cap)
    numbers = {
        "near_full_share_full_gpu": extra[MEM_FULL_GPU]["near_full_share"],
        "near_full_share_others_max": max(
            e["near_full_share"] for g, e in extra.items() if g != MEM_FULL_GPU
        ),
        "near_full_gap_share_full_gpu": extra[MEM_FULL_GPU]["near_full_gap_share"],
    }
    return Outcome(numbers, flagged_gpus=(MEM_FULL_GPU,), gpu_extra=extra)


def _memory_truth(ctx: Context, cap: int) -> dict[int, dict[str, float]]:
    busy = truth.busy_by_gpu(ctx.builder.kernel_runs)
    events: dict[int, list[tuple[int, int]]] = {}
    for row in ctx.builder.rows["CUDA_GPU_MEMORY_USAGE_EVENTS"]:
        t, gpu, nbytes, op = row[0], row[2], row[6], row[8]
        events.setdefault(gpu, []).append((t, nbytes if op == 0 else -nbytes))
    out = {}
    for gpu, iv in busy.items():
        lo, hi = iv[0][0], iv[-1][1]
        ev = sorted(events[gpu], key=lambda e: e[0])

        def level_at(x: int, ev: list[tuple[int, int]] = ev) -> int:
            return sum(d for t, d in ev if t <= x)

        points = [lo] + sorted({t for t, _ in ev if lo < t < hi}) + [hi]
        near = 0
        peak = level_at(lo)
        for a, b in zip(points, points[1:], strict=False):
            v = level_at(a)
            peak = max(peak, v)
            if v >= NEAR_FULL_SHARE * cap:
                near += b - a
        gaps = truth.gaps(iv, lo, hi)
        full_gaps = [e - s for s, e in gaps if level_at(s) >= NEAR_FULL_SHARE * cap]
        out[gpu] = {
            "peak_share": peak / cap,
            "near_full_share": near / (hi - lo),
            "near_full_gaps": float(len(full_gaps)),
            "near_full_gap_share": sum(full_gaps) / truth.total(gaps),
        }
    return out


# --- 4.3 a request burst lands on the emptiest GPU; the others starve ------------------------

BURST_GPUS = 4
BURST_DURATION_S = 4.0
BURST_AT_SHARE = 0.3  # the burst arrives at this share of the capture
BURST_REQUESTS = 48
BURST_SPREAD_NS = 40_000_000  # ... within 40 ms
TRICKLE_INTERVAL_MS = 60.0  # mean gap between ordinary arrivals (all GPUs together)
BURST_TOKENS = (10, 30)
BURST_STEP_SCALE = 0.33
BURST_PER_REQUEST = 0.02
LOAD_WINDOWS = 50  # the load metrics' windows (docs/metrics/load.md)
BURST_FACTOR = 3.0
BURST_MIN_EVENTS = 5
STARVATION_MIN_NS = 5_000_000
REQUEST_TEXT = "request {}"


def request_burst(ctx: Context) -> Outcome:
    """DP=4 behind a router: ordinary requests round-robin, then a burst of 48 requests in
    40 ms all goes to the GPU that received the fewest in the last second; while it works
    through them, the other GPUs wait on their empty queues."""
    ranks = ctx.setup(A100_SXM, BURST_GPUS, "dp rank {}")
    engine = ctx.engine
    base = ctx.program(rescaled(decode_step(1), BURST_STEP_SCALE))
    duration = round(BURST_DURATION_S * 1e9 * ctx.scale)
    end = START_NS + duration
    burst_at = START_NS + round(duration * BURST_AT_SHARE)
    queues: dict[int, list[Request]] = {r.index: [] for r in ranks}
    arrivals: list[tuple[int, int]] = []  # (time, rank) of every request, for the router
    t, rid, slot = START_NS, 0, 0
    while t < end:
        if burst_at <= t:
            recent = [i for a, i in arrivals if a >= burst_at - 1_000_000_000]
            target = min(range(BURST_GPUS), key=lambda i: (recent.count(i), i))
            for _ in range(BURST_REQUESTS):
                rid += 1
                at_ns = burst_at + ctx.rng.randrange(BURST_SPREAD_NS)
                queues[target].append(Request(rid, at_ns, ctx.rng.randint(*BURST_TOKENS), 300))
                arrivals.append((at_ns, target))
            burst_at = end + 1  # once
            for q in queues.values():
                q.sort(key=lambda r: r.arrival)
        rid += 1
        tokens = ctx.rng.randint(*BURST_TOKENS)
        queues[slot].append(Request(rid, t, tokens, 300))
        arrivals.append((t, slot))
        slot = (slot + 1) % BURST_GPUS
        t += round(ctx.rng.expovariate(1 / TRICKLE_INTERVAL_MS) * 1e6)
    for q in queues.values():
        q.sort(key=lambda r: r.arrival)
    for r in ranks:
        pending, active = queues[r.index], []
        r.host = max(r.host, START_NS)
        while pending or active:
            if r.host >= end:
                pending = []  # the capture ends: finish what was admitted, admit no more
            while pending and pending[0].arrival <= r.host:
                req = pending.pop(0)
                req.left = req.tokens
                active.append(req)
            if not active:
                engine.wait_queue(r, pending[0].arrival)
                continue
            start = r.host
            factor = ctx.jitter(STEP_JITTER) * (1 + BURST_PER_REQUEST * len(active))
            for op in base:
                engine.launch(r, op.kernel, ctx.ns(op.us * factor))
            engine.sync(r)
            ctx.builder.nvtx_range(r.pid, r.tid, STEP_RANGE, start, r.host)
            for req in active:
                req.left -= 1
            for req in [q for q in active if q.left == 0]:
                active.remove(req)
                ctx.builder.nvtx_start_end(
                    r.pid, r.tid, REQUEST_TEXT.format(req.rid), req.arrival, r.host, req.rid
                )
    numbers, flagged, extra = _burst_truth(ctx)
    return Outcome(numbers, flagged_gpus=flagged, gpu_extra=extra)


def _burst_truth(
    ctx: Context,
) -> tuple[dict[str, float], tuple[int, ...], dict[int, dict[str, float]]]:
    busy = truth.busy_by_gpu(ctx.builder.kernel_runs)
    lo = min(iv[0][0] for iv in busy.values())
    hi = max(iv[-1][1] for iv in busy.values())
    gpu_of = {global_tid(r.pid, r.tid): r.gpu for r in ctx.ranks}
    starts = [
        (row[0], gpu_of[row[7]])
        for row in ctx.builder.rows["NVTX_EVENTS"]
        if str(row[6]).startswith("request ") and row[7] in gpu_of
    ]
    width = -(-(hi - lo) // LOAD_WINDOWS)
    load = [[0] * BURST_GPUS for _ in range(LOAD_WINDOWS)]
    for t, g in starts:
        if lo <= t < hi:
            load[(t - lo) // width][g] += 1
    totals = [sum(w) for w in load]
    median = truth.percentile(totals, 50)
    threshold = max(BURST_FACTOR * median, BURST_MIN_EVENTS)
    bursts = [i for i, v in enumerate(totals) if v >= threshold]
    top = max(bursts, key=lambda i: totals[i])
    top_gpu = max(range(BURST_GPUS), key=lambda g: (load[top][g], -g))
    extra: dict[int, dict[str, float]] = {}
    for r in ctx.ranks:
        iv = busy[r.gpu]
        others = truth.union(x for g, o in busy.items() if g != r.gpu for x in o)
        waits = truth.union(
            (s.start, s.end)
            for s in ctx.builder.host_spans
            if (s.pid, s.tid, s.kind, s.name) == (r.pid, r.tid, "osrt", QUEUE_WAIT_CALL)
        )
        starved = 0
        for s, e in truth.gaps(iv, iv[0][0], iv[-1][1]):
            if e - s < STARVATION_MIN_NS:
                continue
            if truth.overlap([(s, e)], others) >= 0.5 * (e - s) and truth.overlap(
                [(s, e)], waits
            ) >= 0.5 * (e - s):
                starved += e - s
        extra[r.gpu] = {
            "starved_share": starved / (iv[-1][1] - iv[0][0]),
            "requests": float(sum(1 for _, g in starts if g == r.gpu)),
        }
    numbers = {
        "burst_windows": float(len(bursts)),
        "burst_load": float(totals[top]),
        "burst_top_gpu": float(top_gpu),
        "burst_top_share": load[top][top_gpu] / totals[top],
        "median_window_load": float(median),
    }
    return numbers, (top_gpu,), extra
