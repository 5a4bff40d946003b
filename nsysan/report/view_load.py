"""Report sections for step and request latency and for load over time (bursts, starvation).

Every number comes from :mod:`nsysan.analyze.steps` and :mod:`nsysan.analyze.load`,
formatted by :mod:`nsysan.report.fmt`; missing data is named with what to capture.
"""

from __future__ import annotations

from typing import Literal

import polars as pl

from nsysan.analysis import Analysis
from nsysan.report import fmt
from nsysan.report.catalog import in_lang, translate, unavailable_text
from nsysan.report.viewmodel import Section, SeriesView, Table

Lang = Literal["en", "zh"]

TITLES: dict[str, dict[str, str]] = {
    "steps": {"en": "Step and request latency, throughput", "zh": "步与请求延迟、吞吐"},
    "load": {"en": "Load over time: bursts and starvation", "zh": "随时间变化的负载：突发与饥饿"},
}
STARVED_ROWS = 10


def _rate(per_s: float | None) -> str:
    return "—" if per_s is None else fmt.rate(per_s)


def _ratio(v: float | None) -> str:
    return "—" if v is None else f"{v:.2f}×"


def steps_section(analysis: Analysis, lang: Lang) -> Section:
    result = analysis.steps
    if result is None or not result.per_gpu["steps"].sum():
        return Section(
            key="steps",
            title=TITLES["steps"][lang],
            unavailable=unavailable_text(analysis.unavailable, "steps", lang),
        )
    per = result.per_gpu.sort("gpu")
    label = next((v for v in per["label"].to_list() if v), "")
    source = next((v for v in per["source"].to_list() if v), "")
    what = (
        in_lang(
            lang,
            f"Steps are the NVTX range '{label}' on each GPU's processes (host time).",
            f"步即各卡进程上的 NVTX 区间“{label}”（主机侧时长）。",
        )
        if source == "nvtx"
        else in_lang(
            lang,
            f"Steps are the repeated kernel sequence ({translate(label, lang)}), the same boundaries on every GPU.",
            f"步即重复的内核序列（{translate(label, lang)}），各卡边界相同。",
        )
    )
    steps = Table(
        title=in_lang(lang, "Per GPU: steps and throughput", "逐卡：步与吞吐"),
        columns=(
            "GPU",
            in_lang(lang, "steps", "步数"),
            in_lang(lang, "steps per second", "每秒步数"),
            in_lang(lang, "step p50 / p90 / p99 / max", "步时长 p50 / p90 / p99 / 最大"),
            in_lang(lang, "p99 / p50", "p99 / p50"),
            in_lang(lang, "kernels per second", "每秒内核数"),
        ),
        rows=tuple(
            (
                f"GPU {r['gpu']}",
                fmt.count(r["steps"]),
                _rate(r["steps_per_s"]),
                " / ".join(
                    fmt.duration(r[c])
                    for c in ("step_p50_ns", "step_p90_ns", "step_p99_ns", "step_max_ns")
                ),
                _ratio(r["step_tail_ratio"]),
                _rate(r["kernels_per_s"]),
            )
            for r in per.iter_rows(named=True)
        ),
        note=what,
    )
    slow = Table(
        title=in_lang(
            lang, "Slowest steps (start on the trace timeline)", "最慢的步（起点为时间线上的位置）"
        ),
        columns=(
            "GPU",
            in_lang(lang, "start", "起点"),
            in_lang(lang, "duration", "时长"),
            in_lang(lang, "× median", "× 中位数"),
        ),
        rows=tuple(
            (
                f"GPU {r['gpu']}",
                fmt.duration(r["start_ns"], 4),
                fmt.duration(r["duration_ns"]),
                _ratio(r["over_median"]),
            )
            for r in result.slowest.iter_rows(named=True)
        ),
        note=in_lang(
            lang,
            "Pass a start to --start/--end to zoom the report on it.",
            "把起点传给 --start/--end 即可把报告聚焦到该处。",
        ),
    )
    tables = [steps, slow]
    paragraphs: list[str] = []
    if per["requests"].drop_nulls().len():
        tables.append(
            Table(
                title=in_lang(
                    lang,
                    "Per GPU: requests (NVTX ranges named 'request…')",
                    "逐卡：请求（名为“request…”的 NVTX 区间）",
                ),
                columns=(
                    "GPU",
                    in_lang(lang, "requests", "请求数"),
                    in_lang(lang, "requests per second", "每秒请求数"),
                    in_lang(lang, "latency p50 / p99 / max", "延迟 p50 / p99 / 最大"),
                    in_lang(lang, "p99 / p50", "p99 / p50"),
                ),
                rows=tuple(
                    (
                        f"GPU {r['gpu']}",
                        fmt.count(r["requests"]),
                        _rate(r["requests_per_s"]),
                        " / ".join(
                            fmt.duration(r[c])
                            for c in ("request_p50_ns", "request_p99_ns", "request_max_ns")
                        ),
                        _ratio(r["request_tail_ratio"]),
                    )
                    for r in per.iter_rows(named=True)
                    if r["requests"]
                ),
            )
        )
    else:
        paragraphs.append(
            in_lang(
                lang,
                "No NVTX ranges named 'request…': request latency needs one start/end range per request (e.g. 'request 17').",
                "没有名称以 request 开头的 NVTX 区间：请求延迟需要每个请求一个起止区间（名称以 request 开头，后接请求编号）。",
            )
        )
    return Section(
        key="steps", title=TITLES["steps"][lang], paragraphs=tuple(paragraphs), tables=tuple(tables)
    )


def load_section(analysis: Analysis, lang: Lang) -> Section:
    result = analysis.load
    if result is None:
        return Section(
            key="load",
            title=TITLES["load"][lang],
            unavailable=unavailable_text(analysis.unavailable, "load", lang),
        )
    requests = result.kind == "requests"
    unit = (
        in_lang(lang, "requests arriving", "到达的请求")
        if requests
        else in_lang(lang, "kernels starting", "开始的内核")
    )
    gpu_ids = sorted({int(g) for g in result.windows["gpu"].to_list()})
    series = SeriesView(
        title=in_lang(lang, f"load per time window ({unit})", f"每个时间窗的负载（{unit}）"),
        y_label=unit,
        y_kind="zero",
        gpu_labels=tuple(f"GPU {g}" for g in gpu_ids),
        x_ns=tuple(
            tuple(int(v) for v in result.windows.filter(pl.col("gpu") == g)["start_ns"].to_list())
            for g in gpu_ids
        ),
        y=tuple(
            tuple(float(v) for v in result.windows.filter(pl.col("gpu") == g)["load"].to_list())
            for g in gpu_ids
        ),
    )
    paragraphs = [
        in_lang(
            lang,
            "Load is requests arriving (request ranges) per window."
            if requests
            else "The trace has no request ranges: load is kernels starting per window, and bursts are not looked for in it.",
            "负载为每个时间窗内到达的请求（请求区间）。"
            if requests
            else "追踪中没有请求区间：负载为每个时间窗内开始的内核，且不在其中寻找突发。",
        )
    ]
    tables: list[Table] = []
    if result.bursts.height:
        tables.append(
            Table(
                title=in_lang(lang, "Burst windows", "突发时间窗"),
                columns=(
                    in_lang(lang, "from", "起点"),
                    in_lang(lang, "to", "终点"),
                    in_lang(lang, "requests", "请求数"),
                    in_lang(lang, "× median window", "× 中位数时间窗"),
                    in_lang(lang, "GPU taking most", "承接最多的卡"),
                    in_lang(lang, "its share", "其占比"),
                    in_lang(lang, "its busy share just before", "此前的忙碌占比"),
                ),
                rows=tuple(
                    (
                        fmt.duration(r["start_ns"], 4),
                        fmt.duration(r["end_ns"], 4),
                        fmt.count(r["load"]),
                        _ratio(r["over_median"]),
                        f"GPU {r['top_gpu']}",
                        fmt.percent(r["top_share"]),
                        fmt.percent(r["top_busy_before"]),
                    )
                    for r in result.bursts.iter_rows(named=True)
                ),
            )
        )
    starved = result.starved.head(STARVED_ROWS)
    if starved.height:
        tables.append(
            Table(
                title=in_lang(
                    lang,
                    "Starved stretches (idle while other GPUs work, feeder waiting on a queue)",
                    "饥饿时段（其他卡在工作时空闲，发射线程在等待队列）",
                ),
                columns=(
                    "GPU",
                    in_lang(lang, "from", "起点"),
                    in_lang(lang, "to", "终点"),
                    in_lang(lang, "duration", "时长"),
                    in_lang(lang, "other GPUs busy", "其他卡忙碌"),
                    in_lang(lang, "feeder waiting", "发射线程等待"),
                ),
                rows=tuple(
                    (
                        f"GPU {r['gpu']}",
                        fmt.duration(r["start_ns"], 4),
                        fmt.duration(r["end_ns"], 4),
                        fmt.duration(r["duration_ns"]),
                        fmt.percent(r["others_busy_share"]),
                        fmt.percent(r["wait_share"]),
                    )
                    for r in starved.iter_rows(named=True)
                ),
                note=in_lang(
                    lang,
                    "Gaps of at least 5 ms with other GPUs busy at least half of the time and the feeding thread in a blocking OS call "
                    "(queue, condition, lock) at least half of it; the longest first.",
                    "至少 5 ms 的间隙，其中至少一半时间其他卡忙碌、且发射线程至少一半时间处于阻塞型系统调用（队列、条件变量、锁）中；按时长从长到短。",
                ),
            )
        )
    else:
        paragraphs.append(in_lang(lang, "No starved stretches.", "没有饥饿时段。"))
    return Section(
        key="load",
        title=TITLES["load"][lang],
        paragraphs=tuple(paragraphs),
        tables=tuple(tables),
        series=(series,),
    )
