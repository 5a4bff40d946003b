"""One row per trace: the columns of results.csv / results.parquet / results.json.

Every column is defined in docs/batch.md#columns; the row of an analysed trace is
computed from its analysis document only, so a row can be traced to that JSON.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from nsysan.diff.measures import overall_measures

ROW_SCHEMA: dict[str, Any] = {
    "trace_id": pl.String,
    "status": pl.String,
    "error": pl.String,
    "files": pl.String,
    "content_hash": pl.String,
    "verdict": pl.String,
    "severity": pl.String,
    "rule_id": pl.String,
    "gpus": pl.Int64,
    "gap_share_worst": pl.Float64,
    "gap_share_mean": pl.Float64,
    "stagger_score": pl.Float64,
    "nccl_share": pl.Float64,
    "transfer_share": pl.Float64,
    "bound_ratio": pl.Float64,
    "duration_ns": pl.Int64,
    "kernels": pl.Int64,
    "findings_critical": pl.Int64,
    "findings_warning": pl.Int64,
    "findings_info": pl.Int64,
    "rules": pl.String,
    "report": pl.String,
    "json": pl.String,
}
# Floats in results.csv: fixed digits, so a local and a Dask run write the same bytes.
CSV_FLOAT_DIGITS = 6


def _bound_ratio(doc: dict[str, Any]) -> float | None:
    """Memory-bound share of the kernel time classified memory- or compute-bound."""
    bound = (doc.get("results") or {}).get("bound") or {}
    rows = bound.get("per_gpu") or []
    memory = sum(r.get("memory_ns") or 0 for r in rows)
    compute = sum(r.get("compute_ns") or 0 for r in rows)
    return memory / (memory + compute) if memory + compute else None


def empty_row(trace_id: str, files: str, status: str, error: str | None) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(ROW_SCHEMA)
    row.update(trace_id=trace_id, status=status, error=error, files=files)
    return row


def row_from_document(
    doc: dict[str, Any],
    *,
    trace_id: str,
    files: str,
    content_hash: str,
    report: str,
    json_path: str,
    lang: str = "en",
) -> dict[str, Any]:
    """The row of an analysed trace."""
    m = overall_measures(doc)
    headline = doc.get("headline") or {}
    findings = doc.get("findings") or []
    work = (doc.get("workload") or {}).get("per_gpu") or []
    severity = [f["severity"] for f in findings]
    row = empty_row(trace_id, files, "ok", None)
    row.update(
        content_hash=content_hash,
        verdict=(headline.get("texts") or {}).get(lang) or headline.get("text"),
        severity=headline.get("severity"),
        rule_id=headline.get("rule_id"),
        gpus=len(doc.get("gpus") or []),
        gap_share_worst=m["gap_share_worst"],
        gap_share_mean=m["gap_share"],
        stagger_score=m["stagger_score"],
        nccl_share=m["nccl_share"],
        transfer_share=m["transfer_share"],
        bound_ratio=_bound_ratio(doc),
        duration_ns=int(m["duration_ns"]) if m["duration_ns"] is not None else None,
        kernels=sum(int(r["kernel_count"]) for r in work) if work else 0,
        findings_critical=severity.count("critical"),
        findings_warning=severity.count("warning"),
        findings_info=severity.count("info"),
        rules=";".join(f["rule_id"] for f in findings) or None,
        report=report,
        json=json_path,
    )
    return row


def rows_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """The rows as a table with the documented columns, sorted by trace id."""
    return pl.DataFrame(rows, schema=ROW_SCHEMA, orient="row").sort("trace_id")


def csv_text(frame: pl.DataFrame) -> str:
    floats = [c for c, t in ROW_SCHEMA.items() if t == pl.Float64]
    return frame.with_columns(pl.col(floats).round(CSV_FLOAT_DIGITS)).write_csv(
        float_precision=CSV_FLOAT_DIGITS
    )
