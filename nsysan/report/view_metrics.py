"""Report sections that read the GPU's own counters against the timeline: the
dashboard view (NVML-style utilization, GR Active), memory- vs compute-bound kernel
time (Nsight Compute) and contention signals (clocks, SM Active, DRAM throughput).

Every number comes from an analysis result, formatted by :mod:`nsysan.report.fmt`;
missing data is named with what to capture.
"""

from __future__ import annotations

from typing import Literal

import polars as pl

from nsysan.analysis import Analysis
from nsysan.diagnose.facts import Facts
from nsysan.report import fmt, view_gpu
from nsysan.report.catalog import in_lang, unavailable_text
from nsysan.report.view_appendix import ncu_join_warning
from nsysan.report.viewmodel import Section, SeriesView, StackedSharesView, Table

Lang = Literal["en", "zh"]

TITLES: dict[str, dict[str, str]] = {
    "dashboard": {"en": "Dashboard view vs timeline view", "zh": "监控面板视图与时间线视图"},
    "bound": {"en": "Memory- vs compute-bound", "zh": "带宽受限与计算受限"},
    "contention": {"en": "Contention signals (GPU metrics)", "zh": "资源争用信号（GPU 指标）"},
}


def dashboard_section(
    analysis: Analysis, labels: dict[int, str], lang: Lang, facts: Facts
) -> Section:
    d = analysis.dashboard
    if d is None:
        return Section(
            key="dashboard",
            title=TITLES["dashboard"][lang],
            unavailable=unavailable_text(analysis.unavailable, "dashboard", lang),
        )
    per = d.per_gpu.sort("gpu")
    rows = tuple(
        (
            f"GPU {r['gpu']}",
            fmt.percent(r["dashboard_util_share"]),
            f"{fmt.percent(r['dashboard_min_share'])} – {fmt.percent(r['dashboard_max_share'])}",
            fmt.percent(r["gr_active_share"]),
            fmt.percent(r["sm_active_share"]),
            fmt.percent(r["gap_share"]),
        )
        for r in per.iter_rows(named=True)
    )
    note_en = f"Sample period {fmt.duration(d.period_ns)}"
    note_zh = f"采样周期 {fmt.duration(d.period_ns)}"
    if d.period_ns != d.configured_period_ns:
        note_en += (
            f" (the configured {fmt.duration(d.configured_period_ns)} would give fewer than 20 periods in the longest "
            "window, so 1/20 of that window is used)"
        )
        note_zh += f"（设定的 {fmt.duration(d.configured_period_ns)} 在最长时间窗内不足 20 个周期，因此改用该时间窗的 1/20）"
    table = Table(
        columns=(
            "GPU",
            in_lang(lang, "NVML-style utilization", "NVML 口径利用率"),
            in_lang(lang, "per-period range", "各采样周期范围"),
            "GR Active",
            "SM Active",
            in_lang(lang, "gap share (timeline)", "间隙占比（时间线）"),
        ),
        rows=rows,
        note=in_lang(lang, note_en + ".", note_zh + "。"),
    )
    paragraphs = [
        in_lang(
            lang,
            "NVML's utilization is the share of each sample period with at least one kernel running, so its mean equals the "
            "timeline's busy share; what a dashboard hides is where the gaps are (which GPUs idle together) and how busy the SMs are "
            "inside a 'busy' period. Dashboard spread across GPUs "
            f"{fmt.percent(d.dashboard_spread_share)}, per-period spread {fmt.percent(d.period_spread_share)}, "
            f"while one GPU works and another idles {fmt.percent(d.timeline_spread_share)} of the common time. "
            "The per-window busy share over time is the chart of the load-balance section.",
            "NVML 利用率是每个采样周期中至少有一个内核在运行的时间比例，其均值等于时间线的忙碌占比；面板隐藏的是间隙出现在哪里（哪些卡同时空闲）"
            f"以及“忙碌”周期内 SM 实际有多忙。各卡面板差异 {fmt.percent(d.dashboard_spread_share)}，逐周期差异 {fmt.percent(d.period_spread_share)}，"
            f"而一张卡工作、另一张卡空闲的时间占共同时间的 {fmt.percent(d.timeline_spread_share)}。随时间变化的逐时间窗忙碌占比见负载均衡一节的图。",
        )
    ]
    gr = (
        [v for v in per["gr_active_share"].to_list() if v is not None]
        if "gr_active_share" in per.columns
        else []
    )
    nvml = [v for v in per["dashboard_util_share"].to_list() if v is not None]
    if gr and nvml:
        gr_span = view_gpu.span_text(gr)
        nvml_span = view_gpu.span_text(nvml)
        paragraphs.append(
            in_lang(
                lang,
                f"Two dashboard readings, two numbers: GR Active {gr_span} (from GPU metrics; what DCGM-style dashboards show, and "
                f"the dashboard reading the findings quote) counts any time the GPU has work resident, copies and the moments between "
                f"queued kernels included; the NVML-style utilization {nvml_span} counts only time with a kernel running, which is "
                "1 − gap share. Both look alike on every GPU; neither shows that the gaps are staggered.",
                f"两种面板读数，两个数字：GR Active {gr_span}（来自 GPU 指标；DCGM 类监控面板显示的数值，也是各项发现引用的面板读数）"
                f"计入 GPU 上有任何工作驻留的时间，包括拷贝以及排队内核之间的时刻；NVML 口径利用率 {nvml_span} 只计入有内核运行的时间，"
                "即 1 − 间隙占比。两者在每张卡上都差不多；都看不出间隙是错开的。",
            )
        )
    return Section(
        key="dashboard",
        title=TITLES["dashboard"][lang],
        paragraphs=tuple(paragraphs),
        tables=(table,),
    )


def bound_section(analysis: Analysis, labels: dict[int, str], lang: Lang) -> Section:
    b = analysis.bound
    if b is None:
        return Section(
            key="bound",
            title=TITLES["bound"][lang],
            unavailable=unavailable_text(analysis.unavailable, "bound", lang),
        )
    per = b.per_gpu.sort("gpu")
    classes = [c[: -len("_share")] for c in per.columns if c.endswith("_share")]
    shares = tuple(
        tuple(round(float(r[f"{c}_share"] or 0), 4) for c in classes)
        for r in per.iter_rows(named=True)
    )
    warning = ncu_join_warning(analysis)
    return Section(
        key="bound",
        title=TITLES["bound"][lang],
        paragraphs=(
            *((warning[1] if lang == "zh" else warning[0],) if warning else ()),
            in_lang(
                lang,
                f"Kernel time split by Nsight Compute's speed-of-light class ({analysis.ncu_path}); 'unjoined' kernels had no Nsight Compute data and are counted, not guessed.",
                f"按 Nsight Compute SOL 分类划分的内核时间（{analysis.ncu_path}）；“unjoined” 表示该内核没有 Nsight Compute 数据，单独计数而不推测。",
            ),
        ),
        stacked=(
            StackedSharesView(
                gpu_labels=tuple(f"GPU {g}" for g in per["gpu"].to_list()),
                categories=tuple(classes),
                shares=shares,
                title=in_lang(lang, "share of kernel time by class", "按类别划分的内核时间占比"),
            ),
        ),
    )


def contention_section(analysis: Analysis, labels: dict[int, str], lang: Lang) -> Section:
    c = analysis.contention
    if c is None or not c.available:
        return Section(
            key="contention",
            title=TITLES["contention"][lang],
            unavailable=unavailable_text(analysis.unavailable, "contention", lang),
        )
    series = []
    for key, title_en, title_zh, ylab, kind in (
        ("gpc_clock", "GPC clock (MHz)", "GPC 时钟（MHz）", "MHz", "zero"),
        ("sm_active", "SM Active (% of time)", "SM Active（时间占比）", "SM Active", "share"),
        (
            "dram_read",
            "DRAM read throughput (% of peak)",
            "显存读带宽（峰值百分比）",
            in_lang(lang, "% of peak", "峰值百分比"),
            "share",
        ),
    ):
        rows = c.series.filter(pl.col("key") == key).sort("gpu", "bin_start_ns")
        if rows.is_empty():
            continue
        gpu_ids = sorted(rows["gpu"].unique().to_list())
        series.append(
            SeriesView(
                title=in_lang(lang, title_en, title_zh) + _value_range(rows, key, lang),
                y_label=ylab,
                y_kind=kind,
                gpu_labels=tuple(f"GPU {g}" for g in gpu_ids),
                x_ns=tuple(
                    tuple(int(v) for v in rows.filter(pl.col("gpu") == g)["bin_start_ns"].to_list())
                    for g in gpu_ids
                ),
                y=tuple(
                    tuple(
                        None if v is None else round(float(v), 2)
                        for v in rows.filter(pl.col("gpu") == g)["value"].to_list()
                    )
                    for g in gpu_ids
                ),
            )
        )
    clocks = c.clocks.sort("gpu")
    table = Table(
        columns=(
            "GPU",
            in_lang(lang, "reference clock", "参考时钟"),
            in_lang(lang, "busy clock mean", "忙碌时平均时钟"),
            in_lang(lang, "busy clock min", "忙碌时最低时钟"),
            in_lang(lang, "busy time with a drop", "降频的忙碌时间"),
        ),
        rows=tuple(
            (
                f"GPU {r['gpu']}",
                "n/a"
                if r["reference_clock_mhz"] is None
                else f"{r['reference_clock_mhz']:.0f} MHz",
                "n/a"
                if r["busy_clock_mean_mhz"] is None
                else f"{r['busy_clock_mean_mhz']:.0f} MHz",
                "n/a" if r["busy_clock_min_mhz"] is None else f"{r['busy_clock_min_mhz']:.0f} MHz",
                fmt.percent(r["drop_busy_share"]),
            )
            for r in clocks.iter_rows(named=True)
        ),
        note=in_lang(
            lang,
            f"A drop is a GPC clock more than {fmt.percent(c.clock_drop_share, 0)} below the reference while the GPU is busy.",
            f"降频指 GPU 忙碌时 GPC 时钟比参考值低 {fmt.percent(c.clock_drop_share, 0)} 以上。",
        ),
    )
    return Section(
        key="contention", title=TITLES["contention"][lang], tables=(table,), series=tuple(series)
    )


def _value_range(rows: pl.DataFrame, key: str, lang: Lang) -> str:
    """ ", 1,395–1,410 MHz over the capture": the range the axis from 0 flattens."""
    if key != "gpc_clock" or rows.is_empty():
        return ""
    low, high = rows["value"].min(), rows["value"].max()
    if low is None or high is None:
        return ""
    return in_lang(
        lang,
        f": {low:,.0f}–{high:,.0f} MHz over the capture",
        f"：采集期间 {low:,.0f}–{high:,.0f} MHz",
    )
