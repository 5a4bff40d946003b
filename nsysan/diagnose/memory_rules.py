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
from nsysan.diagnose.wording import say, say_n
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
    full_window = say_n(
        len(hit),
        "memory-pressure.full",
        where=gpu_list(m.gpu for m in hit),
        capacity=span((float(m.capacity_bytes or 0) for m in hit), nbytes),
        near=span(m.near_full_share or 0.0 for m in hit),
    )
    peak = span(m.peak_share or 0.0 for m in hit)
    evidence: list[EvidenceItem] = []
    for m in hit[:4]:
        lab = f"GPU {m.gpu}"
        evidence += [
            _ev("peak_share", f"peak device memory in use, share of capacity, {lab}", m.peak_share, percent(m.peak_share)),
            _ev("near_full_share", f"window with memory ≥90% full, {lab}", m.near_full_share, percent(m.near_full_share)),
            _ev("near_full_gap_share", f"gap time starting with memory ≥90% full, {lab}", m.near_full_gap_share, percent(m.near_full_gap_share)),
        ]  # fmt: skip
    if blocked:
        claim = say(
            "memory-pressure.claim.blocked",
            full=full_window,
            peak=peak,
            first=at(min(hit, key=lambda m: m.peak_ns).peak_ns),
            share=span(m.near_full_gap_share or 0.0 for m in hit),
            its=say_n(len(hit), "pronoun.its"),
            gaps=span(gap.get(m.gpu, 0.0) for m in hit),
            lower=say("memory-pressure.lower-bound"),
        )
        return Finding(
            rule_id="memory-pressure",
            severity="warning",
            seed_section="4.2",
            cause_category="device memory / KV-cache pressure",
            impact_share=max(gap.get(m.gpu, 0.0) for m in hit),
            title=say("memory-pressure.title.blocked"),
            claim=claim,
            recommendation=say("memory-pressure.recommendation.blocked"),
            evidence=tuple(evidence),
        )
    return Finding(
        rule_id="memory-pressure",
        severity="info",
        seed_section="4.2",
        cause_category="device memory / KV-cache pressure",
        impact_share=0.0,
        title=say("memory-pressure.title.close"),
        claim=say(
            "memory-pressure.claim.close",
            full=full_window,
            peak=peak,
            lower=say("memory-pressure.lower-bound"),
        ),
        recommendation=say("memory-pressure.recommendation.close"),
        evidence=tuple(evidence),
    )


MEMORY_RULES = (memory_pressure,)
MEMORY_RULE_IDS = ("memory-pressure",)
