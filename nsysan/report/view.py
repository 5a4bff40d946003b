"""Analysis + diagnosis → the report's view model (:class:`ReportView`).

Pure data work: every number shown is taken from an analysis result and formatted
by :mod:`nsysan.report.fmt`; nothing is recomputed differently from the JSON output.
This module assembles the page: the title, findings, myths, recommendations and the
sections in reading order, each built by its own ``view_*`` module (where the time
goes: :mod:`~nsysan.report.view_gaps`; balance and communication:
:mod:`~nsysan.report.view_balance`; device counters: :mod:`~nsysan.report.view_metrics`;
the aggregated timeline: :mod:`~nsysan.report.view_timeline`; ...).
"""

from __future__ import annotations

from typing import Any, Literal

from nsysan.analysis import Analysis
from nsysan.diagnose import Diagnosis
from nsysan.diagnose.facts import Facts, gather_facts
from nsysan.report.catalog import in_lang, translate
from nsysan.report.glossary import definition_anchor, definition_title
from nsysan.report.view_appendix import appendix

# Re-exported: nsysan.cli imports ncu_join_warning from this module.
from nsysan.report.view_appendix import ncu_join_warning as ncu_join_warning
from nsysan.report.view_balance import balance_section, communication_section
from nsysan.report.view_gaps import gaps_section, gpu_section, host_section, stagger_section
from nsysan.report.view_load import load_section, steps_section
from nsysan.report.view_metrics import bound_section, contention_section, dashboard_section
from nsysan.report.view_resources import cpu_section, launch_section, memory_section
from nsysan.report.view_timeline import timeline_section
from nsysan.report.viewmodel import Evidence, FindingView, MythView, ReportView, Section

Lang = Literal["en", "zh"]

MYTH_VERDICT_TEXT = {
    "holds": {"en": "holds here", "zh": "在此成立"},
    "does_not_hold": {"en": "does not hold here", "zh": "在此不成立"},
    "cannot_tell": {"en": "cannot tell", "zh": "无法判断"},
}
# The chapter's four dimensions (and its case study), by section: a finding's cause
# category names the dimension in words, never by section number.
DIMENSIONS = {
    "4.1": ("model-parallel split", "模型并行切分"),
    "4.2": ("data-parallel load", "数据并行负载"),
    "4.3": ("dynamic requests", "动态请求"),
    "4.4": ("resource contention", "资源争用"),
    "4.5": ("false balance, as in the case study", "假均衡（见案例）"),
}


def _gpu_labels(analysis: Analysis) -> dict[int, str]:
    gpus = analysis.trace.gpus.sort("gpu")
    labels = {}
    for row in gpus.iter_rows(named=True):
        ident = row["pci_bus"] or (row["uuid"] or "")[:8] or row["gpu_key"]
        name = (row["name"] or "GPU").replace("NVIDIA ", "")
        labels[row["gpu"]] = f"GPU {row['gpu']} ({name}, {ident})"
    return labels


def build_view(analysis: Analysis, diagnosis: Diagnosis, lang: Lang = "en") -> ReportView:
    """The whole report's view model for ``lang``."""
    labels = _gpu_labels(analysis)
    title = (
        in_lang(lang, "nsysan report", "nsysan 报告")
        + ": "
        + ", ".join(p.rsplit("/", 1)[-1] for p in analysis.trace.sources["path"].to_list()[:4])
        + (" …" if analysis.trace.sources.height > 4 else "")
    )
    findings = tuple(_finding_view(f, lang) for f in diagnosis.findings)
    myths = tuple(
        MythView(
            myth_id=m.myth_id,
            title=m.title[lang],
            verdict=m.verdict,
            verdict_text=MYTH_VERDICT_TEXT[m.verdict][lang],
            why=m.why[lang],
        )
        for m in diagnosis.myths
    )
    recommendations = tuple(dict.fromkeys(f.recommendation[lang] for f in diagnosis.findings))
    if not recommendations and analysis.trace.has_gpu_work:
        recommendations = (
            in_lang(
                lang,
                "No rule reached its threshold. Keep this report as a baseline and compare the next trace with `nsysan compare`.",
                "没有规则达到阈值。保留本报告作为基线，之后用 `nsysan compare` 与新的时间线对比。",
            ),
        )
    no_work = analysis.gaps is None
    sections = () if no_work else _sections(analysis, labels, lang, _facts(analysis, diagnosis))
    return ReportView(
        title=title,
        lang=lang,
        headline=diagnosis.headline.texts[lang],
        headline_severity=diagnosis.headline.severity,
        findings=findings,
        sections=sections,
        myths=myths,
        recommendations=recommendations,
        appendix=appendix(analysis, lang),
        no_gpu_work=no_work,
    )


def _finding_view(f: Any, lang: Lang) -> FindingView:
    return FindingView(
        rule_id=f.rule_id,
        severity=f.severity,
        title=f.title[lang],
        claim=f.claim[lang],
        cause_category=_cause_category(f, lang),
        evidence=tuple(
            Evidence(
                label=translate(e.label, lang),
                value_text=e.display,
                source=definition_anchor(e.source),
                source_label=definition_title(definition_anchor(e.source), lang),
            )
            for e in f.evidence
        ),
        recommendation=f.recommendation[lang],
    )


def _cause_category(f: Any, lang: Lang) -> str:
    cause = translate(f.cause_category, lang)
    dim = DIMENSIONS.get(f.seed_section)
    if dim is None:
        return cause
    return in_lang(lang, f"{cause} ({dim[0]})", f"{cause}（{dim[1]}）")


def _facts(analysis: Analysis, diagnosis: Diagnosis) -> Facts:
    """The facts the diagnosis read (gathered again only for a diagnosis made without)."""
    return diagnosis.facts if diagnosis.facts is not None else gather_facts(analysis)


def _sections(
    analysis: Analysis, labels: dict[int, str], lang: Lang, facts: Facts
) -> tuple[Section, ...]:
    return (
        gpu_section(analysis, labels, lang, facts),
        timeline_section(analysis, labels, lang, facts),
        gaps_section(analysis, labels, lang, facts),
        stagger_section(analysis, labels, lang, facts),
        host_section(analysis, labels, lang, facts),
        dashboard_section(analysis, labels, lang, facts),
        balance_section(analysis, labels, lang),
        communication_section(analysis, labels, lang, facts),
        bound_section(analysis, labels, lang),
        contention_section(analysis, labels, lang),
        launch_section(analysis, lang),
        cpu_section(analysis, lang),
        memory_section(analysis, lang),
        steps_section(analysis, lang),
        load_section(analysis, lang),
    )
