"""Rules on load over time: request bursts, starved GPUs, long-tail latency (seed 4.3).

* ``request-burst``: a window where requests arrive at ≥ 3× the median rate and one
  GPU receives most of them (docs/metrics/load.md#bursts).
* ``gpu-starvation``: GPUs idle while others work, their feeding threads waiting on a
  queue or condition (docs/metrics/load.md#starvation).
* ``long-tail-latency``: request (else step) latency p99 far above its median
  (docs/metrics/steps.md).
"""

from __future__ import annotations

from nsysan.analyze.load import LOAD_WINDOWS
from nsysan.diagnose.facts import Facts
from nsysan.diagnose.findings import EvidenceItem, Finding
from nsysan.diagnose.gpu_rules import at, gpu_list, span
from nsysan.report.fmt import count, duration, percent

BURST_TOP_SHARE = 0.6  # one GPU takes this share of a burst's requests
STARVED_SHARE = 0.10  # window share a GPU spends starved
LONG_TAIL_RATIO = 4.0  # p99 / p50 of request (or step) latency
LONG_TAIL_MIN_COUNT = 20  # requests (or steps) on the GPU
SOURCE = "docs/metrics/load.md"


def _ev(
    metric: str, label: str, value: float | int | None, display: str, source: str = SOURCE
) -> EvidenceItem:
    return EvidenceItem(metric=metric, label=label, value=value, display=display, source=source)


def request_burst(f: Facts) -> Finding | None:
    hit = [b for b in f.resources.bursts if b.top_share >= BURST_TOP_SHARE]
    if not hit or f.gpu_count < 2:
        return None
    b = max(hit, key=lambda b: b.load)
    where = f"GPU {b.top_gpu}"
    over = (
        f"{b.over_median:.1f}× the median window" if b.over_median else "against a median of none"
    )
    over_zh = (
        f"为中位数时间窗的 {b.over_median:.1f} 倍" if b.over_median else "而中位数时间窗没有请求"
    )
    before_en = (
        f" (it was {percent(b.top_busy_before)} busy just before)"
        if b.top_busy_before is not None
        else ""
    )
    before_zh = (
        f"（此前它的忙碌占比为 {percent(b.top_busy_before)}）"
        if b.top_busy_before is not None
        else ""
    )
    more = len(hit) - 1
    more_en = (
        f" {more} more burst window{'s follow' if more > 1 else ' follows'} the same pattern."
        if more
        else ""
    )
    more_zh = f"另有 {more} 个突发时间窗呈同样模式。" if more else ""
    return Finding(
        rule_id="request-burst",
        severity="warning",
        seed_section="4.3",
        cause_category="request bursts",
        impact_share=len(hit) / LOAD_WINDOWS,  # the share of the capture in burst windows
        title={"en": "A request burst lands on one GPU", "zh": "请求突发集中到一张卡"},
        claim={
            "en": f"From {at(b.start_ns)} to {at(b.end_ns)} on the trace timeline, {count(b.load)} requests arrived ({over}); "
            f"{percent(b.top_share)} of them went to {where}{before_en}.{more_en}",
            "zh": f"在时间线上 {at(b.start_ns)} 到 {at(b.end_ns)} 之间到达了 {count(b.load)} 个请求（{over_zh}）；"
            f"其中 {percent(b.top_share)} 被分到 {where}{before_zh}。{more_zh}",
        },
        recommendation={
            "en": "Spread bursts: admit by each GPU's queue depth and free KV cache rather than by emptiness at arrival, cap a GPU's "
            "batch growth per step, or smooth arrivals with a rate limiter.",
            "zh": "分散突发：按各卡的队列深度与空闲 KV cache 接纳请求，而不是按到达时谁最空；限制每步单卡批量的增长，或用限流平滑到达。",
        },
        evidence=(
            _ev("burst_load", "requests in the burst window", b.load, count(b.load)),
            _ev(
                "burst_over_median",
                "burst window / median window",
                b.over_median,
                f"{b.over_median:.1f}×" if b.over_median else "—",
            ),
            _ev(
                "burst_top_share", f"share of the burst, {where}", b.top_share, percent(b.top_share)
            ),
        ),
    )


def gpu_starvation(f: Facts) -> Finding | None:
    hit = [s for s in f.resources.starved if s.starved_share >= STARVED_SHARE]
    if not hit:
        return None
    where = gpu_list(s.gpu for s in hit)
    share = span(s.starved_share for s in hit)
    longest = max(hit, key=lambda s: (s.longest_end_ns or 0) - (s.longest_start_ns or 0))
    one = len(hit) == 1
    return Finding(
        rule_id="gpu-starvation",
        # The symptom; the cause is a routing finding (request-burst, dp-long-tail) or host-side.
        severity="info",
        seed_section="4.3",
        cause_category="starvation",
        impact_share=max(s.starved_share for s in hit),
        title={"en": "GPUs starve while others work", "zh": "部分 GPU 在其他卡工作时挨饿"},
        claim={
            "en": f"{where} {'is' if one else 'are'} idle {share} of {'its' if one else 'their'} window while other GPUs run kernels and "
            f"{'its' if one else 'their'} feeding thread{'' if one else 's'} wait{'s' if one else ''} on a queue or condition "
            f"(the longest from {at(longest.longest_start_ns)} to {at(longest.longest_end_ns)} on GPU {longest.gpu}): "
            "no work reaches them while the others are loaded.",
            "zh": f"{where} 在时间窗的 {share} 内空闲，而其他卡在运行内核，且其发射线程在等待队列或条件变量"
            f"（最长的一段在 GPU {longest.gpu} 上，从 {at(longest.longest_start_ns)} 到 {at(longest.longest_end_ns)}）：其他卡满载时没有工作到达这些卡。",
        },
        recommendation={
            "en": "Let idle GPUs take work: a shared queue or work stealing across replicas, routing by outstanding tokens instead of "
            "round-robin, and splitting long requests (chunked prefill) so one GPU does not hold the backlog.",
            "zh": "让空闲的卡能拿到工作：副本之间共享队列或工作窃取，按未完成的词元数而不是轮询路由，并拆分长请求（分块预填充），"
            "避免积压集中在一张卡上。",
        },
        evidence=tuple(
            _ev(
                "starved_share",
                f"window starved, GPU {s.gpu}",
                s.starved_share,
                percent(s.starved_share),
            )
            for s in hit[:4]
        ),
    )


def long_tail_latency(f: Facts) -> Finding | None:
    hit = [
        t
        for t in f.resources.tails
        if t.ratio >= LONG_TAIL_RATIO and t.count >= LONG_TAIL_MIN_COUNT
    ]
    if not hit:
        return None
    what = "request" if any(t.what == "request" for t in hit) else "step"
    hit = [t for t in hit if t.what == what]
    where = gpu_list(t.gpu for t in hit)
    worst = max(hit, key=lambda t: t.ratio)
    what_zh = "请求" if what == "request" else "步"
    return Finding(
        rule_id="long-tail-latency",
        severity="info",
        seed_section="4.3",
        cause_category="dynamic requests (long tail)",
        impact_share=0.0,
        title={"en": f"Long-tail {what} latency", "zh": f"{what_zh}延迟长尾"},
        claim={
            "en": f"On {where} the {what} latency p99 is {span((t.ratio for t in hit), lambda v: f'{v:.1f}×')} the median "
            f"(GPU {worst.gpu}: p50 {duration(worst.p50_ns)}, p99 {duration(worst.p99_ns)}, max {duration(worst.max_ns)} "
            f"starting at {at(worst.slowest_start_ns)}): a few long {what}s dominate the tail.",
            "zh": f"在 {where} 上，{what_zh}延迟的 p99 是中位数的 {span((t.ratio for t in hit), lambda v: f'{v:.1f}')} 倍"
            f"（GPU {worst.gpu}：p50 {duration(worst.p50_ns)}，p99 {duration(worst.p99_ns)}，最大 {duration(worst.max_ns)}，"
            f"起点 {at(worst.slowest_start_ns)}）：少数很长的{what_zh}决定了尾部。",
        },
        recommendation={
            "en": "Keep long generations from blocking short ones: cap generation length per batch, schedule by remaining tokens, "
            "or preempt and resume long requests.",
            "zh": "避免长生成阻塞短请求：限制每批的生成长度，按剩余词元数调度，或对长请求抢占后再恢复。",
        },
        evidence=tuple(
            _ev(
                f"{what}_tail_ratio",
                f"{what} latency p99 / p50, GPU {t.gpu}",
                t.ratio,
                f"{t.ratio:.1f}×",
                "docs/metrics/steps.md",
            )
            for t in hit[:4]
        ),
    )


LOAD_RULES = (request_burst, gpu_starvation, long_tail_latency)
LOAD_RULE_IDS = ("request-burst", "gpu-starvation", "long-tail-latency")
