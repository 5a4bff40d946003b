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
from nsysan.diagnose.wording import nothing, say, say_n
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
    more = len(hit) - 1
    claim = say(
        "request-burst.claim",
        start=at(b.start_ns),
        end=at(b.end_ns),
        load=count(b.load),
        over=(
            say("request-burst.over-median", times=f"{b.over_median:.1f}")
            if b.over_median
            else say("request-burst.no-median")
        ),
        share=percent(b.top_share),
        gpu=where,
        before=(
            say("request-burst.before", busy=percent(b.top_busy_before))
            if b.top_busy_before is not None
            else nothing()
        ),
        more=say_n(more, "request-burst.more", more=more) if more else nothing(),
    )
    return Finding(
        rule_id="request-burst",
        severity="warning",
        seed_section="4.3",
        cause_category="request bursts",
        impact_share=len(hit) / LOAD_WINDOWS,  # the share of the capture in burst windows
        title=say("request-burst.title"),
        claim=claim,
        recommendation=say("request-burst.recommendation"),
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
    longest = max(hit, key=lambda s: (s.longest_end_ns or 0) - (s.longest_start_ns or 0))
    claim = say_n(
        len(hit),
        "gpu-starvation.claim",
        where=gpu_list(s.gpu for s in hit),
        share=span(s.starved_share for s in hit),
        start=at(longest.longest_start_ns),
        end=at(longest.longest_end_ns),
        gpu=longest.gpu,
    )
    return Finding(
        rule_id="gpu-starvation",
        # The symptom; the cause is a routing finding (request-burst, dp-long-tail) or host-side.
        severity="info",
        seed_section="4.3",
        cause_category="starvation",
        impact_share=max(s.starved_share for s in hit),
        title=say("gpu-starvation.title"),
        claim=claim,
        recommendation=say("gpu-starvation.recommendation"),
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
    worst = max(hit, key=lambda t: t.ratio)
    word = say("long-tail-latency.request" if what == "request" else "long-tail-latency.step")
    low, high = (f"{v:.1f}" for v in (min(t.ratio for t in hit), max(t.ratio for t in hit)))
    claim = say(
        "long-tail-latency.claim",
        gpus=gpu_list(t.gpu for t in hit),
        what=word,
        times=(
            say("long-tail-latency.times", low=low)
            if low == high
            else say("long-tail-latency.times-range", low=low, high=high)
        ),
        gpu=worst.gpu,
        p50=duration(worst.p50_ns),
        p99=duration(worst.p99_ns),
        max=duration(worst.max_ns),
        start=at(worst.slowest_start_ns),
    )
    return Finding(
        rule_id="long-tail-latency",
        severity="info",
        seed_section="4.3",
        cause_category="dynamic requests (long tail)",
        impact_share=0.0,
        title=say("long-tail-latency.title", what=word),
        claim=claim,
        recommendation=say("long-tail-latency.recommendation"),
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
