"""Turn an analysis into findings, a headline verdict and the four-myth checklist.

Rules (``rules.RULES``) read the named numbers of ``facts.Facts``; thresholds are
documented in docs/findings.md. Every sentence they, the headline and the myths say
is an entry of ``wording.WORDING``, English and Chinese side by side.
"""

from __future__ import annotations

from nsysan.analysis import Analysis
from nsysan.diagnose.facts import Facts, gather_facts
from nsysan.diagnose.findings import SEVERITY_RANK, Diagnosis, Finding, Headline
from nsysan.diagnose.gpu_rules import STALL_CATEGORY
from nsysan.diagnose.myths import check_myths
from nsysan.diagnose.rules import RULES
from nsysan.diagnose.wording import say, say_n
from nsysan.report.fmt import percent

__all__ = ["Diagnosis", "Finding", "diagnose", "diagnose_facts"]

# A finding explained by a more specific one is dropped: key is dropped when any of
# its values fired. Host-bound gaps are part of false balance; staggered gaps that
# follow a pipeline's fill/drain staircase are bubbles, not false balance; a compute
# skew whose leader moves over time is load drift, not a static split.
_SUBSUMED_BY = {
    # On a launch-bound GPU the host's "cause" is the launch calls themselves.
    # ... and behind a burst that landed on one GPU, the others wait on empty queues.
    "host-bound-gaps": ("false-balance", "pipeline-bubble", "launch-bound", "request-burst"),
    "host-late-unknown": ("false-balance", "pipeline-bubble"),
    "false-balance": ("pipeline-bubble",),
    "static-split-skew": ("dp-long-tail",),
    # Tiny kernels explain both the gaps and the idle SMs behind a busy-looking GPU.
    "sm-idle-while-busy": ("small-kernels", "launch-bound"),
    # launch-bound is the measured form of the small-kernels pattern (µs gaps, launch rate).
    "small-kernels": ("launch-bound",),
    # launch-bound names the shape of its GPUs' top kernel itself.
    "launch-config": ("launch-bound",),
    # On a launch-bound GPU the feeding thread is busy launching.
    "feeding-thread-busy": ("launch-bound",),
    # A burst that lands on one GPU explains the drift that follows it.
    "dp-long-tail": ("request-burst",),
}


def _stall_explained(finding: Finding, ids: set[str]) -> bool:
    """A long stall mid-run (not a start-up) that load drift or a pipeline explains."""
    return (
        finding.rule_id == "dominant-gap"
        and finding.cause_category == STALL_CATEGORY
        and bool(ids & {"dp-long-tail", "pipeline-bubble"})
    )


def diagnose_facts(facts: Facts) -> tuple[Finding, ...]:
    """All findings the rules support, most important first."""
    found = [f for f in (rule(facts) for rule in RULES) if f is not None]
    ids = {f.rule_id for f in found}
    found = [
        f
        for f in found
        if not ids & set(_SUBSUMED_BY.get(f.rule_id, ())) and not _stall_explained(f, ids)
    ]
    return tuple(
        sorted(found, key=lambda f: (SEVERITY_RANK[f.severity], -f.impact_share, f.rule_id))
    )


def _headline(facts: Facts, findings: tuple[Finding, ...], analysis: Analysis) -> Headline:
    if not analysis.trace.has_gpu_work or facts.gpu_count == 0 or analysis.gaps is None:
        texts = say("headline.no-gpu")
        return Headline(severity="info", text=texts["en"], texts=texts, rule_id=None)
    if findings:
        top = findings[0]
        more = len(findings) - 1
        texts = say_n(more, "headline.more", claim=top.claim, more=more) if more else top.claim
        return Headline(
            severity=top.severity, text=texts["en"], texts=dict(texts), rule_id=top.rule_id
        )
    gaps = facts.gap_share
    low, high = percent(min(gaps)), percent(max(gaps))
    n = len(gaps)
    texts = say_n(n, "headline.none", n=n, gaps=low if low == high else f"{low}–{high}")
    return Headline(severity="info", text=texts["en"], texts=texts, rule_id=None)


def diagnose(analysis: Analysis) -> Diagnosis:
    """Findings, headline and myth verdicts for one analysis."""
    facts = gather_facts(analysis)
    findings = diagnose_facts(facts) if facts.gpu_count else ()
    return Diagnosis(
        headline=_headline(facts, findings, analysis),
        findings=findings,
        myths=check_myths(facts, findings),
        facts=facts,
    )
