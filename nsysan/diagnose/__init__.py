"""Turn an analysis into findings, a headline verdict and the four-myth checklist.

Rules (``rules.RULES``) read the named numbers of ``facts.Facts``; thresholds are
documented in docs/findings.md.
"""

from __future__ import annotations

from nsysan.analysis import Analysis
from nsysan.diagnose.facts import Facts, gather_facts
from nsysan.diagnose.findings import SEVERITY_RANK, Diagnosis, Finding, Headline
from nsysan.diagnose.myths import check_myths
from nsysan.diagnose.rules import RULES
from nsysan.report.fmt import percent

__all__ = ["Diagnosis", "Finding", "diagnose", "diagnose_facts"]

# A finding explained by a more specific one is dropped: key is dropped when any of
# its values fired. Host-bound gaps are part of false balance; staggered gaps that
# follow a pipeline's fill/drain staircase are bubbles, not false balance; a compute
# skew whose leader moves over time is load drift, not a static split.
_SUBSUMED_BY = {
    "host-bound-gaps": ("false-balance",),
    "false-balance": ("pipeline-bubble",),
    "static-split-skew": ("dp-long-tail",),
}


def diagnose_facts(facts: Facts) -> tuple[Finding, ...]:
    """All findings the rules support, most important first."""
    found = [f for f in (rule(facts) for rule in RULES) if f is not None]
    ids = {f.rule_id for f in found}
    found = [f for f in found if not ids & set(_SUBSUMED_BY.get(f.rule_id, ()))]
    return tuple(
        sorted(found, key=lambda f: (SEVERITY_RANK[f.severity], -f.impact_share, f.rule_id))
    )


def _headline(facts: Facts, findings: tuple[Finding, ...], analysis: Analysis) -> Headline:
    if not analysis.trace.has_gpu_work or facts.gpu_count == 0:
        why = (
            analysis.trace.capabilities.missing[0]
            if analysis.trace.capabilities.missing
            else "no GPU work"
        )
        return Headline(
            severity="info",
            text=f"No GPU work to analyse: {why}.",
            texts={
                "en": f"No GPU work to analyse: {why}.",
                "zh": f"没有可分析的 GPU 工作：{why}。",
            },
            rule_id=None,
        )
    if findings:
        top = findings[0]
        more = len(findings) - 1
        suffix_en = f" ({more} more finding{'s' if more != 1 else ''} below)" if more else ""
        suffix_zh = f"（下文还有 {more} 项发现）" if more else ""
        return Headline(
            severity=top.severity,
            text=top.claim["en"] + suffix_en,
            texts={"en": top.claim["en"] + suffix_en, "zh": top.claim["zh"] + suffix_zh},
            rule_id=top.rule_id,
        )
    gaps = facts.gap_share
    span = f"{percent(min(gaps), 0)}–{percent(max(gaps), 0)}" if gaps else "n/a"
    n = facts.gpu_count
    return Headline(
        severity="info",
        text=f"No imbalance found: {n} GPU{'s' if n != 1 else ''}, gap share {span}; no rule's threshold was reached.",
        texts={
            "en": f"No imbalance found: {n} GPU{'s' if n != 1 else ''}, gap share {span}; no rule's threshold was reached.",
            "zh": f"未发现负载不均：{n} 张 GPU，间隙占比 {span}；没有规则达到阈值。",
        },
        rule_id=None,
    )


def diagnose(analysis: Analysis) -> Diagnosis:
    """Findings, headline and myth verdicts for one analysis."""
    facts = gather_facts(analysis)
    findings = diagnose_facts(facts) if facts.gpu_count else ()
    return Diagnosis(
        headline=_headline(facts, findings, analysis),
        findings=findings,
        myths=check_myths(facts, findings),
    )
