"""The diff as a few lines for the terminal."""

from __future__ import annotations

from typing import Any

from nsysan.report import fmt

# Measures shown in the terminal summary, in order, with how to format them.
SHOWN = (
    ("gap_share", "gap share (mean)", "share"),
    ("gap_share_worst", "gap share (worst GPU)", "share"),
    ("stagger_score", "stagger score", "number"),
    ("host_share", "host-side share of gaps", "share"),
    ("nccl_share", "NCCL share", "share"),
    ("transfer_share", "transfer share", "share"),
    ("throughput", "throughput", "rate"),
)


def format_value(value: float | None, kind: str) -> str:
    if value is None:
        return "n/a"
    if kind == "share":
        return fmt.percent(value)
    return f"{value:,.3g}" if kind == "number" else f"{value:,.2f}"


def format_delta(m: dict[str, Any], kind: str) -> str:
    d = m.get("delta")
    if d is None:
        return ""
    if kind == "share":
        return f"{d * 100:+.1f} pt"
    rel = m.get("relative")
    return f"{rel * 100:+.1f}%" if rel is not None else f"{d:+,.3g}"


def render_text(diff: dict[str, Any]) -> str:
    unit = diff.get("throughput_unit") or ""
    lines = [f"warning: {w}" for w in diff["comparable"]["warnings"]]
    for key, label, kind in SHOWN:
        m = diff["overall"].get(key) or {}
        if m.get("before") is None and m.get("after") is None:
            continue
        suffix = f" ({unit})" if key == "throughput" and unit else ""
        lines.append(
            f"{label}{suffix}: {format_value(m['before'], kind)} -> "
            f"{format_value(m['after'], kind)}  {format_delta(m, kind)}".rstrip()
        )
    for row in diff["gpus"]:
        m = row["measures"]["gap_share"]
        lines.append(
            f"  GPU {row['gpu']}: gap share {format_value(m['before'], 'share')} -> "
            f"{format_value(m['after'], 'share')}"
        )
    f = diff["findings"]
    for key in ("resolved", "new", "remaining"):
        ids = ", ".join(r["rule_id"] for r in f[key]) or "none"
        lines.append(f"{key} findings: {ids}")
    k = diff["kernels"]
    for key in ("slower", "faster"):
        for r in k[key][:3]:
            lines.append(
                f"  {key}: {r['name'][:80]} {fmt.duration(r['before_mean_ns'])} -> "
                f"{fmt.duration(r['after_mean_ns'])} per call ({r['relative'] * 100:+.0f}%)"
            )
    lines.append(f"kernels added: {len(k['added'])}, removed: {len(k['removed'])} (top {k['top']})")
    for g in diff["gates"]:
        state = "TRIPPED" if g["tripped"] else "ok"
        why = f" ({g['reason']})" if g.get("reason") else ""
        lines.append(f"gate {g['expression']}: {state}{why}")
    return "\n".join(lines)
