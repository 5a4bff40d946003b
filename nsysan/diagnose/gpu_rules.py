"""Rules that look at each GPU, not at the mean: a finding names the GPU(s) and numbers.

* ``dominant-gap``: one gap holds a large share of a GPU's window (often the start-up
  before steady state); said first, with its place on the trace timeline.
* ``gpu-side-gaps``: a GPU idle with the next kernel already queued: waiting on memory
  copies or on device-side dependencies.
* ``small-kernels``: tiny kernels whose launch gaps are a large share of the window.
* ``sm-idle-while-busy``: the dashboard's GR Active is high while SM Active is near 0.

The other rule modules name GPUs, ranges and instants with this module's ``gpu_list``,
``span`` and ``at``; ``host_rules`` examines the same idle GPUs (``idle_gpus``, at
least ``IDLE_GPU_SHARE`` of their window) and words them the same way.

Thresholds are named constants, documented in docs/findings.md.
"""

from __future__ import annotations

from collections.abc import Iterable

from nsysan.diagnose.facts import Facts
from nsysan.diagnose.findings import EvidenceItem, Finding
from nsysan.diagnose.gpu_facts import GpuFacts
from nsysan.report.fmt import count, duration, percent

DOMINANT_GAP_SHARE = 0.25  # a single gap this share of a GPU's window is named first
DOMINANT_CRITICAL_SHARE = 0.50  # ... and is critical from this share on
IDLE_GPU_SHARE = 0.20  # a GPU idle this share of its steady-state window is examined
SMALL_KERNEL_NS = 10_000  # median kernel below this is launch-scale work
SMALL_GAP_TIME_SHARE = 0.50  # share of gap time in launch-scale gaps (< 100 µs)
SM_IDLE_GR_ACTIVE = 0.50  # GR Active at least this ...
SM_IDLE_SM_ACTIVE = 0.10  # ... while SM Active is below this
GPU_WAIT_SHARE = 0.50  # gap time with the next kernel already queued (gpu-side-gaps)
COPY_GAP_SHARE = 0.50  # ... of which a memory copy runs during this share: waiting on copies
STALL_CATEGORY = "one long stall"


def at(ns: int | None) -> str:
    """A point on the trace timeline, precise enough to pass to ``--start``/``--end``."""
    return duration(ns, 4)


def _ev(
    metric: str, label: str, value: float | int | None, display: str, source: str
) -> EvidenceItem:
    return EvidenceItem(metric=metric, label=label, value=value, display=display, source=source)


def gap_share_evidence(g: GpuFacts) -> EvidenceItem:
    """``g``'s gap share as evidence."""
    return _ev(
        "gap_share",
        f"gap share, {g.label}",
        g.gap_share,
        percent(g.gap_share),
        "docs/metrics/gaps.md",
    )


def gpu_list(gpus: Iterable[int], lang: str = "en") -> str:
    """``[0,1,2,3]`` → "GPU 0–3"; ``[1]`` → "GPU 1"; ``[0, 2]`` → "GPU 0, 2"."""
    ids = sorted(set(gpus))
    if not ids:
        return ""
    if len(ids) > 2 and ids == list(range(ids[0], ids[-1] + 1)):
        return f"GPU {ids[0]}–{ids[-1]}"
    return "GPU " + ", ".join(str(g) for g in ids)


def span(values: Iterable[float], fmt_one=percent) -> str:  # type: ignore[no-untyped-def]
    """ "35.1%–37.1%" (or one value when they format the same)."""
    vals = list(values)
    low, high = fmt_one(min(vals)), fmt_one(max(vals))
    return low if low == high else f"{low}–{high}"


def against_others(f: Facts, hit: list[GpuFacts]) -> tuple[str, str]:
    """ ", against 5.3% on GPU 0" when the other GPUs idle much less."""
    ids = {g.gpu for g in hit}
    rest = [g for g in f.per_gpu if g.gpu not in ids]
    if not rest or max(g.gap_share for g in rest) >= IDLE_GPU_SHARE:
        return "", ""
    where = gpu_list(g.gpu for g in rest)
    shares = span(g.gap_share for g in rest)
    return f", against {shares} on {where}", f"，而 {where} 仅 {shares}"


def window_phrase(f: Facts, n: int) -> tuple[str, str]:
    """ " of its steady-state window" (or " of their window") for ``n`` GPUs, and in Chinese."""
    its = "its" if n == 1 else "their"
    if f.warmup_detected:
        return f" of {its} steady-state window", "稳态时间窗内"
    return f" of {its} window", "时间窗内"


def dominant_gap(f: Facts) -> Finding | None:
    """One gap holds a large share of a GPU's window: name it first, and steady state."""
    hit = [g for g in f.per_gpu if g.longest_share >= DOMINANT_GAP_SHARE]
    if not hit:
        return None
    warm = all(g.warmup for g in hit)
    where = gpu_list(g.gpu for g in hit)
    each = "each sit" if len(hit) > 1 else "sits"
    length = span((g.longest_ns for g in hit), duration)
    share = span(g.longest_share for g in hit)
    start = min(g.longest_start_ns or 0 for g in hit)
    end = max(g.longest_end_ns or 0 for g in hit)
    what_en = "the start-up before steady state" if warm else "a stall in the middle of the run"
    what_zh = "即进入稳态之前的启动阶段" if warm else "即运行中途的一次停顿"
    steady_en = steady_zh = ""
    if warm:
        steady = span(g.gap_share for g in hit)
        steady_en = f" In steady state (from {at(max(g.steady_start_ns for g in hit))}) the gap share is {steady}."
        steady_zh = (
            f"稳态（自 {at(max(g.steady_start_ns for g in hit))} 起）的间隙占比为 {steady}。"
        )
    evidence = []
    for g in extremes(hit, lambda g: g.longest_share):
        evidence += [
            _ev(
                "longest_gap",
                f"longest gap, {g.label}",
                g.longest_ns,
                duration(g.longest_ns),
                "docs/metrics/gaps.md",
            ),
            _ev(
                "longest_gap_share",
                f"longest gap share of the window, {g.label}",
                g.longest_share,
                percent(g.longest_share),
                "docs/metrics/gaps.md",
            ),
        ]
        if warm:
            evidence.append(
                _ev(
                    "steady_gap_share",
                    f"steady-state gap share, {g.label}",
                    g.gap_share,
                    percent(g.gap_share),
                    "docs/metrics/gaps.md",
                )
            )
    evidence += [
        _ev("gap_start", "gap start (trace timeline)", start, at(start), "docs/metrics/gaps.md"),
        _ev("gap_end", "gap end (trace timeline)", end, at(end), "docs/metrics/gaps.md"),
    ]
    top = max(g.longest_share for g in hit)
    skip = at(max(g.steady_start_ns for g in hit)).replace(" ", "")
    return Finding(
        rule_id="dominant-gap",
        severity="critical" if top >= DOMINANT_CRITICAL_SHARE else "warning",
        seed_section="",
        cause_category="start-up before steady state" if warm else STALL_CATEGORY,
        impact_share=top,
        title={
            "en": "One gap dominates the capture" + (": the start-up" if warm else ""),
            "zh": "单个间隙主导了本次采集" + ("：启动阶段" if warm else ""),
        },
        claim={
            "en": f"One gap dominates: {where} {each} idle {length} in a single gap ({share} of the window), "
            f"from {at(start)} to {at(end)} on the trace timeline — {what_en}.{steady_en}",
            "zh": f"单个间隙占主导：{where} 在一个间隙中空闲 {length}（占时间窗的 {share}），"
            f"位于时间线上 {at(start)} 至 {at(end)}，{what_zh}。{steady_zh}",
        },
        recommendation={
            "en": f"Judge the run by its steady state (this report shows both; `--start {skip}` pins it) and capture steady state only "
            "(`nsys profile --delay` or `--capture-range=cudaProfilerApi`); if the start-up is part of every job, find what the host "
            "does before the first kernels (initialisation, data loading, compilation) and cache or overlap it."
            if warm
            else "Open the trace in Nsight Systems at the gap's start and see what the GPU waited for (the host-side cause "
            "section says what the feeding thread was doing).",
            "zh": f"以稳态评判这次运行（本报告两者都给出；可用 `--start {skip}` 固定），并只采集稳态"
            "（`nsys profile --delay` 或 `--capture-range=cudaProfilerApi`）；若每个作业都有这段启动，找出第一个内核之前主机在做什么"
            "（初始化、数据加载、编译），缓存它或使其与计算重叠。"
            if warm
            else "在 Nsight Systems 中打开该间隙开始处，查看 GPU 在等待什么（主机侧原因一节给出了发射线程当时在做什么）。",
        },
        evidence=tuple(evidence),
    )


# With more GPUs than this, evidence lists the GPUs at both ends of the range only
# (the sections' tables list every GPU).
EVIDENCE_GPUS = 4


def extremes(hit: list[GpuFacts], key) -> list[GpuFacts]:  # type: ignore[no-untyped-def]
    """``hit``, or only its lowest and highest by ``key`` when it is long."""
    if len(hit) <= EVIDENCE_GPUS:
        return hit
    low, high = min(hit, key=key), max(hit, key=key)
    return [g for g in hit if g is low or g is high]


def idle_gpus(f: Facts) -> list[GpuFacts]:
    """The GPUs idle at least ``IDLE_GPU_SHARE`` of their (steady-state) window."""
    return [g for g in f.per_gpu if g.gap_share >= IDLE_GPU_SHARE]


def small_kernels(f: Facts) -> Finding | None:
    """Tiny kernels with launch-scale gaps between them that add up to much of the window."""
    hit = [
        g
        for g in idle_gpus(f)
        if g.median_kernel_ns is not None
        and g.median_kernel_ns < SMALL_KERNEL_NS
        and (g.small_gap_share or 0.0) >= SMALL_GAP_TIME_SHARE
    ]
    if not hit:
        return None
    where = gpu_list(g.gpu for g in hit)
    kernels = sum(g.kernel_count for g in hit)
    med = span((g.median_kernel_ns or 0 for g in hit), duration)
    gaps = span(g.gap_share for g in hit)
    med_gap = span((g.median_gap_ns or 0 for g in hit), duration)
    queued = [g.causes.get("gpu_wait", 0.0) for g in hit if g.causes]
    sm = [g for g in hit if g.sm_active_share is not None and g.gr_active_share is not None]
    sm_en = sm_zh = ""
    if sm:
        sm_en = f" SM Active is {span(g.sm_active_share or 0.0 for g in sm)} while GR Active shows {span(g.gr_active_share or 0.0 for g in sm)}."
        sm_zh = f"SM Active 仅 {span(g.sm_active_share or 0.0 for g in sm)}，而 GR Active 显示 {span(g.gr_active_share or 0.0 for g in sm)}。"
    q_en = f"; {span(queued)} of it with the next kernel already queued" if queued else ""
    q_zh = f"；其中 {span(queued)} 的时间下一个内核已在排队" if queued else ""
    evidence = []
    for g in extremes(hit, lambda g: g.gap_share):
        evidence += [
            _ev(
                "kernel_count",
                f"kernels, {g.label}",
                g.kernel_count,
                count(g.kernel_count),
                "docs/metrics/gaps.md",
            ),
            _ev(
                "median_kernel",
                f"median kernel duration, {g.label}",
                g.median_kernel_ns,
                duration(g.median_kernel_ns),
                "docs/metrics/gaps.md",
            ),
            _ev(
                "median_gap",
                f"median gap, {g.label}",
                g.median_gap_ns,
                duration(g.median_gap_ns),
                "docs/metrics/gaps.md",
            ),
            gap_share_evidence(g),
        ]
    return Finding(
        rule_id="small-kernels",
        severity="warning",
        seed_section="4.4",
        cause_category="launch overhead of small kernels",
        impact_share=max(g.gap_share for g in hit),
        title={
            "en": "Kernels too small: launch overhead sets the pace",
            "zh": "内核过小：发射开销决定了节奏",
        },
        claim={
            "en": f"{where} {'runs' if len(hit) == 1 else 'run'} {count(kernels)} kernels with a median of {med}, and {gaps} of the window is the "
            f"gaps between them (median gap {med_gap}{q_en}): per-kernel launch and scheduling overhead, not GPU work, sets the pace.{sm_en}",
            "zh": f"{where} 运行了 {count(kernels)} 个内核，中位时长仅 {med}，时间窗内 {gaps} 是内核之间的间隙（间隙中位数 {med_gap}{q_zh}）："
            f"决定节奏的是每个内核的发射与调度开销，而不是 GPU 计算。{sm_zh}",
        },
        recommendation={
            "en": "Fuse the small kernels, give each launch more work (larger batches or grids), or capture the sequence once in a CUDA graph.",
            "zh": "融合这些小内核，让每次发射承担更多工作（更大的批量或网格），或用 CUDA Graph 一次性捕获这段序列。",
        },
        evidence=tuple(evidence),
    )


def _gpu_side(g: GpuFacts) -> float:
    """Gap time with the next kernel queued: waiting, or behind a transfer on the GPU."""
    return g.causes.get("gpu_wait", 0.0) + g.causes.get("gpu_transfer", 0.0)


def gpu_side_gaps(f: Facts) -> Finding | None:
    """GPUs idle with the next kernel already queued: device-side waits (copies, dependencies)."""
    hit = [
        g
        for g in idle_gpus(f)
        if _gpu_side(g) >= GPU_WAIT_SHARE
        and not (
            g.median_kernel_ns is not None
            and g.median_kernel_ns < SMALL_KERNEL_NS
            and (g.small_gap_share or 0.0) >= SMALL_GAP_TIME_SHARE
        )
    ]
    if not hit:
        return None
    where = gpu_list(g.gpu for g in hit)
    gaps = span(g.gap_share for g in hit)
    queued = span(_gpu_side(g) for g in hit)
    copies = [g.copy_gap_share or 0.0 for g in hit]
    by_copies = min(copies) >= COPY_GAP_SHARE
    o_en, o_zh = against_others(f, hit)
    s_en, s_zh = window_phrase(f, len(hit))
    if by_copies:
        why_en = f"memory copies run during {span(copies)} of that gap time: the kernels wait for their data transfers, which do not overlap compute"
        why_zh = f"其中 {span(copies)} 的间隙时间有内存拷贝在进行：内核在等待数据传输，而传输没有与计算重叠"
        rec = (
            "Overlap transfers with compute: pinned host memory, cudaMemcpyAsync on a separate stream, double buffering; or keep the data on the GPU between kernels.",
            "让传输与计算重叠：使用锁页内存、在独立的流上用 cudaMemcpyAsync、双缓冲；或在内核之间把数据保留在 GPU 上。",
        )
    else:
        why_en = f"memory copies run during only {span(copies)} of it: the GPU waited on device-side dependencies (events, other streams, copies of another GPU)"
        why_zh = f"其中只有 {span(copies)} 的时间有内存拷贝：GPU 在等待设备侧的依赖（事件、其他流、其他卡的拷贝）"
        rec = (
            "Open the trace at the longest gaps and follow the dependency the next kernel waits on (event waits, cross-stream or cross-GPU synchronization); reorder the streams so that independent work fills the wait.",
            "在最长的间隙处打开追踪，找出下一个内核等待的依赖（事件等待、跨流或跨卡同步）；重新安排各流，让独立的工作填补等待。",
        )
    evidence = []
    for g in extremes(hit, lambda g: g.gap_share):
        evidence += [
            gap_share_evidence(g),
            _ev(
                "gpu_wait_share",
                f"GPU-side wait or transfer, share of gap time, {g.label}",
                _gpu_side(g),
                percent(_gpu_side(g)),
                "docs/metrics/host.md",
            ),
            _ev(
                "copy_gap_share",
                f"gap time with a memory copy running, {g.label}",
                g.copy_gap_share,
                percent(g.copy_gap_share),
                "docs/metrics/gaps.md",
            ),
        ]
    return Finding(
        rule_id="gpu-side-gaps",
        severity="warning",
        seed_section="4.4",
        cause_category="waits for data transfers" if by_copies else "device-side dependencies",
        impact_share=max(g.gap_share for g in hit),
        title={
            "en": "GPUs idle with work already queued",
            "zh": "工作已排队，GPU 却在空闲",
        },
        claim={
            "en": f"{where} {'is' if len(hit) == 1 else 'are'} idle {gaps}{s_en}{o_en}, with the next kernel already queued for {queued} of that gap time; {why_en}.",
            "zh": f"{where} 在{s_zh}空闲 {gaps}{o_zh}，其中 {queued} 的间隙时间下一个内核已在排队；{why_zh}。",
        },
        recommendation={"en": rec[0], "zh": rec[1]},
        evidence=tuple(evidence),
    )


def sm_idle_while_busy(f: Facts) -> Finding | None:
    """GR Active (what a dashboard shows) high while the SMs are nearly idle."""
    hit = [
        g
        for g in f.per_gpu
        if g.gr_active_share is not None
        and g.sm_active_share is not None
        and g.gr_active_share >= SM_IDLE_GR_ACTIVE
        and g.sm_active_share < SM_IDLE_SM_ACTIVE
    ]
    if not hit:
        return None
    where = gpu_list(g.gpu for g in hit)
    gr = span(g.gr_active_share or 0.0 for g in hit)
    sm = span(g.sm_active_share or 0.0 for g in hit)
    evidence = []
    for g in extremes(hit, lambda g: g.sm_active_share or 0.0):
        evidence += [
            _ev(
                "gr_active",
                f"GR Active, {g.label}",
                g.gr_active_share,
                percent(g.gr_active_share),
                "docs/metrics/dashboard.md",
            ),
            _ev(
                "sm_active",
                f"SM Active, {g.label}",
                g.sm_active_share,
                percent(g.sm_active_share),
                "docs/metrics/dashboard.md",
            ),
        ]
    return Finding(
        rule_id="sm-idle-while-busy",
        severity="warning",
        seed_section="4.4",
        cause_category="utilization overstates work",
        impact_share=max((g.gr_active_share or 0) - (g.sm_active_share or 0) for g in hit),
        title={
            "en": "The dashboard says busy, the SMs are nearly idle",
            "zh": "面板显示忙碌，SM 却几乎空闲",
        },
        claim={
            "en": f"{where}: GR Active (what a dashboard shows) is {gr} while SM Active is {sm} — the GPU counts as busy whenever any work is "
            "resident, but almost none of its SMs are working.",
            "zh": f"{where}：GR Active（监控面板显示的数值）为 {gr}，而 SM Active 仅 {sm}——只要有任何工作驻留，GPU 就被计为忙碌，但几乎没有 SM 在工作。",
        },
        recommendation={
            "en": "Give each kernel enough blocks to fill the SMs (larger batches, fused kernels), and watch SM Active, not utilization.",
            "zh": "让每个内核有足够的线程块填满 SM（更大的批量、融合内核），并关注 SM Active 而不是利用率。",
        },
        evidence=tuple(evidence),
    )
