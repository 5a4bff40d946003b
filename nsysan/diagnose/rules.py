"""Diagnosis rules: one function per finding, each over :class:`Facts`.

Every threshold is a named constant here and documented in docs/findings.md (a test
checks that every rule id and constant is). A rule returns ``None`` unless its
evidence is present and clear: a missing measurement never fires a rule.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from statistics import mean

from nsysan.diagnose.cpu_rules import CPU_RULE_IDS, CPU_RULES
from nsysan.diagnose.facts import Facts  # noqa: F401  (re-exported for tests)
from nsysan.diagnose.findings import EvidenceItem, Finding
from nsysan.diagnose.gpu_rules import GPU_RULE_IDS, GPU_RULES, host_bound_gaps  # noqa: F401
from nsysan.diagnose.launch_rules import LAUNCH_RULE_IDS, LAUNCH_RULES
from nsysan.diagnose.load_rules import LOAD_RULE_IDS, LOAD_RULES
from nsysan.diagnose.memory_rules import MEMORY_RULE_IDS, MEMORY_RULES
from nsysan.diagnose.transfer_rules import transfer_heavy
from nsysan.report.fmt import duration, percent, ratio

# false-balance / host-bound (seed 4.5, 4.4 CPU-side scheduling)
GAP_SHARE_HIGH = 0.20  # mean gap share of the GPUs that makes gaps a finding
GAP_SHARE_EACH = 0.10  # every GPU has at least this much gap time (the dashboard looks busy on all)
DASHBOARD_BALANCED_SPREAD = 0.10  # dashboard max - min across GPUs: "looks balanced"
HOST_SIDE_SHARE = 0.50  # share of gap time on the host side that names the CPU as the cause
# aligned gaps: a common cause
ALIGNED_ALL_IDLE_SHARE = 0.10  # share of the common window with every GPU idle
# static split / hot expert (seed 4.1)
COMPUTE_SKEW_MAX_OVER_MEAN = 1.05  # most-loaded GPU's compute time over the mean
EXPERT_KERNEL_PATTERN = re.compile(r"(?i)moe|expert|topk|grouped_?gemm|router")
EXPERT_DIFF_SHARE = 0.5  # share of the compute difference explained by expert kernels
# pipeline bubbles (seed 4.1)
BUBBLE_SHARE_HIGH = 0.15
BUBBLE_STAIRCASE_MIN = 0.05  # spread of fill and of drain share across stages
# Pipeline signature: later stages idle longer at the start and shorter at the end,
# so fill and drain shares are ranked in opposite orders across GPUs.
BUBBLE_FILL_DRAIN_MAX_CORRELATION = -0.8
# ... and the fill share grows (or shrinks) steadily with the GPU's position.
BUBBLE_STAGE_ORDER_MIN_CORRELATION = 0.8
# Two GPUs always rank as a perfect staircase (a rank correlation of two points is
# +-1), so two independent GPUs would pass: a staircase takes three stages or more.
BUBBLE_MIN_STAGES = 3
# drift / long tail (seed 4.2, 4.3)
DRIFT_SPREAD_HIGH = 0.30  # busy-share spread between GPUs in the worst drift window
# Load drift: over the capture, one GPU's busy share moves this much relative to
# another's (difference of the fitted trends). Window-to-window noise on short
# captures stays well below it.
DRIFT_TREND_SPREAD = 0.50
# communication (seed 4.4)
NCCL_SHARE_HIGH = 0.30
NCCL_WAIT_SHARE_HIGH = 0.30
NCCL_SHARE_FOR_SKEW = 0.05
# memory bandwidth (seed 4.4)
MEMORY_BOUND_SHARE_HIGH = 0.50
# power / thermal (seed 4.4)
CLOCK_DROP_BUSY_SHARE = 0.10


def _ev(
    metric: str, label: str, value: float | int | str | None, display: str, source: str
) -> EvidenceItem:
    return EvidenceItem(metric=metric, label=label, value=value, display=display, source=source)


def _pct(metric: str, label: str, value: float | None, source: str) -> EvidenceItem:
    """Evidence that is a share, shown as a percentage."""
    return _ev(metric, label, value, percent(value), source)


def _range(values: tuple[float, ...] | list[float]) -> str:
    low, high = percent(min(values)), percent(max(values))
    return low if low == high else f"{low}–{high}"


def _ranks(values: tuple[float, ...]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    for rank, i in enumerate(order):
        ranks[i] = float(rank)
    return ranks


def rank_correlation(a: tuple[float, ...], b: tuple[float, ...]) -> float | None:
    """Spearman's rank correlation (no tie correction); None when undefined."""
    if len(a) != len(b) or len(a) < 2:
        return None
    ra, rb = _ranks(a), _ranks(b)
    ma, mb = mean(ra), mean(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb, strict=True))
    va = sum((x - ma) ** 2 for x in ra)
    vb = sum((y - mb) ** 2 for y in rb)
    return cov / (va * vb) ** 0.5 if va and vb else None


def false_balance(f: Facts) -> Finding | None:
    """Dashboard balanced and busy-looking on every GPU, timeline full of unaligned gaps."""
    if f.gpu_count < 2 or not f.gap_share or not f.dashboard_share:
        return None
    if mean(f.gap_share) < GAP_SHARE_HIGH or min(f.gap_share) < GAP_SHARE_EACH:
        return None
    if f.dashboard_spread is None or f.dashboard_spread > DASHBOARD_BALANCED_SPREAD:
        return None
    if f.stagger_verdict not in ("staggered", "independent"):
        return None
    shown = [g for g in f.gr_active_share if g is not None]
    dash = tuple(shown) if len(shown) == f.gpu_count else f.dashboard_share
    dash_name = (
        "GR Active from GPU metrics" if len(shown) == f.gpu_count else "NVML-style utilization"
    )
    dash_name_zh = "GPU 指标中的 GR Active" if len(shown) == f.gpu_count else "NVML 口径利用率"
    # Only measured host-side causes name the CPU; unattributed time does not.
    host = f.measured_host_share if f.measured_host_share is not None else None
    host_text_en = ""
    host_text_zh = ""
    if host is not None and host >= HOST_SIDE_SHARE:
        detail_en, detail_zh = [], []
        if f.gil_share:
            detail_en.append(f"GIL-signature waits {percent(f.gil_share)}")
            detail_zh.append(f"GIL 特征等待 {percent(f.gil_share)}")
        if f.top_nvtx:
            ranges = ", ".join(f"{t} {percent(sh)}" for t, sh in f.top_nvtx[:2])
            detail_en.append(f"inside NVTX ranges, overlapping the waits: {ranges}")
            detail_zh.append(f"位于 NVTX 区间内（与上述等待重叠）：{ranges}")
        extra_en = f" ({'; '.join(detail_en)})" if detail_en else ""
        extra_zh = f"（{'；'.join(detail_zh)}）" if detail_zh else ""
        host_text_en = f", and {percent(host)} of gap time has a measured host-side cause{extra_en} — throughput is limited by the CPU, not the GPUs"
        host_text_zh = f"，且 {percent(host)} 的间隙时间有实测的主机侧原因{extra_zh}——吞吐受限于 CPU，而不是 GPU"
    n = f.gpu_count
    claim_en = (
        f"False balance: all {n} GPUs look {_range(dash)} busy on the dashboard ({dash_name}), "
        f"but {_range(f.gap_share)} of each GPU's time is gaps, {f.stagger_verdict} across GPUs"
        f"{host_text_en}."
    )
    claim_zh = (
        f"假均衡：监控面板上 {n} 张卡的利用率都显示为 {_range(dash)}（{dash_name_zh}），"
        f"但每张卡有 {_range(f.gap_share)} 的时间是计算间隙，且各卡间隙{'错开' if f.stagger_verdict == 'staggered' else '互不相关'}"
        f"{host_text_zh}。"
    )
    evidence = [
        _pct("gap_share", f"gap share, {lab}", g, "docs/metrics/gaps.md")
        for lab, g in zip(f.gpu_labels, f.gap_share, strict=False)
    ]
    evidence += [
        _pct("dashboard", f"{dash_name}, {lab}", d, "docs/metrics/dashboard.md")
        for lab, d in zip(f.gpu_labels, dash, strict=False)
    ]
    evidence.append(
        _ev(
            "stagger_score",
            "stagger score (−1 aligned … +1 staggered)",
            f.stagger_score,
            f"{f.stagger_score:+.2f}" if f.stagger_score is not None else "n/a",
            "docs/metrics/stagger.md",
        )
    )
    if f.co_idle_ratio is not None:
        evidence.append(
            _ev(
                "co_idle_ratio",
                "co-idle time, observed / if independent",
                f.co_idle_ratio,
                ratio(f.co_idle_ratio),
                "docs/metrics/stagger.md",
            )
        )
    if host is not None:
        evidence.append(
            _pct(
                "measured_host_share",
                "gap time with a measured host-side cause",
                host,
                "docs/metrics/host.md",
            )
        )
    if f.gil_share:
        evidence.append(
            _pct(
                "gil_share", "GIL-signature share of gap time", f.gil_share, "docs/metrics/host.md"
            )
        )
    for text, share in f.top_nvtx:
        evidence.append(
            _pct("nvtx", f"NVTX range covering gaps: {text}", share, "docs/metrics/host.md")
        )
    cpu_bound = host is not None and host >= HOST_SIDE_SHARE
    return Finding(
        rule_id="false-balance",
        severity="critical",
        seed_section="4.5",
        cause_category="CPU-side scheduling" if cpu_bound else "unaligned per-GPU stalls",
        impact_share=mean(f.gap_share),
        title={
            "en": "False balance: busy-looking GPUs with staggered gaps",
            "zh": "假均衡：利用率看似均衡，时间线上间隙错开",
        },
        claim={"en": claim_en, "zh": claim_zh},
        recommendation={
            "en": "Move tokenization and sampling off the Python GIL (a C++/Rust tokenizer, separate "
            "processes with enough CPU cores per GPU), overlap host preparation of the next batch "
            "with GPU work, and verify with a new trace that gap share falls (the case study: 35% → 8%)."
            if cpu_bound
            else "Look at what each process does between kernels (host-side cause section); the gaps are "
            "per-process stalls, not a shared barrier.",
            "zh": "把 tokenizer 与采样逻辑移出 Python GIL（改用 C++/Rust 实现，或用独立进程并为每张卡分配足够的 CPU 核），"
            "让下一批数据的主机侧准备与 GPU 计算重叠，并重新抓取时间线确认间隙占比下降（案例中 35% → 8%）。"
            if cpu_bound
            else "查看每个进程在内核之间做了什么（主机侧原因一节）；这些间隙是各进程各自的停顿，而不是共同的屏障。",
        },
        evidence=tuple(evidence),
    )


def aligned_gaps(f: Facts) -> Finding | None:
    """Gaps that coincide across GPUs: a common cause (collective, barrier, shared loader)."""
    if f.gpu_count < 2 or f.stagger_verdict != "aligned" or not f.gap_share:
        return None
    if mean(f.gap_share) < GAP_SHARE_HIGH or (f.all_idle_share or 0) < ALIGNED_ALL_IDLE_SHARE:
        return None
    return Finding(
        rule_id="aligned-gaps",
        severity="warning",
        seed_section="4.4",
        cause_category="common stall (barrier, collective, shared loader)",
        impact_share=f.all_idle_share or 0.0,
        title={"en": "All GPUs idle at the same time", "zh": "所有 GPU 同时空闲"},
        claim={
            "en": f"Gaps are aligned across the {f.gpu_count} GPUs: all of them are idle together {percent(f.all_idle_share)} of the common {'steady-state ' if f.warmup_detected else ''}window (stagger score {f.stagger_score:+.2f}), which points to a shared cause such as a barrier, a collective or a shared data loader.",
            "zh": f"{f.gpu_count} 张卡的间隙是对齐的：在共同{'稳态' if f.warmup_detected else ''}时间窗内有 {percent(f.all_idle_share)} 的时间所有卡同时空闲（错开分数 {f.stagger_score:+.2f}），说明存在共同原因，如屏障、集合通信或共享的数据加载。",
        },
        recommendation={
            "en": "Find what every rank waits for at the same time (host-side cause section, NVTX ranges): data loading, checkpointing, a barrier; overlap it with compute.",
            "zh": "找出所有进程同时在等待什么（主机侧原因、NVTX 区间）：数据加载、检查点、屏障；使其与计算重叠。",
        },
        evidence=(
            _pct(
                "all_idle_share",
                "all GPUs idle, share of common steady-state window"
                if f.warmup_detected
                else "all GPUs idle, share of common window",
                f.all_idle_share,
                "docs/metrics/stagger.md",
            ),
            _ev(
                "stagger_score",
                "stagger score",
                f.stagger_score,
                f"{f.stagger_score:+.2f}",
                "docs/metrics/stagger.md",
            ),
        ),
    )


def _expert_diff_share(f: Facts) -> float:
    return sum(share for name, share in f.top_diff_kernels if EXPERT_KERNEL_PATTERN.search(name))


def compute_skew(f: Facts) -> Finding | None:
    """One GPU computes more than the others: a static split or a hot MoE expert."""
    if f.gpu_count < 2 or f.compute_max_over_mean is None:
        return None
    if f.compute_max_over_mean < COMPUTE_SKEW_MAX_OVER_MEAN:
        return None
    expert = _expert_diff_share(f) >= EXPERT_DIFF_SHARE
    kernels = ", ".join(f"{n} ({percent(s)})" for n, s in f.top_diff_kernels[:3])
    kernels_zh = "，".join(
        f"{'（其他内核）' if n == '(other kernels)' else n}（{percent(s)}）"
        for n, s in f.top_diff_kernels[:3]
    )
    most, least = f.most_loaded_gpu, f.least_loaded_gpu
    skew = f.compute_max_over_mean
    if expert:
        rule, title_en, title_zh = (
            "moe-hot-expert",
            "A hot MoE expert overloads one GPU",
            "MoE 热点专家使单卡过载",
        )
        claim_en = f"GPU {most} computes {ratio(skew)} the mean; expert kernels explain most of its extra time over GPU {least}: {kernels}."
        claim_zh = f"GPU {most} 的计算时间是平均值的 {ratio(skew)}；它比 GPU {least} 多出的时间主要来自专家内核：{kernels_zh}。"
        rec_en = "Re-balance experts periodically (expert replication or re-placement by measured heat), add capacity factors / token dropping, or use expert parallelism with load-aware routing."
        rec_zh = "周期性地按实测热度重新分配专家（复制热点专家或重新放置），设置容量因子/丢弃超额词元，或使用负载感知的路由。"
        section = "4.1"
    else:
        rule, title_en, title_zh = (
            "static-split-skew",
            "Uneven split of work across GPUs",
            "各卡之间工作切分不均",
        )
        claim_en = f"GPU {most} computes {ratio(skew)} the mean (load-balance efficiency {percent(f.compute_efficiency)}); the kernels behind its extra time over GPU {least}: {kernels}."
        claim_zh = f"GPU {most} 的计算时间是平均值的 {ratio(skew)}（负载均衡效率 {percent(f.compute_efficiency)}）；它比 GPU {least} 多出的时间来自：{kernels_zh}。"
        rec_en = "Make the split divisible (heads, layers or shards per GPU), or weight the assignment by measured cost; re-check with a new trace."
        rec_zh = (
            "让切分可整除（每卡的注意力头、层或分片数），或按实测开销加权分配；用新的时间线复核。"
        )
        section = "4.1"
    return Finding(
        rule_id=rule,
        severity="warning",
        seed_section=section,
        cause_category="static split" if not expert else "hot expert",
        impact_share=1.0 - (f.compute_efficiency or 1.0),
        title={"en": title_en, "zh": title_zh},
        claim={"en": claim_en, "zh": claim_zh},
        recommendation={"en": rec_en, "zh": rec_zh},
        evidence=(
            _ev(
                "compute_max_over_mean",
                "compute time, max / mean",
                skew,
                ratio(skew),
                "docs/metrics/balance.md",
            ),
            _pct(
                "compute_efficiency",
                "load-balance efficiency (mean / max)",
                f.compute_efficiency,
                "docs/metrics/balance.md",
            ),
            *(
                _pct("kernel_diff", f"share of the difference: {n}", s, "docs/metrics/balance.md")
                for n, s in f.top_diff_kernels[:3]
            ),
        ),
    )


def _spread(values: tuple[float, ...]) -> float:
    return max(values) - min(values) if values else 0.0


def pipeline_bubble(f: Facts) -> Finding | None:
    """Idle at the start/end of each iteration, growing stage by stage (fill/drain)."""
    if f.gpu_count < BUBBLE_MIN_STAGES or f.bubble_share is None:
        return None
    if len(f.fill_share_per_gpu) < BUBBLE_MIN_STAGES or f.bubble_share < BUBBLE_SHARE_HIGH:
        return None
    if min(_spread(f.fill_share_per_gpu), _spread(f.drain_share_per_gpu)) < BUBBLE_STAIRCASE_MIN:
        return None
    corr = rank_correlation(f.fill_share_per_gpu, f.drain_share_per_gpu)
    if corr is None or corr > BUBBLE_FILL_DRAIN_MAX_CORRELATION:
        return None
    position = tuple(float(i) for i in range(len(f.fill_share_per_gpu)))
    order = rank_correlation(f.fill_share_per_gpu, position)
    if order is None or abs(order) < BUBBLE_STAGE_ORDER_MIN_CORRELATION:
        return None
    return Finding(
        rule_id="pipeline-bubble",
        severity="warning",
        seed_section="4.1",
        cause_category="pipeline fill/drain",
        impact_share=f.bubble_share,
        title={"en": "Pipeline bubbles at fill and drain", "zh": "流水线填充/排空气泡"},
        claim={
            "en": f"{percent(f.bubble_share)} of each iteration is bubble (idle at its start or end), growing from stage to stage: fill {_range(f.fill_share_per_gpu)}, drain {_range(f.drain_share_per_gpu)} across GPUs.",
            "zh": f"每次迭代有 {percent(f.bubble_share)} 的时间是气泡（迭代开始或结束时空闲），且逐级递增：各卡填充 {_range(f.fill_share_per_gpu)}，排空 {_range(f.drain_share_per_gpu)}。",
        },
        recommendation={
            "en": "Use more micro-batches per iteration, an interleaved (virtual-stage) schedule, or fewer pipeline stages.",
            "zh": "每次迭代使用更多微批次，采用交错（虚拟流水级）调度，或减少流水线级数。",
        },
        evidence=(
            _pct(
                "bubble_share",
                "bubble share of iteration time",
                f.bubble_share,
                "docs/metrics/balance.md",
            ),
            *(
                _pct("fill_share", f"fill share, {lab}", v, "docs/metrics/balance.md")
                for lab, v in zip(f.gpu_labels, f.fill_share_per_gpu, strict=False)
            ),
        ),
    )


def load_drift(f: Facts) -> Finding | None:
    """Load that moves between GPUs over time: long requests hogging one GPU."""
    if f.gpu_count < 2 or f.drift_spread_max is None or f.drift_spread_min is None:
        return None
    if f.drift_spread_max < DRIFT_SPREAD_HIGH:
        return None
    if not f.busy_trend or max(f.busy_trend) - min(f.busy_trend) < DRIFT_TREND_SPREAD:
        return None
    trend_spread = max(f.busy_trend) - min(f.busy_trend)
    return Finding(
        rule_id="dp-long-tail",
        severity="warning",
        seed_section="4.2",
        cause_category="dynamic requests (long tail)",
        impact_share=f.drift_spread_mean or 0.0,
        title={"en": "Load drifts between GPUs over time", "zh": "负载随时间在各卡之间漂移"},
        claim={
            "en": f"The load drifts between GPUs over the capture: one GPU's busy share moves {percent(trend_spread)} relative to another's, and in the worst time window the GPUs' busy shares differ by {percent(f.drift_spread_max)} (best window {percent(f.drift_spread_min)}) — some GPUs keep working while others run dry.",
            "zh": f"负载在采集期间于各卡之间漂移：某张卡的忙碌占比相对另一张卡变化了 {percent(trend_spread)}，最差时间窗内各卡忙碌占比相差 {percent(f.drift_spread_max)}（最好时间窗 {percent(f.drift_spread_min)}）——部分卡持续工作而其他卡无事可做。",
        },
        recommendation={
            "en": "Schedule by estimated cost (sequence length, generation budget), not round-robin; add starvation detection and preemption or request migration.",
            "zh": "按预估开销（序列长度、生成长度）调度而不是轮询；加入饥饿检测与抢占或请求迁移。",
        },
        evidence=(
            _pct(
                "drift_spread_max",
                "busy-share spread, worst window",
                f.drift_spread_max,
                "docs/metrics/balance.md",
            ),
            _pct(
                "drift_spread_min",
                "busy-share spread, best window",
                f.drift_spread_min,
                "docs/metrics/balance.md",
            ),
            *(
                _ev(
                    "busy_trend",
                    f"busy-share trend over the capture, {lab}",
                    t,
                    f"{t * 100:+.0f} pts",
                    "docs/metrics/balance.md",
                )
                for lab, t in zip(f.gpu_labels, f.busy_trend, strict=False)
            ),
        ),
    )


def comm_bound(f: Facts) -> Finding | None:
    """Communication itself (NCCL time less the estimated wait for late peers) is large."""
    if f.nccl_share is None:
        return None
    transfer = f.nccl_share * (1.0 - (f.nccl_wait_share or 0.0))
    if transfer < NCCL_SHARE_HIGH:
        return None
    coll = f" (mostly {f.top_collective})" if f.top_collective else ""
    coll_zh = f"（主要是 {f.top_collective}）" if f.top_collective else ""
    return Finding(
        rule_id="comm-bound",
        severity="warning",
        seed_section="4.4",
        cause_category="interconnect bandwidth (NVLink/PCIe)",
        impact_share=transfer,
        title={
            "en": "Communication takes a large share of GPU time",
            "zh": "通信占用了大量 GPU 时间",
        },
        claim={
            "en": f"NCCL kernels take {percent(f.nccl_share)} of busy GPU time{coll}; "
            f"{percent(transfer)} is communication itself, not waiting for late GPUs.",
            "zh": f"NCCL 内核占 GPU 忙碌时间的 {percent(f.nccl_share)}{coll_zh}；"
            f"其中 {percent(transfer)} 是通信本身，而不是等待迟到的卡。",
        },
        recommendation={
            "en": "Keep tensor-parallel groups inside one NVLink/NVSwitch domain, overlap communication with compute, or lower the TP degree for long sequences.",
            "zh": "把张量并行组限制在同一个 NVLink/NVSwitch 域内，让通信与计算重叠，或在长序列时降低 TP 度。",
        },
        evidence=(
            _pct("nccl_share", "NCCL share of busy time", f.nccl_share, "docs/metrics/nccl.md"),
            _pct(
                "nccl_wait_share",
                "estimated wait share of NCCL time",
                f.nccl_wait_share,
                "docs/metrics/nccl.md",
            ),
        ),
    )


def collective_skew(f: Facts) -> Finding | None:
    if f.nccl_share is None or f.nccl_share < NCCL_SHARE_FOR_SKEW:
        return None
    if f.nccl_wait_share is None or f.nccl_wait_share < NCCL_WAIT_SHARE_HIGH:
        return None
    return Finding(
        rule_id="collective-skew",
        severity="info",
        seed_section="4.4",
        cause_category="arrival skew at collectives",
        impact_share=f.nccl_share * f.nccl_wait_share,
        title={
            "en": "GPUs wait for each other inside collectives",
            "zh": "各卡在集合通信中互相等待",
        },
        claim={
            "en": f"{percent(f.nccl_wait_share)} of NCCL time is early arrivers waiting for the last GPU (median start skew {duration(f.nccl_skew_median_ns)}); the wait is a symptom of imbalance before the collective.",
            "zh": f"NCCL 时间中有 {percent(f.nccl_wait_share)} 是先到的卡在等待最后一张卡（启动偏差中位数 {duration(f.nccl_skew_median_ns)}）；这种等待是集合通信之前负载不均的表现。",
        },
        recommendation={
            "en": "Fix the imbalance before the collective (see the other findings); the late GPU is listed per instance in the JSON output.",
            "zh": "修正集合通信之前的负载不均（见其他发现）；JSON 输出中列出了每次通信最晚到达的卡。",
        },
        evidence=(
            _pct(
                "nccl_wait_share",
                "estimated wait share of NCCL time",
                f.nccl_wait_share,
                "docs/metrics/nccl.md",
            ),
        ),
    )


def memory_bound(f: Facts) -> Finding | None:
    if f.memory_bound_share is None or f.memory_bound_share < MEMORY_BOUND_SHARE_HIGH:
        return None
    return Finding(
        rule_id="memory-bound",
        severity="warning",
        seed_section="4.4",
        cause_category="memory bandwidth",
        impact_share=f.memory_bound_share,
        title={"en": "Most GPU time is memory-bound", "zh": "大部分 GPU 时间受显存带宽限制"},
        claim={
            "en": f"{percent(f.memory_bound_share)} of kernel time is in memory-bound kernels (Nsight Compute speed-of-light); high utilization here does not mean compute is used.",
            "zh": f"{percent(f.memory_bound_share)} 的内核时间属于带宽受限内核（Nsight Compute SOL）；此时的高利用率并不代表算力被用满。",
        },
        recommendation={
            "en": "Fuse memory-bound kernels, use lower-precision KV cache / weights, and batch more requests to raise arithmetic intensity.",
            "zh": "融合带宽受限的内核，使用更低精度的 KV cache/权重，增大批量以提高计算强度。",
        },
        evidence=(
            _pct(
                "memory_bound_share",
                "memory-bound share of kernel time",
                f.memory_bound_share,
                "docs/metrics/bound.md",
            ),
            _pct(
                "unjoined_share",
                "kernel time without Nsight Compute data",
                f.unjoined_share,
                "docs/metrics/bound.md",
            ),
        ),
    )


def clock_throttling(f: Facts) -> Finding | None:
    if not f.clock_drop_share or max(f.clock_drop_share) < CLOCK_DROP_BUSY_SHARE:
        return None
    hit = [
        (lab, share, low)
        for lab, share, low in zip(f.gpu_labels, f.clock_drop_share, f.clock_min_mhz, strict=False)
        if share >= CLOCK_DROP_BUSY_SHARE
    ]
    names = ", ".join(lab for lab, _, _ in hit)
    lowest = min((low for _, _, low in hit if low is not None), default=None)
    low_text = f" down to {lowest:.0f} MHz" if lowest is not None else ""
    ref = f" from {f.clock_reference_mhz:.0f} MHz" if f.clock_reference_mhz else ""
    return Finding(
        rule_id="clock-throttling",
        severity="warning",
        seed_section="4.4",
        cause_category="power / thermal",
        impact_share=max(f.clock_drop_share),
        title={"en": "GPU clocks drop while busy", "zh": "GPU 在忙碌时降频"},
        claim={
            "en": f"{names}: the GPC clock falls{ref}{low_text} for up to {percent(max(f.clock_drop_share))} of busy time — power or thermal throttling slows these GPUs and everyone waiting for them.",
            "zh": f"{names}：GPC 时钟{('从 ' + f'{f.clock_reference_mhz:.0f} MHz') if f.clock_reference_mhz else ''}降至{f'{lowest:.0f} MHz' if lowest is not None else '更低'}，最多占忙碌时间的 {percent(max(f.clock_drop_share))}——功耗或温度降频拖慢了这些卡以及等待它们的卡。",
        },
        recommendation={
            "en": "Check power limits, cooling and neighbouring load (`nvidia-smi -q -d PERFORMANCE` shows the throttle reasons).",
            "zh": "检查功耗上限、散热和相邻负载（`nvidia-smi -q -d PERFORMANCE` 可显示降频原因）。",
        },
        evidence=tuple(
            _pct(
                "clock_drop_share",
                f"busy time with clock drop, {lab}",
                share,
                "docs/metrics/contention.md",
            )
            for lab, share, _ in hit
        ),
    )


Rule = Callable[[Facts], "Finding | None"]

#: Every rule, in the order they are evaluated. Order does not decide importance:
#: findings are sorted by severity, then impact_share.
RULES: tuple[Rule, ...] = (
    false_balance,
    *GPU_RULES,
    aligned_gaps,
    compute_skew,
    pipeline_bubble,
    load_drift,
    comm_bound,
    collective_skew,
    memory_bound,
    clock_throttling,
    transfer_heavy,
    *LAUNCH_RULES,
    *CPU_RULES,
    *MEMORY_RULES,
    *LOAD_RULES,
)

RULE_IDS = (
    "false-balance",
    "host-bound-gaps",
    "aligned-gaps",
    "static-split-skew",
    "moe-hot-expert",
    "pipeline-bubble",
    "dp-long-tail",
    "comm-bound",
    "collective-skew",
    "memory-bound",
    "clock-throttling",
    "transfer-heavy",
    *GPU_RULE_IDS,
    *LAUNCH_RULE_IDS,
    *CPU_RULE_IDS,
    *MEMORY_RULE_IDS,
    *LOAD_RULE_IDS,
)
