"""The report's transfer tables: memcpys and memsets per GPU and per direction.

Numbers come from :class:`nsysan.analyze.transfers.TransferResult`; definitions are in
docs/metrics/transfers.md.
"""

from __future__ import annotations

from typing import Literal

import polars as pl

from nsysan.analysis import Analysis
from nsysan.report import fmt
from nsysan.report.catalog import in_lang
from nsysan.report.viewmodel import Table

Lang = Literal["en", "zh"]

DIRECTION_ZH = {
    "HtoD": "主机→设备",
    "DtoH": "设备→主机",
    "DtoD": "设备→设备",
    "PtoP": "卡间",
    "HtoH": "主机→主机",
    "memset": "memset",
}


def _direction(direction: str, lang: Lang) -> str:
    return DIRECTION_ZH.get(direction, direction) if lang == "zh" else direction


def transfer_summary_table(analysis: Analysis, lang: Lang) -> Table | None:
    """Per GPU: transfer time and bytes by direction, share of the window, exposed share."""
    t = analysis.transfers
    if t is None:
        return None
    by_direction = (
        t.per_operation.sort("gpu", "total_ns", descending=[False, True])
        .group_by("gpu", maintain_order=True)
        .agg(pl.struct("direction", "bytes", "total_ns").alias("parts"))
    )
    parts = {int(g): p for g, p in by_direction.iter_rows()}
    rows = []
    for r in t.per_gpu.iter_rows(named=True):
        mix = " · ".join(
            f"{_direction(p['direction'], lang)} {fmt.nbytes(p['bytes'])} / {fmt.duration(p['total_ns'])}"
            for p in parts.get(int(r["gpu"]), [])
        )
        rows.append(
            (
                f"GPU {r['gpu']}",
                fmt.count(r["count"]),
                mix,
                fmt.duration(r["transfer_ns"]),
                fmt.percent(r["transfer_share"]),
                fmt.percent(r["exposed_share"]),
            )
        )
    return Table(
        title=in_lang(lang, "Memory transfers", "内存传输"),
        columns=(
            "GPU",
            in_lang(lang, "copies and memsets", "拷贝与 memset 次数"),
            in_lang(lang, "by direction: bytes / time", "按方向：字节数 / 时间"),
            in_lang(lang, "transfer time in the window", "时间窗内传输时间"),
            in_lang(lang, "share of the window", "占时间窗"),
            in_lang(lang, "with no kernel running", "无内核运行时"),
        ),
        rows=tuple(rows),
        note=in_lang(
            lang,
            "Transfer time in the window is the union of the GPU's memcpys and memsets "
            "(overlapping ones count once); by direction, the sum of durations over the "
            "whole trace, as NVIDIA's cuda_gpu_mem_time_sum reports it. Gap time with a "
            "transfer running is the cause 'GPU busy with a transfer', not host-side.",
            "时间窗内传输时间是该卡 memcpy 与 memset 区间的并集（重叠只计一次）；按方向列出的是整条时间线上的"
            "时长之和，与 NVIDIA 的 cuda_gpu_mem_time_sum 口径一致。有传输在运行的间隙时间归为"
            "“GPU 正在传输”，而不是主机侧原因。",
        ),
    )


def transfer_operation_table(analysis: Analysis, lang: Lang) -> Table | None:
    """Per GPU and operation (NVIDIA's label): count, bytes, total, min, max."""
    t = analysis.transfers
    if t is None:
        return None
    return Table(
        title=in_lang(lang, "Transfers by operation", "按操作类型的传输"),
        columns=(
            "GPU",
            in_lang(lang, "operation", "操作"),
            in_lang(lang, "count", "次数"),
            in_lang(lang, "bytes", "字节数"),
            in_lang(lang, "total time", "总时间"),
            in_lang(lang, "in the window", "时间窗内"),
            in_lang(lang, "min", "最短"),
            in_lang(lang, "max", "最长"),
        ),
        rows=tuple(
            (
                f"GPU {r['gpu']}",
                _direction(r["direction"], lang),
                fmt.count(r["count"]),
                fmt.nbytes(r["bytes"]),
                fmt.duration(r["total_ns"]),
                fmt.duration(r["window_ns"]),
                fmt.duration(r["min_ns"]),
                fmt.duration(r["max_ns"]),
            )
            for r in t.per_operation.iter_rows(named=True)
        ),
    )
