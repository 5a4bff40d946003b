"""Rules on NCCL collectives (seed 4.4, docs/metrics/nccl.md).

* ``comm-bound``: communication itself (NCCL time less the estimated wait for late
  peers) takes a large share of busy GPU time.
* ``collective-skew``: GPUs that arrive early at a collective wait a large share of
  NCCL time for the last one.
* ``nccl-outlier``: one NCCL kernel far longer than its collective's median on the
  same GPU.

Thresholds are named constants, documented in docs/findings.md.
"""

from __future__ import annotations

from nsysan.diagnose.facts import Facts
from nsysan.diagnose.findings import Finding, number_evidence, share_evidence
from nsysan.diagnose.gpu_rules import at
from nsysan.diagnose.wording import nothing, say
from nsysan.report.fmt import count, duration, percent, ratio

# communication (seed 4.4)
NCCL_SHARE_HIGH = 0.30
NCCL_WAIT_SHARE_HIGH = 0.30
NCCL_SHARE_FOR_SKEW = 0.05
# one slow collective
NCCL_OUTLIER_OVER_MEDIAN = 20.0  # an NCCL kernel this many times its collective's median
NCCL_OUTLIER_MIN_NS = 1_000_000  # ... and at least this long


def comm_bound(f: Facts) -> Finding | None:
    """Communication itself (NCCL time less the estimated wait for late peers) is large."""
    if f.nccl_share is None:
        return None
    transfer = f.nccl_share * (1.0 - (f.nccl_wait_share or 0.0))
    if transfer < NCCL_SHARE_HIGH:
        return None
    return Finding(
        rule_id="comm-bound",
        severity="warning",
        seed_section="4.4",
        cause_category="interconnect bandwidth (NVLink/PCIe)",
        impact_share=transfer,
        title=say("comm-bound.title"),
        claim=say(
            "comm-bound.claim",
            nccl=percent(f.nccl_share),
            collective=(
                say("comm-bound.collective", collective=f.top_collective)
                if f.top_collective
                else nothing()
            ),
            transfer=percent(transfer),
        ),
        recommendation=say("comm-bound.recommendation"),
        evidence=(
            share_evidence(
                "nccl_share", "NCCL share of busy time", f.nccl_share, "docs/metrics/nccl.md"
            ),
            share_evidence(
                "nccl_wait_share",
                "estimated wait share of NCCL time",
                f.nccl_wait_share,
                "docs/metrics/nccl.md",
            ),
        ),
    )


def collective_skew(f: Facts) -> Finding | None:
    if f.nccl_share is None or f.nccl_share < NCCL_SHARE_FOR_SKEW:
        return None
    if f.nccl_wait_share is None or f.nccl_wait_share < NCCL_WAIT_SHARE_HIGH:
        return None
    return Finding(
        rule_id="collective-skew",
        severity="info",
        seed_section="4.4",
        cause_category="arrival skew at collectives",
        impact_share=f.nccl_share * f.nccl_wait_share,
        title=say("collective-skew.title"),
        claim=say(
            "collective-skew.claim",
            wait=percent(f.nccl_wait_share),
            skew=duration(f.nccl_skew_median_ns),
        ),
        recommendation=say("collective-skew.recommendation"),
        evidence=(
            share_evidence(
                "nccl_wait_share",
                "estimated wait share of NCCL time",
                f.nccl_wait_share,
                "docs/metrics/nccl.md",
            ),
        ),
    )


def nccl_outlier(f: Facts) -> Finding | None:
    """One NCCL kernel far longer than its collective's median on the same GPU."""
    hit = [
        o
        for o in f.nccl_outliers
        if o.over_median >= NCCL_OUTLIER_OVER_MEDIAN and o.duration_ns >= NCCL_OUTLIER_MIN_NS
    ]
    if not hit:
        return None
    o = hit[0]
    more = (
        say("nccl-outlier.more", more=len(hit) - 1, threshold=f"{NCCL_OUTLIER_OVER_MEDIAN:.0f}")
        if len(hit) > 1
        else nothing()
    )
    return Finding(
        rule_id="nccl-outlier",
        severity="warning",
        seed_section="4.4",
        cause_category="one slow collective",
        impact_share=0.0,
        title=say("nccl-outlier.title"),
        claim=say(
            "nccl-outlier.claim",
            collective=o.collective,
            gpu=o.gpu,
            duration=duration(o.duration_ns),
            median=duration(o.median_ns),
            over=ratio(o.over_median, 0),
            count=count(o.count),
            start=at(o.start_ns),
            more=more,
        ),
        recommendation=say("nccl-outlier.recommendation"),
        evidence=(
            number_evidence(
                "nccl_longest",
                f"longest {o.collective}, GPU {o.gpu}",
                o.duration_ns,
                duration(o.duration_ns),
                "docs/metrics/nccl.md",
            ),
            number_evidence(
                "nccl_median",
                f"median {o.collective}, GPU {o.gpu}",
                o.median_ns,
                duration(o.median_ns),
                "docs/metrics/nccl.md",
            ),
            number_evidence(
                "nccl_over_median",
                "longest / median",
                o.over_median,
                ratio(o.over_median, 0),
                "docs/metrics/nccl.md",
            ),
            number_evidence(
                "nccl_start",
                "start (trace timeline)",
                o.start_ns,
                at(o.start_ns),
                "docs/metrics/nccl.md",
            ),
        ),
    )
