"""``--fail-if`` gates of ``nsysan diff`` and ``--fail-on`` of ``analyze``.

Syntax (docs/diff.md#gates)::

    MEASURE OP VALUE           OP: >  >=  <  <=
    gap_share>+5pt             after − before, in percentage points (shares only)
    throughput<-3%             (after − before) / before, in percent
    stagger_score>0.1          after − before, in the measure's own unit
    new_finding>=warning       a finding absent before, of this severity or worse
    finding>=critical          any finding after, of this severity or worse

A gate whose measure is missing on either side is not evaluated; it is reported,
and trips only with ``--strict``.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nsysan.errors import SettingsError

SEVERITY_RANK = {"info": 0, "warning": 1, "critical": 2}
_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
}
_GATE = re.compile(
    r"^\s*(?P<measure>[a-z_]+)\s*(?P<op>>=|<=|>|<)\s*"
    r"(?:(?P<severity>info|warning|critical)|(?P<number>[+-]?\d+(?:\.\d+)?)\s*(?P<unit>pt|%)?)\s*$"
)
FINDING_MEASURES = ("new_finding", "finding")
# Why a gate was not evaluated (the diff page shows them from the catalogue).
NOT_MEASURED = "not measured in both runs"
BEFORE_ZERO = "before is 0: no relative change"
REASON_KEYS = {NOT_MEASURED: "diff.gate.not_measured", BEFORE_ZERO: "diff.gate.before_zero"}
SYNTAX = (
    "MEASURE OP VALUE, e.g. 'gap_share>+5pt', 'throughput<-3%', 'new_finding>=warning' "
    "(docs/diff.md#gates)"
)


@dataclass(frozen=True)
class Gate:
    expression: str
    measure: str
    op: str
    number: float | None
    unit: str | None  # "pt", "%" or None (the measure's own unit)
    severity: str | None


def parse_gate(text: str, measures: frozenset[str], shares: frozenset[str]) -> Gate:
    """One ``--fail-if`` expression; :class:`SettingsError` when it does not parse."""
    m = _GATE.match(text)
    if not m:
        raise SettingsError(f"--fail-if {text!r}: not a gate; {SYNTAX}")
    measure, op = m["measure"], m["op"]
    if measure in FINDING_MEASURES:
        if not m["severity"]:
            raise SettingsError(
                f"--fail-if {text!r}: {measure} takes a severity (info, warning, critical)"
            )
        return Gate(text, measure, op, None, None, m["severity"])
    if measure not in measures:
        known = ", ".join(sorted(measures | set(FINDING_MEASURES)))
        raise SettingsError(f"--fail-if {text!r}: unknown measure {measure!r}; known: {known}")
    if m["severity"]:
        raise SettingsError(f"--fail-if {text!r}: {measure} takes a number, not a severity")
    if m["unit"] == "pt" and measure not in shares:
        raise SettingsError(f"--fail-if {text!r}: 'pt' (percentage points) is for shares only")
    return Gate(text, measure, op, float(m["number"]), m["unit"], None)


def evaluate_gate(
    gate: Gate,
    overall: dict[str, dict[str, float | None]],
    findings_after: list[dict[str, Any]],
    new_findings: list[dict[str, Any]],
) -> dict[str, Any]:
    """``{expression, measure, value, tripped[, reason]}`` for one gate."""
    compare = _OPS[gate.op]
    if gate.severity is not None:
        pool = new_findings if gate.measure == "new_finding" else findings_after
        level = SEVERITY_RANK[gate.severity]
        hits = [f["rule_id"] for f in pool if compare(SEVERITY_RANK[f["severity"]], level)]
        return {
            "expression": gate.expression,
            "measure": gate.measure,
            "value": ", ".join(hits) or None,
            "tripped": bool(hits),
        }
    m = overall.get(gate.measure) or {}
    before, after = m.get("before"), m.get("after")
    value: float | None
    if before is None or after is None:
        value, reason = None, NOT_MEASURED
    elif gate.unit == "%":
        value = (after - before) / abs(before) * 100 if before else None
        reason = BEFORE_ZERO if value is None else ""
    elif gate.unit == "pt":
        value, reason = (after - before) * 100, ""
    else:
        value, reason = after - before, ""
    out: dict[str, Any] = {
        "expression": gate.expression,
        "measure": gate.measure,
        "value": value,
        "tripped": value is not None and compare(value, gate.number),  # type: ignore[arg-type]
    }
    if reason:
        out["reason"] = reason
    return out


def findings_at_or_above(findings: list[dict[str, Any]], level: str) -> list[dict[str, Any]]:
    """The findings of severity ``level`` or worse (``analyze --fail-on``)."""
    return [f for f in findings if SEVERITY_RANK[f["severity"]] >= SEVERITY_RANK[level]]
