"""Rules on GPUs left idle because the host launched late, its cause measured or not.

* ``host-bound-gaps``: a GPU idle for a large share of its (steady-state) window, with
  most of that gap time in a *measured* host-side cause; the recommendation follows
  from the causes measured (each cause's ``host-cause.<cause>.advice`` in
  :mod:`nsysan.diagnose.wording`).
* ``host-late-unknown``: the same idle GPU, the host launched late, but the trace
  cannot say why (most gap time unattributed); says what to capture.

They read host attribution's time per cause (docs/metrics/host.md). Thresholds are
named constants, documented in docs/findings.md.
"""

from __future__ import annotations

from nsysan.diagnose.facts import Facts
from nsysan.diagnose.findings import Finding, number_evidence
from nsysan.diagnose.gpu_facts import MEASURED_HOST_CAUSES
from nsysan.diagnose.gpu_rules import (
    against_others,
    extremes,
    gap_share_evidence,
    gpu_list,
    idle_gpus,
    span,
    window_phrase,
)
from nsysan.diagnose.wording import Text, capitalized, join, nothing, say, say_n
from nsysan.report.fmt import percent

MEASURED_CAUSE_SHARE = 0.50  # measured host-side causes: the host is named as the cause
UNATTRIBUTED_SHARE = 0.50  # unattributed gap time: the trace cannot say why
CAPTURE_HINT = "nsys profile -t cuda,nvtx,osrt --sample=cpu --cpuctxsw=process-tree"


# What a missing cause needs (nsysan.analyze.host_causes' cause ids), as a wording key.
_MISSING_DATA = (
    (("gil_wait", "blocking_os", "os_call"), "host-late-unknown.no-osrt"),
    (("descheduled",), "host-late-unknown.no-scheduling"),
    (("nvtx",), "host-late-unknown.no-nvtx"),
    (("cuda_sync", "cuda_api"), "host-late-unknown.no-cuda-api"),
)


def _lacking(causes: tuple[str, ...]) -> Text:
    """ " (no OS-runtime trace, no NVTX ranges)": the data the causes that were not measured need."""
    missing = [say(key) for ids, key in _MISSING_DATA if set(ids) & set(causes)]
    if not missing:
        return nothing()
    return say("host-late-unknown.lacking", missing=join("sep.enum", missing))


def host_bound_gaps(f: Facts) -> Finding | None:
    """GPUs idle much of their window, mostly in measured host-side causes."""
    hit = [g for g in idle_gpus(f) if (g.measured_host_share or 0.0) >= MEASURED_CAUSE_SHARE]
    if not hit:
        return None
    totals: dict[str, float] = {}
    for g in hit:
        for c in MEASURED_HOST_CAUSES:
            totals[c] = totals.get(c, 0.0) + g.causes.get(c, 0.0) / len(hit)
    main = [c for c, v in sorted(totals.items(), key=lambda kv: -kv[1]) if v >= 0.05][:3]
    names = {c: say(f"host-cause.{c}") for c in main}
    causes = (say("host-cause.share", cause=names[c], share=percent(totals[c])) for c in main)
    claim = say(
        "host-bound-gaps.claim",
        gpus=say_n(len(hit), "gpus.are", where=gpu_list(g.gpu for g in hit)),
        gaps=span(g.gap_share for g in hit),
        window=window_phrase(f, len(hit)),
        others=against_others(f, hit),
        measured=span(g.measured_host_share or 0.0 for g in hit),
        causes=join("sep.list", causes),
    )
    advice = join("sep.clause", (say(f"host-cause.{c}.advice") for c in main))
    evidence = []
    for g in extremes(hit, lambda g: g.gap_share):
        evidence.append(
            number_evidence(
                "gap_share",
                f"gap share, {g.label}",
                g.gap_share,
                percent(g.gap_share),
                "docs/metrics/gaps.md",
            )
        )
        for c in main:
            evidence.append(
                number_evidence(
                    f"{c}_share",
                    f"{names[c]['en']}, share of gap time, {g.label}",
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
        title=say("host-bound-gaps.title"),
        claim=claim,
        recommendation=capitalized(say("host-bound-gaps.recommendation", advice=advice)),
        evidence=tuple(evidence),
    )


def host_late_unknown(f: Facts) -> Finding | None:
    """GPUs idle much of their window; the host was late but the trace cannot say why."""
    hit = [g for g in idle_gpus(f) if (g.unattributed_share or 0.0) >= UNATTRIBUTED_SHARE]
    if not hit:
        return None
    claim = say(
        "host-late-unknown.claim",
        gpus=say_n(len(hit), "gpus.are", where=gpu_list(g.gpu for g in hit)),
        gaps=span(g.gap_share for g in hit),
        window=window_phrase(f, len(hit)),
        others=against_others(f, hit),
        unknown=span(g.unattributed_share or 0.0 for g in hit),
        lacking=_lacking(f.host_unavailable_causes),
    )
    evidence = []
    for g in extremes(hit, lambda g: g.gap_share):
        evidence += [
            gap_share_evidence(g),
            number_evidence(
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
        title=say("host-late-unknown.title"),
        claim=claim,
        recommendation=say("host-late-unknown.recommendation", capture=CAPTURE_HINT),
        evidence=tuple(evidence),
    )
