"""Rule on device memory pressure (docs/findings.md#memory-pressure).

``memory-pressure``: a GPU whose device memory in use (a lower bound, see
docs/metrics/memory.md) stays at ≥ 90% of its capacity for much of its window. A
warning when it also idles and most of its gap time is in gaps that start while it is
near full (a scheduler that cannot admit requests into a full KV cache); info when it
only runs close to the limit.
"""

from __future__ import annotations

from nsysan.diagnose.facts import Facts
from nsysan.diagnose.findings import EvidenceItem, Finding
from nsysan.diagnose.gpu_rules import IDLE_GPU_SHARE, at, gpu_list, span
from nsysan.diagnose.resource_facts import MemoryFacts
from nsysan.report.fmt import nbytes, percent

NEAR_FULL_TIME_SHARE = 0.5  # window share with memory ≥ 90% of capacity
NEAR_FULL_GAP_SHARE = 0.5  # gap time in gaps that start near full (warning)
CLOSE_TO_LIMIT_SHARE = 0.95  # peak share that alone makes an info finding
SOURCE = "docs/metrics/memory.md"


def _ev(metric: str, label: str, value: float | int | None, display: str) -> EvidenceItem:
    return EvidenceItem(metric=metric, label=label, value=value, display=display, source=SOURCE)


def memory_pressure(f: Facts) -> Finding | None:
    gap = {g.gpu: g.gap_share for g in f.per_gpu}
    full: list[MemoryFacts] = [
        m
        for m in f.resources.memory
        if (m.near_full_share or 0.0) >= NEAR_FULL_TIME_SHARE
        or (m.peak_share or 0.0) >= CLOSE_TO_LIMIT_SHARE
    ]
    if not full:
        return None
    blocked = [
        m
        for m in full
        if (m.near_full_gap_share or 0.0) >= NEAR_FULL_GAP_SHARE
        and gap.get(m.gpu, 0.0) >= IDLE_GPU_SHARE
    ]
    hit = blocked or full
    where = gpu_list(m.gpu for m in hit)
    peak = span(m.peak_share or 0.0 for m in hit)
    near = span(m.near_full_share or 0.0 for m in hit)
    cap = span((float(m.capacity_bytes or 0) for m in hit), nbytes)
    first = min(hit, key=lambda m: m.peak_ns)
    run, their = ("runs", "its") if len(hit) == 1 else ("run", "their")
    evidence: list[EvidenceItem] = []
    for m in hit[:4]:
        lab = f"GPU {m.gpu}"
        evidence += [
            _ev("peak_share", f"peak device memory in use, share of capacity, {lab}", m.peak_share, percent(m.peak_share)),
            _ev("near_full_share", f"window with memory ≥90% full, {lab}", m.near_full_share, percent(m.near_full_share)),
            _ev("near_full_gap_share", f"gap time starting with memory ≥90% full, {lab}", m.near_full_gap_share, percent(m.near_full_gap_share)),
        ]  # fmt: skip
    lower_en = (
        "(in use counts only the allocations the trace saw, so the GPU held at least this much)"
    )
    lower_zh = "（占用只统计追踪中看到的分配，GPU 实际占用至少如此）"
    if blocked:
        gaps = span(gap.get(m.gpu, 0.0) for m in hit)
        share = span(m.near_full_gap_share or 0.0 for m in hit)
        return Finding(
            rule_id="memory-pressure",
            severity="warning",
            seed_section="4.2",
            cause_category="device memory / KV-cache pressure",
            impact_share=max(gap.get(m.gpu, 0.0) for m in hit),
            title={
                "en": "Memory nearly full: the GPU waits for room",
                "zh": "显存接近占满：GPU 在等待空间",
            },
            claim={
                "en": f"{where} {run} with device memory at least 90% of {cap} for {near} of {their} window (peak {peak}, first at "
                f"{at(first.peak_ns)}), and {share} of {their} {gaps} gap time is in gaps that start while memory is that full: "
                f"the scheduler cannot admit more work (a full KV cache) {lower_en}.",
                "zh": f"{where} 在时间窗的 {near} 内显存占用不低于 {cap} 的 90%（峰值 {peak}，首次出现在 {at(first.peak_ns)}），"
                f"其 {gaps} 的间隙时间中有 {share} 的间隙开始于显存如此之满时：调度器无法接纳更多工作（KV cache 已满）{lower_zh}。",
            },
            recommendation={
                "en": "Free room for the KV cache: a smaller max batch or max sequence length, a quantized KV cache, more tensor "
                "parallelism, or preemption/swapping of long requests; route new requests to GPUs with free cache.",
                "zh": "为 KV cache 腾出空间：减小最大批量或最大序列长度、量化 KV cache、提高张量并行度，或对长请求抢占/换出；"
                "把新请求路由到仍有空闲 cache 的卡上。",
            },
            evidence=tuple(evidence),
        )
    return Finding(
        rule_id="memory-pressure",
        severity="info",
        seed_section="4.2",
        cause_category="device memory / KV-cache pressure",
        impact_share=0.0,
        title={"en": "Memory close to the limit", "zh": "显存接近上限"},
        claim={
            "en": f"{where} {run} with device memory at least 90% of {cap} for {near} of {their} window (peak {peak}) {lower_en}; "
            "the GPU gaps do not start mostly while it is that full, so memory is not shown to hold the GPUs back.",
            "zh": f"{where} 在时间窗的 {near} 内显存占用不低于 {cap} 的 90%（峰值 {peak}）{lower_zh}；"
            "GPU 间隙并非主要开始于显存如此之满时，因此没有证据表明显存拖慢了 GPU。",
        },
        recommendation={
            "en": "Leave headroom for longer requests or larger batches, or watch for out-of-memory preemption as load grows.",
            "zh": "为更长的请求或更大的批量预留余量，或在负载增长时留意显存不足导致的抢占。",
        },
        evidence=tuple(evidence),
    )


MEMORY_RULES = (memory_pressure,)
MEMORY_RULE_IDS = ("memory-pressure",)
