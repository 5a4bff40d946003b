"""The analysis as one JSON-ready document, and its short text summary.

The document's layout is versioned (``jsonout.SCHEMA_VERSION``) and documented in
docs/json-schema.md; CI jobs and dashboards gate on ``findings``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from nsysan import __version__
from nsysan.analysis import Analysis
from nsysan.diagnose import Diagnosis, diagnose
from nsysan.report import fmt
from nsysan.report.jsonout import SCHEMA_VERSION, to_jsonable

# Per-event tables: one row per gap, interval, kernel instance or sample. They make
# the document grow with the trace, so they are left out unless ``detail="full"``.
EVENT_TABLES: dict[str, tuple[str, ...]] = {
    "busy": ("intervals",),
    "nvidia_busy": ("intervals",),
    "gaps": ("gaps",),
    "nvidia_gaps": ("gaps",),
    "stagger": ("gaps",),
    "host": ("gaps",),
    "nccl": ("instances", "instance_kernels"),
    "dashboard": ("periods",),
    "contention": ("series", "clock_drops"),
    "imbalance": ("drift", "bubbles", "iterations"),
    "bound": ("kernels",),
    "transfers": ("intervals",),
    "memory": ("series",),
    "steps": ("steps", "requests"),
    "load": ("windows",),
}


def _result_json(name: str, result: object, detail: str) -> Any:
    omitted = [] if detail == "full" else _event_fields(name, result)
    if omitted:
        # Replaced before conversion: turning millions of rows into Python objects
        # only to drop them was most of the time (and memory) of ``analyze --json``.
        result = dataclasses.replace(result, **dict.fromkeys(omitted))  # type: ignore[type-var]
    data = to_jsonable(result)
    if isinstance(data, dict) and omitted:
        for f in omitted:
            del data[f]
        data["omitted_event_tables"] = omitted
    return data


def _event_fields(name: str, result: object) -> list[str]:
    """The per-event table fields of ``result`` that summary mode leaves out."""
    if not dataclasses.is_dataclass(result) or isinstance(result, type):
        return []
    fields = {f.name for f in dataclasses.fields(result)}
    return [f for f in EVENT_TABLES.get(name, ()) if f in fields]


def _workload_json(analysis: Analysis) -> dict[str, Any] | None:
    """Throughput, transfer share and kernel time by name (nsysan/analyze/workload.py)."""
    from nsysan.analyze.workload import measure_workload

    if analysis.busy is None:
        return None
    imbalance = analysis.imbalance
    found_steps = imbalance is not None and imbalance.iteration_source is not None
    workload = measure_workload(
        analysis.trace.kernels,
        analysis.trace.memcpy,
        analysis.busy.windows,
        imbalance.bubbles_per_gpu if found_steps else None,  # type: ignore[union-attr]
        imbalance.iteration_label if found_steps else None,  # type: ignore[union-attr]
    )
    return to_jsonable(workload)  # type: ignore[no-any-return]


def analysis_document(
    analysis: Analysis, detail: str = "summary", diagnosis: Diagnosis | None = None
) -> dict[str, Any]:
    """Everything ``nsysan analyze --json`` prints.

    ``detail="summary"`` (default) leaves out the per-event tables listed in
    :data:`EVENT_TABLES` (naming them in ``omitted_event_tables``); ``"full"`` keeps them.
    ``diagnosis``: :func:`diagnose`'s of ``analysis`` when the caller has it already.
    """
    if diagnosis is None:
        diagnosis = diagnose(analysis)
    trace = analysis.trace
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "analysis",
        "tool": {"name": "nsysan", "version": __version__},
        "inputs": to_jsonable(trace.sources),
        "ncu_csv": str(analysis.ncu_path) if analysis.ncu_path else None,
        "settings": to_jsonable(analysis.settings),
        "gpus": to_jsonable(trace.gpus),
        "capabilities": {
            "present": dict(trace.capabilities.present),
            "missing": list(trace.capabilities.missing),
        },
        "notes": list(trace.notes),
        "unavailable": dict(analysis.unavailable),
        "headline": to_jsonable(diagnosis.headline),
        "findings": to_jsonable(diagnosis.findings),
        "myths": to_jsonable(diagnosis.myths),
        "detail": detail,
        "workload": _workload_json(analysis),
        "results": {
            name: _result_json(name, result, detail) for name, result in analysis.results.items()
        },
    }


def render_summary_text(document: dict[str, Any]) -> str:
    """A few lines for the terminal: headline, per-GPU gap share, findings."""
    lines = [str(document["headline"]["text"])]
    gaps = document["results"].get("gaps")
    if gaps:
        lines.append("per GPU (kernels busy union, window first→last kernel):")
        for row in gaps["summary"]:
            lines.append(
                f"  GPU {row['gpu']}: gap share {fmt.percent(row['gap_share'])}, "
                f"{fmt.count(row['gap_count'])} gaps, window {fmt.duration(row['window_ns'])}"
            )
    findings = document["findings"]
    lines.append(f"findings: {len(findings)}")
    for f in findings:
        lines.append(f"  [{f['severity']}] {f['rule_id']}: {f['claim']['en']}")
    for name, why in document["unavailable"].items():
        lines.append(f"  unavailable: {name}: {why}")
    return "\n".join(lines)
