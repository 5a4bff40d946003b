"""Rules on how the GPUs' gaps line up in time (seed 4.5, 4.4).

Both read the stagger verdict (docs/metrics/stagger.md) over steady state:

* ``false-balance``: every GPU looks busy and evenly loaded on the dashboard, yet a
  large share of each GPU's time is gaps that are staggered or independent across
  GPUs; the CPU is named as the cause only when the gap time's host-side cause is
  measured.
* ``aligned-gaps``: the GPUs' gaps coincide, so every GPU is idle at once for a share
  of the common window: a shared cause (a barrier, a collective, a shared loader).

Thresholds are named constants, documented in docs/findings.md.
"""

from __future__ import annotations

from statistics import mean

from nsysan.diagnose.facts import Facts
from nsysan.diagnose.findings import EvidenceItem, Finding
from nsysan.diagnose.gpu_rules import span
from nsysan.report.fmt import percent, ratio

# false-balance / host-bound (seed 4.5, 4.4 CPU-side scheduling)
GAP_SHARE_HIGH = 0.20  # mean gap share of the GPUs that makes gaps a finding
GAP_SHARE_EACH = 0.10  # every GPU has at least this much gap time (the dashboard looks busy on all)
DASHBOARD_BALANCED_SPREAD = 0.10  # dashboard max - min across GPUs: "looks balanced"
HOST_SIDE_SHARE = 0.50  # share of gap time on the host side that names the CPU as the cause
# aligned gaps: a common cause
ALIGNED_ALL_IDLE_SHARE = 0.10  # share of the common window with every GPU idle


def _ev(
    metric: str, label: str, value: float | int | str | None, display: str, source: str
) -> EvidenceItem:
    return EvidenceItem(metric=metric, label=label, value=value, display=display, source=source)


def _pct(metric: str, label: str, value: float | None, source: str) -> EvidenceItem:
    """Evidence that is a share, shown as a percentage."""
    return _ev(metric, label, value, percent(value), source)


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
        f"False balance: all {n} GPUs look {span(dash)} busy on the dashboard ({dash_name}), "
        f"but {span(f.gap_share)} of each GPU's time is gaps, {f.stagger_verdict} across GPUs"
        f"{host_text_en}."
    )
    claim_zh = (
        f"假均衡：监控面板上 {n} 张卡的利用率都显示为 {span(dash)}（{dash_name_zh}），"
        f"但每张卡有 {span(f.gap_share)} 的时间是计算间隙，且各卡间隙{'错开' if f.stagger_verdict == 'staggered' else '互不相关'}"
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
