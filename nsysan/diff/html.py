"""The HTML diff page (``nsysan diff -o diff.html``), in the report's style."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nsysan.diff import DIFFERENT_PROGRAM_OVERLAP, KERNEL_CHANGE_NS, KERNEL_CHANGE_SHARE
from nsysan.diff.gates import REASON_KEYS
from nsysan.diff.measures import SHARE_MEASURES
from nsysan.output import write_atomic
from nsysan.report import fmt
from nsysan.report.i18n import t
from nsysan.report.pages import render_page

OVERALL_ROWS = (
    "gap_share",
    "gap_share_worst",
    "stagger_score",
    "throughput",
    "steps_per_s",
    "requests_per_s",
    "kernels_per_s",
    "nccl_share",
    "transfer_share",
    "busy_share",
    "host_share",
    "launch_call_share",
    "cuda_sync_share",
    "gil_wait_share",
    "blocking_os_share",
    "descheduled_share",
    "gpu_wait_share",
    "duration_ns",
)
GPU_ROWS = ("gap_share", "busy_share", "host_share", "nccl_share", "transfer_share", "throughput")


def _value(measure: str, v: float | None) -> str:
    if v is None:
        return "n/a"
    if measure in SHARE_MEASURES:
        return fmt.percent(v)
    if measure.endswith("_ns"):
        return fmt.duration(v)
    return f"{v:,.3g}" if abs(v) < 1000 else f"{v:,.0f}"


def _delta(measure: str, m: dict[str, Any]) -> tuple[str, str]:
    """(text, direction) where direction is better/worse/same for colouring."""
    d = m.get("delta")
    if d is None:
        return "", "same"
    if measure in SHARE_MEASURES:
        text = f"{d * 100:+.1f} pt"
    elif m.get("relative") is not None:
        text = f"{m['relative'] * 100:+.1f}%"
    else:
        text = f"{d:+,.3g}"
    if abs(d) < 1e-12:
        return text, "same"
    higher_is_better = measure in (
        "throughput",
        "steps_per_s",
        "requests_per_s",
        "kernels_per_s",
        "busy_share",
    )
    lower_is_better = measure.startswith("gap_share") or measure == "duration_ns"
    if higher_is_better or lower_is_better:
        good = (d > 0) == higher_is_better
        return text, "better" if good else "worse"
    return text, "same"


def _label(measure: str, unit: str | None, lang: str) -> str:
    if measure == "throughput":
        return t("measure.throughput", lang, unit=unit or "n/a")
    return t(f"measure.{measure}", lang)


def _rows(measures: dict[str, Any], names: tuple[str, ...], unit: str | None, lang: str) -> list:
    rows = []
    for name in names:
        m = measures.get(name)
        if not m or (m["before"] is None and m["after"] is None):
            continue
        text, direction = _delta(name, m)
        rows.append(
            {
                "label": _label(name, unit, lang),
                "before": _value(name, m["before"]),
                "after": _value(name, m["after"]),
                "delta": text,
                "direction": direction,
            }
        )
    return rows


def _kernel_rows(rows: list[dict[str, Any]]) -> list[dict[str, str]]:
    return [
        {
            "name": r["name"],
            "calls": f"{r['before_count']:,} → {r['after_count']:,}",
            "per_call": f"{fmt.duration(r['before_mean_ns'])} → {fmt.duration(r['after_mean_ns'])}",
            "total": f"{fmt.duration(r['before_ns'])} → {fmt.duration(r['after_ns'])}",
            "relative": f"{r['relative'] * 100:+.0f}%" if r["relative"] is not None else "",
        }
        for r in rows
    ]


def _warnings(diff: dict[str, Any], lang: str) -> list[str]:
    c = diff["comparable"]
    out = []
    if not c["same_gpu_count"]:
        out.append(
            t(
                "diff.warn.gpu_count",
                lang,
                before=diff["before"]["gpu_count"],
                after=diff["after"]["gpu_count"],
            )
        )
    overlap = c["kernel_name_overlap"]
    if overlap is not None and overlap < DIFFERENT_PROGRAM_OVERLAP:
        out.append(t("diff.warn.program", lang, overlap=fmt.percent(overlap)))
    return out


def render_diff_html(diff: dict[str, Any], lang: str = "en") -> str:
    unit = diff.get("throughput_unit")
    name = lambda side: ", ".join(Path(p).name for p in diff[side]["paths"]) or side  # noqa: E731
    headline_key = "headline_zh" if lang == "zh" else "headline"
    return render_page(
        "diff.html.j2",
        lang,
        title=t("diff.title", lang, before=name("before"), after=name("after")),
        sides=[
            {
                "label": t(f"diff.{side}", lang),
                "paths": diff[side]["paths"],
                "headline": diff[side].get(headline_key) or diff[side]["headline"] or "",
                "severity": diff[side]["severity"] or "info",
            }
            for side in ("before", "after")
        ],
        warnings=_warnings(diff, lang),
        overall=_rows(diff["overall"], OVERALL_ROWS, unit, lang),
        gpus=[
            {"gpu": g["gpu"], "rows": _rows(g["measures"], GPU_ROWS, unit, lang)}
            for g in diff["gpus"]
        ],
        findings={
            key: [
                {
                    "rule_id": f["rule_id"],
                    "severity": f["severity"],
                    "title": f["title"][lang],
                }
                for f in diff["findings"][key]
            ]
            for key in ("resolved", "new", "remaining")
        },
        kernels={
            key: _kernel_rows(diff["kernels"][key])
            for key in ("slower", "faster", "added", "removed")
        },
        kernels_explain=t(
            "diff.kernels.explain",
            lang,
            share=fmt.percent(KERNEL_CHANGE_SHARE),
            ns=fmt.duration(KERNEL_CHANGE_NS),
            top=diff["kernels"]["top"],
        ),
        gates=[
            {
                **g,
                "reason": t(REASON_KEYS[g["reason"]], lang)
                if g.get("reason") in REASON_KEYS
                else "",
            }
            for g in diff["gates"]
        ],
    )


def write_diff_html(diff: dict[str, Any], path: str | Path, lang: str = "en") -> Path:
    return write_atomic(path, render_diff_html(diff, lang))
