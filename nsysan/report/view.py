"""Analysis + diagnosis → the report's view model (:class:`ReportView`).

Pure data work: every number shown is taken from an analysis result and formatted
by :mod:`nsysan.report.fmt`; nothing is recomputed differently from the JSON output.
The aggregated timeline is the one piece computed here: the busy union binned into
at most ``view_timeline.TIMELINE_MAX_BINS`` equal bins per GPU, so a trace of millions of
kernels stays a small page.
"""

from __future__ import annotations

from typing import Any, Literal

import polars as pl

from nsysan.analysis import Analysis
from nsysan.diagnose import Diagnosis
from nsysan.diagnose.facts import Facts, gather_facts
from nsysan.report import fmt, view_gpu
from nsysan.report.catalog import cause_label, short_cause, translate
from nsysan.report.glossary import definition_anchor, definition_title
from nsysan.report.view_appendix import appendix, ncu_join_warning
from nsysan.report.view_contexts import context_table
from nsysan.report.view_graphs import graph_table
from nsysan.report.view_load import load_section, steps_section
from nsysan.report.view_resources import cpu_section, launch_section, memory_section
from nsysan.report.view_timeline import timeline_section
from nsysan.report.view_transfers import transfer_operation_table, transfer_summary_table
from nsysan.report.viewmodel import (
    Evidence,
    FindingView,
    HistogramView,
    MatrixView,
    MythView,
    ReportView,
    Section,
    SeriesView,
    StackedSharesView,
    Table,
)

Lang = Literal["en", "zh"]

KERNEL_DIFF_ROWS = 8

TITLES: dict[str, dict[str, str]] = {
    "gpus": {"en": "Per-GPU summary", "zh": "逐卡概览"},
    "timeline": {"en": "Timeline (aggregated)", "zh": "时间线（聚合）"},
    "gaps": {"en": "Gaps and their sizes", "zh": "间隙及其大小分布"},
    "stagger": {"en": "Stagger of gaps across GPUs", "zh": "各卡间隙的错开程度"},
    "host": {"en": "Host-side cause of gap time", "zh": "间隙时间的主机侧原因"},
    "balance": {
        "en": "Load balance, kernels behind the skew, drift",
        "zh": "负载均衡、造成偏差的内核与漂移",
    },
    "dashboard": {"en": "Dashboard view vs timeline view", "zh": "监控面板视图与时间线视图"},
    "communication": {"en": "Communication (NCCL)", "zh": "通信（NCCL）"},
    "bound": {"en": "Memory- vs compute-bound", "zh": "带宽受限与计算受限"},
    "contention": {"en": "Contention signals (GPU metrics)", "zh": "资源争用信号（GPU 指标）"},
}
MYTH_VERDICT_TEXT = {
    "holds": {"en": "holds here", "zh": "在此成立"},
    "does_not_hold": {"en": "does not hold here", "zh": "在此不成立"},
    "cannot_tell": {"en": "cannot tell", "zh": "无法判断"},
}
# The chapter's four dimensions (and its case study), by section: a finding's cause
# category names the dimension in words, never by section number.
DIMENSIONS = {
    "4.1": ("model-parallel split", "模型并行切分"),
    "4.2": ("data-parallel load", "数据并行负载"),
    "4.3": ("dynamic requests", "动态请求"),
    "4.4": ("resource contention", "资源争用"),
    "4.5": ("false balance, as in the case study", "假均衡（见案例）"),
}


def _l(lang: Lang, en: str, zh: str) -> str:
    return zh if lang == "zh" else en


def _gpu_labels(analysis: Analysis) -> dict[int, str]:
    gpus = analysis.trace.gpus.sort("gpu")
    labels = {}
    for row in gpus.iter_rows(named=True):
        ident = row["pci_bus"] or (row["uuid"] or "")[:8] or row["gpu_key"]
        name = (row["name"] or "GPU").replace("NVIDIA ", "")
        labels[row["gpu"]] = f"GPU {row['gpu']} ({name}, {ident})"
    return labels


def _short(labels: dict[int, str]) -> tuple[str, ...]:
    return tuple(f"GPU {g}" for g in sorted(labels))


def build_view(analysis: Analysis, diagnosis: Diagnosis, lang: Lang = "en") -> ReportView:
    """The whole report's view model for ``lang``."""
    labels = _gpu_labels(analysis)
    title = (
        _l(lang, "nsysan report", "nsysan 报告")
        + ": "
        + ", ".join(p.rsplit("/", 1)[-1] for p in analysis.trace.sources["path"].to_list()[:4])
        + (" …" if analysis.trace.sources.height > 4 else "")
    )
    findings = tuple(_finding_view(f, lang) for f in diagnosis.findings)
    myths = tuple(
        MythView(
            myth_id=m.myth_id,
            title=m.title[lang],
            verdict=m.verdict,
            verdict_text=MYTH_VERDICT_TEXT[m.verdict][lang],
            why=m.why[lang],
        )
        for m in diagnosis.myths
    )
    recommendations = tuple(dict.fromkeys(f.recommendation[lang] for f in diagnosis.findings))
    if not recommendations and analysis.trace.has_gpu_work:
        recommendations = (
            _l(
                lang,
                "No rule reached its threshold. Keep this report as a baseline and compare the next trace with `nsysan compare`.",
                "没有规则达到阈值。保留本报告作为基线，之后用 `nsysan compare` 与新的时间线对比。",
            ),
        )
    no_work = analysis.gaps is None
    sections = () if no_work else _sections(analysis, labels, lang)
    return ReportView(
        title=title,
        lang=lang,
        headline=diagnosis.headline.texts[lang],
        headline_severity=diagnosis.headline.severity,
        findings=findings,
        sections=sections,
        myths=myths,
        recommendations=recommendations,
        appendix=appendix(analysis, lang),
        no_gpu_work=no_work,
    )


def _finding_view(f: Any, lang: Lang) -> FindingView:
    return FindingView(
        rule_id=f.rule_id,
        severity=f.severity,
        title=f.title[lang],
        claim=f.claim[lang],
        cause_category=_cause_category(f, lang),
        evidence=tuple(
            Evidence(
                label=translate(e.label, lang),
                value_text=e.display,
                source=definition_anchor(e.source),
                source_label=definition_title(definition_anchor(e.source), lang),
            )
            for e in f.evidence
        ),
        recommendation=f.recommendation[lang],
    )


def _cause_category(f: Any, lang: Lang) -> str:
    cause = translate(f.cause_category, lang)
    dim = DIMENSIONS.get(f.seed_section)
    if dim is None:
        return cause
    return _l(lang, f"{cause} ({dim[0]})", f"{cause}（{dim[1]}）")


def _sections(analysis: Analysis, labels: dict[int, str], lang: Lang) -> tuple[Section, ...]:
    facts = gather_facts(analysis)
    return (
        _gpu_section(analysis, labels, lang, facts),
        timeline_section(analysis, labels, lang, facts),
        _gaps_section(analysis, labels, lang, facts),
        _stagger_section(analysis, labels, lang, facts),
        _host_section(analysis, labels, lang, facts),
        _dashboard_section(analysis, labels, lang, facts),
        _balance_section(analysis, labels, lang),
        _communication_section(analysis, labels, lang, facts),
        _bound_section(analysis, labels, lang),
        _contention_section(analysis, labels, lang),
        launch_section(analysis, lang),
        cpu_section(analysis, lang),
        memory_section(analysis, lang),
        steps_section(analysis, lang),
        load_section(analysis, lang),
    )


def _score(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.2f}"


def _reason(analysis: Analysis, name: str, lang: Lang) -> str:
    return translate(analysis.unavailable.get(name, ""), lang)


def _value(df: pl.DataFrame, gpu: int, col: str) -> Any:
    if col not in df.columns:
        return None
    rows = df.filter(pl.col("gpu") == gpu)
    return rows[col][0] if rows.height else None


def _gpu_section(analysis: Analysis, labels: dict[int, str], lang: Lang, facts: Facts) -> Section:
    gaps = analysis.gaps.summary if analysis.gaps else pl.DataFrame()
    dash = analysis.dashboard.per_gpu if analysis.dashboard else pl.DataFrame()
    nccl = analysis.nccl.per_gpu if analysis.nccl else pl.DataFrame()
    bound = analysis.bound.per_gpu if analysis.bound else None
    steady = {g.gpu: g for g in facts.per_gpu}
    has_gr = "gr_active_share" in dash.columns and dash["gr_active_share"].drop_nulls().len() > 0
    has_nccl = analysis.nccl is not None and analysis.nccl.nccl_kernels > 0
    has_bound = bound is not None and "memory_share" in bound.columns
    rows = []
    for gpu in sorted(labels):
        g = steady.get(gpu)
        row = [
            f"GPU {gpu}",
            fmt.percent(_value(dash, gpu, "dashboard_util_share")),
            *([fmt.percent(_value(dash, gpu, "gr_active_share"))] if has_gr else []),
            fmt.percent(_value(gaps, gpu, "gap_share")),
            *([fmt.percent(g.gap_share if g else None)] if facts.warmup_detected else []),
            *([fmt.percent(_value(nccl, gpu, "nccl_busy_share"))] if has_nccl else []),
        ]
        if has_bound:
            row.append(
                f"{fmt.percent(_value(bound, gpu, 'memory_share'), 0)} / "  # type: ignore[arg-type]
                f"{fmt.percent(_value(bound, gpu, 'compute_share'), 0)}"  # type: ignore[arg-type]
            )
        measured = g.measured_host_share if g else None
        row.append(fmt.percent(measured))
        main = max(g.causes, key=lambda c: g.causes[c]) if g and g.causes else None
        row.append(short_cause(main, lang) if main else _l(lang, "n/a", "无"))
        rows.append(tuple(row))
    columns = (
        "GPU",
        _l(lang, "dashboard (NVML-style)", "面板利用率（NVML 口径）"),
        *(["GR Active"] if has_gr else []),
        _l(lang, "gap share", "间隙占比"),
        *([_l(lang, "gap share in steady state", "稳态间隙占比")] if facts.warmup_detected else []),
        *([_l(lang, "NCCL share of busy", "NCCL 占忙碌")] if has_nccl else []),
        *([_l(lang, "memory / compute bound", "带宽受限 / 计算受限")] if has_bound else []),
        _l(lang, "gap time with a measured host cause", "有实测主机侧原因的间隙时间"),
        _l(lang, "main gap cause", "主要间隙原因"),
    )
    window = analysis.settings.window
    kind = {
        "per_gpu": ("per GPU", "逐卡"),
        "common": ("common", "共同"),
        "explicit": ("explicit", "指定"),
        "nvtx": ("NVTX range", "NVTX 区间"),
    }[window.kind]
    with_graphs = (
        (" and CUDA graph executions", "与 CUDA 图执行")
        if analysis.trace.graphs.height
        else ("", "")
    )
    note = _l(
        lang,
        f"Window: {kind[0]}; busy = union of kernels{with_graphs[0]} on the GPU (all streams). "
        + ("GR Active comes from GPU metrics. " if has_gr else "")
        + ("Steady state: after the start-up gap (see Gaps). " if facts.warmup_detected else "")
        + "Host causes are over steady state.",
        f"时间窗：{kind[1]}；忙碌 = 该卡上所有流的内核{with_graphs[1]}区间并集。"
        + ("GR Active 来自 GPU 指标。" if has_gr else "")
        + ("稳态：启动间隙之后（见“间隙”一节）。" if facts.warmup_detected else "")
        + "主机侧原因按稳态计算。",
    )
    graphs = graph_table(analysis, lang)
    devices = Table(
        title=_l(lang, "Devices", "设备"),
        columns=("GPU", _l(lang, "device", "设备"), _l(lang, "identity", "标识")),
        rows=tuple((f"GPU {gpu}", *_device(label)) for gpu, label in sorted(labels.items())),
    )
    return Section(
        key="gpus",
        title=TITLES["gpus"][lang],
        tables=tuple(
            t
            for t in (
                Table(columns=columns, rows=tuple(rows), note=note),
                transfer_summary_table(analysis, lang),
                graphs,
                context_table(analysis, lang),
                devices,
            )
            if t is not None
        ),
    )


def _device(label: str) -> tuple[str, str]:
    """("A100-SXM4-80GB", "0000:07:00.0") from "GPU 0 (A100-SXM4-80GB, 0000:07:00.0)"."""
    inner = label.split(" (", 1)[1].rstrip(")") if " (" in label else label
    name, _, ident = inner.partition(", ")
    return name, ident


def _gaps_section(analysis: Analysis, labels: dict[int, str], lang: Lang, facts: Facts) -> Section:
    gaps = analysis.gaps
    assert gaps is not None
    dist = gaps.distribution.sort("gpu", "bucket")
    buckets = (
        tuple(dist.filter(pl.col("gpu") == dist["gpu"][0])["label"].to_list())
        if dist.height
        else ()
    )
    gpu_ids = sorted(dist["gpu"].unique().to_list()) if dist.height else []
    counts = tuple(
        tuple(int(v) for v in dist.filter(pl.col("gpu") == g)["count"].to_list()) for g in gpu_ids
    )
    times = tuple(
        tuple(int(v) for v in dist.filter(pl.col("gpu") == g)["total_ns"].to_list())
        for g in gpu_ids
    )
    paragraphs = [
        _l(
            lang,
            "A gap is a maximal interval inside the GPU's window with no kernel running. "
            "Gap share = gap time / window. The distribution covers every gap, from launch-scale microseconds to seconds.",
            "间隙是 GPU 时间窗内没有任何内核运行的最长区间。间隙占比 = 间隙时间 / 时间窗。分布包含所有间隙，从发射级的微秒到秒级。",
        )
    ]
    tables = []
    dominant = view_gpu.dominant_table(facts.per_gpu, lang)
    if dominant is not None:
        tables.append(dominant)
    sizes = view_gpu.kernel_gap_table(facts.per_gpu, lang)
    if sizes is not None:
        tables.append(sizes)
    if analysis.nvidia_gaps is not None:
        ng = analysis.nvidia_gaps.summary
        rows = tuple(
            (
                str(r["pid"]),
                str(r["device_id"]),
                fmt.percent(r["gap_share"]),
                fmt.count(r["gap_count"]),
            )
            for r in ng.iter_rows(named=True)
        )
        tables.append(
            Table(
                columns=(
                    "PID",
                    "CUDA device",
                    _l(lang, "gap share (NVIDIA gpu_gaps)", "间隙占比（NVIDIA gpu_gaps 口径）"),
                    _l(lang, "gaps", "间隙数"),
                ),
                rows=rows,
                note=_l(
                    lang,
                    "busy = kernels + memcpy + memset + profiler overhead per process and device, as `nsys analyze -r gpu_gaps`.",
                    "忙碌 = 每进程每设备的内核 + memcpy + memset + 采集开销，与 `nsys analyze -r gpu_gaps` 相同。",
                ),
            )
        )
    return Section(
        key="gaps",
        title=TITLES["gaps"][lang],
        paragraphs=tuple(paragraphs),
        tables=tuple(tables),
        histogram=HistogramView(
            bucket_labels=buckets,
            gpu_labels=tuple(f"GPU {g}" for g in gpu_ids),
            counts=counts,
            time_ns=times,
        )
        if dist.height
        else None,
    )


def _stagger_section(
    analysis: Analysis, labels: dict[int, str], lang: Lang, facts: Facts
) -> Section:
    s = analysis.stagger
    if s is None:
        return Section(
            key="stagger",
            title=TITLES["stagger"][lang],
            unavailable=_reason(analysis, "stagger", lang),
        )
    gpu_ids = sorted(labels)
    index = {g: i for i, g in enumerate(gpu_ids)}
    values: list[list[float | None]] = [[None] * len(gpu_ids) for _ in gpu_ids]
    for r in s.pairs.iter_rows(named=True):
        a, b = index.get(r["gpu_a"]), index.get(r["gpu_b"])
        if a is None or b is None:
            continue
        score = None if r["stagger_score"] is None else round(float(r["stagger_score"]), 3)
        values[a][b] = values[b][a] = score
    para = _l(
        lang,
        f"Verdict: {s.verdict}. Observed co-idle time is {fmt.ratio(s.co_idle_ratio)} what independent gaps would give "
        f"(stagger score {_score(s.stagger_score)}: −1 aligned, 0 independent, +1 staggered). All GPUs idle together "
        f"{fmt.percent(s.all_idle_share)} of the common window (independence would give "
        f"{fmt.percent(s.expected_all_idle_share)}); at least one idle {fmt.percent(s.any_idle_share)}.",
        f"结论：{translate(s.verdict, lang)}。实测的同时空闲时间是间隙相互独立时期望的 {fmt.ratio(s.co_idle_ratio)}"
        f"（错开分数 {_score(s.stagger_score)}：−1 对齐，0 互不相关，+1 错开）。在共同时间窗内所有卡同时空闲 "
        f"{fmt.percent(s.all_idle_share)}（若相互独立应为 {fmt.percent(s.expected_all_idle_share)}）；至少一张卡空闲 {fmt.percent(s.any_idle_share)}。",
    )
    paragraphs = [para]
    steady = analysis.steady_stagger
    if steady is not None and analysis.dominant is not None:
        start = analysis.dominant.common_steady_start_ns
        paragraphs.append(
            _l(
                lang,
                f"Steady state (after the start-up gap, from {view_gpu.at(start)} on the trace timeline): verdict {steady.verdict}, "
                f"stagger score {_score(steady.stagger_score)}; all GPUs idle together {fmt.percent(steady.all_idle_share)} of the "
                f"common steady-state window (independence would give {fmt.percent(steady.expected_all_idle_share)}). "
                "The findings read these steady-state numbers: the start-up gap every GPU shares would make any trace look aligned.",
                f"稳态（启动间隙之后，自时间线上 {view_gpu.at(start)} 起）：结论为{translate(steady.verdict, lang)}，错开分数 "
                f"{_score(steady.stagger_score)}；在共同稳态时间窗内所有卡同时空闲 {fmt.percent(steady.all_idle_share)}"
                f"（若相互独立应为 {fmt.percent(steady.expected_all_idle_share)}）。各项发现按这些稳态数值判断：所有卡共有的启动间隙会让任何追踪看起来都是对齐的。",
            )
        )
    idle = s.idle_count.sort("idle_gpus")
    table = Table(
        columns=(
            _l(lang, "GPUs idle at once", "同时空闲的卡数"),
            _l(lang, "observed share", "实测占比"),
            _l(lang, "if independent", "独立时的期望"),
        ),
        rows=tuple(
            (
                str(r["idle_gpus"]),
                fmt.percent(r["observed_share"]),
                fmt.percent(r["expected_share"]),
            )
            for r in idle.iter_rows(named=True)
        ),
    )
    return Section(
        key="stagger",
        title=TITLES["stagger"][lang],
        paragraphs=tuple(paragraphs),
        tables=(table,),
        matrix=MatrixView(
            labels=tuple(f"GPU {g}" for g in gpu_ids),
            values=tuple(tuple(row) for row in values),
            title=_l(
                lang,
                "stagger score per GPU pair (−1 aligned, 0 independent, +1 staggered)",
                "逐对错开分数（−1 对齐，0 独立，+1 错开）",
            ),
            value_label=_l(lang, "stagger score", "错开分数"),
            center=0.0,
        ),
    )


def _host_section(analysis: Analysis, labels: dict[int, str], lang: Lang, facts: Facts) -> Section:
    h = analysis.host
    if h is None:
        return Section(
            key="host", title=TITLES["host"][lang], unavailable=_reason(analysis, "host", lang)
        )
    shares = h.shares
    causes = [
        c
        for c in dict.fromkeys(shares.sort("cause")["cause"].to_list())
        if shares.filter(pl.col("cause") == c)["time_ns"].sum() > 0
    ]
    gpu_ids = sorted(shares["gpu"].unique().to_list())
    matrix = []
    for g in gpu_ids:
        rows = shares.filter(pl.col("gpu") == g)
        total = float(rows["time_ns"].sum() or 0)
        matrix.append(
            tuple(
                round(float(rows.filter(pl.col("cause") == c)["time_ns"].sum()) / total, 4)
                if total
                else 0.0
                for c in causes
            )
        )
    paragraphs = [
        _l(
            lang,
            "Each nanosecond of gap time gets one cause: the host was late to launch the next kernel (and what the feeding "
            "thread was doing), or the work was already queued and the GPU waited.",
            "每一纳秒的间隙时间对应一个原因：主机发射下一个内核晚了（以及发射线程当时在做什么），或者工作已排队而 GPU 在等待。",
        )
    ]
    paragraphs += [
        _l(lang, f"Unavailable: {u}", f"不可用：{translate(u, lang)}") for u in h.unavailable
    ]
    tables = list(view_gpu.cause_tables(facts.per_gpu, facts, analysis, lang))
    if h.nvtx.height:
        top = h.nvtx.sort("covered_ns", descending=True).head(10)
        tables.append(
            Table(
                columns=(
                    "GPU",
                    _l(lang, "NVTX range on the feeding thread", "发射线程上的 NVTX 区间"),
                    _l(lang, "gap time it covers", "覆盖的间隙时间"),
                ),
                rows=tuple(
                    (f"GPU {r['gpu']}", str(r["text"]), fmt.duration(r["covered_ns"]))
                    for r in top.iter_rows(named=True)
                ),
            )
        )
    if h.gil_threads.height:
        tables.append(
            Table(
                columns=(
                    _l(lang, "thread", "线程"),
                    _l(lang, "wait call", "等待调用"),
                    _l(lang, "~5 ms waits", "约 5 ms 的等待"),
                    _l(lang, "GIL wait time", "GIL 等待时间"),
                ),
                rows=tuple(
                    (
                        f"{r['pid']}/{r['tid']}",
                        str(r["call"]),
                        fmt.count(r["gil_waits"]),
                        fmt.duration(r["gil_wait_ns"]),
                    )
                    for r in h.gil_threads.iter_rows(named=True)
                ),
            )
        )
    return Section(
        key="host",
        title=TITLES["host"][lang],
        paragraphs=tuple(paragraphs),
        tables=tuple(tables),
        stacked=(
            StackedSharesView(
                gpu_labels=tuple(f"GPU {g}" for g in gpu_ids),
                categories=tuple(cause_label(c, lang) for c in causes),
                shares=tuple(matrix),
                title=_l(lang, "share of gap time by cause", "按原因划分的间隙时间占比"),
            ),
        )
        if causes
        else (),
    )


def _dashboard_section(
    analysis: Analysis, labels: dict[int, str], lang: Lang, facts: Facts
) -> Section:
    d = analysis.dashboard
    if d is None:
        return Section(
            key="dashboard",
            title=TITLES["dashboard"][lang],
            unavailable=translate(analysis.unavailable.get("dashboard", ""), lang),
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
            _l(lang, "NVML-style utilization", "NVML 口径利用率"),
            _l(lang, "per-period range", "各采样周期范围"),
            "GR Active",
            "SM Active",
            _l(lang, "gap share (timeline)", "间隙占比（时间线）"),
        ),
        rows=rows,
        note=_l(lang, note_en + ".", note_zh + "。"),
    )
    paragraphs = [
        _l(
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
            _l(
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


def _balance_section(analysis: Analysis, labels: dict[int, str], lang: Lang) -> Section:
    imb = analysis.imbalance
    if imb is None:
        return Section(
            key="balance",
            title=TITLES["balance"][lang],
            unavailable=_reason(analysis, "imbalance", lang),
        )
    per = imb.per_gpu.sort("gpu")
    rows = tuple(
        (
            f"GPU {r['gpu']}",
            fmt.duration(r["busy_ns"]),
            fmt.percent(r["busy_share"]),
            fmt.duration(r["compute_ns"]),
            fmt.duration(r["nccl_ns"]),
            fmt.count(r["kernel_count"]),
        )
        for r in per.iter_rows(named=True)
    )
    tables = [
        Table(
            columns=(
                "GPU",
                _l(lang, "busy", "忙碌"),
                _l(lang, "busy share", "忙碌占比"),
                _l(lang, "compute (non-NCCL)", "计算（非 NCCL）"),
                "NCCL",
                _l(lang, "kernels", "内核数"),
            ),
            rows=rows,
            note=_l(
                lang,
                f"Load-balance efficiency (mean/max): busy {fmt.percent(imb.busy_efficiency)}, compute {fmt.percent(imb.compute_efficiency)}; "
                f"compute max/mean {fmt.ratio(imb.compute_max_over_mean)}.",
                f"负载均衡效率（均值/最大值）：忙碌 {fmt.percent(imb.busy_efficiency)}，计算 {fmt.percent(imb.compute_efficiency)}；计算最大/均值 {fmt.ratio(imb.compute_max_over_mean)}。",
            ),
        )
    ]
    if (
        imb.kernel_diff.height
        and imb.most_loaded_gpu is not None
        and imb.most_loaded_gpu != imb.least_loaded_gpu
    ):
        diff = imb.kernel_diff.sort("diff_ns", descending=True).head(KERNEL_DIFF_ROWS)
        tables.append(
            Table(
                columns=(
                    _l(lang, "kernel", "内核"),
                    f"GPU {imb.most_loaded_gpu}",
                    f"GPU {imb.least_loaded_gpu}",
                    _l(lang, "difference", "差值"),
                    _l(lang, "share of difference", "占差值比例"),
                ),
                rows=tuple(
                    (
                        translate(str(r["short_name"] or r["name"]), lang),
                        fmt.duration(r["most_ns"]),
                        fmt.duration(r["least_ns"]),
                        fmt.duration(r["diff_ns"]),
                        fmt.percent(r["diff_share"]),
                    )
                    for r in diff.iter_rows(named=True)
                ),
                note=_l(
                    lang,
                    "Kernels behind the compute difference between the most and the least loaded GPU.",
                    "造成最忙与最闲两张卡之间计算时间差异的内核。",
                ),
            )
        )
    paragraphs = []
    if imb.bubble_share is not None:
        paragraphs.append(
            _l(
                lang,
                f"Iterations found from {imb.iteration_source}: {imb.iteration_label}. Bubble share {fmt.percent(imb.bubble_share)} "
                f"(fill {fmt.percent(imb.fill_share)}, drain {fmt.percent(imb.drain_share)}).",
                f"迭代边界来自 {imb.iteration_source}：{translate(imb.iteration_label or '', lang)}。气泡占比 {fmt.percent(imb.bubble_share)}（填充 {fmt.percent(imb.fill_share)}，排空 {fmt.percent(imb.drain_share)}）。",
            )
        )
    elif imb.bubble_reason:
        paragraphs.append(
            _l(
                lang,
                f"Pipeline bubbles: {imb.bubble_reason}.",
                f"流水线气泡：{translate(imb.bubble_reason, lang)}。",
            )
        )
    drift = imb.drift.sort("gpu", "window")
    gpu_ids = sorted(drift["gpu"].unique().to_list()) if drift.height else []
    series = SeriesView(
        title=_l(
            lang,
            f"busy share per time window ({analysis.settings.drift_windows} windows)",
            f"每个时间窗的忙碌占比（{analysis.settings.drift_windows} 个时间窗）",
        ),
        y_label=_l(lang, "busy share", "忙碌占比"),
        y_kind="share",
        gpu_labels=tuple(f"GPU {g}" for g in gpu_ids),
        x_ns=tuple(
            tuple(int(v) for v in drift.filter(pl.col("gpu") == g)["start_ns"].to_list())
            for g in gpu_ids
        ),
        y=tuple(
            tuple(
                None if v is None else round(float(v), 4)
                for v in drift.filter(pl.col("gpu") == g)["busy_share"].to_list()
            )
            for g in gpu_ids
        ),
    )
    return Section(
        key="balance",
        title=TITLES["balance"][lang],
        paragraphs=tuple(paragraphs),
        tables=tuple(tables),
        series=(series,) if gpu_ids else (),
    )


def _communication_section(
    analysis: Analysis, labels: dict[int, str], lang: Lang, facts: Facts
) -> Section:
    n = analysis.nccl
    transfers = transfer_operation_table(analysis, lang)
    if n is None or n.nccl_kernels == 0:
        reason = translate(analysis.unavailable.get("nccl", ""), lang) or _l(
            lang, "no NCCL kernels in this trace", "此时间线中没有 NCCL 内核"
        )
        if transfers is not None:
            return Section(
                key="communication",
                title=TITLES["communication"][lang],
                paragraphs=(reason + _l(lang, "; memory copies:", "；内存拷贝："),),
                tables=(transfers,),
            )
        return Section(key="communication", title=TITLES["communication"][lang], unavailable=reason)
    rows = tuple(
        (
            f"GPU {r['gpu']}",
            fmt.count(r["nccl_kernels"]),
            fmt.duration(r["nccl_ns"]),
            fmt.percent(r["nccl_busy_share"]),
            fmt.percent(r["nccl_window_share"]),
            fmt.percent(r["overlap_share"]),
            fmt.duration(r["wait_ns"]),
        )
        for r in n.per_gpu.sort("gpu").iter_rows(named=True)
    )
    table = Table(
        columns=(
            "GPU",
            _l(lang, "NCCL kernels", "NCCL 内核数"),
            _l(lang, "NCCL time", "NCCL 时间"),
            _l(lang, "of busy", "占忙碌"),
            _l(lang, "of window", "占时间窗"),
            _l(lang, "overlapped with compute", "与计算重叠"),
            _l(lang, "estimated wait", "估计等待"),
        ),
        rows=rows,
    )
    coll = (
        n.per_collective.group_by("collective")
        .agg(pl.col("nccl_kernels").sum(), pl.col("nccl_ns").sum(), pl.col("wait_ns").sum())
        .sort("nccl_ns", descending=True)
    )
    coll_table = Table(
        columns=(
            _l(lang, "collective", "集合通信"),
            _l(lang, "kernels", "内核数"),
            _l(lang, "time", "时间"),
            _l(lang, "estimated wait", "估计等待"),
        ),
        rows=tuple(
            (
                str(r["collective"]),
                fmt.count(r["nccl_kernels"]),
                fmt.duration(r["nccl_ns"]),
                fmt.duration(r["wait_ns"]),
            )
            for r in coll.iter_rows(named=True)
        ),
    )
    para = _l(
        lang,
        f"{fmt.count(n.matched_instances)} collective instances matched across GPUs ({fmt.count(n.unmatched_kernels)} kernels unmatched); "
        f"start skew median {fmt.duration(n.skew_median_ns)}, p99 {fmt.duration(n.skew_p99_ns)}; estimated wait {fmt.percent(n.wait_share)} of NCCL time.",
        f"跨卡匹配了 {fmt.count(n.matched_instances)} 次集合通信（{fmt.count(n.unmatched_kernels)} 个内核未匹配）；启动偏差中位数 {fmt.duration(n.skew_median_ns)}，p99 {fmt.duration(n.skew_p99_ns)}；估计等待占 NCCL 时间的 {fmt.percent(n.wait_share)}。",
    )
    return Section(
        key="communication",
        title=TITLES["communication"][lang],
        paragraphs=(para,),
        tables=tuple(
            t
            for t in (table, coll_table, view_gpu.nccl_outlier_table(facts, lang), transfers)
            if t is not None
        ),
    )


def _bound_section(analysis: Analysis, labels: dict[int, str], lang: Lang) -> Section:
    b = analysis.bound
    if b is None:
        return Section(
            key="bound",
            title=TITLES["bound"][lang],
            unavailable=_reason(analysis, "bound", lang),
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
            _l(
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
                title=_l(lang, "share of kernel time by class", "按类别划分的内核时间占比"),
            ),
        ),
    )


def _contention_section(analysis: Analysis, labels: dict[int, str], lang: Lang) -> Section:
    c = analysis.contention
    if c is None or not c.available:
        return Section(
            key="contention",
            title=TITLES["contention"][lang],
            unavailable=_reason(analysis, "contention", lang),
        )
    series = []
    for key, title_en, title_zh, ylab, kind in (
        ("gpc_clock", "GPC clock (MHz)", "GPC 时钟（MHz）", "MHz", "zero"),
        ("sm_active", "SM Active (% of time)", "SM Active（时间占比）", "SM Active", "share"),
        (
            "dram_read",
            "DRAM read throughput (% of peak)",
            "显存读带宽（峰值百分比）",
            _l(lang, "% of peak", "峰值百分比"),
            "share",
        ),
    ):
        rows = c.series.filter(pl.col("key") == key).sort("gpu", "bin_start_ns")
        if rows.is_empty():
            continue
        gpu_ids = sorted(rows["gpu"].unique().to_list())
        series.append(
            SeriesView(
                title=_l(lang, title_en, title_zh) + _value_range(rows, key, lang),
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
            _l(lang, "reference clock", "参考时钟"),
            _l(lang, "busy clock mean", "忙碌时平均时钟"),
            _l(lang, "busy clock min", "忙碌时最低时钟"),
            _l(lang, "busy time with a drop", "降频的忙碌时间"),
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
        note=_l(
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
    return _l(
        lang,
        f": {low:,.0f}–{high:,.0f} MHz over the capture",
        f"：采集期间 {low:,.0f}–{high:,.0f} MHz",
    )
