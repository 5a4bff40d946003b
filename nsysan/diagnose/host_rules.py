"""Rules on GPUs left idle because the host launched late, its cause measured or not.

* ``host-bound-gaps``: a GPU idle for a large share of its (steady-state) window, with
  most of that gap time in a *measured* host-side cause; the recommendation follows
  from the causes measured (``CAUSE_ADVICE``).
* ``host-late-unknown``: the same idle GPU, the host launched late, but the trace
  cannot say why (most gap time unattributed); says what to capture.

They read host attribution's time per cause (docs/metrics/host.md). Thresholds are
named constants, documented in docs/findings.md.
"""

from __future__ import annotations

from nsysan.diagnose.facts import Facts
from nsysan.diagnose.findings import EvidenceItem, Finding
from nsysan.diagnose.gpu_rules import (
    against_others,
    extremes,
    gap_share_evidence,
    gpu_list,
    idle_gpus,
    span,
    window_phrase,
)
from nsysan.report.fmt import percent

MEASURED_CAUSE_SHARE = 0.50  # measured host-side causes: the host is named as the cause
UNATTRIBUTED_SHARE = 0.50  # unattributed gap time: the trace cannot say why

# A recommendation per measured cause (only measured causes are recommended on).
CAUSE_ADVICE: dict[str, tuple[str, str]] = {
    "cuda_sync": (
        "remove synchronizing calls (cudaStreamSynchronize, cudaDeviceSynchronize, blocking copies) from the loop, or wait on events only where the result is needed",
        "把同步调用（cudaStreamSynchronize、cudaDeviceSynchronize、阻塞式拷贝）移出循环，或只在确实需要结果的地方等待事件",
    ),
    "gil_wait": (
        "move tokenization and sampling off the Python GIL (a C++/Rust tokenizer, separate processes with enough CPU cores per GPU)",
        "把 tokenizer 与采样移出 Python GIL（改用 C++/Rust 实现，或用独立进程并为每张卡分配足够的 CPU 核）",
    ),
    "blocking_os": (
        "find the lock, queue or sleep the feeding thread blocks on (the OS-runtime rows in the gaps) and take it off the launch path",
        "找出发射线程阻塞的锁、队列或 sleep（间隙中的 OS 运行时调用），把它移出发射路径",
    ),
    "cuda_api": (
        "hoist the other CUDA API calls (allocation, memcpy setup, stream/event creation) out of the loop",
        "把其他 CUDA API 调用（显存分配、拷贝准备、流/事件创建）移出循环",
    ),
    "os_call": (
        "move I/O and other system calls of the feeding thread off the launch path",
        "把发射线程上的 I/O 等系统调用移出发射路径",
    ),
    "descheduled": (
        "give the feeding thread a CPU core of its own (pinning, fewer threads per core)",
        "为发射线程分配独占的 CPU 核（绑核，减少每核线程数）",
    ),
    "nvtx": (
        "speed up or overlap the host work in the NVTX ranges that cover the gaps (see the host-side cause section)",
        "加速覆盖间隙的 NVTX 区间中的主机工作，或使其与 GPU 计算重叠（见主机侧原因一节）",
    ),
    "launch_call": (
        "launches themselves are slow: batch them with CUDA graphs",
        "发射调用本身耗时：用 CUDA Graph 合并发射",
    ),
}
CAUSE_NAMES: dict[str, tuple[str, str]] = {
    "cuda_sync": ("CUDA synchronizing calls", "CUDA 同步调用"),
    "gil_wait": ("GIL-signature waits", "GIL 特征等待"),
    "blocking_os": ("blocking OS calls", "阻塞型系统调用"),
    "cuda_api": ("other CUDA API calls", "其他 CUDA API 调用"),
    "os_call": ("other OS calls", "其他系统调用"),
    "descheduled": ("off CPU", "线程被调度出 CPU"),
    "nvtx": ("named NVTX ranges", "命名的 NVTX 区间"),
    "launch_call": ("launch calls", "发射调用"),
}
CAPTURE_HINT = "nsys profile -t cuda,nvtx,osrt --sample=cpu --cpuctxsw=process-tree"


def _ev(
    metric: str, label: str, value: float | int | None, display: str, source: str
) -> EvidenceItem:
    return EvidenceItem(metric=metric, label=label, value=value, display=display, source=source)


# What a missing cause needs, in words (nsysan.analyze.host_causes' cause ids).
_MISSING_DATA = (
    (("gil_wait", "blocking_os", "os_call"), "no OS-runtime trace", "没有 OS 运行时追踪"),
    (("descheduled",), "no CPU scheduling data", "没有 CPU 调度数据"),
    (("nvtx",), "no NVTX ranges", "没有 NVTX 区间"),
    (("cuda_sync", "cuda_api"), "no CUDA API trace", "没有 CUDA API 追踪"),
)


def _missing(causes: tuple[str, ...]) -> tuple[str, str]:
    hit = [(en, zh) for ids, en, zh in _MISSING_DATA if set(ids) & set(causes)]
    return ", ".join(en for en, _ in hit), "、".join(zh for _, zh in hit)


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + "." if text else ""


def host_bound_gaps(f: Facts) -> Finding | None:
    """GPUs idle much of their window, mostly in measured host-side causes."""
    hit = [g for g in idle_gpus(f) if (g.measured_host_share or 0.0) >= MEASURED_CAUSE_SHARE]
    if not hit:
        return None
    totals: dict[str, float] = {}
    for g in hit:
        for c in CAUSE_NAMES:
            totals[c] = totals.get(c, 0.0) + g.causes.get(c, 0.0) / len(hit)
    main = [c for c, v in sorted(totals.items(), key=lambda kv: -kv[1]) if v >= 0.05][:3]
    where = gpu_list(g.gpu for g in hit)
    gaps = span(g.gap_share for g in hit)
    measured = span(g.measured_host_share or 0.0 for g in hit)
    parts_en = ", ".join(f"{CAUSE_NAMES[c][0]} {percent(totals[c])}" for c in main)
    parts_zh = "，".join(f"{CAUSE_NAMES[c][1]} {percent(totals[c])}" for c in main)
    o_en, o_zh = against_others(f, hit)
    s_en, s_zh = window_phrase(f, len(hit))
    evidence = []
    for g in extremes(hit, lambda g: g.gap_share):
        evidence.append(
            _ev(
                "gap_share",
                f"gap share, {g.label}",
                g.gap_share,
                percent(g.gap_share),
                "docs/metrics/gaps.md",
            )
        )
        for c in main:
            evidence.append(
                _ev(
                    f"{c}_share",
                    f"{CAUSE_NAMES[c][0]}, share of gap time, {g.label}",
                    g.causes.get(c, 0.0),
                    percent(g.causes.get(c, 0.0)),
                    "docs/metrics/host.md",
                )
            )
    return Finding(
        rule_id="host-bound-gaps",
        severity="warning",
        seed_section="4.4",
        cause_category="CPU-side scheduling",
        impact_share=max(g.gap_share * (g.measured_host_share or 0) for g in hit),
        title={"en": "GPU gaps caused on the host side", "zh": "GPU 间隙由主机侧造成"},
        claim={
            "en": f"{where} {'is' if len(hit) == 1 else 'are'} idle {gaps}{s_en}{o_en}; {measured} of that gap time has a measured host-side cause "
            f"({parts_en}): the next kernel was launched only after the GPU ran dry.",
            "zh": f"{where} 在{s_zh}空闲 {gaps}{o_zh}；其中 {measured} 的间隙时间有实测的主机侧原因（{parts_zh}）：GPU 空闲之后下一个内核才被发射。",
        },
        recommendation={
            "en": _sentence("; ".join(CAUSE_ADVICE[c][0] for c in main if c in CAUSE_ADVICE)),
            "zh": "；".join(CAUSE_ADVICE[c][1] for c in main if c in CAUSE_ADVICE) + "。",
        },
        evidence=tuple(evidence),
    )


def host_late_unknown(f: Facts) -> Finding | None:
    """GPUs idle much of their window; the host was late but the trace cannot say why."""
    hit = [g for g in idle_gpus(f) if (g.unattributed_share or 0.0) >= UNATTRIBUTED_SHARE]
    if not hit:
        return None
    where = gpu_list(g.gpu for g in hit)
    gaps = span(g.gap_share for g in hit)
    unknown = span(g.unattributed_share or 0.0 for g in hit)
    o_en, o_zh = against_others(f, hit)
    s_en, s_zh = window_phrase(f, len(hit))
    miss_en, miss_zh = _missing(f.host_unavailable_causes)
    lack_en = f" ({miss_en})" if miss_en else ""
    lack_zh = f"（{miss_zh}）" if miss_zh else ""
    evidence = []
    for g in extremes(hit, lambda g: g.gap_share):
        evidence += [
            gap_share_evidence(g),
            _ev(
                "unattributed_share",
                f"unattributed share of gap time, {g.label}",
                g.unattributed_share,
                percent(g.unattributed_share),
                "docs/metrics/host.md",
            ),
        ]
    return Finding(
        rule_id="host-late-unknown",
        severity="warning",
        seed_section="4.4",
        cause_category="host late, cause not captured",
        impact_share=max(g.gap_share * (g.unattributed_share or 0) for g in hit),
        title={
            "en": "The host launched late, and the trace cannot say why",
            "zh": "主机发射滞后，但追踪无法说明原因",
        },
        claim={
            "en": f"{where} {'is' if len(hit) == 1 else 'are'} idle {gaps}{s_en}{o_en}: the next kernel was launched only after the GPU ran dry, "
            f"but {unknown} of that gap time is unattributed{lack_en} — the trace cannot say what the host was doing.",
            "zh": f"{where} 在{s_zh}空闲 {gaps}{o_zh}：GPU 空闲之后下一个内核才被发射，但其中 {unknown} 的间隙时间无法归因{lack_zh}——"
            "追踪无法说明主机当时在做什么。",
        },
        recommendation={
            "en": f"Capture again with `{CAPTURE_HINT} …` and NVTX ranges around data loading, tokenization and sampling, so the host time can be attributed; "
            "no fix is recommended from this trace.",
            "zh": f"用 `{CAPTURE_HINT} …` 重新采集，并在数据加载、tokenizer 与采样周围加上 NVTX 区间，以便归因主机时间；"
            "仅凭本追踪不建议具体修改。",
        },
        evidence=tuple(evidence),
    )
