"""The numbers the diagnosis rules reason about, pulled out of an :class:`Analysis`.

Rules read :class:`Facts`, not the analysis tables, so each rule is a few lines over
named numbers and can be tested with hand-made facts. ``None`` means "not measured"
(the analysis was unavailable), never zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from nsysan.analysis import Analysis
from nsysan.analyze.host_causes import HOST_SIDE_CAUSES
from nsysan.diagnose.gpu_facts import (
    MEASURED_HOST_CAUSES,
    UNATTRIBUTED_CAUSES,
    GpuFacts,
    NcclOutlier,
    gather_gpu_facts,
    gather_nccl_outliers,
)
from nsysan.diagnose.resource_facts import ResourceFacts, gather_resource_facts


@dataclass(frozen=True)
class Facts:
    gpu_count: int
    gpu_labels: tuple[str, ...] = ()
    # gaps (kernels busy union, per GPU window): over steady state when a start-up was
    # detected (warmup_detected), else over the whole window (== window_gap_share)
    gap_share: tuple[float, ...] = ()
    window_gap_share: tuple[float, ...] = ()
    warmup_detected: bool = False
    per_gpu: tuple[GpuFacts, ...] = ()
    # dashboard
    dashboard_share: tuple[float, ...] = ()  # NVML-style utilization per GPU
    gr_active_share: tuple[float | None, ...] = ()  # GPU-metrics engine activity per GPU
    dashboard_spread: float | None = None  # max - min across GPUs of what the dashboard shows
    timeline_spread: float | None = None
    # stagger
    stagger_verdict: str | None = None
    stagger_score: float | None = None
    co_idle_ratio: float | None = None
    all_idle_share: float | None = None
    # host
    host_share: float | None = None  # host-side share of all gap time (pooled)
    host_share_per_gpu: tuple[float, ...] = ()
    gil_share: float | None = None
    blocking_share: float | None = None
    sync_share: float | None = None
    gpu_wait_share: float | None = None
    host_unavailable: tuple[str, ...] = ()
    host_unavailable_causes: tuple[str, ...] = ()
    measured_host_share: float | None = None  # gap time with a measured host cause
    unattributed_share: float | None = None  # host late, cause not in the trace
    top_nvtx: tuple[tuple[str, float], ...] = ()  # (text, share of gap time)
    # imbalance
    compute_efficiency: float | None = None
    compute_max_over_mean: float | None = None
    busy_efficiency: float | None = None
    most_loaded_gpu: int | None = None
    least_loaded_gpu: int | None = None
    top_diff_kernels: tuple[tuple[str, float], ...] = ()  # (short name, share of the diff)
    drift_spread_mean: float | None = None
    drift_spread_max: float | None = None
    drift_spread_min: float | None = None
    leader_changes: int = 0
    busy_trend: tuple[float, ...] = ()  # per GPU: fitted change of busy share over the capture
    bubble_share: float | None = None
    fill_share_per_gpu: tuple[float, ...] = ()
    drain_share_per_gpu: tuple[float, ...] = ()
    iteration_source: str | None = None
    # nccl
    nccl_share: float | None = None  # pooled share of busy time
    nccl_wait_share: float | None = None
    nccl_skew_median_ns: int | None = None
    top_collective: str | None = None
    nccl_outliers: tuple[NcclOutlier, ...] = ()
    # bound
    memory_bound_share: float | None = None
    compute_bound_share: float | None = None
    unjoined_share: float | None = None
    # contention
    clock_drop_share: tuple[float, ...] = ()  # per GPU with clocks, busy-time share
    clock_min_mhz: tuple[float | None, ...] = ()
    clock_reference_mhz: float | None = None
    metrics_available: bool = False
    missing: tuple[str, ...] = field(default=())
    # launches, host CPUs, device memory (nsysan.diagnose.resource_facts)
    resources: ResourceFacts = field(default_factory=ResourceFacts)


def _col(df: pl.DataFrame, name: str) -> tuple[float, ...]:
    if name not in df.columns:
        return ()
    return tuple(float(v) if v is not None else 0.0 for v in df.sort("gpu")[name].to_list())


def gather_facts(analysis: Analysis) -> Facts:
    """Reduce an analysis to the named numbers of :class:`Facts`."""
    trace = analysis.trace
    gpus = trace.gpus.sort("gpu")
    labels = tuple(f"GPU {g}" for g in gpus["gpu"].to_list())
    values: dict[str, object] = {
        "gpu_count": gpus.height,
        "gpu_labels": labels,
        "missing": tuple(trace.capabilities.missing),
        "resources": gather_resource_facts(analysis),
    }
    if analysis.gaps is not None:
        values["gap_share"] = values["window_gap_share"] = _col(analysis.gaps.summary, "gap_share")
        per_gpu = gather_gpu_facts(analysis)
        values["per_gpu"] = per_gpu
        if any(g.warmup for g in per_gpu):
            values["warmup_detected"] = True
            values["gap_share"] = tuple(g.gap_share for g in per_gpu)
    if analysis.dashboard is not None:
        d = analysis.dashboard
        per = d.per_gpu.sort("gpu")
        values["dashboard_share"] = _col(per, "dashboard_util_share")
        gr = tuple(per["gr_active_share"].to_list()) if "gr_active_share" in per.columns else ()
        values["gr_active_share"] = gr
        shown = [g for g in gr if g is not None]
        if len(shown) == len(gr) and gr:
            values["dashboard_spread"] = max(shown) - min(shown)
        else:
            values["dashboard_spread"] = d.period_spread_share
        values["timeline_spread"] = d.timeline_spread_share
    if analysis.stagger is not None:
        # After a detected start-up, stagger is read over steady state: a start-up gap
        # that every GPU shares would make any trace look aligned.
        s = analysis.steady_stagger or analysis.stagger
        values.update(
            stagger_verdict=s.verdict,
            stagger_score=s.stagger_score,
            co_idle_ratio=s.co_idle_ratio,
            all_idle_share=s.all_idle_share,
        )
    if analysis.host is not None:
        values.update(_host_facts(analysis))
    if analysis.imbalance is not None:
        values.update(_imbalance_facts(analysis))
    if analysis.nccl is not None and analysis.nccl.nccl_kernels:
        n = analysis.nccl
        values.update(
            nccl_share=n.nccl_busy_share,
            nccl_wait_share=n.wait_share,
            nccl_skew_median_ns=n.skew_median_ns,
        )
        per_coll = n.per_collective
        if per_coll.height:
            top = (
                per_coll.group_by("collective")
                .agg(pl.col("nccl_ns").sum())
                .sort("nccl_ns", descending=True)
            )
            values["top_collective"] = str(top["collective"][0])
        values["nccl_outliers"] = gather_nccl_outliers(analysis)
    elif analysis.nccl is not None:
        values["nccl_share"] = 0.0
    if analysis.bound is not None:
        per = analysis.bound.per_gpu
        total = float(per["kernel_time_ns"].sum() or 0)
        if total > 0:

            def pooled(cls: str) -> float:
                col = f"{cls}_ns"
                return float(per[col].sum()) / total if col in per.columns else 0.0

            values.update(
                memory_bound_share=pooled("memory"),
                compute_bound_share=pooled("compute"),
                unjoined_share=pooled("unjoined"),
            )
    if analysis.contention is not None and analysis.contention.available:
        c = analysis.contention
        values["metrics_available"] = True
        clocks = c.clocks.sort("gpu")
        if clocks.height:
            values["clock_drop_share"] = tuple(
                float(v or 0) for v in clocks["drop_busy_share"].to_list()
            )
            values["clock_min_mhz"] = tuple(clocks["busy_clock_min_mhz"].to_list())
            ref = clocks["reference_clock_mhz"].drop_nulls()
            values["clock_reference_mhz"] = float(ref.max()) if len(ref) else None  # type: ignore[arg-type]
    return Facts(**values)  # type: ignore[arg-type]


def _host_facts(analysis: Analysis) -> dict[str, object]:
    host = analysis.host
    assert host is not None
    shares = host.shares
    total = float(shares["time_ns"].sum() or 0)
    out: dict[str, object] = {
        "host_unavailable": tuple(host.unavailable),
        "host_unavailable_causes": tuple(host.unavailable_causes),
    }
    if total <= 0:
        return out

    def share_of(causes: tuple[str, ...] | list[str]) -> float:
        return float(shares.filter(pl.col("cause").is_in(list(causes)))["time_ns"].sum()) / total

    per_gpu = (
        shares.group_by("gpu")
        .agg(
            (
                pl.col("time_ns").filter(pl.col("cause").is_in(list(HOST_SIDE_CAUSES))).sum()
                / pl.col("time_ns").sum()
            ).alias("host")
        )
        .sort("gpu")
    )
    out.update(
        host_share=share_of(HOST_SIDE_CAUSES),
        measured_host_share=share_of(MEASURED_HOST_CAUSES),
        unattributed_share=share_of(UNATTRIBUTED_CAUSES),
        host_share_per_gpu=tuple(float(v or 0) for v in per_gpu["host"].to_list()),
        gil_share=share_of(["gil_wait"]),
        blocking_share=share_of(["blocking_os"]),
        sync_share=share_of(["cuda_sync"]),
        gpu_wait_share=share_of(["gpu_wait"]),
    )
    if host.nvtx.height:
        gap_total = float(analysis.gaps.summary["gap_ns"].sum()) if analysis.gaps else total  # type: ignore[union-attr]
        top = (
            host.nvtx.group_by("text")
            .agg(pl.col("covered_ns").sum())
            .sort("covered_ns", descending=True)
            .head(3)
        )
        out["top_nvtx"] = tuple(
            (str(t), float(c) / gap_total) for t, c in top.iter_rows() if gap_total > 0
        )
    return out


def _imbalance_facts(analysis: Analysis) -> dict[str, object]:
    imb = analysis.imbalance
    assert imb is not None
    out: dict[str, object] = {
        "compute_efficiency": imb.compute_efficiency,
        "compute_max_over_mean": imb.compute_max_over_mean,
        "busy_efficiency": imb.busy_efficiency,
        "most_loaded_gpu": imb.most_loaded_gpu,
        "least_loaded_gpu": imb.least_loaded_gpu,
        "drift_spread_mean": imb.drift_spread_mean,
        "drift_spread_max": imb.drift_spread_max,
        "leader_changes": imb.leader_changes,
        "bubble_share": imb.bubble_share,
        "iteration_source": imb.iteration_source,
    }
    if "busy_share_trend" in imb.per_gpu.columns:
        out["busy_trend"] = tuple(
            float(v or 0) for v in imb.per_gpu.sort("gpu")["busy_share_trend"].to_list()
        )
    if imb.drift_windows.height:
        out["drift_spread_min"] = float(imb.drift_windows["spread_share"].min())  # type: ignore[arg-type]
    if imb.kernel_diff.height:
        top = imb.kernel_diff.sort("diff_ns", descending=True).head(3)
        out["top_diff_kernels"] = tuple(
            (str(s or n), float(sh or 0))
            for s, n, sh in zip(top["short_name"], top["name"], top["diff_share"], strict=True)
        )
    if imb.bubbles_per_gpu.height:
        b = imb.bubbles_per_gpu.sort("gpu")
        out["fill_share_per_gpu"] = tuple(float(v or 0) for v in b["fill_share"].to_list())
        out["drain_share_per_gpu"] = tuple(float(v or 0) for v in b["drain_share"].to_list())
    return out
