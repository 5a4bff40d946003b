"""The report's table of several contexts on one GPU (MPS, processes, green contexts).

Numbers come from :func:`nsysan.analyze.contexts.context_split`; definitions are in
docs/metrics/contexts.md.
"""

from __future__ import annotations

from typing import Literal

from nsysan.analysis import Analysis
from nsysan.analyze.contexts import context_split
from nsysan.report import fmt
from nsysan.report.catalog import in_lang
from nsysan.report.viewmodel import Table

Lang = Literal["en", "zh"]


def context_table(analysis: Analysis, lang: Lang) -> Table | None:
    """One row per context on each GPU that has more than one; None when none has."""
    if analysis.busy is None:
        return None
    split = context_split(analysis.trace.kernels, analysis.busy.windows, analysis.busy.summary)
    if split.is_empty():
        return None
    rows = tuple(
        (
            f"GPU {r['gpu']}",
            str(r["pid"]),
            str(r["context_id"]) if r["context_id"] is not None else "—",
            str(r["green_context_id"]) if r["green_context_id"] is not None else "—",
            fmt.count(r["kernels"]),
            fmt.duration(r["kernel_ns"]),
            fmt.duration(r["busy_ns"]),
            fmt.percent(r["busy_share"]),
        )
        for r in split.iter_rows(named=True)
    )
    return Table(
        title=in_lang(lang, "Contexts sharing a GPU", "共享同一 GPU 的上下文"),
        columns=(
            "GPU",
            in_lang(lang, "process", "进程"),
            in_lang(lang, "context", "上下文"),
            in_lang(lang, "green context", "绿色上下文"),
            in_lang(lang, "kernels", "内核数"),
            in_lang(lang, "kernel time", "内核时间"),
            in_lang(lang, "busy time", "忙碌时间"),
            in_lang(lang, "of the GPU's busy time", "占该卡忙碌时间"),
        ),
        rows=rows,
        note=in_lang(
            lang,
            "The GPU is the physical device: every context on it (MPS clients, other "
            "processes, green contexts) counts towards its busy time and gaps. Busy time per "
            "context is the union of its kernels in the GPU's window; the shares add up to "
            "more than 100% when contexts ran at the same time.",
            "GPU 指物理设备：其上的所有上下文（MPS 客户端、其他进程、绿色上下文）都计入该卡的忙碌时间与间隙。"
            "每个上下文的忙碌时间是其内核在该卡时间窗内的区间并集；上下文同时运行时，各占比之和会超过 100%。",
        ),
    )
