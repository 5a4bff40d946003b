"""Before/after comparison of two analyses (the case study's verification step).

Works on analysis documents (``nsysan analyze -o run.json``) or on exports, which are
analysed with default settings first. Reports per-GPU gap share and throughput (steps
per second, kernels per second, requests per second where the trace has them) before
and after, and which findings were resolved or are new.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nsysan.errors import InputNotFoundError, NsysanError
from nsysan.report import fmt


def load_document(path: Path, nsys_path: Path | None = None) -> dict[str, Any]:
    """An analysis document from a JSON file, or by analysing an export or a report."""
    if not path.exists():
        raise InputNotFoundError(f"{path}: no such file")
    if path.suffix.lower() == ".json":
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise NsysanError(
                f"{path}: not an nsysan analysis JSON ({exc})", slug="settings"
            ) from None
        if not isinstance(doc, dict) or "results" not in doc:
            raise NsysanError(
                f"{path}: not an nsysan analysis JSON (no 'results')", slug="settings"
            )
        return doc
    from nsysan.analysis import analyze
    from nsysan.ingest import load_trace
    from nsysan.report.document import analysis_document
    from nsysan.report.jsonout import to_jsonable

    trace = load_trace([path], nsys_path=nsys_path)
    return to_jsonable(analysis_document(analyze(trace)))  # type: ignore[no-any-return]


def _per_gpu(doc: dict[str, Any]) -> dict[int, dict[str, Any]]:
    gaps = (doc.get("results") or {}).get("gaps") or {}
    return {row["gpu"]: row for row in gaps.get("summary", [])}


def _throughput(doc: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """Per GPU: steps/s and kernels/s (results.steps, else results.launch)."""
    results = doc.get("results") or {}
    out: dict[int, dict[str, Any]] = {}
    for row in (results.get("launch") or {}).get("per_gpu", []):
        out.setdefault(row["gpu"], {})["kernels_per_s"] = row.get("launch_rate")
    for row in (results.get("steps") or {}).get("per_gpu", []):
        out.setdefault(row["gpu"], {})["steps_per_s"] = row.get("steps_per_s")
        out[row["gpu"]]["requests_per_s"] = row.get("requests_per_s")
    return out


def _ratio(after: float | None, before: float | None) -> float | None:
    return after / before if after is not None and before else None


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def compare_documents(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """Differences between two analysis documents."""
    b, a = _per_gpu(before), _per_gpu(after)
    tb, ta = _throughput(before), _throughput(after)
    rows = []
    for gpu in sorted(set(b) | set(a)):
        row: dict[str, Any] = {
            "gpu": gpu,
            "gap_share_before": b.get(gpu, {}).get("gap_share"),
            "gap_share_after": a.get(gpu, {}).get("gap_share"),
        }
        for key in ("steps_per_s", "kernels_per_s", "requests_per_s"):
            row[f"{key}_before"] = tb.get(gpu, {}).get(key)
            row[f"{key}_after"] = ta.get(gpu, {}).get(key)
            row[f"{key}_ratio"] = _ratio(row[f"{key}_after"], row[f"{key}_before"])
        rows.append(row)
    before_ids = {f["rule_id"] for f in before.get("findings", [])}
    after_ids = {f["rule_id"] for f in after.get("findings", [])}
    return {
        "gpus": rows,
        "mean_gap_share_before": _mean(
            [r["gap_share_before"] for r in rows if r["gap_share_before"] is not None]
        ),
        "mean_gap_share_after": _mean(
            [r["gap_share_after"] for r in rows if r["gap_share_after"] is not None]
        ),
        "resolved_findings": sorted(before_ids - after_ids),
        "new_findings": sorted(after_ids - before_ids),
        "remaining_findings": sorted(before_ids & after_ids),
        "headline_before": (before.get("headline") or {}).get("text"),
        "headline_after": (after.get("headline") or {}).get("text"),
    }


def render_comparison(result: dict[str, Any]) -> str:
    lines = [
        f"mean gap share: {fmt.percent(result['mean_gap_share_before'])} -> {fmt.percent(result['mean_gap_share_after'])}"
    ]
    for row in result["gpus"]:
        lines.append(
            f"  GPU {row['gpu']}: {fmt.percent(row['gap_share_before'])} -> {fmt.percent(row['gap_share_after'])}"
        )
    lines.append("throughput (steps/s; kernels/s):")
    for row in result["gpus"]:
        lines.append(
            f"  GPU {row['gpu']}: steps/s {_rate(row.get('steps_per_s_before'))} -> "
            f"{_rate(row.get('steps_per_s_after'))}{_change(row.get('steps_per_s_ratio'))}; "
            f"kernels/s {_rate(row.get('kernels_per_s_before'))} -> {_rate(row.get('kernels_per_s_after'))}"
            f"{_change(row.get('kernels_per_s_ratio'))}"
        )
    lines.append(f"resolved findings: {', '.join(result['resolved_findings']) or 'none'}")
    lines.append(f"new findings: {', '.join(result['new_findings']) or 'none'}")
    lines.append(f"remaining findings: {', '.join(result['remaining_findings']) or 'none'}")
    return "\n".join(lines)


def _rate(v: float | None) -> str:
    return "n/a" if v is None else f"{v:,.1f}"


def _change(ratio: float | None) -> str:
    return "" if ratio is None else f" ({ratio:.2f}×)"
