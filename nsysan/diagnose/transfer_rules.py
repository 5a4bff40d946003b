"""The rule on memory transfers: GPUs whose window is spent moving data (seed 4.4).

* ``transfer-heavy``: a GPU's memcpys and memsets (their union, over its whole window,
  nsysan.analyze.transfers) take at least ``TRANSFER_SHARE_HIGH`` of its window, or at
  least ``TRANSFER_SHARE_MIN`` of it while lasting longer than all its kernels
  together. The impact is the transfer time no kernel overlaps, as a share of the window.

Thresholds are named constants, documented in docs/findings.md.
"""

from __future__ import annotations

from nsysan.diagnose.facts import Facts
from nsysan.diagnose.findings import EvidenceItem, Finding
from nsysan.diagnose.gpu_facts import GpuFacts
from nsysan.diagnose.gpu_rules import gpu_list
from nsysan.diagnose.wording import nothing, say, say_n
from nsysan.report.fmt import duration, percent, ratio

TRANSFER_SHARE_HIGH = 0.20  # transfers this share of a GPU's window: named
TRANSFER_SHARE_MIN = 0.02  # ... or this share, when they outlast the GPU's kernels


def _heavy(g: GpuFacts) -> bool:
    share = g.transfer_share
    if share is None:
        return False
    return share >= TRANSFER_SHARE_HIGH or (
        share >= TRANSFER_SHARE_MIN and g.transfer_ns > g.busy_ns
    )


def _span(values: list[float]) -> str:
    low, high = percent(min(values)), percent(max(values))
    return low if low == high else f"{low}–{high}"


def transfer_heavy(f: Facts) -> Finding | None:
    """GPUs whose window is largely memory transfers."""
    hit = [g for g in f.per_gpu if _heavy(g)]
    if not hit:
        return None
    outlast = nothing()
    times = [g.transfer_ns / g.busy_ns for g in hit if g.transfer_ns > g.busy_ns > 0]
    if times:
        lo, hi = ratio(min(times)), ratio(max(times))
        outlast = say("transfer-heavy.outlast", times=lo if lo == hi else f"{lo}–{hi}")
    claim = say(
        "transfer-heavy.claim",
        spend=say_n(
            len(hit),
            "transfer-heavy.spend",
            where=gpu_list(g.gpu for g in hit),
            shares=_span([g.transfer_share or 0.0 for g in hit]),
        ),
        exposed=_span([g.transfer_exposed_share or 0.0 for g in hit]),
        outlast=outlast,
    )
    evidence = []
    for g in hit:
        evidence += [
            EvidenceItem(
                metric="transfer_share",
                label=f"memcpy/memset time, share of the window, {g.label}",
                value=g.transfer_share,
                display=percent(g.transfer_share),
                source="docs/metrics/transfers.md",
            ),
            EvidenceItem(
                metric="transfer_exposed_share",
                label=f"transfer time with no kernel running, share of the window, {g.label}",
                value=g.transfer_exposed_share,
                display=percent(g.transfer_exposed_share),
                source="docs/metrics/transfers.md",
            ),
            EvidenceItem(
                metric="transfer_ns",
                label=f"memcpy/memset time in the window, {g.label}",
                value=g.transfer_ns,
                display=duration(g.transfer_ns),
                source="docs/metrics/transfers.md",
            ),
        ]
    return Finding(
        rule_id="transfer-heavy",
        severity="warning",
        seed_section="4.4",
        cause_category="memory transfers",
        impact_share=max(g.transfer_exposed_share or 0.0 for g in hit),
        title=say("transfer-heavy.title"),
        claim=claim,
        recommendation=say("transfer-heavy.recommendation"),
        evidence=tuple(evidence),
    )
