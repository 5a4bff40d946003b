"""OUTDIR/index.html: every trace of a batch in one sortable, filterable table.

Self-contained like the reports (inline CSS, a few lines of inline script, charts as
inline SVG), so it opens offline; wording from the catalogue (en/zh).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from nsysan.report import fmt
from nsysan.report.i18n import t
from nsysan.report.pages import render_page

GAP_BINS = 10  # histogram of the worst GPU's gap share: 0–10%, …, 90–100%


def _share(v: float | None) -> str:
    return fmt.percent(v) if v is not None else ""


def _number(v: float | None) -> str:
    return f"{v:.3g}" if v is not None else ""


def _cells(row: dict[str, Any]) -> dict[str, Any]:
    """Display text and sort key of every column of one row."""

    def num(v: float | None) -> str:
        return "" if v is None else repr(float(v))

    return {
        "row": row,
        "gap_worst": (_share(row["gap_share_worst"]), num(row["gap_share_worst"])),
        "gap_mean": (_share(row["gap_share_mean"]), num(row["gap_share_mean"])),
        "stagger": (_number(row["stagger_score"]), num(row["stagger_score"])),
        "nccl": (_share(row["nccl_share"]), num(row["nccl_share"])),
        "transfer": (_share(row["transfer_share"]), num(row["transfer_share"])),
        "bound": (_share(row["bound_ratio"]), num(row["bound_ratio"])),
        "duration": (
            fmt.duration(row["duration_ns"]) if row["duration_ns"] is not None else "",
            num(row["duration_ns"]),
        ),
        "gpus": ("" if row["gpus"] is None else str(row["gpus"]), num(row["gpus"])),
        "severity_rank": {"critical": "3", "warning": "2", "info": "1"}.get(
            row["severity"] or "", "0"
        ),
    }


def _gap_histogram(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    counts = [0] * GAP_BINS
    for r in rows:
        v = r["gap_share_worst"]
        if v is not None:
            counts[min(int(v * GAP_BINS), GAP_BINS - 1)] += 1
    top = max(counts) or 1
    step = 100 // GAP_BINS
    return [
        {"label": f"{i * step}–{(i + 1) * step}%", "count": c, "width": round(100 * c / top, 1)}
        for i, c in enumerate(counts)
    ]


def _rules_chart(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    counts = Counter(rule for r in rows if r["rules"] for rule in r["rules"].split(";"))
    top = max(counts.values(), default=1)
    return [
        {"label": rule, "count": c, "width": round(100 * c / top, 1)}
        for rule, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    ]


def render_index(rows: list[dict[str, Any]], notes: list[str], lang: str = "en") -> str:
    status = Counter(r["status"] for r in rows)
    return render_page(
        "batch_index.html.j2",
        lang,
        title=t("batch.title", lang, count=len(rows)),
        summary=t(
            "batch.summary",
            lang,
            ok=status.get("ok", 0),
            failed=status.get("failed", 0),
            skipped=status.get("skipped", 0),
        ),
        rows=[_cells(r) for r in rows],
        notes=notes,
        gap_bins=_gap_histogram(rows),
        rules=_rules_chart(rows),
    )
