"""Rules on hardware limits that slow the kernels themselves (seed 4.4).

* ``memory-bound``: most kernel time is in memory-bound kernels (Nsight Compute
  speed-of-light, docs/metrics/bound.md), so high utilization does not mean the
  compute units are used.
* ``clock-throttling``: a GPU's clock drops for a share of its busy time (power or
  thermal throttling, docs/metrics/contention.md).

Thresholds are named constants, documented in docs/findings.md.
"""

from __future__ import annotations

from nsysan.diagnose.facts import Facts
from nsysan.diagnose.findings import EvidenceItem, Finding
from nsysan.report.fmt import percent

# memory bandwidth (seed 4.4)
MEMORY_BOUND_SHARE_HIGH = 0.50
# power / thermal (seed 4.4)
CLOCK_DROP_BUSY_SHARE = 0.10


def _pct(metric: str, label: str, value: float | None, source: str) -> EvidenceItem:
    """Evidence that is a share, shown as a percentage."""
    return EvidenceItem(
        metric=metric, label=label, value=value, display=percent(value), source=source
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
