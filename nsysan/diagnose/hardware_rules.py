"""Rules on hardware limits that slow the kernels themselves (seed 4.4).

* ``memory-bound``: most kernel time is in memory-bound kernels (Nsight Compute
  speed-of-light, docs/metrics/bound.md), so high utilization does not mean the
  compute units are used.
* ``clock-throttling``: a GPU's clock drops for a share of its busy time (power or
  thermal throttling, docs/metrics/contention.md).

Thresholds are named constants, documented in docs/findings.md.
"""

from __future__ import annotations

from nsysan.diagnose.facts import Facts
from nsysan.diagnose.findings import Finding, share_evidence
from nsysan.diagnose.wording import nothing, say
from nsysan.report.fmt import percent

# memory bandwidth (seed 4.4)
MEMORY_BOUND_SHARE_HIGH = 0.50
# power / thermal (seed 4.4)
CLOCK_DROP_BUSY_SHARE = 0.10


def memory_bound(f: Facts) -> Finding | None:
    if f.memory_bound_share is None or f.memory_bound_share < MEMORY_BOUND_SHARE_HIGH:
        return None
    return Finding(
        rule_id="memory-bound",
        severity="warning",
        seed_section="4.4",
        cause_category="memory bandwidth",
        impact_share=f.memory_bound_share,
        title=say("memory-bound.title"),
        claim=say("memory-bound.claim", share=percent(f.memory_bound_share)),
        recommendation=say("memory-bound.recommendation"),
        evidence=(
            share_evidence(
                "memory_bound_share",
                "memory-bound share of kernel time",
                f.memory_bound_share,
                "docs/metrics/bound.md",
            ),
            share_evidence(
                "unjoined_share",
                "kernel time without Nsight Compute data",
                f.unjoined_share,
                "docs/metrics/bound.md",
            ),
        ),
    )


def clock_throttling(f: Facts) -> Finding | None:
    if not f.clock_drop_share or max(f.clock_drop_share) < CLOCK_DROP_BUSY_SHARE:
        return None
    hit = [
        (lab, share, low)
        for lab, share, low in zip(f.gpu_labels, f.clock_drop_share, f.clock_min_mhz, strict=False)
        if share >= CLOCK_DROP_BUSY_SHARE
    ]
    lowest = min((low for _, _, low in hit if low is not None), default=None)
    reference = (
        say("clock-throttling.reference", mhz=f"{f.clock_reference_mhz:.0f}")
        if f.clock_reference_mhz
        else nothing()
    )
    drop = (
        say("clock-throttling.drop", reference=reference, mhz=f"{lowest:.0f}")
        if lowest is not None
        else say("clock-throttling.drop-unknown", reference=reference)
    )
    return Finding(
        rule_id="clock-throttling",
        severity="warning",
        seed_section="4.4",
        cause_category="power / thermal",
        impact_share=max(f.clock_drop_share),
        title=say("clock-throttling.title"),
        claim=say(
            "clock-throttling.claim",
            gpus=", ".join(lab for lab, _, _ in hit),
            drop=drop,
            share=percent(max(f.clock_drop_share)),
        ),
        recommendation=say("clock-throttling.recommendation"),
        evidence=tuple(
            share_evidence(
                "clock_drop_share",
                f"busy time with clock drop, {lab}",
                share,
                "docs/metrics/contention.md",
            )
            for lab, share, _ in hit
        ),
    )
