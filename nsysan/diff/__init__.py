"""Before/after comparison of two runs (``nsysan diff BEFORE... --vs AFTER...``).

Each side is an analysis document (``nsysan analyze -o run.json``) or the trace
files of one run (a folder or archive of rank files too), analysed with the given
settings. The comparison (a ``kind: diff`` document, docs/diff.md) has per GPU and
overall before/after/delta of every measure in :mod:`nsysan.diff.measures`, per-kernel
changes, findings resolved/new/remaining, and the outcome of ``--fail-if`` gates.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nsysan import __version__
from nsysan.diff.gates import evaluate_gate, parse_gate
from nsysan.diff.measures import (
    SHARE_MEASURES,
    overall_measures,
    per_gpu_measures,
    throughput_unit,
    with_throughput,
)
from nsysan.errors import InputNotFoundError, SettingsError
from nsysan.report.jsonout import SCHEMA_VERSION

# A kernel is slower/faster when its mean time per call changed by at least this
# share and this many ns (noise in a few-percent band is not a change).
KERNEL_CHANGE_SHARE = 0.05
KERNEL_CHANGE_NS = 1_000
# Below this share of kernel time under common kernel names, the two runs are
# "plainly different programs" (a warning; --strict refuses).
DIFFERENT_PROGRAM_OVERLAP = 0.2
TOP_KERNELS = 10


def load_run(
    paths: Sequence[Path], settings: Any = None, nsys_path: Path | None = None
) -> dict[str, Any]:
    """The analysis document of one side: a JSON document, or traces analysed now."""
    for p in paths:
        if not p.exists():
            raise InputNotFoundError(f"{p}: no such file or folder")
    if len(paths) == 1 and paths[0].suffix.lower() == ".json":
        return _read_document(paths[0])
    if any(p.suffix.lower() == ".json" for p in paths):
        raise SettingsError("give one analysis JSON per side, or trace files, not both")
    from nsysan.analysis import analyze
    from nsysan.batch.inputs import expand_run, with_source_labels
    from nsysan.ingest import load_trace
    from nsysan.report.document import analysis_document
    from nsysan.report.jsonout import to_jsonable

    with expand_run(paths) as (traces, labels):
        # Big host tables stay in the table cache's files (nsysan.stored).
        trace = load_trace(traces, nsys_path=nsys_path, store_host_tables=True)
        trace = with_source_labels(trace, labels)
    document = analysis_document(analyze(trace, settings, detail_tables=False))
    return to_jsonable(document)  # type: ignore[no-any-return]


def _read_document(path: Path) -> dict[str, Any]:
    from nsysan.contract import ContractError, errors

    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ContractError(f"{path}: not an nsysan analysis JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("kind") != "analysis":
        raise ContractError(f"{path}: not an nsysan analysis JSON (kind is not 'analysis')")
    problems = errors(doc)
    if problems:
        raise ContractError(f"{path}: does not follow the JSON schema: {problems[0]}")
    return doc


def _delta(before: float | None, after: float | None) -> dict[str, float | None]:
    delta = after - before if before is not None and after is not None else None
    relative = delta / abs(before) if delta is not None and before else None
    return {"before": before, "after": after, "delta": delta, "relative": relative}


def _measures(
    before: dict[str, float | None], after: dict[str, float | None]
) -> dict[str, dict[str, float | None]]:
    return {k: _delta(before.get(k), after.get(k)) for k in before}


def _kernel_table(doc: dict[str, Any]) -> dict[str, dict[str, int]]:
    return {k["name"]: k for k in (doc.get("workload") or {}).get("kernels") or []}


def kernel_changes(before: dict[str, Any], after: dict[str, Any], top: int) -> dict[str, Any]:
    """Kernels added, removed, slower and faster (per call), biggest effect first."""
    b, a = _kernel_table(before), _kernel_table(after)

    def row(name: str) -> dict[str, Any]:
        kb, ka = b.get(name, {}), a.get(name, {})
        bn, an = kb.get("total_ns", 0), ka.get("total_ns", 0)
        bc, ac = kb.get("count", 0), ka.get("count", 0)
        mean_b, mean_a = (bn / bc if bc else None), (an / ac if ac else None)
        rel = (mean_a - mean_b) / mean_b if mean_a is not None and mean_b else None
        return {
            "name": name,
            "before_ns": bn,
            "after_ns": an,
            "delta_ns": an - bn,
            "before_count": bc,
            "after_count": ac,
            "before_mean_ns": mean_b,
            "after_mean_ns": mean_a,
            "relative": rel,
        }

    both = [row(n) for n in b.keys() & a.keys()]

    def changed(r: dict[str, Any], sign: int) -> bool:
        if r["relative"] is None:
            return False
        step = (r["after_mean_ns"] - r["before_mean_ns"]) * sign
        return r["relative"] * sign >= KERNEL_CHANGE_SHARE and step >= KERNEL_CHANGE_NS

    def effect(r: dict[str, Any]) -> float:
        # What the per-call change cost (or saved) over the after run's calls.
        return abs(r["after_mean_ns"] - r["before_mean_ns"]) * r["after_count"]

    return {
        "top": top,
        "added": sorted((row(n) for n in a.keys() - b.keys()), key=lambda r: -r["after_ns"])[:top],
        "removed": sorted((row(n) for n in b.keys() - a.keys()), key=lambda r: -r["before_ns"])[
            :top
        ],
        "slower": sorted((r for r in both if changed(r, 1)), key=effect, reverse=True)[:top],
        "faster": sorted((r for r in both if changed(r, -1)), key=effect, reverse=True)[:top],
    }


def _kernel_overlap(before: dict[str, Any], after: dict[str, Any]) -> float | None:
    """Share of kernel time under names both runs have (the smaller of the two sides)."""
    b, a = _kernel_table(before), _kernel_table(after)
    tb, ta = sum(k["total_ns"] for k in b.values()), sum(k["total_ns"] for k in a.values())
    if not tb or not ta:
        return None
    common = b.keys() & a.keys()
    return min(
        sum(b[n]["total_ns"] for n in common) / tb, sum(a[n]["total_ns"] for n in common) / ta
    )


def comparability(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """Same GPU count? Same program (kernel names)? Warnings in words when not."""
    nb, na = len(before.get("gpus") or []), len(after.get("gpus") or [])
    overlap = _kernel_overlap(before, after)
    warnings = []
    if nb != na:
        warnings.append(
            f"the runs have different GPU counts ({nb} before, {na} after): "
            "per-GPU rows are matched by GPU index"
        )
    if overlap is not None and overlap < DIFFERENT_PROGRAM_OVERLAP:
        warnings.append(
            f"only {overlap:.0%} of kernel time is under kernel names both runs have: "
            "they look like different programs"
        )
    return {"same_gpu_count": nb == na, "kernel_name_overlap": overlap, "warnings": warnings}


def _finding_rows(findings: list[dict[str, Any]], ids: set[str], before: dict[str, str]) -> list:
    rows = []
    for f in findings:
        if f["rule_id"] in ids:
            row = {"rule_id": f["rule_id"], "severity": f["severity"], "title": f["title"]}
            if f["rule_id"] in before:
                row["severity_before"] = before[f["rule_id"]]
            rows.append(row)
    return rows


def diff_documents(
    before: dict[str, Any],
    after: dict[str, Any],
    *,
    before_paths: Sequence[str] = (),
    after_paths: Sequence[str] = (),
    gates: Sequence[str] = (),
    top: int = TOP_KERNELS,
    strict: bool = False,
) -> dict[str, Any]:
    """The ``kind: diff`` document of two analysis documents."""
    unit = throughput_unit(before, after)
    measure_names = frozenset(with_throughput(overall_measures(before), unit))
    parsed = [parse_gate(g, measure_names, SHARE_MEASURES) for g in gates]
    comparable = comparability(before, after)
    if strict and comparable["warnings"]:
        raise SettingsError(f"refusing to compare (--strict): {comparable['warnings'][0]}")
    overall = _measures(
        with_throughput(overall_measures(before), unit),
        with_throughput(overall_measures(after), unit),
    )
    gb, ga = per_gpu_measures(before), per_gpu_measures(after)
    empty = dict.fromkeys(next(iter((gb or ga).values()), {}))
    gpus = [
        {
            "gpu": gpu,
            "measures": _measures(
                with_throughput(gb.get(gpu, empty), unit), with_throughput(ga.get(gpu, empty), unit)
            ),
        }
        for gpu in sorted(set(gb) | set(ga))
    ]
    fb = {f["rule_id"]: f["severity"] for f in before.get("findings", [])}
    fa = {f["rule_id"]: f["severity"] for f in after.get("findings", [])}
    findings = {
        "resolved": _finding_rows(before.get("findings", []), fb.keys() - fa.keys(), {}),
        "new": _finding_rows(after.get("findings", []), fa.keys() - fb.keys(), {}),
        "remaining": _finding_rows(after.get("findings", []), fa.keys() & fb.keys(), fb),
    }
    results = [
        evaluate_gate(g, overall, after.get("findings", []), findings["new"]) for g in parsed
    ]
    if strict:
        for r in results:
            if r.get("reason") and not r["tripped"]:
                r["tripped"] = True
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "diff",
        "tool": {"name": "nsysan", "version": __version__},
        "before": _side(before, before_paths),
        "after": _side(after, after_paths),
        "comparable": comparable,
        "throughput_unit": unit,
        "overall": overall,
        "gpus": gpus,
        "kernels": kernel_changes(before, after, top),
        "findings": findings,
        "gates": results,
    }


def _side(doc: dict[str, Any], paths: Sequence[str]) -> dict[str, Any]:
    headline = doc.get("headline") or {}
    return {
        "paths": list(paths) or [str(i.get("path")) for i in doc.get("inputs", [])],
        "gpu_count": len(doc.get("gpus") or []),
        "headline": headline.get("text"),
        "headline_zh": (headline.get("texts") or {}).get("zh"),
        "severity": headline.get("severity"),
        "kernel_names": len(_kernel_table(doc)),
    }
