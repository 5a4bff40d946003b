"""The four myths of seed section 4.6, each with a verdict on this trace.

Each myth is a belief a team might hold. The verdict says whether *this trace*
supports it: ``holds`` (the evidence agrees with the belief here),
``does_not_hold`` (the evidence contradicts it here) or ``cannot_tell`` (the data
needed is missing, and ``why`` names it).
"""

from __future__ import annotations

from nsysan.diagnose.facts import Facts
from nsysan.diagnose.findings import Finding, MythCheck
from nsysan.report.fmt import percent, ratio

# A GPU set whose busy time (mean / max) is at least this is "balanced".
BALANCED_EFFICIENCY = 0.90
# NCCL below this share of busy time: communication is not a factor.
NCCL_NEGLIGIBLE_SHARE = 0.05
# One GPU working while another idles this share of the common time: DP is not
# balanced moment to moment, even when the totals are.
DP_MOMENT_SPREAD = 0.20


def _ids(findings: tuple[Finding, ...]) -> set[str]:
    return {f.rule_id for f in findings}


NO_KERNELS = ("No GPU kernels in the trace: nothing to judge.", "时间线中没有 GPU 内核：无从判断。")


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


def _titles(findings: tuple[Finding, ...], ids: set[str], lang: str) -> str:
    sep = "；" if lang == "zh" else "; "
    return sep.join(f.title[lang] for f in findings if f.rule_id in ids)


# Findings that show what a utilization number hides.
HIDDEN_BY_UTILIZATION = frozenset(
    {
        "false-balance",
        "memory-bound",
        "clock-throttling",
        "comm-bound",
        "host-bound-gaps",
        "host-late-unknown",
        "small-kernels",
        "launch-bound",
        "sm-idle-while-busy",
        "dominant-gap",
    }
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
            NO_KERNELS,
        )
    hidden = _ids(findings) & HIDDEN_BY_UTILIZATION
    if hidden:
        return _check(
            "only-gpu-utilization",
            1,
            title,
            "does_not_hold",
            (
                f"Utilization hides what the timeline shows here: {_titles(findings, hidden, 'en')}.",
                f"此处利用率掩盖了时间线揭示的问题：{_titles(findings, hidden, 'zh')}。",
            ),
        )
    gaps = f"{percent(min(f.gap_share))}–{percent(max(f.gap_share))}"
    if not f.metrics_available:
        return _check(
            "only-gpu-utilization",
            1,
            title,
            "cannot_tell",
            (
                f"Utilization agrees with the timeline here (gap share {gaps}), but without GPU metrics "
                "(SM Active, memory bandwidth, NVLink) the trace cannot show what it hides; capture with "
                "`nsys profile --gpu-metrics-devices=all`.",
                f"此处利用率与时间线一致（间隙占比 {gaps}），但缺少 GPU 指标（SM Active、显存带宽、NVLink），"
                "追踪无法说明利用率掩盖了什么；请用 `nsys profile --gpu-metrics-devices=all` 采集。",
            ),
        )
    return _check(
        "only-gpu-utilization",
        1,
        title,
        "holds",
        (
            f"Utilization, SM activity and clocks agree here (gap share {gaps}); no hidden bottleneck was found.",
            f"此处利用率、SM 活跃度与时钟一致（间隙占比 {gaps}），未发现隐藏瓶颈。",
        ),
    )


def dp_is_balanced(f: Facts, findings: tuple[Finding, ...]) -> MythCheck:
    title = ("Data parallelism is balanced by nature", "数据并行天然均衡")
    if not f.gap_share:
        return _check("dp-balanced-by-nature", 2, title, "cannot_tell", NO_KERNELS)
    if f.gpu_count < 2 or f.busy_efficiency is None or len(f.gap_share) < 2:
        return _check(
            "dp-balanced-by-nature",
            2,
            title,
            "cannot_tell",
            (
                "Only one GPU ran kernels: there is no balance between GPUs to judge.",
                "只有一张卡运行了内核：没有卡间均衡可供判断。",
            ),
        )
    drift = "dp-long-tail" in _ids(findings)
    if f.busy_efficiency < BALANCED_EFFICIENCY or drift:
        low = min(range(len(f.gap_share)), key=lambda i: f.gap_share[i])
        high = max(range(len(f.gap_share)), key=lambda i: f.gap_share[i])
        lab = f.gpu_labels
        return _check(
            "dp-balanced-by-nature",
            2,
            title,
            "does_not_hold",
            (
                f"Busy time is uneven: {lab[high]} idles {percent(f.gap_share[high])} against {percent(f.gap_share[low])} on "
                f"{lab[low]} (busy-time efficiency {percent(f.busy_efficiency)})"
                + ("; the load drifts over time." if drift else "."),
                f"各卡忙碌时间不均：{lab[high]} 空闲 {percent(f.gap_share[high])}，而 {lab[low]} 仅 {percent(f.gap_share[low])}"
                f"（忙碌时间效率 {percent(f.busy_efficiency)}）"
                + ("；负载随时间漂移。" if drift else "。"),
            ),
        )
    if f.timeline_spread is not None and f.timeline_spread >= DP_MOMENT_SPREAD:
        return _check(
            "dp-balanced-by-nature",
            2,
            title,
            "does_not_hold",
            (
                f"The totals are even (busy-time efficiency {percent(f.busy_efficiency)}), but moment to moment they are not: "
                f"one GPU works while another idles {percent(f.timeline_spread)} of the common time.",
                f"总量均衡（忙碌时间效率 {percent(f.busy_efficiency)}），但逐时刻并不均衡：在共同时间内有 {percent(f.timeline_spread)} "
                "的时间一张卡在工作而另一张卡空闲。",
            ),
        )
    return _check(
        "dp-balanced-by-nature",
        2,
        title,
        "holds",
        (
            f"Busy time is even across GPUs (efficiency {percent(f.busy_efficiency)}) and stable over this capture.",
            f"各卡忙碌时间均匀（效率 {percent(f.busy_efficiency)}），且在本次采集中保持稳定。",
        ),
    )


def topology_does_not_matter(f: Facts, findings: tuple[Finding, ...]) -> MythCheck:
    title = ("Communication topology does not matter", "可以忽略通信拓扑")
    if not f.gap_share:
        return _check("topology-irrelevant", 3, title, "cannot_tell", NO_KERNELS)
    if f.gpu_count < 2 or len(f.gap_share) < 2:
        return _check(
            "topology-irrelevant",
            3,
            title,
            "cannot_tell",
            (
                "Only one GPU ran kernels: no communication between GPUs to judge.",
                "只有一张卡运行了内核：没有卡间通信可供判断。",
            ),
        )
    if not f.nccl_share:
        return _check(
            "topology-irrelevant",
            3,
            title,
            "cannot_tell",
            (
                "No NCCL kernels in this trace: communication was not exercised, so topology cannot be judged; "
                "a capture of a run that communicates (NCCL) would tell.",
                "该追踪中没有 NCCL 内核：没有发生通信，无法判断拓扑的影响；需要采集一次有通信（NCCL）的运行。",
            ),
        )
    hit = _ids(findings) & {"comm-bound", "collective-skew", "nccl-outlier"}
    if hit:
        return _check(
            "topology-irrelevant",
            3,
            title,
            "does_not_hold",
            (
                f"NCCL takes {percent(f.nccl_share)} of busy time and {_titles(findings, hit, 'en').lower()}.",
                f"NCCL 占忙碌时间的 {percent(f.nccl_share)}，且{_titles(findings, hit, 'zh')}。",
            ),
        )
    if f.nccl_share < NCCL_NEGLIGIBLE_SHARE:
        return _check(
            "topology-irrelevant",
            3,
            title,
            "holds",
            (
                f"Collectives take {percent(f.nccl_share)} of busy time in this run; longer sequences may change that.",
                f"本次运行中集合通信仅占忙碌时间的 {percent(f.nccl_share)}；序列更长时可能改变。",
            ),
        )
    return _check(
        "topology-irrelevant",
        3,
        title,
        "cannot_tell",
        (
            f"NCCL takes {percent(f.nccl_share)} of busy time: not dominant, but not negligible; interconnect "
            "metrics (NVLink/PCIe throughput in GPU metrics) would tell.",
            f"NCCL 占忙碌时间的 {percent(f.nccl_share)}：不占主导，但也不可忽略；需要互联带宽指标（GPU 指标中的 NVLink/PCIe 吞吐）才能判断。",
        ),
    )


def static_split_is_final(f: Facts, findings: tuple[Finding, ...]) -> MythCheck:
    title = ("A static split never needs re-balancing", "静态切分后无需再调整")
    if not f.gap_share:
        return _check("static-split-final", 4, title, "cannot_tell", NO_KERNELS)
    if f.gpu_count < 2 or f.compute_max_over_mean is None:
        return _check(
            "static-split-final",
            4,
            title,
            "cannot_tell",
            (
                "Only one GPU ran kernels: there is no split between GPUs to judge.",
                "只有一张卡运行了内核：没有卡间切分可供判断。",
            ),
        )
    hit = _ids(findings) & {
        "static-split-skew",
        "moe-hot-expert",
        "dp-long-tail",
        "pipeline-bubble",
    }
    if hit:
        return _check(
            "static-split-final",
            4,
            title,
            "does_not_hold",
            (
                f"The split is uneven or shifts over time here: {_titles(findings, hit, 'en')}.",
                f"此处切分不均或随时间变化：{_titles(findings, hit, 'zh')}。",
            ),
        )
    return _check(
        "static-split-final",
        4,
        title,
        "holds",
        (
            f"Compute is even across GPUs (max/mean {ratio(f.compute_max_over_mean)}) and the load does not drift in this capture.",
            f"各卡计算均匀（最大/平均 {ratio(f.compute_max_over_mean)}），且本次采集中负载没有漂移。",
        ),
    )


MYTHS = (utilization_is_enough, dp_is_balanced, topology_does_not_matter, static_split_is_final)


def check_myths(f: Facts, findings: tuple[Finding, ...]) -> tuple[MythCheck, ...]:
    return tuple(m(f, findings) for m in MYTHS)
