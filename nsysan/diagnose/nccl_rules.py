"""Rules on NCCL collectives (seed 4.4, docs/metrics/nccl.md).

* ``comm-bound``: communication itself (NCCL time less the estimated wait for late
  peers) takes a large share of busy GPU time.
* ``collective-skew``: GPUs that arrive early at a collective wait a large share of
  NCCL time for the last one.
* ``nccl-outlier``: one NCCL kernel far longer than its collective's median on the
  same GPU.

Thresholds are named constants, documented in docs/findings.md.
"""

from __future__ import annotations

from nsysan.diagnose.facts import Facts
from nsysan.diagnose.findings import EvidenceItem, Finding
from nsysan.diagnose.gpu_rules import at
from nsysan.report.fmt import count, duration, percent, ratio

# communication (seed 4.4)
NCCL_SHARE_HIGH = 0.30
NCCL_WAIT_SHARE_HIGH = 0.30
NCCL_SHARE_FOR_SKEW = 0.05
# one slow collective
NCCL_OUTLIER_OVER_MEDIAN = 20.0  # an NCCL kernel this many times its collective's median
NCCL_OUTLIER_MIN_NS = 1_000_000  # ... and at least this long


def _ev(
    metric: str, label: str, value: float | int | str | None, display: str, source: str
) -> EvidenceItem:
    return EvidenceItem(metric=metric, label=label, value=value, display=display, source=source)


def _pct(metric: str, label: str, value: float | None, source: str) -> EvidenceItem:
    """Evidence that is a share, shown as a percentage."""
    return _ev(metric, label, value, percent(value), source)


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


def nccl_outlier(f: Facts) -> Finding | None:
    """One NCCL kernel far longer than its collective's median on the same GPU."""
    hit = [
        o
        for o in f.nccl_outliers
        if o.over_median >= NCCL_OUTLIER_OVER_MEDIAN and o.duration_ns >= NCCL_OUTLIER_MIN_NS
    ]
    if not hit:
        return None
    o = hit[0]
    more_en = (
        f" ({len(hit) - 1} more over {NCCL_OUTLIER_OVER_MEDIAN:.0f}× in the communication section)"
        if len(hit) > 1
        else ""
    )
    more_zh = (
        f"（通信一节另有 {len(hit) - 1} 个超过 {NCCL_OUTLIER_OVER_MEDIAN:.0f}×）"
        if len(hit) > 1
        else ""
    )
    return Finding(
        rule_id="nccl-outlier",
        severity="warning",
        seed_section="4.4",
        cause_category="one slow collective",
        impact_share=0.0,
        title={
            "en": "One collective takes far longer than the others",
            "zh": "某次集合通信远慢于其他",
        },
        claim={
            "en": f"One {o.collective} on GPU {o.gpu} takes {duration(o.duration_ns)} against a {duration(o.median_ns)} median "
            f"({ratio(o.over_median, 0)} over {count(o.count)} instances), starting at {at(o.start_ns)} on the trace timeline{more_en}: "
            "the GPUs waiting on it stall for that long.",
            "zh": f"GPU {o.gpu} 上的一次 {o.collective} 耗时 {duration(o.duration_ns)}，而中位数仅 {duration(o.median_ns)}"
            f"（{count(o.count)} 次中的 {ratio(o.over_median, 0)}），开始于时间线上 {at(o.start_ns)}{more_zh}：等待它的卡会停顿同样长的时间。",
        },
        recommendation={
            "en": "Open the trace at that time: a late peer, a first-call setup (communicator init, buffer registration) or a contended link; "
            "warm the communicator up before timing, and check the peer GPU's timeline just before.",
            "zh": "在该时刻打开追踪：可能是对端迟到、首次调用的初始化（通信器创建、缓冲区注册）或链路争用；计时前先预热通信器，并查看对端卡在此之前的时间线。",
        },
        evidence=(
            _ev(
                "nccl_longest",
                f"longest {o.collective}, GPU {o.gpu}",
                o.duration_ns,
                duration(o.duration_ns),
                "docs/metrics/nccl.md",
            ),
            _ev(
                "nccl_median",
                f"median {o.collective}, GPU {o.gpu}",
                o.median_ns,
                duration(o.median_ns),
                "docs/metrics/nccl.md",
            ),
            _ev(
                "nccl_over_median",
                "longest / median",
                o.over_median,
                ratio(o.over_median, 0),
                "docs/metrics/nccl.md",
            ),
            _ev(
                "nccl_start",
                "start (trace timeline)",
                o.start_ns,
                at(o.start_ns),
                "docs/metrics/nccl.md",
            ),
        ),
    )
