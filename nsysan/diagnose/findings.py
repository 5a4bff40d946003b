"""What a diagnosis is made of: findings with evidence, myth verdicts, a headline.

Text is kept per language (``en``, ``zh``) inside each object so that the JSON output
and the report carry exactly the same claims; it is made from the entries of
:mod:`nsysan.diagnose.wording`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from nsysan.report.fmt import percent

if TYPE_CHECKING:
    from nsysan.diagnose.facts import Facts

Severity = Literal["critical", "warning", "info"]
MythVerdict = Literal["holds", "does_not_hold", "cannot_tell"]
Lang = Literal["en", "zh"]

SEVERITY_RANK = {"critical": 0, "warning": 1, "info": 2}


@dataclass(frozen=True)
class EvidenceItem:
    """One number behind a claim, with where it comes from (a docs anchor)."""

    metric: str  # e.g. "gap_share"
    label: str  # e.g. "gap share, GPU 2"
    value: float | int | str | None
    display: str  # formatted, e.g. "35.1%"
    source: str  # e.g. "docs/metrics/gaps.md#gap-share"


@dataclass(frozen=True)
class Finding:
    rule_id: str
    severity: Severity
    # Seed chapter section the cause belongs to: "4.1", "4.2", "4.3", "4.4", "4.5".
    seed_section: str
    cause_category: str  # e.g. "CPU-side scheduling"
    # Estimated share of GPU time the problem affects (0..1); orders findings of equal severity.
    impact_share: float
    title: dict[str, str]
    claim: dict[str, str]
    recommendation: dict[str, str]
    evidence: tuple[EvidenceItem, ...] = field(default=())


@dataclass(frozen=True)
class MythCheck:
    myth_id: str
    seed_item: int  # 1..4 in seed section 4.6
    title: dict[str, str]
    verdict: MythVerdict
    why: dict[str, str]


@dataclass(frozen=True)
class Headline:
    severity: Severity
    text: str  # English; the same sentence per language in ``texts``
    texts: dict[str, str]
    rule_id: str | None  # the top finding's rule, None when there is none


@dataclass(frozen=True)
class Diagnosis:
    headline: Headline
    findings: tuple[Finding, ...]  # most important first
    myths: tuple[MythCheck, ...]
    # What the rules read; the report's sections show the same numbers.
    facts: Facts | None = field(default=None, compare=False, repr=False)


def number_evidence(
    metric: str, label: str, value: float | int | str | None, display: str, source: str
) -> EvidenceItem:
    """One number of a finding's evidence, with the docs page that defines it."""
    return EvidenceItem(metric=metric, label=label, value=value, display=display, source=source)


def share_evidence(metric: str, label: str, value: float | None, source: str) -> EvidenceItem:
    """Evidence that is a share, shown as a percentage."""
    return number_evidence(metric, label, value, percent(value), source)
