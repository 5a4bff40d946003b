"""Rules on the host CPUs during GPU gaps: saturated cores or blocked feeding threads.

They read the per-host verdict of :mod:`nsysan.analyze.cpu` (docs/metrics/cpu.md) and
fire only where a GPU of that host idles at least ``IDLE_GPU_SHARE`` of its
(steady-state) window. Nsight Systems records scheduling only for the profiled
processes' threads, so every claim says "cores running the profiled processes", never
"idle cores".

* ``cpu-saturated``: the profiled processes alone fill the host's cores during gaps.
* ``cpu-blocked``: the feeding threads wait in locks, condition variables or
  synchronizing calls while few cores run profiled threads.
* ``feeding-thread-busy``: the feeding threads are on CPU through the gaps while few
  cores run profiled threads: one thread's own work is the launch path's bottleneck.
* ``feeding-thread-off-cpu``: the feeding threads are off CPU outside any traced call.
"""

from __future__ import annotations

from nsysan.diagnose.facts import Facts
from nsysan.diagnose.findings import EvidenceItem, Finding
from nsysan.diagnose.gpu_rules import IDLE_GPU_SHARE, gpu_list, span
from nsysan.diagnose.resource_facts import CpuHostFacts
from nsysan.report.fmt import percent

SOURCE = "docs/metrics/cpu.md"
CAPTURE = "nsys profile -t cuda,nvtx,osrt --cpuctxsw=process-tree"


def _ev(metric: str, label: str, value: float | int | None, display: str) -> EvidenceItem:
    return EvidenceItem(metric=metric, label=label, value=value, display=display, source=SOURCE)


def _idle_hosts(f: Facts, verdict: str) -> list[tuple[CpuHostFacts, float]]:
    """Hosts with ``verdict`` and the largest steady-state gap share of their GPUs."""
    gap = {g.gpu: g.gap_share for g in f.per_gpu}
    out = []
    for h in f.resources.cpu:
        worst = max((gap.get(g, 0.0) for g in h.gpus), default=0.0)
        if h.verdict == verdict and worst >= IDLE_GPU_SHARE:
            out.append((h, worst))
    return out


def _their(hits: list[tuple[CpuHostFacts, float]]) -> tuple[str, str]:
    """("is", "its") for one GPU, ("are", "their") for several."""
    one = len({g for h, _ in hits for g in h.gpus}) == 1
    return ("is", "its") if one else ("are", "their")


def _where(hits: list[tuple[CpuHostFacts, float]]) -> tuple[str, str, str]:
    """("GPU 0–3", "host a, host b", gap-share span)."""
    gpus = [g for h, _ in hits for g in h.gpus]
    hosts = ", ".join(h.host for h, _ in hits[:3]) + (
        f" (+{len(hits) - 3})" if len(hits) > 3 else ""
    )
    return gpu_list(gpus), hosts, span(w for _, w in hits)


def _cores(hits: list[tuple[CpuHostFacts, float]]) -> str:
    busy = span((h.busy_cores_gap_mean or 0.0 for h, _ in hits), lambda v: f"{v:.1f}")
    total = span((float(h.cores or 0) for h, _ in hits), lambda v: f"{v:.0f}")
    return f"{busy} of {total}"


def _host_evidence(hits: list[tuple[CpuHostFacts, float]]) -> tuple[EvidenceItem, ...]:
    out: list[EvidenceItem] = []
    for h, _ in hits[:2]:
        out += [
            _ev("busy_cores_gap_mean", f"cores running the profiled processes during gaps, {h.host}", h.busy_cores_gap_mean, f"{(h.busy_cores_gap_mean or 0):.1f} / {h.cores}"),
            _ev("saturated_gap_share", f"gap time with ≥90% of cores busy, {h.host}", h.saturated_gap_share, percent(h.saturated_gap_share)),
            _ev("feeding_waiting_share", f"feeding threads waiting, share of gap time, {h.host}", h.waiting_share, percent(h.waiting_share)),
            _ev("feeding_running_share", f"feeding threads on CPU, share of gap time, {h.host}", h.running_share, percent(h.running_share)),
            _ev("feeding_descheduled_share", f"feeding threads off CPU outside any call, share of gap time, {h.host}", h.descheduled_share, percent(h.descheduled_share)),
        ]  # fmt: skip
    return tuple(out)


COVERS_EN = "(Nsight Systems records only the profiled processes' threads: other programs' use of the cores is not seen.)"
COVERS_ZH = "（Nsight Systems 只记录被分析进程的线程：其他程序对 CPU 核的占用不可见。）"


def cpu_saturated(f: Facts) -> Finding | None:
    hits = _idle_hosts(f, "saturated")
    if not hits:
        return None
    gpus, hosts, gaps = _where(hits)
    sat = span(h.saturated_gap_share or 0.0 for h, _ in hits)
    desched = span(h.descheduled_share or 0.0 for h, _ in hits)
    return Finding(
        rule_id="cpu-saturated",
        severity="warning",
        seed_section="4.4",
        cause_category="CPU-side scheduling",
        impact_share=max(w for _, w in hits),
        title={"en": "Host CPUs saturated", "zh": "主机 CPU 饱和"},
        claim={
            "en": f"{gpus} {_their(hits)[0]} idle {gaps} of {_their(hits)[1]} window while the profiled processes keep at least 90% of the cores of {hosts} busy "
            f"during {sat} of GPU gap time (on average {_cores(hits)} cores); the feeding threads are off CPU outside any call "
            f"{desched} of their gap time: the host is CPU-starved.",
            "zh": f"{gpus} 空闲占时间窗的 {gaps}，而在 GPU 间隙时间的 {sat} 内，被分析进程占用了 {hosts} 至少 90% 的 CPU 核"
            f"（平均 {_cores(hits).replace(' of ', ' / ')} 个核）；发射线程在其间隙时间的 {desched} 内不在 CPU 上且不在任何调用中："
            "主机 CPU 不足。",
        },
        recommendation={
            "en": "Give each GPU more CPU cores, or run fewer CPU threads (data-loader workers, tokenizer threads, OMP_NUM_THREADS), "
            "and pin each feeding thread to a core of its own.",
            "zh": "为每张卡分配更多 CPU 核，或减少 CPU 线程数（数据加载进程、tokenizer 线程、OMP_NUM_THREADS），并为每个发射线程绑定独占的 CPU 核。",
        },
        evidence=_host_evidence(hits),
    )


def cpu_blocked(f: Facts) -> Finding | None:
    hits = _idle_hosts(f, "blocked")
    if not hits:
        return None
    gpus, hosts, gaps = _where(hits)
    wait = span(h.waiting_share or 0.0 for h, _ in hits)
    return Finding(
        rule_id="cpu-blocked",
        severity="warning",
        seed_section="4.4",
        cause_category="serialized host (GIL, locks, queues)",
        impact_share=max(w for _, w in hits),
        title={
            "en": "Feeding threads blocked, not short of cores",
            "zh": "发射线程被阻塞，而不是缺少 CPU 核",
        },
        claim={
            "en": f"{gpus} {_their(hits)[0]} idle {gaps} of {_their(hits)[1]} window; {_their(hits)[1]} feeding threads wait in locks, condition variables or synchronizing "
            f"calls {wait} of their gap time, while the profiled processes keep only {_cores(hits)} cores of {hosts} busy: "
            f"serialization (GIL, a lock, a queue) — more cores will not help. {COVERS_EN}",
            "zh": f"{gpus} 空闲占时间窗的 {gaps}；其发射线程在间隙时间的 {wait} 内等待锁、条件变量或同步调用，"
            f"而被分析进程在 {hosts} 上平均只占用 {_cores(hits).replace(' of ', ' / ')} 个核：这是串行化（GIL、锁、队列）——"
            f"增加 CPU 核无济于事。{COVERS_ZH}",
        },
        recommendation={
            "en": "Remove the serialization on the launch path: move tokenization and sampling off the GIL (C++/Rust, separate processes), "
            "shorten the critical section, or hand work through a lock-free queue; adding cores alone will not help.",
            "zh": "消除发射路径上的串行化：把 tokenizer 与采样移出 GIL（C++/Rust 实现或独立进程），缩短临界区，或改用无锁队列传递工作；"
            "仅增加 CPU 核无济于事。",
        },
        evidence=_host_evidence(hits),
    )


def feeding_thread_busy(f: Facts) -> Finding | None:
    hits = _idle_hosts(f, "feeding_thread_busy")
    if not hits:
        return None
    gpus, hosts, gaps = _where(hits)
    run = span(h.running_share or 0.0 for h, _ in hits)
    return Finding(
        rule_id="feeding-thread-busy",
        severity="warning",
        seed_section="4.4",
        cause_category="CPU-side scheduling",
        impact_share=max(w for _, w in hits),
        title={"en": "The feeding thread is busy on its CPU", "zh": "发射线程自身在 CPU 上忙碌"},
        claim={
            "en": f"{gpus} {_their(hits)[0]} idle {gaps} of {_their(hits)[1]} window; {_their(hits)[1]} feeding threads are on CPU {run} of their gap time while the profiled "
            f"processes keep {_cores(hits)} cores of {hosts} busy: one thread's own host work sits on the launch path. {COVERS_EN}",
            "zh": f"{gpus} 空闲占时间窗的 {gaps}；其发射线程在间隙时间的 {run} 内在 CPU 上运行，而被分析进程在 {hosts} 上平均只占用 "
            f"{_cores(hits).replace(' of ', ' / ')} 个核：单个线程自身的主机工作处在发射路径上。{COVERS_ZH}",
        },
        recommendation={
            "en": "Find what the feeding thread computes between launches (NVTX ranges or CPU sampling: --sample=cpu) and move it off the "
            "launch path (another thread or process, precomputation) or speed it up; more cores alone will not help.",
            "zh": "找出发射线程在两次发射之间计算了什么（NVTX 区间或 CPU 采样：--sample=cpu），把它移出发射路径（其他线程或进程、预先计算）"
            "或加速它；仅增加 CPU 核无济于事。",
        },
        evidence=_host_evidence(hits),
    )


def feeding_thread_off_cpu(f: Facts) -> Finding | None:
    hits = _idle_hosts(f, "off_cpu")
    if not hits:
        return None
    gpus, hosts, gaps = _where(hits)
    off = span(h.descheduled_share or 0.0 for h, _ in hits)
    traced = all(h.osrt_traced for h, _ in hits)
    why_en = (
        "waiting for a core that other programs held (not recorded) or blocked in a call the OS-runtime trace does not cover"
        if traced
        else "waiting for a core that other programs held (not recorded) or blocked in a call — the trace has no OS-runtime calls to tell"
    )
    why_zh = (
        "在等待被其他程序占用的 CPU 核（未被记录），或阻塞在 OS 运行时追踪未覆盖的调用中"
        if traced
        else "在等待被其他程序占用的 CPU 核（未被记录），或阻塞在某个调用中——追踪中没有 OS 运行时调用，无法区分"
    )
    return Finding(
        rule_id="feeding-thread-off-cpu",
        severity="info",
        seed_section="4.4",
        cause_category="CPU-side scheduling",
        impact_share=max(w for _, w in hits),
        title={
            "en": "The feeding thread is off CPU in the gaps",
            "zh": "间隙中发射线程不在 CPU 上",
        },
        claim={
            "en": f"{gpus} {_their(hits)[0]} idle {gaps} of {_their(hits)[1]} window; {_their(hits)[1]} feeding threads are off CPU outside any traced call {off} of their gap "
            f"time, while the profiled processes keep {_cores(hits)} cores of {hosts} busy: {why_en}.",
            "zh": f"{gpus} 空闲占时间窗的 {gaps}；其发射线程在间隙时间的 {off} 内不在 CPU 上且不在任何被追踪的调用中，"
            f"而被分析进程在 {hosts} 上平均只占用 {_cores(hits).replace(' of ', ' / ')} 个核：{why_zh}。",
        },
        recommendation={
            "en": f"Capture again with `{CAPTURE} …` to see blocking calls; if the thread waits for a core, pin it to a core of its own.",
            "zh": f"用 `{CAPTURE} …` 重新采集以看到阻塞调用；若线程在等待 CPU 核，为它绑定独占的核。",
        },
        evidence=_host_evidence(hits),
    )


CPU_RULES = (cpu_saturated, cpu_blocked, feeding_thread_busy, feeding_thread_off_cpu)
CPU_RULE_IDS = ("cpu-saturated", "cpu-blocked", "feeding-thread-busy", "feeding-thread-off-cpu")
