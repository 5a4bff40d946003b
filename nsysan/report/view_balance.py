"""Report sections on how evenly the work is split and how GPUs wait on each other:
load balance (the kernels behind the skew, pipeline bubbles, drift over time) and
communication (NCCL time, overlap, estimated wait, memory copies).

Every number comes from :mod:`nsysan.analyze.imbalance` and :mod:`nsysan.analyze.nccl`,
formatted by :mod:`nsysan.report.fmt`; missing data is named with what to capture.
"""

from __future__ import annotations

from typing import Literal

import polars as pl

from nsysan.analysis import Analysis
from nsysan.diagnose.facts import Facts
from nsysan.report import fmt, view_gpu
from nsysan.report.catalog import in_lang, translate, unavailable_text
from nsysan.report.view_transfers import transfer_operation_table
from nsysan.report.viewmodel import Section, SeriesView, Table

Lang = Literal["en", "zh"]

KERNEL_DIFF_ROWS = 8

TITLES: dict[str, dict[str, str]] = {
    "balance": {
        "en": "Load balance, kernels behind the skew, drift",
        "zh": "负载均衡、造成偏差的内核与漂移",
    },
    "communication": {"en": "Communication (NCCL)", "zh": "通信（NCCL）"},
}


def balance_section(analysis: Analysis, labels: dict[int, str], lang: Lang) -> Section:
    imb = analysis.imbalance
    if imb is None:
        return Section(
            key="balance",
            title=TITLES["balance"][lang],
            unavailable=unavailable_text(analysis.unavailable, "imbalance", lang),
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
                in_lang(lang, "busy", "忙碌"),
                in_lang(lang, "busy share", "忙碌占比"),
                in_lang(lang, "compute (non-NCCL)", "计算（非 NCCL）"),
                "NCCL",
                in_lang(lang, "kernels", "内核数"),
            ),
            rows=rows,
            note=in_lang(
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
                    in_lang(lang, "kernel", "内核"),
                    f"GPU {imb.most_loaded_gpu}",
                    f"GPU {imb.least_loaded_gpu}",
                    in_lang(lang, "difference", "差值"),
                    in_lang(lang, "share of difference", "占差值比例"),
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
                note=in_lang(
                    lang,
                    "Kernels behind the compute difference between the most and the least loaded GPU.",
                    "造成最忙与最闲两张卡之间计算时间差异的内核。",
                ),
            )
        )
    paragraphs = []
    if imb.bubble_share is not None:
        paragraphs.append(
            in_lang(
                lang,
                f"Iterations found from {imb.iteration_source}: {imb.iteration_label}. Bubble share {fmt.percent(imb.bubble_share)} "
                f"(fill {fmt.percent(imb.fill_share)}, drain {fmt.percent(imb.drain_share)}).",
                f"迭代边界来自 {imb.iteration_source}：{translate(imb.iteration_label or '', lang)}。气泡占比 {fmt.percent(imb.bubble_share)}（填充 {fmt.percent(imb.fill_share)}，排空 {fmt.percent(imb.drain_share)}）。",
            )
        )
    elif imb.bubble_reason:
        paragraphs.append(
            in_lang(
                lang,
                f"Pipeline bubbles: {imb.bubble_reason}.",
                f"流水线气泡：{translate(imb.bubble_reason, lang)}。",
            )
        )
    drift = imb.drift.sort("gpu", "window")
    gpu_ids = sorted(drift["gpu"].unique().to_list()) if drift.height else []
    series = SeriesView(
        title=in_lang(
            lang,
            f"busy share per time window ({analysis.settings.drift_windows} windows)",
            f"每个时间窗的忙碌占比（{analysis.settings.drift_windows} 个时间窗）",
        ),
        y_label=in_lang(lang, "busy share", "忙碌占比"),
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


def communication_section(
    analysis: Analysis, labels: dict[int, str], lang: Lang, facts: Facts
) -> Section:
    n = analysis.nccl
    transfers = transfer_operation_table(analysis, lang)
    if n is None or n.nccl_kernels == 0:
        reason = unavailable_text(analysis.unavailable, "nccl", lang) or in_lang(
            lang, "no NCCL kernels in this trace", "此时间线中没有 NCCL 内核"
        )
        if transfers is not None:
            return Section(
                key="communication",
                title=TITLES["communication"][lang],
                paragraphs=(reason + in_lang(lang, "; memory copies:", "；内存拷贝："),),
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
            in_lang(lang, "NCCL kernels", "NCCL 内核数"),
            in_lang(lang, "NCCL time", "NCCL 时间"),
            in_lang(lang, "of busy", "占忙碌"),
            in_lang(lang, "of window", "占时间窗"),
            in_lang(lang, "overlapped with compute", "与计算重叠"),
            in_lang(lang, "estimated wait", "估计等待"),
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
            in_lang(lang, "collective", "集合通信"),
            in_lang(lang, "kernels", "内核数"),
            in_lang(lang, "time", "时间"),
            in_lang(lang, "estimated wait", "估计等待"),
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
    para = in_lang(
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
