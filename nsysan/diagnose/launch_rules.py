"""Rules on launch overhead and launch configuration (docs/findings.md).

* ``launch-bound``: a GPU whose kernels are mostly under 10 µs and which spends a
  large share of its window in launch-scale gaps (< 10 µs) between them
  (:mod:`nsysan.analyze.launch`). It names the launch configuration of the top
  kernel when that is a single block or sub-warp blocks.
* ``launch-config``: the top kernels of a GPU launched with one thread per block,
  fewer than a warp per block, or a single block, holding a notable share of its
  kernel time.
"""

from __future__ import annotations

from nsysan.diagnose.facts import Facts
from nsysan.diagnose.findings import EvidenceItem, Finding
from nsysan.diagnose.gpu_rules import gpu_list, sm_active, span
from nsysan.diagnose.resource_facts import ConfigFact, LaunchFacts
from nsysan.diagnose.wording import Text, join, nothing, say, say_n
from nsysan.report.fmt import count, duration, percent, rate

CONFIG_TIME_SHARE = 0.10  # flagged configurations holding this share of a GPU's kernel time
CONFIG_WARNING_SHARE = 0.50  # ... a warning from this share on (info below)
SOURCE = "docs/metrics/launch.md"


def _ev(metric: str, label: str, value: float | int | None, display: str) -> EvidenceItem:
    return EvidenceItem(metric=metric, label=label, value=value, display=display, source=SOURCE)


def dims(d: tuple[int, int, int]) -> str:
    """(1024, 1, 1) → "1024×1×1"."""
    return "×".join(str(v) for v in d)


def _rate(per_s: float | None) -> str:
    return rate(per_s)


def _why(c: ConfigFact, sms: int | None) -> Text:
    """What is wrong with one launch shape, in words."""
    if c.one_thread_blocks:
        return say("launch-config.one-thread")
    if c.sub_warp_blocks:
        return say("launch-config.sub-warp", threads=c.block[0] * c.block[1] * c.block[2])
    return say(
        "launch-config.single-block",
        of=say("launch-config.of-sms", sms=sms) if sms else nothing(),
    )


def launch_bound(f: Facts) -> Finding | None:
    """Tiny kernels with µs gaps between them: the launch path sets the pace."""
    hit: list[LaunchFacts] = [g for g in f.resources.launch if g.launch_bound]
    if not hit:
        return None
    ids = {g.gpu for g in hit}
    shapes = [
        c
        for c in f.resources.configs
        if c.gpu in ids
        and c.time_share >= CONFIG_TIME_SHARE
        and (c.single_block or c.sub_warp_blocks)
    ]
    shape = nothing()
    if shapes:
        top = max(shapes, key=lambda c: c.time_share)
        shape = say(
            "launch-bound.shape",
            kernel=top.kernel,
            grid=dims(top.grid),
            block=dims(top.block),
            why=_why(top, (f.resources.sm_count or {}).get(top.gpu)),
        )
    claim = say(
        "launch-bound.claim",
        gpus=say_n(len(hit), "gpus.are", where=gpu_list(g.gpu for g in hit)),
        small=span(g.small_kernel_share or 0.0 for g in hit),
        kernels=count(sum(g.kernels for g in hit)),
        median=span((g.kernel_p50_ns or 0 for g in hit), duration),
        rate=span((g.launch_rate or 0.0 for g in hit), _rate),
        gaps=span(g.short_gap_share or 0.0 for g in hit),
        shape=shape,
        sm=sm_active(g for g in f.per_gpu if g.gpu in ids),
    )
    evidence: list[EvidenceItem] = []
    for g in hit[:4]:
        lab = f"GPU {g.gpu}"
        evidence += [
            _ev("kernels", f"kernels, {lab}", g.kernels, count(g.kernels)),
            _ev("small_kernel_share", f"kernels under 10 µs, {lab}", g.small_kernel_share, percent(g.small_kernel_share)),
            _ev("kernel_p50", f"median kernel, {lab}", g.kernel_p50_ns, duration(g.kernel_p50_ns)),
            _ev("launch_rate", f"launches per second, {lab}", g.launch_rate, _rate(g.launch_rate)),
            _ev("short_gap_share", f"window in gaps under 10 µs, {lab}", g.short_gap_share, percent(g.short_gap_share)),
        ]  # fmt: skip
    return Finding(
        rule_id="launch-bound",
        severity="warning",
        seed_section="4.4",
        cause_category="launch overhead of small kernels",
        impact_share=max(g.short_gap_share or 0.0 for g in hit),
        title=say("launch-bound.title"),
        claim=claim,
        recommendation=say("launch-bound.recommendation"),
        evidence=tuple(evidence),
    )


def launch_config(f: Facts) -> Finding | None:
    """Top kernels launched with one-thread blocks, sub-warp blocks or a single block."""
    hit = [c for c in f.resources.configs if c.time_share >= CONFIG_TIME_SHARE]
    if not hit:
        return None
    by_gpu: dict[int, float] = {}
    for c in hit:
        by_gpu[c.gpu] = by_gpu.get(c.gpu, 0.0) + c.time_share
    # Kernels grouped by shape, most time first (the same kernels repeat across ranks).
    sms = f.resources.sm_count or {}
    groups: dict[tuple[tuple[int, int, int], tuple[int, int, int]], list[ConfigFact]] = {}
    for c in sorted(hit, key=lambda c: -c.time_share):
        groups.setdefault((c.grid, c.block), []).append(c)
    shapes = []
    for (grid, block), members in list(groups.items())[:3]:
        names = list(dict.fromkeys(c.kernel for c in members))
        shapes.append(
            say(
                "launch-config.shape",
                kernels=", ".join(names[:4]) + (f" (+{len(names) - 4})" if len(names) > 4 else ""),
                grid=dims(grid),
                block=dims(block),
                why=_why(members[0], sms.get(members[0].gpu)),
            )
        )
    more = len(groups) - len(shapes)
    claim = say(
        "launch-config.claim",
        gpus=gpu_list(by_gpu),
        kind=say(
            "launch-config.kind.one-thread"
            if all(c.one_thread_blocks for c in hit)
            else "launch-config.kind.narrow"
        ),
        share=span(by_gpu.values()),
        shapes=join("sep.clause", shapes),
        more=say_n(more, "launch-config.more", more=more) if more > 0 else nothing(),
    )
    named = sorted(hit, key=lambda c: -c.time_share)[:4]
    narrow = [c for c in hit if c.one_thread_blocks or c.sub_warp_blocks]
    evidence = [
        _ev(
            "config_time_share",
            f"kernel time, {c.kernel} (grid {dims(c.grid)}, block {dims(c.block)}), GPU {c.gpu}",
            c.time_share,
            percent(c.time_share),
        )
        for c in named
    ]
    return Finding(
        rule_id="launch-config",
        # Narrow blocks waste lanes on every SM: a warning when they hold most of the time.
        severity="warning" if narrow and max(by_gpu.values()) >= CONFIG_WARNING_SHARE else "info",
        seed_section="4.4",
        cause_category="launch configuration",
        impact_share=max(by_gpu.values()),
        title=say("launch-config.title"),
        claim=claim,
        recommendation=say("launch-config.recommendation"),
        evidence=tuple(evidence),
    )


LAUNCH_RULES = (launch_bound, launch_config)
LAUNCH_RULE_IDS = ("launch-bound", "launch-config")
