"""Report sections on where each GPU's time goes: the per-GPU summary, the gaps and
their sizes, their stagger across GPUs, and the host-side cause of gap time.

Every number comes from an analysis result or the per-GPU diagnosis facts
(:mod:`nsysan.diagnose.facts`), formatted by :mod:`nsysan.report.fmt`.
"""

from __future__ import annotations

from typing import Any, Literal

import polars as pl

from nsysan.analysis import Analysis
from nsysan.diagnose.facts import Facts
from nsysan.report import fmt, view_gpu
from nsysan.report.catalog import cause_label, in_lang, short_cause, translate, unavailable_text
from nsysan.report.view_contexts import context_table
from nsysan.report.view_graphs import graph_table
from nsysan.report.view_transfers import transfer_summary_table
from nsysan.report.viewmodel import HistogramView, MatrixView, Section, StackedSharesView, Table

Lang = Literal["en", "zh"]

TITLES: dict[str, dict[str, str]] = {
    "gpus": {"en": "Per-GPU summary", "zh": "逐卡概览"},
    "gaps": {"en": "Gaps and their sizes", "zh": "间隙及其大小分布"},
    "stagger": {"en": "Stagger of gaps across GPUs", "zh": "各卡间隙的错开程度"},
    "host": {"en": "Host-side cause of gap time", "zh": "间隙时间的主机侧原因"},
}


def _score(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.2f}"


def _value(df: pl.DataFrame, gpu: int, col: str) -> Any:
    if col not in df.columns:
        return None
    rows = df.filter(pl.col("gpu") == gpu)
    return rows[col][0] if rows.height else None


def gpu_section(analysis: Analysis, labels: dict[int, str], lang: Lang, facts: Facts) -> Section:
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
        row.append(short_cause(main, lang) if main else in_lang(lang, "n/a", "无"))
        rows.append(tuple(row))
    columns = (
        "GPU",
        in_lang(lang, "dashboard (NVML-style)", "面板利用率（NVML 口径）"),
        *(["GR Active"] if has_gr else []),
        in_lang(lang, "gap share", "间隙占比"),
        *(
            [in_lang(lang, "gap share in steady state", "稳态间隙占比")]
            if facts.warmup_detected
            else []
        ),
        *([in_lang(lang, "NCCL share of busy", "NCCL 占忙碌")] if has_nccl else []),
        *([in_lang(lang, "memory / compute bound", "带宽受限 / 计算受限")] if has_bound else []),
        in_lang(lang, "gap time with a measured host cause", "有实测主机侧原因的间隙时间"),
        in_lang(lang, "main gap cause", "主要间隙原因"),
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
    note = in_lang(
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
        title=in_lang(lang, "Devices", "设备"),
        columns=("GPU", in_lang(lang, "device", "设备"), in_lang(lang, "identity", "标识")),
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


def gaps_section(analysis: Analysis, labels: dict[int, str], lang: Lang, facts: Facts) -> Section:
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
        in_lang(
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
                    in_lang(
                        lang, "gap share (NVIDIA gpu_gaps)", "间隙占比（NVIDIA gpu_gaps 口径）"
                    ),
                    in_lang(lang, "gaps", "间隙数"),
                ),
                rows=rows,
                note=in_lang(
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


def stagger_section(
    analysis: Analysis, labels: dict[int, str], lang: Lang, facts: Facts
) -> Section:
    s = analysis.stagger
    if s is None:
        return Section(
            key="stagger",
            title=TITLES["stagger"][lang],
            unavailable=unavailable_text(analysis.unavailable, "stagger", lang),
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
    para = in_lang(
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
            in_lang(
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
            in_lang(lang, "GPUs idle at once", "同时空闲的卡数"),
            in_lang(lang, "observed share", "实测占比"),
            in_lang(lang, "if independent", "独立时的期望"),
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
            title=in_lang(
                lang,
                "stagger score per GPU pair (−1 aligned, 0 independent, +1 staggered)",
                "逐对错开分数（−1 对齐，0 独立，+1 错开）",
            ),
            value_label=in_lang(lang, "stagger score", "错开分数"),
            center=0.0,
        ),
    )


def host_section(analysis: Analysis, labels: dict[int, str], lang: Lang, facts: Facts) -> Section:
    h = analysis.host
    if h is None:
        return Section(
            key="host",
            title=TITLES["host"][lang],
            unavailable=unavailable_text(analysis.unavailable, "host", lang),
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
        in_lang(
            lang,
            "Each nanosecond of gap time gets one cause: the host was late to launch the next kernel (and what the feeding "
            "thread was doing), or the work was already queued and the GPU waited.",
            "每一纳秒的间隙时间对应一个原因：主机发射下一个内核晚了（以及发射线程当时在做什么），或者工作已排队而 GPU 在等待。",
        )
    ]
    paragraphs += [
        in_lang(lang, f"Unavailable: {u}", f"不可用：{translate(u, lang)}") for u in h.unavailable
    ]
    tables = list(view_gpu.cause_tables(facts.per_gpu, facts, analysis, lang))
    if h.nvtx.height:
        top = h.nvtx.sort("covered_ns", descending=True).head(10)
        tables.append(
            Table(
                columns=(
                    "GPU",
                    in_lang(lang, "NVTX range on the feeding thread", "发射线程上的 NVTX 区间"),
                    in_lang(lang, "gap time it covers", "覆盖的间隙时间"),
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
                    in_lang(lang, "thread", "线程"),
                    in_lang(lang, "wait call", "等待调用"),
                    in_lang(lang, "~5 ms waits", "约 5 ms 的等待"),
                    in_lang(lang, "GIL wait time", "GIL 等待时间"),
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
                title=in_lang(lang, "share of gap time by cause", "按原因划分的间隙时间占比"),
            ),
        )
        if causes
        else (),
    )
