"""The four myths of seed section 4.6, each with a verdict on this trace.

Each myth is a belief a team might hold. The verdict says whether *this trace*
supports it: ``holds`` (the evidence agrees with the belief here),
``does_not_hold`` (the evidence contradicts it here) or ``cannot_tell`` (the data
needed is missing, and ``why`` names it).
"""

from __future__ import annotations

from nsysan.diagnose.facts import Facts
from nsysan.diagnose.findings import Finding, MythCheck
from nsysan.diagnose.wording import Text, join, mid_sentence, nothing, say
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


def _check(myth_id: str, item: int, verdict: str, why: Text) -> MythCheck:
    """Myth ``myth_id``'s verdict; its title is the entry ``myth.<myth_id>.title``."""
    return MythCheck(
        myth_id=myth_id,
        seed_item=item,
        title=say(f"myth.{myth_id}.title"),
        verdict=verdict,  # type: ignore[arg-type]
        why=why,
    )


def _titles(findings: tuple[Finding, ...], ids: set[str]) -> Text:
    """The titles of the findings in ``ids``, as one list."""
    return join("sep.clause", (f.title for f in findings if f.rule_id in ids))


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
    myth = "only-gpu-utilization"
    if not f.gap_share:
        return _check(myth, 1, "cannot_tell", say("myth.no-kernels"))
    hidden = _ids(findings) & HIDDEN_BY_UTILIZATION
    if hidden:
        why = say("myth.only-gpu-utilization.hidden", findings=_titles(findings, hidden))
        return _check(myth, 1, "does_not_hold", why)
    gaps = f"{percent(min(f.gap_share))}–{percent(max(f.gap_share))}"
    if not f.metrics_available:
        return _check(
            myth, 1, "cannot_tell", say("myth.only-gpu-utilization.no-metrics", gaps=gaps)
        )
    return _check(myth, 1, "holds", say("myth.only-gpu-utilization.holds", gaps=gaps))


def dp_is_balanced(f: Facts, findings: tuple[Finding, ...]) -> MythCheck:
    myth = "dp-balanced-by-nature"
    if not f.gap_share:
        return _check(myth, 2, "cannot_tell", say("myth.no-kernels"))
    if f.gpu_count < 2 or f.busy_efficiency is None or len(f.gap_share) < 2:
        return _check(myth, 2, "cannot_tell", say("myth.dp-balanced-by-nature.one-gpu"))
    drift = "dp-long-tail" in _ids(findings)
    efficiency = percent(f.busy_efficiency)
    if f.busy_efficiency < BALANCED_EFFICIENCY or drift:
        low = min(range(len(f.gap_share)), key=lambda i: f.gap_share[i])
        high = max(range(len(f.gap_share)), key=lambda i: f.gap_share[i])
        why = say(
            "myth.dp-balanced-by-nature.uneven",
            idler=f.gpu_labels[high],
            idle=percent(f.gap_share[high]),
            busier=f.gpu_labels[low],
            busy=percent(f.gap_share[low]),
            efficiency=efficiency,
            drift=say("myth.dp-balanced-by-nature.drift") if drift else nothing(),
        )
        return _check(myth, 2, "does_not_hold", why)
    if f.timeline_spread is not None and f.timeline_spread >= DP_MOMENT_SPREAD:
        why = say(
            "myth.dp-balanced-by-nature.moment",
            efficiency=efficiency,
            spread=percent(f.timeline_spread),
        )
        return _check(myth, 2, "does_not_hold", why)
    return _check(myth, 2, "holds", say("myth.dp-balanced-by-nature.holds", efficiency=efficiency))


def topology_does_not_matter(f: Facts, findings: tuple[Finding, ...]) -> MythCheck:
    myth = "topology-irrelevant"
    if not f.gap_share:
        return _check(myth, 3, "cannot_tell", say("myth.no-kernels"))
    if f.gpu_count < 2 or len(f.gap_share) < 2:
        return _check(myth, 3, "cannot_tell", say("myth.topology-irrelevant.one-gpu"))
    if not f.nccl_share:
        return _check(myth, 3, "cannot_tell", say("myth.topology-irrelevant.no-nccl"))
    share = percent(f.nccl_share)
    hit = _ids(findings) & {"comm-bound", "collective-skew", "nccl-outlier"}
    if hit:
        why = say(
            "myth.topology-irrelevant.findings",
            share=share,
            findings=mid_sentence(_titles(findings, hit)),
        )
        return _check(myth, 3, "does_not_hold", why)
    if f.nccl_share < NCCL_NEGLIGIBLE_SHARE:
        return _check(myth, 3, "holds", say("myth.topology-irrelevant.negligible", share=share))
    return _check(myth, 3, "cannot_tell", say("myth.topology-irrelevant.unclear", share=share))


def static_split_is_final(f: Facts, findings: tuple[Finding, ...]) -> MythCheck:
    myth = "static-split-final"
    if not f.gap_share:
        return _check(myth, 4, "cannot_tell", say("myth.no-kernels"))
    if f.gpu_count < 2 or f.compute_max_over_mean is None:
        return _check(myth, 4, "cannot_tell", say("myth.static-split-final.one-gpu"))
    hit = _ids(findings) & {
        "static-split-skew",
        "moe-hot-expert",
        "dp-long-tail",
        "pipeline-bubble",
    }
    if hit:
        why = say("myth.static-split-final.findings", findings=_titles(findings, hit))
        return _check(myth, 4, "does_not_hold", why)
    why = say("myth.static-split-final.holds", ratio=ratio(f.compute_max_over_mean))
    return _check(myth, 4, "holds", why)


MYTHS = (utilization_is_enough, dp_is_balanced, topology_does_not_matter, static_split_is_final)


def check_myths(f: Facts, findings: tuple[Finding, ...]) -> tuple[MythCheck, ...]:
    return tuple(m(f, findings) for m in MYTHS)
