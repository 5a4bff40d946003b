"""Rules on the host CPUs during GPU gaps: saturated cores or blocked feeding threads.

They read the per-host verdict of :mod:`nsysan.analyze.cpu` (docs/metrics/cpu.md) and
fire only where a GPU of that host idles at least ``IDLE_GPU_SHARE`` of its
(steady-state) window. Nsight Systems records scheduling only for the profiled
processes' threads, so every claim says "cores running the profiled processes", never
"idle cores".

* ``cpu-saturated``: the profiled processes alone fill the host's cores during gaps.
* ``cpu-blocked``: the feeding threads wait in locks, condition variables or
  synchronizing calls while few cores run profiled threads.
* ``feeding-thread-busy``: the feeding threads are on CPU through the gaps while few
  cores run profiled threads: one thread's own work is the launch path's bottleneck.
* ``feeding-thread-off-cpu``: the feeding threads are off CPU outside any traced call.
"""

from __future__ import annotations

from nsysan.diagnose.facts import Facts
from nsysan.diagnose.findings import EvidenceItem, Finding
from nsysan.diagnose.gpu_rules import IDLE_GPU_SHARE, gpu_list, span
from nsysan.diagnose.resource_facts import CpuHostFacts
from nsysan.diagnose.wording import say, say_n
from nsysan.report.fmt import percent

SOURCE = "docs/metrics/cpu.md"
CAPTURE = "nsys profile -t cuda,nvtx,osrt --cpuctxsw=process-tree"


def _ev(metric: str, label: str, value: float | int | None, display: str) -> EvidenceItem:
    return EvidenceItem(metric=metric, label=label, value=value, display=display, source=SOURCE)


def _idle_hosts(f: Facts, verdict: str) -> list[tuple[CpuHostFacts, float]]:
    """Hosts with ``verdict`` and the largest steady-state gap share of their GPUs."""
    gap = {g.gpu: g.gap_share for g in f.per_gpu}
    out = []
    for h in f.resources.cpu:
        worst = max((gap.get(g, 0.0) for g in h.gpus), default=0.0)
        if h.verdict == verdict and worst >= IDLE_GPU_SHARE:
            out.append((h, worst))
    return out


def _claim_values(hits: list[tuple[CpuHostFacts, float]]) -> dict[str, object]:
    """The values every host-CPU claim fills: its idle GPUs (``idle``), ``its`` or
    ``their`` for them, the hosts and their cores in use (``cores``: "3.2 of 16")."""
    gpus = [g for h, _ in hits for g in h.gpus]
    n = len(set(gpus))
    hosts = ", ".join(h.host for h, _ in hits[:3]) + (
        f" (+{len(hits) - 3})" if len(hits) > 3 else ""
    )
    busy = span((h.busy_cores_gap_mean or 0.0 for h, _ in hits), lambda v: f"{v:.1f}")
    total = span((float(h.cores or 0) for h, _ in hits), lambda v: f"{v:.0f}")
    return {
        "idle": say_n(n, "cpu.idle", gpus=gpu_list(gpus), gaps=span(w for _, w in hits)),
        "its": say_n(n, "pronoun.its"),
        "hosts": hosts,
        "cores": say("cpu.cores", busy=busy, total=total),
    }


def _host_evidence(hits: list[tuple[CpuHostFacts, float]]) -> tuple[EvidenceItem, ...]:
    out: list[EvidenceItem] = []
    for h, _ in hits[:2]:
        out += [
            _ev("busy_cores_gap_mean", f"cores running the profiled processes during gaps, {h.host}", h.busy_cores_gap_mean, f"{(h.busy_cores_gap_mean or 0):.1f} / {h.cores}"),
            _ev("saturated_gap_share", f"gap time with ≥90% of cores busy, {h.host}", h.saturated_gap_share, percent(h.saturated_gap_share)),
            _ev("feeding_waiting_share", f"feeding threads waiting, share of gap time, {h.host}", h.waiting_share, percent(h.waiting_share)),
            _ev("feeding_running_share", f"feeding threads on CPU, share of gap time, {h.host}", h.running_share, percent(h.running_share)),
            _ev("feeding_descheduled_share", f"feeding threads off CPU outside any call, share of gap time, {h.host}", h.descheduled_share, percent(h.descheduled_share)),
        ]  # fmt: skip
    return tuple(out)


def cpu_saturated(f: Facts) -> Finding | None:
    hits = _idle_hosts(f, "saturated")
    if not hits:
        return None
    claim = say(
        "cpu-saturated.claim",
        **_claim_values(hits),
        saturated=span(h.saturated_gap_share or 0.0 for h, _ in hits),
        off=span(h.descheduled_share or 0.0 for h, _ in hits),
    )
    return Finding(
        rule_id="cpu-saturated",
        severity="warning",
        seed_section="4.4",
        cause_category="CPU-side scheduling",
        impact_share=max(w for _, w in hits),
        title=say("cpu-saturated.title"),
        claim=claim,
        recommendation=say("cpu-saturated.recommendation"),
        evidence=_host_evidence(hits),
    )


def cpu_blocked(f: Facts) -> Finding | None:
    hits = _idle_hosts(f, "blocked")
    if not hits:
        return None
    claim = say(
        "cpu-blocked.claim",
        **_claim_values(hits),
        waiting=span(h.waiting_share or 0.0 for h, _ in hits),
        covers=say("cpu.covers"),
    )
    return Finding(
        rule_id="cpu-blocked",
        severity="warning",
        seed_section="4.4",
        cause_category="serialized host (GIL, locks, queues)",
        impact_share=max(w for _, w in hits),
        title=say("cpu-blocked.title"),
        claim=claim,
        recommendation=say("cpu-blocked.recommendation"),
        evidence=_host_evidence(hits),
    )


def feeding_thread_busy(f: Facts) -> Finding | None:
    hits = _idle_hosts(f, "feeding_thread_busy")
    if not hits:
        return None
    claim = say(
        "feeding-thread-busy.claim",
        **_claim_values(hits),
        running=span(h.running_share or 0.0 for h, _ in hits),
        covers=say("cpu.covers"),
    )
    return Finding(
        rule_id="feeding-thread-busy",
        severity="warning",
        seed_section="4.4",
        cause_category="CPU-side scheduling",
        impact_share=max(w for _, w in hits),
        title=say("feeding-thread-busy.title"),
        claim=claim,
        recommendation=say("feeding-thread-busy.recommendation"),
        evidence=_host_evidence(hits),
    )


def feeding_thread_off_cpu(f: Facts) -> Finding | None:
    hits = _idle_hosts(f, "off_cpu")
    if not hits:
        return None
    traced = all(h.osrt_traced for h, _ in hits)
    claim = say(
        "feeding-thread-off-cpu.claim",
        **_claim_values(hits),
        off=span(h.descheduled_share or 0.0 for h, _ in hits),
        why=say(
            "feeding-thread-off-cpu.why.traced" if traced else "feeding-thread-off-cpu.why.untraced"
        ),
    )
    return Finding(
        rule_id="feeding-thread-off-cpu",
        severity="info",
        seed_section="4.4",
        cause_category="CPU-side scheduling",
        impact_share=max(w for _, w in hits),
        title=say("feeding-thread-off-cpu.title"),
        claim=claim,
        recommendation=say("feeding-thread-off-cpu.recommendation", capture=CAPTURE),
        evidence=_host_evidence(hits),
    )


CPU_RULES = (cpu_saturated, cpu_blocked, feeding_thread_busy, feeding_thread_off_cpu)
CPU_RULE_IDS = ("cpu-saturated", "cpu-blocked", "feeding-thread-busy", "feeding-thread-off-cpu")
