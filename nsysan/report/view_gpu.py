"""Report blocks that show the per-GPU diagnosis's numbers where they are defined.

Every number a finding (and so the headline) states comes from
:mod:`nsysan.diagnose.gpu_facts`; these builders lay the same values out as tables in
the sections that define them: the dominant gap and steady state (gaps section), the
host-side causes per GPU and pooled, with overlapping NVTX coverage labelled as such
(host section), the longest NCCL kernels (communication), and a
zoomed timeline of the steady state. Formatting is :mod:`nsysan.report.fmt`'s.
"""

from __future__ import annotations

from typing import Literal

import polars as pl

from nsysan.analysis import Analysis
from nsysan.analyze.host_causes import CAUSES
from nsysan.diagnose.facts import Facts
from nsysan.diagnose.gpu_facts import GpuFacts
from nsysan.report import fmt
from nsysan.report.catalog import cause_label, in_lang
from nsysan.report.viewmodel import Table

Lang = Literal["en", "zh"]

# The zoomed timeline spans this many typical busy+gap cycles of steady state.
ZOOM_CYCLES = 40
ZOOM_BINS = 600


def at(ns: int | None) -> str:
    """A point on the trace timeline (as the findings print it)."""
    return fmt.duration(ns, 4)


def span_text(values: list[float]) -> str:
    """ "86.6%–86.8%" (one value when they print the same)."""
    low, high = fmt.percent(min(values)), fmt.percent(max(values))
    return low if low == high else f"{low}–{high}"


def dominant_table(per_gpu: tuple[GpuFacts, ...], lang: Lang) -> Table | None:
    """Longest gap, its place on the trace timeline, and steady state, per GPU."""
    if not per_gpu or not any(g.dominant or g.warmup for g in per_gpu):
        return None
    warm = any(g.warmup for g in per_gpu)
    rows = tuple(
        (
            g.label,
            fmt.duration(g.longest_ns),
            at(g.longest_start_ns),
            at(g.longest_end_ns),
            fmt.percent(g.longest_share),
            in_lang(lang, "startup", "启动阶段")
            if g.warmup
            else (in_lang(lang, "stall", "停顿") if g.dominant else "—"),
            fmt.percent(g.window_gap_share),
            at(g.steady_start_ns),
            fmt.percent(g.gap_share),
        )
        for g in per_gpu
    )
    return Table(
        title=in_lang(lang, "Dominant gap and steady state", "主导间隙与稳态"),
        columns=(
            "GPU",
            in_lang(lang, "longest gap", "最长间隙"),
            in_lang(lang, "start (trace timeline)", "起点（时间线）"),
            in_lang(lang, "end (trace timeline)", "终点（时间线）"),
            in_lang(lang, "share of the window", "占时间窗"),
            in_lang(lang, "kind", "类型"),
            in_lang(lang, "gap share, whole window", "间隙占比（整个时间窗）"),
            in_lang(lang, "steady state from", "稳态起点"),
            in_lang(lang, "gap share in steady state", "稳态间隙占比"),
        ),
        rows=rows,
        note=in_lang(
            lang,
            "A gap of 25% or more of a GPU's window is dominant; it is the start-up when the GPU did at most 10% of its "
            "work before it, and steady state starts where it ends"
            + (" (the findings read steady state)." if warm else ".")
            + " Times are on the trace timeline: the values --start/--end take.",
            "单个间隙占该卡时间窗 25% 及以上即为主导间隙；若该卡在它之前完成的工作不超过 10%，它就是启动阶段，稳态从它结束处开始"
            + ("（各项发现按稳态计算）。" if warm else "。")
            + "时间为时间线上的位置，即 --start/--end 接受的数值。",
        ),
    )


def kernel_gap_table(per_gpu: tuple[GpuFacts, ...], lang: Lang) -> Table | None:
    """Kernel count and size, gap size, and the share of gap time in launch-scale gaps."""
    if not per_gpu:
        return None
    return Table(
        title=in_lang(lang, "Kernel and gap sizes", "内核与间隙的大小"),
        columns=(
            "GPU",
            in_lang(lang, "kernels", "内核数"),
            in_lang(lang, "median kernel", "内核时长中位数"),
            in_lang(lang, "median gap", "间隙中位数"),
            in_lang(lang, "gap time in gaps under 100 µs", "小于 100 µs 的间隙所占间隙时间"),
            in_lang(lang, "gap time with a memory copy running", "有内存拷贝在进行的间隙时间"),
        ),
        rows=tuple(
            (
                g.label,
                fmt.count(g.kernel_count),
                fmt.duration(g.median_kernel_ns),
                fmt.duration(g.median_gap_ns),
                fmt.percent(g.small_gap_share),
                fmt.percent(g.copy_gap_share),
            )
            for g in per_gpu
        ),
        note=in_lang(
            lang,
            "Medians over the GPU's kernels and its steady-state gaps. Many small kernels with short gaps between them "
            "mean launch overhead sets the pace.",
            "中位数分别按该卡的内核与稳态间隙计算。大量小内核且间隙很短，说明发射开销决定了节奏。",
        ),
    )


def cause_tables(
    per_gpu: tuple[GpuFacts, ...], facts: Facts, analysis: Analysis, lang: Lang
) -> tuple[Table, ...]:
    """Per GPU: measured vs unattributed share and each cause; pooled; NVTX coverage."""
    with_causes = [g for g in per_gpu if g.causes]
    tables: list[Table] = []
    if with_causes:
        shown = [c for c in CAUSES if any(g.causes.get(c, 0.0) >= 0.001 for g in with_causes)]
        warm = facts.warmup_detected
        # One column per GPU, one row per cause: narrow at any GPU count.
        rows: list[tuple[str, ...]] = [
            (
                in_lang(lang, "gap share", "间隙占比"),
                *(fmt.percent(g.gap_share) for g in with_causes),
            ),
            (
                in_lang(lang, "measured host-side cause", "实测的主机侧原因"),
                *(fmt.percent(g.measured_host_share) for g in with_causes),
            ),
            (
                in_lang(lang, "unattributed", "未归因"),
                *(fmt.percent(g.unattributed_share) for g in with_causes),
            ),
        ]
        rows += [
            (cause_label(c, lang), *(fmt.percent(g.causes.get(c, 0.0)) for g in with_causes))
            for c in shown
        ]
        tables.append(
            Table(
                title=in_lang(
                    lang,
                    "Share of each GPU's gap time by cause" + (" (steady state)" if warm else ""),
                    "各卡间隙时间按原因划分的占比" + ("（稳态）" if warm else ""),
                ),
                columns=(
                    in_lang(lang, "share of gap time", "占间隙时间"),
                    *(g.label for g in with_causes),
                ),
                rows=tuple(rows),
                note=in_lang(
                    lang,
                    "Each nanosecond of gap time has one cause, so a GPU's causes (the rows under the first three) add up "
                    "to 100%. 'Measured host-side cause' adds the causes the trace shows (CUDA sync, GIL signature, OS "
                    "calls, off CPU, NVTX ranges, launch calls); 'unattributed' is host time the trace cannot explain.",
                    "每一纳秒的间隙时间只有一个原因，因此每张卡各原因（前三行之下各行）之和为 100%。“实测的主机侧原因”是追踪能说明的原因之和"
                    "（CUDA 同步、GIL 特征、系统调用、线程被调度出 CPU、NVTX 区间、发射调用）；“未归因”是追踪无法解释的主机时间。",
                ),
            )
        )
    if facts.measured_host_share is not None and analysis.host is not None:
        shares = analysis.host.shares
        total = float(shares["time_ns"].sum() or 0)
        pooled = (
            shares.group_by("cause")
            .agg(pl.col("time_ns").sum())
            .filter(pl.col("time_ns") > 0)
            .sort("time_ns", descending=True)
        )
        rows = [
            (cause_label(str(c), lang), fmt.duration(t), fmt.percent(t / total if total else None))
            for c, t in pooled.iter_rows()
        ]
        rows.append(
            (
                in_lang(lang, "all measured host-side causes", "全部实测的主机侧原因"),
                "",
                fmt.percent(facts.measured_host_share),
            )
        )
        rows.append(
            (
                in_lang(lang, "all unattributed", "全部未归因"),
                "",
                fmt.percent(facts.unattributed_share),
            )
        )
        tables.append(
            Table(
                title=in_lang(
                    lang,
                    "All GPUs together: gap time by cause",
                    "全部 GPU 合计：按原因划分的间隙时间",
                ),
                columns=(
                    in_lang(lang, "cause", "原因"),
                    in_lang(lang, "gap time", "间隙时间"),
                    in_lang(lang, "share of all gap time", "占全部间隙时间"),
                ),
                rows=tuple(rows),
                note=in_lang(
                    lang,
                    "Over every GPU's whole window. The causes do not overlap and add up to 100%.",
                    "按每张卡的整个时间窗计算。各原因互不重叠，合计为 100%。",
                ),
            )
        )
    if facts.top_nvtx:
        tables.append(
            Table(
                title=in_lang(
                    lang,
                    "NVTX ranges covering gap time (overlapping)",
                    "覆盖间隙时间的 NVTX 区间（相互重叠）",
                ),
                columns=(
                    in_lang(lang, "NVTX range on the feeding thread", "发射线程上的 NVTX 区间"),
                    in_lang(lang, "share of all gap time it covers", "覆盖的间隙时间占比"),
                ),
                rows=tuple((str(t), fmt.percent(s)) for t, s in facts.top_nvtx),
                note=in_lang(
                    lang,
                    "Overlapping categories: a gap inside an NVTX range can also be a GIL or OS wait, and ranges nest, "
                    "so these shares overlap the causes above and each other and do not add up to 100%.",
                    "相互重叠的类别：NVTX 区间内的间隙同时也可能是 GIL 或系统调用等待，且区间可以嵌套，"
                    "因此这些占比与上面的原因以及彼此之间都有重叠，合计不等于 100%。",
                ),
            )
        )
    return tuple(tables)


def nccl_outlier_table(facts: Facts, lang: Lang) -> Table | None:
    if not facts.nccl_outliers:
        return None
    return Table(
        title=in_lang(lang, "Longest NCCL kernels", "最长的 NCCL 内核"),
        columns=(
            "GPU",
            in_lang(lang, "collective", "集合通信"),
            in_lang(lang, "start (trace timeline)", "起点（时间线）"),
            in_lang(lang, "duration", "时长"),
            in_lang(lang, "median of that collective", "该集合通信的中位数"),
            in_lang(lang, "longest / median", "最长 / 中位数"),
        ),
        rows=tuple(
            (
                f"GPU {o.gpu}",
                o.collective,
                at(o.start_ns),
                fmt.duration(o.duration_ns),
                fmt.duration(o.median_ns),
                fmt.ratio(o.over_median, 0),
            )
            for o in facts.nccl_outliers
        ),
        note=in_lang(
            lang,
            "The median is over that collective's kernels on the same GPU.",
            "中位数按同一张卡上该集合通信的所有内核计算。",
        ),
    )


def zoom_span(per_gpu: tuple[GpuFacts, ...]) -> tuple[int, int] | None:
    """A steady-state stretch of about :data:`ZOOM_CYCLES` busy+gap cycles, mid-run."""
    steady = [g for g in per_gpu if g.window_end_ns > g.steady_start_ns]
    if len(steady) < 1:
        return None
    start = max(g.steady_start_ns for g in steady)
    end = min(g.window_end_ns for g in steady)
    if end <= start:
        return None
    # A typical cycle (one kernel burst and the gap after it): the window over the
    # GPU's kernel count.
    cycles = sorted((g.window_end_ns - g.steady_start_ns) / max(1, g.kernel_count) for g in steady)
    cycle = cycles[len(cycles) // 2]
    width = int(cycle * ZOOM_CYCLES)
    if width <= 0 or width * 3 > end - start:
        return None  # the overview already shows it at this scale
    middle = start + (end - start) // 2
    return middle - width // 2, middle + width // 2
