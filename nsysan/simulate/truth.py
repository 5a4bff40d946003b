"""Ground truth of a generated scenario, measured from the events the generator wrote.

Definitions match docs/metrics.md's defaults: busy is the union of a GPU's kernels, the
window runs from its first kernel start to its last kernel end, a gap is an idle
interval inside it. Numbers are measured on the generated rows, so an analysis of the
file must reproduce them exactly (up to float rounding); the intended targets are in
docs/scenarios.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from itertools import combinations
from types import MappingProxyType
from typing import Any

from nsysan.simulate.trace import KernelRun

Interval = tuple[int, int]


@dataclass(frozen=True)
class GpuTruth:
    """Per physical GPU: identity and the measured load."""

    gpu: int  # TARGET_INFO_GPU.id, also the kernels' deviceId
    uuid: str
    pid: int  # the process feeding it
    role: str  # e.g. "dp rank 0", "tp rank 3", "pp stage 1"
    window_start_ns: int
    window_end_ns: int
    busy_ns: int
    gap_share: float
    kernels: int
    kernel_ns: int  # sum of kernel durations
    compute_ns: int  # kernel time outside NCCL kernels
    nccl_ns: int
    extra: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def window_ns(self) -> int:
        return self.window_end_ns - self.window_start_ns


@dataclass(frozen=True)
class GroundTruth:
    """What a scenario contains and what nsysan should conclude from it."""

    scenario: str
    seed: int
    scale: float
    hostile_names: bool
    seed_section: str  # section of seed-chapter4-zh.txt it illustrates
    top_finding: str | None  # intended top finding id; None: no finding at all
    summary: str
    gpus: tuple[GpuTruth, ...]
    numbers: Mapping[str, float]  # scenario-level numbers, see docs/scenarios.md
    flagged_gpus: tuple[int, ...] = ()  # GPUs the finding is about
    flagged_kernels: tuple[str, ...] = ()  # short names of the kernels behind it
    ncu_csv: str | None = None  # file name of the companion Nsight Compute CSV

    def gpu(self, index: int) -> GpuTruth:
        """The truth of GPU ``index`` (TARGET_INFO_GPU.id)."""
        for g in self.gpus:
            if g.gpu == index:
                return g
        raise KeyError(index)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON-ready dict (mappings as dicts, tuples as lists)."""
        data = _plain(self)
        data["gpus"] = [_plain(g) for g in self.gpus]
        return data


def _plain(obj: object) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for f in fields(obj):  # type: ignore[arg-type]
        value = getattr(obj, f.name)
        if isinstance(value, Mapping):
            value = dict(value)
        elif isinstance(value, tuple):
            value = list(value)
        data[f.name] = value
    return data


def frozen(mapping: Mapping[str, float]) -> Mapping[str, float]:
    """A read-only copy with keys in sorted order (stable JSON)."""
    return MappingProxyType({k: mapping[k] for k in sorted(mapping)})


def union(intervals: Iterable[Interval]) -> list[Interval]:
    """Sorted, merged intervals (touching intervals merge)."""
    merged: list[Interval] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def clip(intervals: Iterable[Interval], lo: int, hi: int) -> list[Interval]:
    """Intervals cut to [lo, hi); empty pieces dropped."""
    return [(max(s, lo), min(e, hi)) for s, e in intervals if min(e, hi) > max(s, lo)]


def total(intervals: Iterable[Interval]) -> int:
    return sum(e - s for s, e in intervals)


def gaps(busy: Sequence[Interval], lo: int, hi: int) -> list[Interval]:
    """Idle intervals of merged ``busy`` inside [lo, hi)."""
    out: list[Interval] = []
    t = lo
    for s, e in clip(busy, lo, hi):
        if s > t:
            out.append((t, s))
        t = max(t, e)
    if hi > t:
        out.append((t, hi))
    return out


def overlap(a: Sequence[Interval], b: Sequence[Interval]) -> int:
    """Total overlap of two merged, sorted interval lists."""
    i = j = 0
    result = 0
    while i < len(a) and j < len(b):
        lo = max(a[i][0], b[j][0])
        hi = min(a[i][1], b[j][1])
        if hi > lo:
            result += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return result


def busy_by_gpu(runs: Iterable[KernelRun]) -> dict[int, list[Interval]]:
    """Merged kernel intervals of each GPU."""
    per_gpu: dict[int, list[Interval]] = {}
    for run in runs:
        per_gpu.setdefault(run.gpu, []).append((run.start, run.end))
    return {gpu: union(iv) for gpu, iv in sorted(per_gpu.items())}


def stagger(busy: Mapping[int, Sequence[Interval]]) -> dict[str, float]:
    """Gap overlap between GPUs against independence, over their common window.

    ``gap_overlap_observed``: mean over GPU pairs of the share of the common window
    where both are idle; ``gap_overlap_independent``: mean over pairs of the product of
    their idle shares; ``stagger_ratio``: observed / independent (< 1: staggered gaps,
    about 1: independent, > 1: aligned).
    """
    lo = max(iv[0][0] for iv in busy.values())
    hi = min(iv[-1][1] for iv in busy.values())
    span = hi - lo
    idle = {gpu: gaps(iv, lo, hi) for gpu, iv in busy.items()}
    observed = []
    independent = []
    for a, b in combinations(sorted(idle), 2):
        observed.append(overlap(idle[a], idle[b]) / span)
        independent.append(total(idle[a]) / span * total(idle[b]) / span)
    obs = sum(observed) / len(observed)
    ind = sum(independent) / len(independent)
    return {
        "gap_overlap_observed": obs,
        "gap_overlap_independent": ind,
        "stagger_ratio": obs / ind if ind else 0.0,
    }


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default), ``q`` in 0..100."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    pos = (len(ordered) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)
