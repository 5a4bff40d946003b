"""The report's appendix: inputs, settings, what the trace lacked, notes, definitions."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone
from typing import Any, Literal

from nsysan import __version__
from nsysan.analysis import Analysis
from nsysan.ingest.ncu import join_warning
from nsysan.report import fmt
from nsysan.report.catalog import in_lang, translate
from nsysan.report.glossary import definitions
from nsysan.report.viewmodel import AppendixView, Table

Lang = Literal["en", "zh"]


def _flatten(prefix: str, value: Any) -> list[tuple[str, str]]:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: list[tuple[str, str]] = []
        for f in dataclasses.fields(value):
            out += _flatten(f"{prefix}{f.name}.", getattr(value, f.name))
        return out
    key = prefix.rstrip(".")
    if isinstance(value, int) and not isinstance(value, bool) and key.endswith("_ns") and value:
        return [(key, f"{value} ({fmt.duration(value)})")]
    return [(key, "—" if value is None else str(value))]


def appendix(analysis: Analysis, lang: Lang) -> AppendixView:
    src = analysis.trace.sources
    inputs = Table(
        columns=(
            in_lang(lang, "file", "文件"),
            in_lang(lang, "export version", "导出版本"),
            in_lang(lang, "host", "主机"),
            in_lang(lang, "UTC session start", "UTC 会话起点"),
            in_lang(lang, "offset applied", "时间偏移"),
        ),
        rows=tuple(
            (
                str(r["path"]),
                f"{r['export_version']}"
                + (
                    in_lang(
                        lang, f" (schema {r['schema_version']})", f"（模式 {r['schema_version']}）"
                    )
                    if r["schema_version"]
                    else ""
                ),
                str(r["host"] or "—"),
                _utc(r["utc_start_ns"]),
                fmt.duration(r["offset_ns"]),
            )
            for r in src.iter_rows(named=True)
        ),
    )
    settings_rows = _flatten("", analysis.settings)
    if analysis.ncu_path:
        settings_rows.append(("ncu_csv", str(analysis.ncu_path)))
    notes = [translate(n, lang) for n in analysis.trace.notes]
    warning = ncu_join_warning(analysis)
    if warning:
        notes.insert(0, warning[1] if lang == "zh" else warning[0])
    missing = list(analysis.trace.capabilities.missing)
    missing += [f"{k}: {v}" for k, v in analysis.unavailable.items() if v not in missing]
    missing = [translate(m, lang) for m in missing]
    return AppendixView(
        tool_version=f"nsysan {__version__}",
        inputs=inputs,
        settings=Table(
            columns=(in_lang(lang, "setting", "设置"), in_lang(lang, "value", "值")),
            rows=tuple(settings_rows),
        ),
        missing=tuple(dict.fromkeys(missing)),
        notes=tuple(notes),
        definitions=definitions(lang),
    )


def _utc(ns: int | None) -> str:
    """A UTC session start as an ISO time (nanoseconds since the epoch kept exact)."""
    if ns is None:
        return "—"
    when = datetime.fromtimestamp(ns // 1_000_000_000, tz=timezone.utc)
    return f"{when:%Y-%m-%d %H:%M:%S}.{ns % 1_000_000_000:09d} UTC"


def ncu_join_warning(analysis: Analysis) -> tuple[str, str] | None:
    """(en, zh) when a Nsight Compute CSV joins less than half of the kernel time."""
    if analysis.bound is None:
        return None
    per = analysis.bound.per_gpu
    total = float(per["kernel_time_ns"].sum() or 0)
    if total <= 0 or "unjoined_ns" not in per.columns:
        return None
    joined = 1.0 - float(per["unjoined_ns"].sum()) / total
    text = join_warning(joined, str(analysis.ncu_path or "the Nsight Compute CSV"))
    return text
