"""The four myths of seed section 4.6, each with a verdict on this trace.

Each myth is a belief a team might hold. The verdict says whether *this trace*
supports it: ``holds`` (the evidence agrees with the belief here),
``does_not_hold`` (the evidence contradicts it here) or ``cannot_tell`` (the data
needed is missing, and ``why`` names it).
"""

from __future__ import annotations

from nsysan.diagnose.facts import Facts
from nsysan.diagnose.findings import Finding, MythCheck
from nsysan.report.fmt import percent

# A GPU set whose busy time (mean / max) is at least this is "balanced".
BALANCED_EFFICIENCY = 0.90
# NCCL below this share of busy time: communication is not a factor.
NCCL_NEGLIGIBLE_SHARE = 0.05


def _ids(findings: tuple[Finding, ...]) -> set[str]:
    return {f.rule_id for f in findings}


def _check(
    myth_id: str, item: int, title: tuple[str, str], verdict: str, why: tuple[str, str]
) -> MythCheck:
    return MythCheck(
        myth_id=myth_id,
        seed_item=item,
        title={"en": title[0], "zh": title[1]},
        verdict=verdict,  # type: ignore[arg-type]
        why={"en": why[0], "zh": why[1]},
    )


def utilization_is_enough(f: Facts, findings: tuple[Finding, ...]) -> MythCheck:
    title = (
        "GPU utilization alone shows whether the GPUs are used well",
        "只看 GPU 利用率就能判断 GPU 是否被充分利用",
    )
    if not f.gap_share:
        return _check(
            "only-gpu-utilization",
            1,
            title,
            "cannot_tell",
            ("no GPU kernels in the trace", "时间线中没有 GPU 内核"),
        )
    hidden = _ids(findings) & {
        "false-balance",
        "memory-bound",
        "clock-throttling",
        "comm-bound",
        "host-bound-gaps",
    }
    if hidden:
        names = ", ".join(sorted(hidden))
        return _check(
            "only-gpu-utilization",
            1,
            title,
            "does_not_hold",
            (
                f"the timeline shows what utilization hides: {names}",
                f"时间线揭示了利用率掩盖的问题：{names}",
            ),
        )
    return _check(
        "only-gpu-utilization",
        1,
        title,
        "holds",
        (
            f"utilization and the timeline agree here (gap share {percent(min(f.gap_share), 0)}–{percent(max(f.gap_share), 0)}); no hidden bottleneck was found"
            + (
                ""
                if f.metrics_available
                else ", but without GPU metrics bandwidth and clocks were not checked"
            ),
            f"此处利用率与时间线一致（间隙占比 {percent(min(f.gap_share), 0)}–{percent(max(f.gap_share), 0)}），未发现隐藏瓶颈"
            + ("" if f.metrics_available else "；但缺少 GPU 指标，未检查带宽与时钟"),
        ),
    )


def dp_is_balanced(f: Facts, findings: tuple[Finding, ...]) -> MythCheck:
    title = ("Data parallelism is balanced by nature", "数据并行天然均衡")
    if f.gpu_count < 2 or f.busy_efficiency is None:
        return _check(
            "dp-balanced-by-nature",
            2,
            title,
            "cannot_tell",
            ("fewer than two GPUs ran work", "运行工作的 GPU 少于两张"),
        )
    drift = "dp-long-tail" in _ids(findings)
    if f.busy_efficiency < BALANCED_EFFICIENCY or drift:
        return _check(
            "dp-balanced-by-nature",
            2,
            title,
            "does_not_hold",
            (
                f"busy time is uneven across GPUs (efficiency {percent(f.busy_efficiency, 0)})"
                + ("; load drifts over time" if drift else ""),
                f"各卡忙碌时间不均（效率 {percent(f.busy_efficiency, 0)}）"
                + ("；负载随时间漂移" if drift else ""),
            ),
        )
    return _check(
        "dp-balanced-by-nature",
        2,
        title,
        "holds",
        (
            f"busy time is even across GPUs (efficiency {percent(f.busy_efficiency, 0)}) and stable over time",
            f"各卡忙碌时间均匀（效率 {percent(f.busy_efficiency, 0)}）且随时间稳定",
        ),
    )


def topology_does_not_matter(f: Facts, findings: tuple[Finding, ...]) -> MythCheck:
    title = ("Communication topology does not matter", "可以忽略通信拓扑")
    if f.nccl_share is None:
        return _check(
            "topology-irrelevant",
            3,
            title,
            "cannot_tell",
            ("no GPU kernels in the trace", "时间线中没有 GPU 内核"),
        )
    if f.gpu_count < 2:
        return _check(
            "topology-irrelevant",
            3,
            title,
            "cannot_tell",
            ("one GPU: no communication between GPUs to judge", "只有一张卡：没有卡间通信可供判断"),
        )
    if {"comm-bound", "collective-skew"} & _ids(findings):
        return _check(
            "topology-irrelevant",
            3,
            title,
            "does_not_hold",
            (
                f"NCCL takes {percent(f.nccl_share, 0)} of busy time",
                f"NCCL 占忙碌时间的 {percent(f.nccl_share, 0)}",
            ),
        )
    if f.nccl_share < NCCL_NEGLIGIBLE_SHARE:
        return _check(
            "topology-irrelevant",
            3,
            title,
            "holds",
            (
                f"collectives take {percent(f.nccl_share, 0)} of busy time here",
                f"此处集合通信仅占忙碌时间的 {percent(f.nccl_share, 0)}",
            ),
        )
    return _check(
        "topology-irrelevant",
        3,
        title,
        "cannot_tell",
        (
            f"NCCL takes {percent(f.nccl_share, 0)} of busy time: not dominant, but topology may matter at longer sequences; interconnect metrics would tell",
            f"NCCL 占忙碌时间的 {percent(f.nccl_share, 0)}：不占主导，但在长序列时拓扑可能变得重要；需要互联带宽指标才能判断",
        ),
    )


def static_split_is_final(f: Facts, findings: tuple[Finding, ...]) -> MythCheck:
    title = ("A static split never needs re-balancing", "静态切分后无需再调整")
    if f.gpu_count < 2 or f.compute_max_over_mean is None:
        return _check(
            "static-split-final",
            4,
            title,
            "cannot_tell",
            ("fewer than two GPUs ran work", "运行工作的 GPU 少于两张"),
        )
    hit = _ids(findings) & {
        "static-split-skew",
        "moe-hot-expert",
        "dp-long-tail",
        "pipeline-bubble",
    }
    if hit:
        names = ", ".join(sorted(hit))
        return _check(
            "static-split-final",
            4,
            title,
            "does_not_hold",
            (f"the split is uneven or shifts over time: {names}", f"切分不均或随时间变化：{names}"),
        )
    return _check(
        "static-split-final",
        4,
        title,
        "holds",
        (
            f"compute is even (max/mean {f.compute_max_over_mean:.2f}) and the load does not drift in this capture",
            f"计算均匀（最大/平均 {f.compute_max_over_mean:.2f}），且本次采集中负载没有漂移",
        ),
    )


MYTHS = (utilization_is_enough, dp_is_balanced, topology_does_not_matter, static_split_is_final)


def check_myths(f: Facts, findings: tuple[Finding, ...]) -> tuple[MythCheck, ...]:
    return tuple(m(f, findings) for m in MYTHS)
