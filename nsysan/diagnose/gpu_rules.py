"""Rules that look at each GPU, not at the mean: a finding names the GPU(s) and numbers.

* ``dominant-gap``: one gap holds a large share of a GPU's window (often the start-up
  before steady state); said first, with its place on the trace timeline.
* ``gpu-side-gaps``: a GPU idle with the next kernel already queued: waiting on memory
  copies or on device-side dependencies.
* ``small-kernels``: tiny kernels whose launch gaps are a large share of the window.
* ``sm-idle-while-busy``: the dashboard's GR Active is high while SM Active is near 0.

The other rule modules name GPUs, ranges and instants with this module's ``gpu_list``,
``span`` and ``at``, and the SM counters with ``sm_active``; ``host_rules`` examines the
same idle GPUs (``idle_gpus``, at least ``IDLE_GPU_SHARE`` of their window) and words
them the same way (``window_phrase``, ``against_others``).

Thresholds are named constants, documented in docs/findings.md; what the findings say
is in :mod:`nsysan.diagnose.wording`.
"""

from __future__ import annotations

from collections.abc import Iterable

from nsysan.diagnose.facts import Facts
from nsysan.diagnose.findings import EvidenceItem, Finding, number_evidence
from nsysan.diagnose.gpu_facts import GpuFacts
from nsysan.diagnose.wording import Text, nothing, say, say_n
from nsysan.report.fmt import count, duration, percent

DOMINANT_GAP_SHARE = 0.25  # a single gap this share of a GPU's window is named first
DOMINANT_CRITICAL_SHARE = 0.50  # ... and is critical from this share on
IDLE_GPU_SHARE = 0.20  # a GPU idle this share of its steady-state window is examined
SMALL_KERNEL_NS = 10_000  # median kernel below this is launch-scale work
SMALL_GAP_TIME_SHARE = 0.50  # share of gap time in launch-scale gaps (< 100 µs)
SM_IDLE_GR_ACTIVE = 0.50  # GR Active at least this ...
SM_IDLE_SM_ACTIVE = 0.10  # ... while SM Active is below this
GPU_WAIT_SHARE = 0.50  # gap time with the next kernel already queued (gpu-side-gaps)
COPY_GAP_SHARE = 0.50  # ... of which a memory copy runs during this share: waiting on copies
STALL_CATEGORY = "one long stall"


def at(ns: int | None) -> str:
    """A point on the trace timeline, precise enough to pass to ``--start``/``--end``."""
    return duration(ns, 4)


def gap_share_evidence(g: GpuFacts) -> EvidenceItem:
    """``g``'s gap share as evidence."""
    return number_evidence(
        "gap_share",
        f"gap share, {g.label}",
        g.gap_share,
        percent(g.gap_share),
        "docs/metrics/gaps.md",
    )


def gpu_list(gpus: Iterable[int], lang: str = "en") -> str:
    """``[0,1,2,3]`` → "GPU 0–3"; ``[1]`` → "GPU 1"; ``[0, 2]`` → "GPU 0, 2"."""
    ids = sorted(set(gpus))
    if not ids:
        return ""
    if len(ids) > 2 and ids == list(range(ids[0], ids[-1] + 1)):
        return f"GPU {ids[0]}–{ids[-1]}"
    return "GPU " + ", ".join(str(g) for g in ids)


def span(values: Iterable[float], fmt_one=percent) -> str:  # type: ignore[no-untyped-def]
    """ "35.1%–37.1%" (or one value when they format the same)."""
    vals = list(values)
    low, high = fmt_one(min(vals)), fmt_one(max(vals))
    return low if low == high else f"{low}–{high}"


def against_others(f: Facts, hit: list[GpuFacts]) -> Text:
    """ ", against 5.3% on GPU 0" when the other GPUs idle much less."""
    ids = {g.gpu for g in hit}
    rest = [g for g in f.per_gpu if g.gpu not in ids]
    if not rest or max(g.gap_share for g in rest) >= IDLE_GPU_SHARE:
        return nothing()
    where = gpu_list(g.gpu for g in rest)
    return say("against-others", shares=span(g.gap_share for g in rest), where=where)


def window_phrase(f: Facts, n: int) -> Text:
    """ " of its steady-state window" (or " of their window") for ``n`` GPUs."""
    return say_n(n, "window.steady" if f.warmup_detected else "window.whole")


def dominant_gap(f: Facts) -> Finding | None:
    """One gap holds a large share of a GPU's window: name it first, and steady state."""
    hit = [g for g in f.per_gpu if g.longest_share >= DOMINANT_GAP_SHARE]
    if not hit:
        return None
    warm = all(g.warmup for g in hit)
    start = min(g.longest_start_ns or 0 for g in hit)
    end = max(g.longest_end_ns or 0 for g in hit)
    steady_start = at(max(g.steady_start_ns for g in hit))
    steady = (
        say("dominant-gap.steady", start=steady_start, share=span(g.gap_share for g in hit))
        if warm
        else nothing()
    )
    claim = say(
        "dominant-gap.claim",
        idle=say_n(len(hit), "dominant-gap.idle", where=gpu_list(g.gpu for g in hit)),
        length=span((g.longest_ns for g in hit), duration),
        share=span(g.longest_share for g in hit),
        start=at(start),
        end=at(end),
        what=say("dominant-gap.what.startup" if warm else "dominant-gap.what.stall"),
        steady=steady,
    )
    evidence = []
    for g in extremes(hit, lambda g: g.longest_share):
        evidence += [
            number_evidence(
                "longest_gap",
                f"longest gap, {g.label}",
                g.longest_ns,
                duration(g.longest_ns),
                "docs/metrics/gaps.md",
            ),
            number_evidence(
                "longest_gap_share",
                f"longest gap share of the window, {g.label}",
                g.longest_share,
                percent(g.longest_share),
                "docs/metrics/gaps.md",
            ),
        ]
        if warm:
            evidence.append(
                number_evidence(
                    "steady_gap_share",
                    f"steady-state gap share, {g.label}",
                    g.gap_share,
                    percent(g.gap_share),
                    "docs/metrics/gaps.md",
                )
            )
    evidence += [
        number_evidence(
            "gap_start", "gap start (trace timeline)", start, at(start), "docs/metrics/gaps.md"
        ),
        number_evidence(
            "gap_end", "gap end (trace timeline)", end, at(end), "docs/metrics/gaps.md"
        ),
    ]
    top = max(g.longest_share for g in hit)
    return Finding(
        rule_id="dominant-gap",
        severity="critical" if top >= DOMINANT_CRITICAL_SHARE else "warning",
        seed_section="",
        cause_category="start-up before steady state" if warm else STALL_CATEGORY,
        impact_share=top,
        title=say("dominant-gap.title.startup" if warm else "dominant-gap.title.stall"),
        claim=claim,
        recommendation=(
            say("dominant-gap.recommendation.startup", skip=steady_start.replace(" ", ""))
            if warm
            else say("dominant-gap.recommendation.stall")
        ),
        evidence=tuple(evidence),
    )


# With more GPUs than this, evidence lists the GPUs at both ends of the range only
# (the sections' tables list every GPU).
EVIDENCE_GPUS = 4


def extremes(hit: list[GpuFacts], key) -> list[GpuFacts]:  # type: ignore[no-untyped-def]
    """``hit``, or only its lowest and highest by ``key`` when it is long."""
    if len(hit) <= EVIDENCE_GPUS:
        return hit
    low, high = min(hit, key=key), max(hit, key=key)
    return [g for g in hit if g is low or g is high]


def idle_gpus(f: Facts) -> list[GpuFacts]:
    """The GPUs idle at least ``IDLE_GPU_SHARE`` of their (steady-state) window."""
    return [g for g in f.per_gpu if g.gap_share >= IDLE_GPU_SHARE]


def small_kernels(f: Facts) -> Finding | None:
    """Tiny kernels with launch-scale gaps between them that add up to much of the window."""
    hit = [
        g
        for g in idle_gpus(f)
        if g.median_kernel_ns is not None
        and g.median_kernel_ns < SMALL_KERNEL_NS
        and (g.small_gap_share or 0.0) >= SMALL_GAP_TIME_SHARE
    ]
    if not hit:
        return None
    queued = [g.causes.get("gpu_wait", 0.0) for g in hit if g.causes]
    claim = say(
        "small-kernels.claim",
        run=say_n(
            len(hit),
            "small-kernels.run",
            where=gpu_list(g.gpu for g in hit),
            kernels=count(sum(g.kernel_count for g in hit)),
        ),
        median=span((g.median_kernel_ns or 0 for g in hit), duration),
        gaps=span(g.gap_share for g in hit),
        median_gap=span((g.median_gap_ns or 0 for g in hit), duration),
        queued=say("small-kernels.queued", queued=span(queued)) if queued else nothing(),
        sm=sm_active(hit),
    )
    evidence = []
    for g in extremes(hit, lambda g: g.gap_share):
        evidence += [
            number_evidence(
                "kernel_count",
                f"kernels, {g.label}",
                g.kernel_count,
                count(g.kernel_count),
                "docs/metrics/gaps.md",
            ),
            number_evidence(
                "median_kernel",
                f"median kernel duration, {g.label}",
                g.median_kernel_ns,
                duration(g.median_kernel_ns),
                "docs/metrics/gaps.md",
            ),
            number_evidence(
                "median_gap",
                f"median gap, {g.label}",
                g.median_gap_ns,
                duration(g.median_gap_ns),
                "docs/metrics/gaps.md",
            ),
            gap_share_evidence(g),
        ]
    return Finding(
        rule_id="small-kernels",
        severity="warning",
        seed_section="4.4",
        cause_category="launch overhead of small kernels",
        impact_share=max(g.gap_share for g in hit),
        title=say("small-kernels.title"),
        claim=claim,
        recommendation=say("small-kernels.recommendation"),
        evidence=tuple(evidence),
    )


def sm_active(gpus: Iterable[GpuFacts]) -> Text:
    """ " SM Active is 3.0% while GR Active shows 70.0%." for the GPUs with both counters."""
    sm = [g for g in gpus if g.sm_active_share is not None and g.gr_active_share is not None]
    if not sm:
        return nothing()
    return say(
        "sm-active",
        sm=span(g.sm_active_share or 0.0 for g in sm),
        gr=span(g.gr_active_share or 0.0 for g in sm),
    )


def _gpu_side(g: GpuFacts) -> float:
    """Gap time with the next kernel queued: waiting, or behind a transfer on the GPU."""
    return g.causes.get("gpu_wait", 0.0) + g.causes.get("gpu_transfer", 0.0)


def gpu_side_gaps(f: Facts) -> Finding | None:
    """GPUs idle with the next kernel already queued: device-side waits (copies, dependencies)."""
    hit = [
        g
        for g in idle_gpus(f)
        if _gpu_side(g) >= GPU_WAIT_SHARE
        and not (
            g.median_kernel_ns is not None
            and g.median_kernel_ns < SMALL_KERNEL_NS
            and (g.small_gap_share or 0.0) >= SMALL_GAP_TIME_SHARE
        )
    ]
    if not hit:
        return None
    copies = [g.copy_gap_share or 0.0 for g in hit]
    by_copies = min(copies) >= COPY_GAP_SHARE
    claim = say(
        "gpu-side-gaps.claim",
        gpus=say_n(len(hit), "gpus.are", where=gpu_list(g.gpu for g in hit)),
        gaps=span(g.gap_share for g in hit),
        window=window_phrase(f, len(hit)),
        others=against_others(f, hit),
        queued=span(_gpu_side(g) for g in hit),
        why=say(
            "gpu-side-gaps.why.copies" if by_copies else "gpu-side-gaps.why.dependencies",
            copies=span(copies),
        ),
    )
    evidence = []
    for g in extremes(hit, lambda g: g.gap_share):
        evidence += [
            gap_share_evidence(g),
            number_evidence(
                "gpu_wait_share",
                f"GPU-side wait or transfer, share of gap time, {g.label}",
                _gpu_side(g),
                percent(_gpu_side(g)),
                "docs/metrics/host.md",
            ),
            number_evidence(
                "copy_gap_share",
                f"gap time with a memory copy running, {g.label}",
                g.copy_gap_share,
                percent(g.copy_gap_share),
                "docs/metrics/gaps.md",
            ),
        ]
    return Finding(
        rule_id="gpu-side-gaps",
        severity="warning",
        seed_section="4.4",
        cause_category="waits for data transfers" if by_copies else "device-side dependencies",
        impact_share=max(g.gap_share for g in hit),
        title=say("gpu-side-gaps.title"),
        claim=claim,
        recommendation=say(
            "gpu-side-gaps.recommendation.copies"
            if by_copies
            else "gpu-side-gaps.recommendation.dependencies"
        ),
        evidence=tuple(evidence),
    )


def sm_idle_while_busy(f: Facts) -> Finding | None:
    """GR Active (what a dashboard shows) high while the SMs are nearly idle."""
    hit = [
        g
        for g in f.per_gpu
        if g.gr_active_share is not None
        and g.sm_active_share is not None
        and g.gr_active_share >= SM_IDLE_GR_ACTIVE
        and g.sm_active_share < SM_IDLE_SM_ACTIVE
    ]
    if not hit:
        return None
    evidence = []
    for g in extremes(hit, lambda g: g.sm_active_share or 0.0):
        evidence += [
            number_evidence(
                "gr_active",
                f"GR Active, {g.label}",
                g.gr_active_share,
                percent(g.gr_active_share),
                "docs/metrics/dashboard.md",
            ),
            number_evidence(
                "sm_active",
                f"SM Active, {g.label}",
                g.sm_active_share,
                percent(g.sm_active_share),
                "docs/metrics/dashboard.md",
            ),
        ]
    return Finding(
        rule_id="sm-idle-while-busy",
        severity="warning",
        seed_section="4.4",
        cause_category="utilization overstates work",
        impact_share=max((g.gr_active_share or 0) - (g.sm_active_share or 0) for g in hit),
        title=say("sm-idle-while-busy.title"),
        claim=say(
            "sm-idle-while-busy.claim",
            where=gpu_list(g.gpu for g in hit),
            gr=span(g.gr_active_share or 0.0 for g in hit),
            sm=span(g.sm_active_share or 0.0 for g in hit),
        ),
        recommendation=say("sm-idle-while-busy.recommendation"),
        evidence=tuple(evidence),
    )
