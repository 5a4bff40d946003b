"""Per-GPU facts: what the rules that look at each GPU (not the mean) reason about.

A :class:`GpuFacts` holds one GPU's numbers over its *steady state* (its window after
a detected start-up, see :mod:`nsysan.analyze.dominant`; the whole window when there
is none): gap share, the dominant gap, kernel sizes, host-side causes of its gap time
and the device counters the dashboard reads. ``None`` is "not measured", never zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from nsysan.analysis import Analysis
from nsysan.analyze.host_causes import CAUSES, HOST_CAUSES
from nsysan.analyze.nccl import nccl_outliers
from nsysan.interval_arrays import merge_arrays, time_before

# Gaps shorter than this are launch-scale: the time between two queued kernels.
SMALL_GAP_NS = 100_000
# Causes that say what the host was doing (measured); "unattributed*" do not.
MEASURED_HOST_CAUSES = (*HOST_CAUSES, "launch_call")
UNATTRIBUTED_CAUSES = ("unattributed", "unattributed_no_data")


@dataclass(frozen=True)
class GpuFacts:
    gpu: int
    label: str  # "GPU 3"
    window_start_ns: int
    window_end_ns: int
    window_gap_share: float  # over the whole window
    gap_share: float  # over steady state (== window_gap_share without a start-up)
    steady_start_ns: int
    longest_start_ns: int | None = None
    longest_end_ns: int | None = None
    longest_ns: int = 0
    longest_share: float = 0.0  # of the whole window
    dominant: bool = False
    warmup: bool = False
    kernel_count: int = 0
    median_kernel_ns: int | None = None
    median_gap_ns: int | None = None
    small_gap_share: float | None = None  # steady gap time in gaps < SMALL_GAP_NS
    # share of steady-state gap time per cause (nsysan.analyze.host_causes.CAUSES); empty when
    # host attribution is unavailable
    causes: dict[str, float] = field(default_factory=dict)
    gr_active_share: float | None = None
    sm_active_share: float | None = None
    copy_gap_share: float | None = None  # steady gap time with a memory copy running
    # Memcpys and memsets over the whole window (nsysan.analyze.transfers): their union,
    # the part of it with no kernel running, and the kernels' busy time to compare.
    transfer_ns: int = 0
    transfer_share: float | None = None
    transfer_exposed_share: float | None = None
    busy_ns: int = 0

    @property
    def measured_host_share(self) -> float | None:
        """Gap time with a measured host-side cause (sync, GIL, OS call, NVTX, launch)."""
        if not self.causes:
            return None
        return sum(self.causes.get(c, 0.0) for c in MEASURED_HOST_CAUSES)

    @property
    def unattributed_share(self) -> float | None:
        if not self.causes:
            return None
        return sum(self.causes.get(c, 0.0) for c in UNATTRIBUTED_CAUSES)


@dataclass(frozen=True)
class NcclOutlier:
    gpu: int
    collective: str
    start_ns: int
    duration_ns: int
    median_ns: int
    count: int
    over_median: float


def _covered(gaps: pl.DataFrame, busy: pl.DataFrame) -> int:
    """Time of ``gaps`` (disjoint) covered by the union of ``busy`` intervals."""
    if gaps.is_empty() or busy.is_empty():
        return 0
    m_start, m_end = merge_arrays(
        busy["start_ns"].to_numpy().astype(np.int64), busy["end_ns"].to_numpy().astype(np.int64)
    )
    if not gaps["start_ns"].is_sorted():
        gaps = gaps.sort("start_ns")
    g_start = gaps["start_ns"].to_numpy().astype(np.int64)
    g_end = gaps["end_ns"].to_numpy().astype(np.int64)
    # Both sets are disjoint and sorted: their common time is the time of one up to
    # the other's ends less up to its starts. The few (copies, say) are the instants
    # asked, not the millions of gaps.
    if len(m_start) < len(g_start):
        return int(
            np.sum(time_before(g_start, g_end, m_end) - time_before(g_start, g_end, m_start))
        )
    return int(np.sum(time_before(m_start, m_end, g_end) - time_before(m_start, m_end, g_start)))


def _cause_shares(steady_causes: pl.DataFrame | None, gpu: int) -> dict[str, float]:
    """Each cause's share of ``gpu``'s steady-state gap time (:attr:`Analysis.steady_causes`)."""
    if steady_causes is None:
        return {}
    rows = steady_causes.filter(pl.col("gpu") == gpu)
    total = float(rows["gap_ns"].sum() or 0)
    if total <= 0:
        return {}
    cols = [f"{c}_ns" for c in CAUSES if f"{c}_ns" in rows.columns]
    sums = rows.select(pl.col(cols).sum()).row(0)
    return {c[: -len("_ns")]: float(v or 0) / total for c, v in zip(cols, sums, strict=True)}


def gather_gpu_facts(analysis: Analysis) -> tuple[GpuFacts, ...]:
    """One :class:`GpuFacts` per GPU with a window, in GPU order."""
    if analysis.gaps is None or analysis.dominant is None:
        return ()
    dom = analysis.dominant.per_gpu.sort("gpu")
    kernels = (
        analysis.trace.kernels.filter(pl.col("gpu").is_not_null())
        .group_by("gpu")
        .agg(
            pl.len().alias("n"),
            (pl.col("end_ns") - pl.col("start_ns")).median().alias("median"),
        )
    )
    kernel_stats = {int(g): (int(n), m) for g, n, m in kernels.iter_rows()}
    gaps = analysis.gaps.gaps
    copies = analysis.trace.memcpy.filter(
        pl.col("gpu").is_not_null() & (pl.col("end_ns") >= pl.col("start_ns"))
    ).select("gpu", "start_ns", "end_ns")
    transfers = _transfer_facts(analysis)
    out = []
    for r in dom.iter_rows(named=True):
        g = int(r["gpu"])
        steady_start = int(r["steady_start_ns"])
        mine = gaps.filter((pl.col("gpu") == g) & (pl.col("start_ns") >= steady_start))
        steady_gap = float(mine["duration_ns"].sum() or 0)
        small = float(mine.filter(pl.col("duration_ns") < SMALL_GAP_NS)["duration_ns"].sum() or 0)
        n, median = kernel_stats.get(g, (0, None))
        gr = sm = None
        if analysis.contention is not None and analysis.contention.available:
            gr = analysis.contention.value(g, "gr_active")
            sm = analysis.contention.value(g, "sm_active")
        window_gap = r["gap_ns"] / r["window_ns"] if r["window_ns"] else 0.0
        out.append(
            GpuFacts(
                gpu=g,
                label=f"GPU {g}",
                window_start_ns=int(r["window_start_ns"]),
                window_end_ns=int(r["window_end_ns"]),
                window_gap_share=float(window_gap),
                gap_share=float(r["steady_gap_share"] or 0.0),
                steady_start_ns=steady_start,
                longest_start_ns=r["longest_start_ns"],
                longest_end_ns=r["longest_end_ns"],
                longest_ns=int(r["longest_ns"] or 0),
                longest_share=float(r["longest_share"] or 0.0),
                dominant=bool(r["dominant"]),
                warmup=bool(r["warmup"]),
                kernel_count=n,
                median_kernel_ns=None if median is None else int(median),
                median_gap_ns=r["median_gap_ns"],
                small_gap_share=small / steady_gap if steady_gap > 0 else None,
                causes=_cause_shares(analysis.steady_causes, g),
                gr_active_share=gr,
                sm_active_share=sm,
                copy_gap_share=_covered(mine, copies.filter(pl.col("gpu") == g)) / steady_gap
                if steady_gap > 0
                else None,
                **transfers.get(g, {}),
            )
        )
    return tuple(out)


def _transfer_facts(analysis: Analysis) -> dict[int, dict[str, object]]:
    """Per GPU, the GpuFacts fields of its transfers and busy time (none without transfers)."""
    if analysis.transfers is None or analysis.busy is None:
        return {}
    busy = {int(g): int(b) for g, b in analysis.busy.summary.select("gpu", "busy_ns").iter_rows()}
    return {
        int(r["gpu"]): {
            "transfer_ns": int(r["transfer_ns"]),
            "transfer_share": r["transfer_share"],
            "transfer_exposed_share": r["exposed_share"],
            "busy_ns": busy.get(int(r["gpu"]), 0),
        }
        for r in analysis.transfers.per_gpu.iter_rows(named=True)
    }


def gather_nccl_outliers(analysis: Analysis, top: int = 5) -> tuple[NcclOutlier, ...]:
    """The longest NCCL kernels with their collective's median on the same GPU."""
    if analysis.nccl is None or not analysis.nccl.nccl_kernels:
        return ()
    return tuple(
        NcclOutlier(
            gpu=int(r["gpu"]),
            collective=str(r["collective"]),
            start_ns=int(r["start_ns"]),
            duration_ns=int(r["duration_ns"]),
            median_ns=int(r["median_ns"] or 0),
            count=int(r["count"]),
            over_median=float(r["over_median"] or 0.0),
        )
        for r in nccl_outliers(analysis.trace.kernels, top).iter_rows(named=True)
    )
