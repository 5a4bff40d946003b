"""Report sections for launches, host CPUs and device memory (what the page shows).

Every number comes from an analysis result (:mod:`nsysan.analyze.launch`, ...) and is
formatted by :mod:`nsysan.report.fmt`; missing data is named with what to capture.
"""

from __future__ import annotations

from typing import Literal

import polars as pl

from nsysan.analysis import Analysis
from nsysan.report import fmt
from nsysan.report.catalog import translate
from nsysan.report.viewmodel import Section, Table

Lang = Literal["en", "zh"]

TITLES: dict[str, dict[str, str]] = {
    "launch": {"en": "Launch overhead and launch configuration", "zh": "发射开销与发射配置"},
}
CONFIG_ROWS = 12


def _l(lang: Lang, en: str, zh: str) -> str:
    return zh if lang == "zh" else en


def _rate(per_s: float | None) -> str:
    return "—" if per_s is None else f"{per_s:,.1f}"


def launch_section(analysis: Analysis, lang: Lang) -> Section:
    result = analysis.launch
    if result is None:
        return Section(
            key="launch",
            title=TITLES["launch"][lang],
            unavailable=translate(analysis.unavailable.get("launch", ""), lang),
        )
    per = result.per_gpu.sort("gpu")
    yes, no = _l(lang, "yes", "是"), _l(lang, "no", "否")
    overhead = Table(
        title=_l(lang, "Kernel sizes and launch-scale gaps", "内核大小与发射级间隙"),
        columns=(
            "GPU",
            _l(lang, "kernels", "内核数"),
            _l(lang, "launches per second", "每秒发射数"),
            _l(lang, "kernel p50 / p90 / p99", "内核时长 p50 / p90 / p99"),
            _l(lang, "kernels under 10 µs", "短于 10 µs 的内核"),
            _l(lang, "their share of kernel time", "其占内核时间"),
            _l(lang, "gaps under 10 µs", "短于 10 µs 的间隙"),
            _l(lang, "window in gaps under 10 µs", "短于 10 µs 的间隙占时间窗"),
            _l(lang, "launch-bound", "发射受限"),
        ),
        rows=tuple(
            (
                f"GPU {r['gpu']}",
                fmt.count(r["kernels"]),
                _rate(r["launch_rate"]),
                " / ".join(
                    fmt.duration(r[c]) for c in ("kernel_p50_ns", "kernel_p90_ns", "kernel_p99_ns")
                ),
                fmt.percent(r["small_kernel_share"]),
                fmt.percent(r["small_kernel_time_share"]),
                fmt.count(r["short_gap_count"]),
                fmt.percent(r["short_gap_share"]),
                yes if r["launch_bound"] else no,
            )
            for r in per.iter_rows(named=True)
        ),
        note=_l(
            lang,
            "Kernels that start in each GPU's window. A GPU is launch-bound when at least half its kernels run under 10 µs "
            "and gaps under 10 µs between back-to-back kernels fill at least 20% of its window.",
            "统计在各卡时间窗内开始的内核。当至少一半内核短于 10 µs，且相邻内核之间短于 10 µs 的间隙至少占时间窗的 20% 时，"
            "该卡即为发射受限。",
        ),
    )
    buckets = result.durations.sort("gpu", "bucket")
    labels = (
        buckets.filter(pl.col("gpu") == buckets["gpu"][0])["label"].to_list()
        if buckets.height
        else []
    )
    histogram = Table(
        title=_l(
            lang,
            "Kernel duration distribution (kernels, share of kernel time)",
            "内核时长分布（内核数，占内核时间）",
        ),
        columns=("GPU", *labels),
        rows=tuple(
            (
                f"GPU {gpu}",
                *(
                    f"{fmt.count(c)} ({fmt.percent(t / total if total else None)})"
                    for c, t in zip(rows["count"], rows["time_ns"], strict=True)
                ),
            )
            for (gpu,), rows in buckets.group_by("gpu", maintain_order=True)
            for total in [int(rows["time_ns"].sum())]
        ),
    )
    tables = [overhead, histogram]
    paragraphs: list[str] = []
    if result.configs_available and result.configs.height:
        tables.append(_config_table(result.configs, lang))
    else:
        paragraphs.append(
            _l(
                lang,
                "The export has no grid/block sizes for its kernels: launch configurations cannot be shown.",
                "导出中没有内核的网格/线程块大小：无法显示发射配置。",
            )
        )
    return Section(
        key="launch",
        title=TITLES["launch"][lang],
        paragraphs=tuple(paragraphs),
        tables=tuple(tables),
    )


def _config_table(configs: pl.DataFrame, lang: Lang) -> Table:
    def flag(r: dict[str, object]) -> str:
        if r["one_thread_blocks"]:
            return _l(lang, "one thread per block", "每块一个线程")
        if r["sub_warp_blocks"]:
            return _l(lang, "block smaller than a warp", "线程块小于一个 warp")
        if r["single_block"]:
            return _l(lang, "single block", "单个线程块")
        return ""

    def dims(r: dict[str, object], kind: str) -> str:
        return "×".join(str(r[f"{kind}_{a}"]) for a in "xyz")

    rows = configs.head(CONFIG_ROWS)
    return Table(
        title=_l(lang, "Launch configuration of the top kernels", "主要内核的发射配置"),
        columns=(
            "GPU",
            _l(lang, "kernel", "内核"),
            _l(lang, "grid", "网格"),
            _l(lang, "block", "线程块"),
            _l(lang, "launches", "发射次数"),
            _l(lang, "share of kernel time", "占内核时间"),
            _l(lang, "shape", "形状"),
        ),
        rows=tuple(
            (
                f"GPU {r['gpu']}",
                str(r["short_name"]),
                dims(r, "grid"),
                dims(r, "block"),
                fmt.count(r["launches"]),
                fmt.percent(r["time_share"]),
                flag(r),
            )
            for r in rows.iter_rows(named=True)
        ),
        note=_l(
            lang,
            f"The {CONFIG_ROWS} largest (GPU, kernel, grid, block) rows by kernel time over the whole trace, from the top five kernels of each GPU. "
            "One thread per block leaves 31 of a warp's 32 lanes idle; a single block runs on one SM.",
            f"按整个追踪的内核时间取前 {CONFIG_ROWS} 行（GPU、内核、网格、线程块），来自每张卡的前五个内核。"
            "每块一个线程会让一个 warp 的 32 条通道中 31 条空闲；单个线程块只能在一个 SM 上运行。",
        ),
    )
