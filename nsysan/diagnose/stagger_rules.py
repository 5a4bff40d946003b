"""Rules on how the GPUs' gaps line up in time (seed 4.5, 4.4).

Both read the stagger verdict (docs/metrics/stagger.md) over steady state:

* ``false-balance``: every GPU looks busy and evenly loaded on the dashboard, yet a
  large share of each GPU's time is gaps that are staggered or independent across
  GPUs; the CPU is named as the cause only when the gap time's host-side cause is
  measured.
* ``aligned-gaps``: the GPUs' gaps coincide, so every GPU is idle at once for a share
  of the common window: a shared cause (a barrier, a collective, a shared loader).

Thresholds are named constants, documented in docs/findings.md.
"""

from __future__ import annotations

from statistics import mean

from nsysan.diagnose.facts import Facts
from nsysan.diagnose.findings import Finding, number_evidence, share_evidence
from nsysan.diagnose.gpu_rules import span
from nsysan.diagnose.wording import Text, join, nothing, say
from nsysan.report.fmt import percent, ratio

# false-balance / host-bound (seed 4.5, 4.4 CPU-side scheduling)
GAP_SHARE_HIGH = 0.20  # mean gap share of the GPUs that makes gaps a finding
GAP_SHARE_EACH = 0.10  # every GPU has at least this much gap time (the dashboard looks busy on all)
DASHBOARD_BALANCED_SPREAD = 0.10  # dashboard max - min across GPUs: "looks balanced"
HOST_SIDE_SHARE = 0.50  # share of gap time on the host side that names the CPU as the cause
# aligned gaps: a common cause
ALIGNED_ALL_IDLE_SHARE = 0.10  # share of the common window with every GPU idle


def _host_cause(f: Facts, host: float) -> Text:
    """ ", and 80.0% of gap time has a measured host-side cause (GIL-signature waits ...) — ..."."""
    details = []
    if f.gil_share:
        details.append(say("false-balance.gil", share=percent(f.gil_share)))
    if f.top_nvtx:
        ranges = ", ".join(f"{t} {percent(sh)}" for t, sh in f.top_nvtx[:2])
        details.append(say("false-balance.nvtx", ranges=ranges))
    return say(
        "false-balance.host",
        share=percent(host),
        details=(
            say("false-balance.details", details=join("sep.clause", details))
            if details
            else nothing()
        ),
    )


def false_balance(f: Facts) -> Finding | None:
    """Dashboard balanced and busy-looking on every GPU, timeline full of unaligned gaps."""
    if f.gpu_count < 2 or not f.gap_share or not f.dashboard_share:
        return None
    if mean(f.gap_share) < GAP_SHARE_HIGH or min(f.gap_share) < GAP_SHARE_EACH:
        return None
    if f.dashboard_spread is None or f.dashboard_spread > DASHBOARD_BALANCED_SPREAD:
        return None
    if f.stagger_verdict not in ("staggered", "independent"):
        return None
    shown = [g for g in f.gr_active_share if g is not None]
    dash = tuple(shown) if len(shown) == f.gpu_count else f.dashboard_share
    measure = say("false-balance.gr-active" if len(shown) == f.gpu_count else "false-balance.nvml")
    dash_name = measure["en"]  # evidence labels are English (nsysan.report.catalog translates)
    # Only measured host-side causes name the CPU; unattributed time does not.
    host = f.measured_host_share if f.measured_host_share is not None else None
    cpu_bound = host is not None and host >= HOST_SIDE_SHARE
    claim = say(
        "false-balance.claim",
        n=f.gpu_count,
        dashboard=span(dash),
        measure=measure,
        gaps=span(f.gap_share),
        verdict=say(
            "false-balance.staggered"
            if f.stagger_verdict == "staggered"
            else "false-balance.independent"
        ),
        host=_host_cause(f, host) if cpu_bound else nothing(),
    )
    evidence = [
        share_evidence("gap_share", f"gap share, {lab}", g, "docs/metrics/gaps.md")
        for lab, g in zip(f.gpu_labels, f.gap_share, strict=False)
    ]
    evidence += [
        share_evidence("dashboard", f"{dash_name}, {lab}", d, "docs/metrics/dashboard.md")
        for lab, d in zip(f.gpu_labels, dash, strict=False)
    ]
    evidence.append(
        number_evidence(
            "stagger_score",
            "stagger score (−1 aligned … +1 staggered)",
            f.stagger_score,
            f"{f.stagger_score:+.2f}" if f.stagger_score is not None else "n/a",
            "docs/metrics/stagger.md",
        )
    )
    if f.co_idle_ratio is not None:
        evidence.append(
            number_evidence(
                "co_idle_ratio",
                "co-idle time, observed / if independent",
                f.co_idle_ratio,
                ratio(f.co_idle_ratio),
                "docs/metrics/stagger.md",
            )
        )
    if host is not None:
        evidence.append(
            share_evidence(
                "measured_host_share",
                "gap time with a measured host-side cause",
                host,
                "docs/metrics/host.md",
            )
        )
    if f.gil_share:
        evidence.append(
            share_evidence(
                "gil_share", "GIL-signature share of gap time", f.gil_share, "docs/metrics/host.md"
            )
        )
    for text, share in f.top_nvtx:
        evidence.append(
            share_evidence(
                "nvtx", f"NVTX range covering gaps: {text}", share, "docs/metrics/host.md"
            )
        )
    return Finding(
        rule_id="false-balance",
        severity="critical",
        seed_section="4.5",
        cause_category="CPU-side scheduling" if cpu_bound else "unaligned per-GPU stalls",
        impact_share=mean(f.gap_share),
        title=say("false-balance.title"),
        claim=claim,
        recommendation=say(
            "false-balance.recommendation.cpu"
            if cpu_bound
            else "false-balance.recommendation.stalls"
        ),
        evidence=tuple(evidence),
    )


def aligned_gaps(f: Facts) -> Finding | None:
    """Gaps that coincide across GPUs: a common cause (collective, barrier, shared loader)."""
    if f.gpu_count < 2 or f.stagger_verdict != "aligned" or not f.gap_share:
        return None
    if mean(f.gap_share) < GAP_SHARE_HIGH or (f.all_idle_share or 0) < ALIGNED_ALL_IDLE_SHARE:
        return None
    return Finding(
        rule_id="aligned-gaps",
        severity="warning",
        seed_section="4.4",
        cause_category="common stall (barrier, collective, shared loader)",
        impact_share=f.all_idle_share or 0.0,
        title=say("aligned-gaps.title"),
        claim=say(
            "aligned-gaps.claim",
            n=f.gpu_count,
            share=percent(f.all_idle_share),
            steady=say("aligned-gaps.steady") if f.warmup_detected else nothing(),
            score=f"{f.stagger_score:+.2f}",
        ),
        recommendation=say("aligned-gaps.recommendation"),
        evidence=(
            share_evidence(
                "all_idle_share",
                "all GPUs idle, share of common steady-state window"
                if f.warmup_detected
                else "all GPUs idle, share of common window",
                f.all_idle_share,
                "docs/metrics/stagger.md",
            ),
            number_evidence(
                "stagger_score",
                "stagger score",
                f.stagger_score,
                f"{f.stagger_score:+.2f}",
                "docs/metrics/stagger.md",
            ),
        ),
    )
