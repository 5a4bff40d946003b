"""The report's CUDA graph table: graph executions and graph-node kernels per GPU.

Numbers come from :func:`nsysan.analyze.graphs.graph_work_per_gpu`; definitions are in
docs/metrics/graphs.md.
"""

from __future__ import annotations

from typing import Literal

import polars as pl

from nsysan.analysis import Analysis
from nsysan.analyze.graphs import graph_work_per_gpu
from nsysan.ingest.graphs import GRAPH_NAME_PREFIX
from nsysan.report import fmt
from nsysan.report.catalog import in_lang
from nsysan.report.viewmodel import Table

Lang = Literal["en", "zh"]


def graph_table(analysis: Analysis, lang: Lang) -> Table | None:
    """Per GPU and graph: executions, kernels (node level), time and share of busy time."""
    work = graph_work_per_gpu(analysis.trace)
    if work.is_empty() or analysis.busy is None:
        return None
    busy = analysis.busy.summary.select(pl.col("gpu").cast(pl.Int32), "busy_ns")
    work = work.join(busy, on="gpu", how="left")
    rows = []
    for r in work.iter_rows(named=True):
        if r["level"] == "graph":
            what = f"{GRAPH_NAME_PREFIX}{r['graph_id']}"
            level = in_lang(lang, "graph level", "图级")
        else:
            what = in_lang(lang, "graph-node kernels", "图节点内核")
            level = in_lang(lang, "node level", "节点级")
        rows.append(
            (
                f"GPU {r['gpu']}",
                what,
                level,
                fmt.count(r["executions"]),
                fmt.count(r["kernels"]) if r["kernels"] is not None else "—",
                fmt.duration(r["time_ns"]),
                fmt.percent(r["time_ns"] / r["busy_ns"] if r["busy_ns"] else None),
            )
        )
    return Table(
        title=in_lang(lang, "CUDA graphs", "CUDA 图"),
        columns=(
            "GPU",
            in_lang(lang, "graph", "图"),
            in_lang(lang, "trace level", "追踪粒度"),
            in_lang(lang, "executions", "执行次数"),
            in_lang(lang, "kernels", "内核数"),
            in_lang(lang, "time", "时间"),
            in_lang(lang, "of busy", "占忙碌"),
        ),
        rows=tuple(rows),
        note=in_lang(
            lang,
            "Graph level (--cuda-graph-trace=graph): each execution is one unit of GPU work, "
            "busy from its start to its end; its kernels are not in the trace. Node level: "
            "kernels whose launch call is cudaGraphLaunch, counted by launch. Time is the sum "
            "of durations over the whole trace; NVIDIA's kernel summary leaves graph-level "
            "executions out.",
            "图级（--cuda-graph-trace 的默认粒度）：每次执行算作一个 GPU 工作单元，从开始到结束都算忙碌；"
            "其中的内核不在时间线中。节点级：启动调用为 cudaGraphLaunch 的内核，按启动次数计数。"
            "时间为整条时间线上的时长之和；NVIDIA 的内核汇总不包含图级执行。",
        ),
    )
