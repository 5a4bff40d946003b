"""The report's timelines: the busy union binned per GPU, NCCL and copy lanes, and the
zoomed view of steady state.

A trace can hold millions of kernels: each GPU's busy union (and its NCCL kernels and
memory copies, as their own rows) is binned into at most ``TIMELINE_MAX_BINS`` equal
bins on the trace timeline, so the page stays small whatever the kernel count."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import polars as pl

from nsysan.analysis import Analysis
from nsysan.analyze.nccl import nccl_kernels
from nsysan.diagnose.facts import Facts
from nsysan.interval_arrays import rows_by_unit, time_before
from nsysan.intervals import union_intervals
from nsysan.report import fmt, view_gpu
from nsysan.report.catalog import in_lang
from nsysan.report.viewmodel import Section, TimelineView

Lang = Literal["en", "zh"]

TIMELINE_MAX_BINS = 1200
TIMELINE_MAX_GAPS = 40
TITLE = {"en": "Timeline (aggregated)", "zh": "时间线（聚合）"}


def _binned_busy(starts: np.ndarray, ends: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Busy ns per bin from disjoint intervals in start order, via cumulative coverage."""
    if starts.size == 0:
        return np.zeros(edges.size - 1)
    return np.diff(time_before(starts, ends, edges)).astype(float)


def _per_gpu(intervals: pl.DataFrame, gpus: list[int]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Each GPU's disjoint ``intervals`` as start and end arrays in start order: views of
    the columns where the table is grouped by GPU (the busy union is), not a filter of
    the table per GPU (millions of rows, once per GPU and per timeline)."""
    starts = intervals["start_ns"].to_numpy().astype(np.int64, copy=False)
    ends = intervals["end_ns"].to_numpy().astype(np.int64, copy=False)
    out = {}
    for gpu, rows in rows_by_unit(intervals["gpu"].to_numpy(), gpus).items():
        s, e = starts[rows], ends[rows]
        if np.any(s[1:] < s[:-1]):
            order = np.argsort(s, kind="stable")
            s, e = s[order], e[order]
        out[gpu] = (s, e)
    return out


def _lanes(analysis: Analysis) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Disjoint NCCL-kernel and transfer (memcpy and memset) intervals per GPU (their own
    timeline rows)."""
    # The NCCL rows are picked first: a filter of every kernel would copy every column.
    kernels = analysis.trace.kernels.select("gpu", "start_ns", "end_ns", "short_name", "name")
    nccl = nccl_kernels(kernels).filter(
        pl.col("gpu").is_not_null() & (pl.col("end_ns") >= pl.col("start_ns"))
    )
    transfers = analysis.transfers
    copies = (
        transfers.intervals
        if transfers is not None
        else pl.DataFrame(schema={"gpu": pl.Int32, "start_ns": pl.Int64, "end_ns": pl.Int64})
    )
    return (
        union_intervals(nccl.select("gpu", "start_ns", "end_ns"), by="gpu"),
        copies.select(pl.col("gpu").cast(nccl.schema["gpu"]), "start_ns", "end_ns"),
    )


def _timeline_view(
    analysis: Analysis,
    labels: dict[int, str],
    lanes: tuple[pl.DataFrame, pl.DataFrame],
    start: int,
    end: int,
    n_bins: int,
    note: tuple[str, str],
    lang: Lang,
) -> TimelineView:
    busy = analysis.busy
    assert busy is not None and analysis.gaps is not None
    windows = busy.windows.sort("gpu")
    span = max(end - start, 1)
    n_bins = int(min(n_bins, max(1, span)))
    bin_ns = -(-span // n_bins)
    edges = start + np.arange(n_bins + 1, dtype=np.int64) * bin_ns

    def binned(
        arrays: tuple[np.ndarray, np.ndarray], row: dict[str, Any]
    ) -> tuple[float | None, ...]:
        share = _binned_busy(*arrays, edges) / bin_ns
        inside = (edges[1:] > row["window_start_ns"]) & (edges[:-1] < row["window_end_ns"])
        return tuple(
            round(float(v), 3) if ok else None for v, ok in zip(share, inside, strict=True)
        )

    gpus = windows["gpu"].to_list()
    busy_rows, nccl_rows, copy_rows = (_per_gpu(t, gpus) for t in (busy.intervals, *lanes))
    matrix, nccl, copies = [], [], []
    for row in windows.iter_rows(named=True):
        g = row["gpu"]
        matrix.append(binned(busy_rows[g], row))
        nccl.append(binned(nccl_rows[g], row) if len(nccl_rows[g][0]) else None)
        copies.append(binned(copy_rows[g], row) if len(copy_rows[g][0]) else None)
    gpu_rows = {g: i for i, g in enumerate(gpus)}
    inside = analysis.gaps.gaps.filter((pl.col("end_ns") > start) & (pl.col("start_ns") < end))
    # The longest gaps: only the rows at or above the k-th longest duration are sorted,
    # not all of them (millions); ties stay in row order either way.
    if inside.height > TIMELINE_MAX_GAPS:
        shortest = inside["duration_ns"].top_k(TIMELINE_MAX_GAPS).min()
        inside = inside.filter(pl.col("duration_ns") >= shortest)
    longest = inside.sort("duration_ns", descending=True, maintain_order=True).head(
        TIMELINE_MAX_GAPS
    )
    gaps = tuple(
        (gpu_rows[g], int(s), int(e))
        for g, s, e in longest.select("gpu", "start_ns", "end_ns").iter_rows()
    )
    n_kernels = analysis.trace.kernels.height
    text = in_lang(
        lang,
        note[0].format(
            kernels=fmt.count(n_kernels), bins=n_bins, bin=fmt.duration(bin_ns), gaps=len(gaps)
        ),
        note[1].format(
            kernels=fmt.count(n_kernels), bins=n_bins, bin=fmt.duration(bin_ns), gaps=len(gaps)
        ),
    )
    return TimelineView(
        gpu_labels=tuple(f"GPU {g}" for g in windows["gpu"].to_list()),
        bin_start_ns=tuple(int(v) for v in edges[:-1]),
        bin_ns=int(bin_ns),
        busy_share=tuple(matrix),
        gaps=gaps,
        note=text,
        nccl_share=tuple(nccl) if any(r is not None for r in nccl) else (),
        copy_share=tuple(copies) if any(r is not None for r in copies) else (),
    )


def timeline_section(
    analysis: Analysis, labels: dict[int, str], lang: Lang, facts: Facts
) -> Section:
    busy = analysis.busy
    assert busy is not None
    windows = busy.windows
    start = int(windows["window_start_ns"].min())  # type: ignore[arg-type]
    end = int(windows["window_end_ns"].max())  # type: ignore[arg-type]
    lanes = _lanes(analysis)
    timeline = _timeline_view(
        analysis,
        labels,
        lanes,
        start,
        end,
        TIMELINE_MAX_BINS,
        (
            "{kernels} kernels aggregated into {bins} bins of {bin}; colour = share of the bin the GPU was busy; "
            "the {gaps} longest gaps are marked.",
            "{kernels} 个内核被聚合为 {bins} 个时间格，每格 {bin}；颜色表示该格内 GPU 忙碌的比例；标出了最长的 {gaps} 个间隙。",
        ),
        lang,
    )
    zoom = None
    span = view_gpu.zoom_span(facts.per_gpu)
    if span is not None:
        zoom = _timeline_view(
            analysis,
            labels,
            lanes,
            span[0],
            span[1],
            view_gpu.ZOOM_BINS,
            (
                "Zoomed into {bin} bins over a stretch of steady state mid-run, so that the gaps of each GPU and how "
                "they line up (or do not) across GPUs are visible; the {gaps} longest gaps in it are marked.",
                "放大到稳态中段的一小段时间，每格 {bin}，以便看清各卡的间隙以及它们在卡间是否对齐；标出了其中最长的 {gaps} 个间隙。",
            ),
            lang,
        )
    return Section(key="timeline", title=TITLE[lang], timeline=timeline, zoom=zoom)
