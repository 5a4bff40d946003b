"""The measures a before/after comparison reads from one analysis document.

Per GPU and for the whole run, each a plain number or ``None`` (not measured). The
names are the ones ``--fail-if`` gates and the diff document use
(docs/diff.md#measures).
"""

from __future__ import annotations

from typing import Any

# Host-cause split of the gap time (results.host.per_gpu, docs/metrics/host.md).
HOST_CAUSES = (
    "host_share",
    "launch_call_share",
    "cuda_sync_share",
    "gil_wait_share",
    "blocking_os_share",
    "descheduled_share",
    "gpu_wait_share",
)
SHARE_MEASURES = frozenset(
    {"gap_share", "gap_share_worst", "busy_share", "nccl_share", "transfer_share", *HOST_CAUSES}
)


def _rows(doc: dict[str, Any], result: str, table: str) -> dict[int, dict[str, Any]]:
    res = (doc.get("results") or {}).get(result) or {}
    return {int(r["gpu"]): r for r in res.get(table) or [] if r.get("gpu") is not None}


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def _first(*values: float | None) -> float | None:
    return next((v for v in values if v is not None), None)


def _sum(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def per_gpu_measures(doc: dict[str, Any]) -> dict[int, dict[str, float | None]]:
    """GPU index → measure → value."""
    gaps = _rows(doc, "gaps", "summary")
    busy = _rows(doc, "busy", "summary")
    host = _rows(doc, "host", "per_gpu")
    nccl = _rows(doc, "nccl", "per_gpu")
    work = {int(r["gpu"]): r for r in (doc.get("workload") or {}).get("per_gpu") or []}
    # The step analysis (results.steps, docs/metrics/steps.md) when present: its steps
    # and requests per second; else the iterations of the pipeline-bubble analysis.
    steps = _rows(doc, "steps", "per_gpu")
    out: dict[int, dict[str, float | None]] = {}
    for gpu in sorted(set(gaps) | set(work)):
        g, w = gaps.get(gpu, {}), work.get(gpu, {})
        m: dict[str, float | None] = {
            "gap_share": g.get("gap_share"),
            "busy_share": busy.get(gpu, {}).get("busy_share"),
            "nccl_share": nccl.get(gpu, {}).get("nccl_window_share"),
            "transfer_share": w.get("transfer_share"),
            "kernels_per_s": w.get("kernels_per_s"),
            "steps_per_s": _first(steps.get(gpu, {}).get("steps_per_s"), w.get("steps_per_s")),
            "requests_per_s": steps.get(gpu, {}).get("requests_per_s"),
            "window_ns": g.get("window_ns", w.get("window_ns")),
        }
        for cause in HOST_CAUSES:
            m[cause] = host.get(gpu, {}).get(cause)
        out[gpu] = m
    return out


def overall_measures(doc: dict[str, Any]) -> dict[str, float | None]:
    """Measure → value for the whole run (means over GPUs unless said otherwise)."""
    gpus = per_gpu_measures(doc)
    rows = list(gpus.values())
    results = doc.get("results") or {}
    stagger = results.get("stagger") or {}
    nccl = results.get("nccl") or {}
    windows = [r["window_ns"] for r in rows if r["window_ns"] is not None]
    kernels_per_s = [r["kernels_per_s"] for r in rows if r["kernels_per_s"] is not None]
    out: dict[str, float | None] = {
        "gap_share": _mean([r["gap_share"] for r in rows]),
        "gap_share_worst": max(
            (r["gap_share"] for r in rows if r["gap_share"] is not None), default=None
        ),
        "stagger_score": stagger.get("stagger_score"),
        "busy_share": _mean([r["busy_share"] for r in rows]),
        "nccl_share": nccl.get("nccl_window_share"),
        "transfer_share": _mean([r["transfer_share"] for r in rows]),
        # The run's rate: kernels per second summed over GPUs; steps are global, so
        # their rate is the mean over GPUs.
        "kernels_per_s": sum(kernels_per_s) if kernels_per_s else None,
        "steps_per_s": _mean([r["steps_per_s"] for r in rows]),
        "requests_per_s": _sum([r["requests_per_s"] for r in rows]),
        "duration_ns": max(windows) if windows else None,
    }
    for cause in HOST_CAUSES:
        out[cause] = _mean([r[cause] for r in rows])
    return out


def throughput_unit(before: dict[str, Any], after: dict[str, Any]) -> str | None:
    """steps/s when both runs have steps, else kernels/s, else None."""
    b, a = overall_measures(before), overall_measures(after)
    if b["steps_per_s"] is not None and a["steps_per_s"] is not None:
        return "steps/s"
    if b["kernels_per_s"] is not None and a["kernels_per_s"] is not None:
        return "kernels/s"
    return None


def with_throughput(measures: dict[str, float | None], unit: str | None) -> dict[str, float | None]:
    """``measures`` plus ``throughput`` in ``unit`` (the gate ``throughput`` reads it)."""
    key = {"steps/s": "steps_per_s", "kernels/s": "kernels_per_s"}.get(unit or "")
    return {**measures, "throughput": measures.get(key) if key else None}
