"""Rules on how work is split between GPUs (seed 4.1, 4.2).

* ``static-split-skew`` / ``moe-hot-expert``: one GPU computes more than the mean;
  when expert kernels explain most of its extra time over the least-loaded GPU, a hot
  MoE expert, otherwise an uneven static split.
* ``pipeline-bubble``: idle time at the start and end of each iteration that grows
  stage by stage, the fill/drain staircase of a pipeline schedule.
* ``dp-long-tail``: the load drifts between GPUs over the capture (long requests
  hogging one GPU while others run dry).

They read the imbalance measures of docs/metrics/balance.md. Thresholds are named
constants, documented in docs/findings.md.
"""

from __future__ import annotations

import re
from statistics import mean

from nsysan.diagnose.facts import Facts
from nsysan.diagnose.findings import Finding, number_evidence, share_evidence
from nsysan.diagnose.gpu_rules import span
from nsysan.diagnose.wording import join, say
from nsysan.report.fmt import percent, ratio

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


def _expert_diff_share(f: Facts) -> float:
    return sum(share for name, share in f.top_diff_kernels if EXPERT_KERNEL_PATTERN.search(name))


def compute_skew(f: Facts) -> Finding | None:
    """One GPU computes more than the others: a static split or a hot MoE expert."""
    if f.gpu_count < 2 or f.compute_max_over_mean is None:
        return None
    if f.compute_max_over_mean < COMPUTE_SKEW_MAX_OVER_MEAN:
        return None
    expert = _expert_diff_share(f) >= EXPERT_DIFF_SHARE
    rule = "moe-hot-expert" if expert else "static-split-skew"
    kernels = join(
        "sep.list",
        (
            say(
                "compute-skew.kernel",
                name=say("compute-skew.other-kernels") if n == "(other kernels)" else n,
                share=percent(s),
            )
            for n, s in f.top_diff_kernels[:3]
        ),
    )
    skew = f.compute_max_over_mean
    claim = say(
        "moe-hot-expert.claim" if expert else "static-split-skew.claim",
        most=f.most_loaded_gpu,
        least=f.least_loaded_gpu,
        skew=ratio(skew),
        efficiency=percent(f.compute_efficiency),  # the static split's claim gives it
        kernels=kernels,
    )
    return Finding(
        rule_id=rule,
        severity="warning",
        seed_section="4.1",
        cause_category="static split" if not expert else "hot expert",
        impact_share=1.0 - (f.compute_efficiency or 1.0),
        title=say("moe-hot-expert.title" if expert else "static-split-skew.title"),
        claim=claim,
        recommendation=say(
            "moe-hot-expert.recommendation" if expert else "static-split-skew.recommendation"
        ),
        evidence=(
            number_evidence(
                "compute_max_over_mean",
                "compute time, max / mean",
                skew,
                ratio(skew),
                "docs/metrics/balance.md",
            ),
            share_evidence(
                "compute_efficiency",
                "load-balance efficiency (mean / max)",
                f.compute_efficiency,
                "docs/metrics/balance.md",
            ),
            *(
                share_evidence(
                    "kernel_diff", f"share of the difference: {n}", s, "docs/metrics/balance.md"
                )
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
        title=say("pipeline-bubble.title"),
        claim=say(
            "pipeline-bubble.claim",
            bubble=percent(f.bubble_share),
            fill=span(f.fill_share_per_gpu),
            drain=span(f.drain_share_per_gpu),
        ),
        recommendation=say("pipeline-bubble.recommendation"),
        evidence=(
            share_evidence(
                "bubble_share",
                "bubble share of iteration time",
                f.bubble_share,
                "docs/metrics/balance.md",
            ),
            *(
                share_evidence("fill_share", f"fill share, {lab}", v, "docs/metrics/balance.md")
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
        title=say("dp-long-tail.title"),
        claim=say(
            "dp-long-tail.claim",
            trend=percent(trend_spread),
            worst=percent(f.drift_spread_max),
            best=percent(f.drift_spread_min),
        ),
        recommendation=say("dp-long-tail.recommendation"),
        evidence=(
            share_evidence(
                "drift_spread_max",
                "busy-share spread, worst window",
                f.drift_spread_max,
                "docs/metrics/balance.md",
            ),
            share_evidence(
                "drift_spread_min",
                "busy-share spread, best window",
                f.drift_spread_min,
                "docs/metrics/balance.md",
            ),
            *(
                number_evidence(
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
