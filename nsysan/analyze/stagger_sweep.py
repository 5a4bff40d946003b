"""The sweep over the GPUs' gap edges behind the stagger (:mod:`nsysan.analyze.stagger`).

Each GPU's gaps become sorted numpy arrays. For every GPU pair, one compiled merge
of the two GPUs' gaps gives the co-idle time of every gap. With three or more GPUs the
any/all shares and the idle-count times come from a sweep over all GPUs' boundaries;
with two, they follow from the co-idle time alone. Python loops run over GPUs and GPU
pairs, never over gaps: ``O(G * N)`` work for ``G`` GPUs and ``N`` gaps.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import polars as pl

from nsysan.compiled import NO_EDGE, compiled
from nsysan.interval_arrays import clip_disjoint, rows_by_unit
from nsysan.intervals import clip_to_windows

__all__ = [
    "CoIdle",
    "GpuGaps",
    "Sweep",
    "co_idle_by_gap",
    "gap_arrays_by_gpu",
    "idle_inside",
    "sweep_edges",
    "two_gpu_sweep",
]

GPU = "gpu"
START = "start_ns"
END = "end_ns"
WINDOW_START = "window_start_ns"
WINDOW_END = "window_end_ns"


@dataclass(frozen=True)
class GpuGaps:
    """One GPU's gaps clipped to its window: of positive length, disjoint, in time order."""

    starts: np.ndarray
    ends: np.ndarray

    @cached_property
    def durations(self) -> np.ndarray:
        return self.ends - self.starts

    def idle_before(self, at: np.ndarray) -> np.ndarray:
        """The GPU's gap time before each instant of ``at`` (few instants).

        With ``m`` gap edges before an instant ``t`` (an edge at ``t`` may count or
        not), the ``m // 2`` first gaps are over, and with ``m`` odd the next one is
        open since its start. The gaps over are summed between the few distinct counts,
        in one pass: a table of the running sum at every edge (16 bytes a gap) was
        held to the end of the stagger, at its memory peak.
        """
        at = np.asarray(at, dtype=np.int64)
        idle = np.zeros(len(at), dtype=np.int64)
        if not len(self.starts):
            return idle
        edges_before = np.searchsorted(self.starts, at) + np.searchsorted(self.ends, at)
        over = edges_before // 2
        done, total, last = {}, 0, 0
        for count in np.unique(over).tolist():
            total += int(self.durations[last:count].sum())
            done[count], last = total, count
        idle += np.array([done[count] for count in over.tolist()], dtype=np.int64)
        is_open = (edges_before & 1).astype(bool)
        opened = self.starts[np.minimum(over, len(self.starts) - 1)]
        idle += np.where(is_open, at - opened, 0)
        return idle


def _clipped(
    start: np.ndarray, end: np.ndarray, window_start: int, window_end: int, points: bool
) -> tuple[np.ndarray, np.ndarray, int]:
    """One GPU's gaps clipped to its window, of positive length, in time order, and
    how many overlap the gap before them.

    No gap may end before it starts; ``points``: some may have length 0.
    """
    if np.all(start[1:] >= end[:-1]):
        # In time order and disjoint: only the first and the last gap that reach into
        # the window can cross its edges, and they keep a positive length if the
        # window has one.
        s, e = clip_disjoint(start, end, window_start, window_end)
        if points or window_start == window_end:
            positive = e > s
            s, e = s[positive], e[positive]
        return s, e, 0
    s, e = np.maximum(start, window_start), np.minimum(end, window_end)
    positive = e > s  # also drops the gaps outside the window
    s, e = s[positive], e[positive]
    step = np.diff(s)
    if not np.all((step > 0) | ((step == 0) & (np.diff(e) >= 0))):
        order = np.lexsort((e, s))
        s, e = s[order], e[order]
    return s, e, int(np.count_nonzero(s[1:] < e[:-1]))


def gap_arrays_by_gpu(gaps: pl.DataFrame, windows: pl.DataFrame) -> dict[int, GpuGaps]:
    """Per GPU of ``windows``, its gaps clipped to its window, of positive length, sorted.

    Gaps without bounds are ignored; gaps that overlap an earlier gap of their GPU
    are an error.
    """
    if any(gaps.null_count().row(0)):
        gaps = gaps.drop_nulls()
    gpu, start, end = (gaps.get_column(c).to_numpy() for c in (GPU, START, END))
    # The library's checks (bounds in order, one valid window per GPU) run on the only
    # rows that can fail them.
    points = bool(np.any(end <= start))
    reversed_rows = end < start if points else None
    clip_to_windows(
        gaps.filter(pl.Series(reversed_rows)) if points else gaps.clear(), windows, by=GPU
    )
    rows = rows_by_unit(gpu, windows.get_column(GPU).to_list())
    by_gpu, overlapping = {}, 0
    for g, window_start, window_end in windows.iter_rows():
        s, e, overlaps = _clipped(start[rows[g]], end[rows[g]], window_start, window_end, points)
        by_gpu[g] = GpuGaps(s, e)
        overlapping += overlaps
    if overlapping:
        raise ValueError(f"{overlapping} gap(s) overlap an earlier gap of the same GPU")
    return by_gpu


def idle_inside(spans: pl.DataFrame, gaps_by_gpu: dict[int, GpuGaps], name: str) -> pl.Series:
    """Gap time of ``spans.gpu`` inside ``[start_ns, end_ns]`` of each span row (few rows)."""
    idle = np.zeros(spans.height, dtype=np.int64)
    gpu, start, end = (spans.get_column(c).to_numpy() for c in (GPU, START, END))
    for g, own in gaps_by_gpu.items():
        rows = gpu == g
        idle[rows] = own.idle_before(end[rows]) - own.idle_before(start[rows])
    return pl.Series(name, idle, dtype=pl.Int64)


def _co_idle_in_gaps(a: GpuGaps, b: GpuGaps) -> tuple[np.ndarray, np.ndarray]:
    """Per gap of ``a`` the gap time of ``b`` inside it, and per gap of ``b`` that of ``a``."""
    return _overlaps_of_sorted(a.starts, a.ends, b.starts, b.ends)


@compiled
def _overlaps_of_sorted(a_start, a_end, b_start, b_end):  # type: ignore[no-untyped-def]
    """Per interval of ``a`` its overlap with all of ``b``, and per interval of ``b`` with ``a``.

    Both are disjoint and in time order: one merge of the two, each overlapping
    pair met once (the one of the two that ends first is done with).
    """
    in_a = np.zeros(len(a_start), dtype=np.int64)
    in_b = np.zeros(len(b_start), dtype=np.int64)
    i = j = 0
    while i < len(a_start) and j < len(b_start):
        overlap = min(a_end[i], b_end[j]) - max(a_start[i], b_start[j])
        if overlap > 0:
            in_a[i] += overlap
            in_b[j] += overlap
        if a_end[i] <= b_end[j]:
            i += 1
        else:
            j += 1
    return in_a, in_b


@dataclass(frozen=True)
class CoIdle:
    """Per GPU and gap, the other GPUs' gap time inside it (``idle``) and how many of
    them are idle some of it (``others``); per ordered pair ``(gpu, other)``, the
    other's gap time inside the GPU's gaps (``pairs``). Sums over the pairs as they
    are found: a per-gap array per pair of GPUs is not kept."""

    idle: dict[int, np.ndarray]
    others: dict[int, np.ndarray]
    pairs: dict[tuple[int, int], int]


def co_idle_by_gap(gaps_by_gpu: dict[int, GpuGaps]) -> CoIdle:
    """:class:`CoIdle` of every pair of GPUs."""
    idle = {gpu: np.zeros(len(own.starts), dtype=np.int64) for gpu, own in gaps_by_gpu.items()}
    others = {gpu: np.zeros(len(own.starts), dtype=np.int64) for gpu, own in gaps_by_gpu.items()}
    pairs: dict[tuple[int, int], int] = {}
    for a, b in itertools.combinations(gaps_by_gpu, 2):
        for gpu, other, inside in zip(
            (a, b), (b, a), _co_idle_in_gaps(gaps_by_gpu[a], gaps_by_gpu[b]), strict=True
        ):
            idle[gpu] += inside
            others[gpu] += inside > 0
            pairs[gpu, other] = int(inside.sum())
    return CoIdle(idle=idle, others=others, pairs=pairs)


@dataclass(frozen=True)
class Sweep:
    """Per GPU, the time inside each of its gaps with at least one other GPU idle
    (``any``) and with every other GPU in its window idle, at least one in one
    (``all``); ``observed_ns[k]``: the time with every GPU inside its window and
    ``k`` GPUs idle."""

    any: dict[int, np.ndarray]
    all: dict[int, np.ndarray]
    observed_ns: list[int]


def sweep_edges(windows: pl.DataFrame, gaps_by_gpu: dict[int, GpuGaps]) -> Sweep:
    """A sweep over every gap and window boundary in time order.

    Between two boundaries, ``idle`` GPUs are in a gap and ``in_window`` inside their
    window; a gap's integrals are the running sums at its end less those at its
    start. Ties need no order: the time between boundaries of one instant is 0. The
    GPUs' gap lists (sorted, disjoint) are merged as they are, not sorted together.
    """
    gpus = list(gaps_by_gpu)
    starts = np.concatenate([own.starts for own in gaps_by_gpu.values()])
    ends = np.concatenate([own.ends for own in gaps_by_gpu.values()])
    offsets = np.zeros(len(gpus) + 1, dtype=np.int64)
    np.cumsum([len(own.starts) for own in gaps_by_gpu.values()], out=offsets[1:])
    edge_times = np.concatenate(
        [windows.get_column(WINDOW_START).to_numpy(), windows.get_column(WINDOW_END).to_numpy()]
    ).astype(np.int64)
    opens = np.repeat(np.array([1, -1], dtype=np.int64), windows.height)
    order = np.argsort(edge_times, kind="stable")
    any_all, observed = _sweep_gpus(
        starts, ends, offsets, edge_times[order], opens[order], windows.height
    )
    del starts, ends
    return Sweep(
        any={gpu: any_all[0, offsets[i] : offsets[i + 1]] for i, gpu in enumerate(gpus)},
        all={gpu: any_all[1, offsets[i] : offsets[i + 1]] for i, gpu in enumerate(gpus)},
        observed_ns=observed.tolist(),
    )


@compiled
def _sweep_gpus(starts, ends, offsets, window_times, window_opens, window_count):  # type: ignore[no-untyped-def]
    """Per gap (rows of ``starts``/``ends``, GPU by GPU between ``offsets``) the time with
    another GPU idle (row 0) and with every other GPU in its window idle (row 1); and
    per ``k`` the time with every GPU in its window and ``k`` idle."""
    gpu_count = len(offsets) - 1
    out = np.zeros((2, len(starts)), dtype=np.int64)
    observed = np.zeros(window_count + 1, dtype=np.int64)
    edge = np.zeros(gpu_count, dtype=np.int64)  # the next edge: 2 * gap + (0 start, 1 end)
    heads = np.full(gpu_count, NO_EDGE, dtype=np.int64)
    remaining = 0
    for i in range(gpu_count):
        if offsets[i + 1] > offsets[i]:
            heads[i] = starts[offsets[i]]
            remaining += 1
    w = 0
    idle = in_window = 0
    any_ns = all_ns = 0
    started, previous = False, 0
    while remaining > 0 or w < len(window_times):
        best, now = -1, NO_EDGE
        for i in range(gpu_count):
            if heads[i] < now or (best < 0 and edge[i] < 2 * (offsets[i + 1] - offsets[i])):
                best, now = i, heads[i]
        if w < len(window_times) and (best < 0 or window_times[w] < now):
            best, now = gpu_count, window_times[w]
        if started:
            length = now - previous
            if idle >= 2:
                any_ns += length
            if in_window >= 2 and idle == in_window:
                all_ns += length
            if in_window == window_count:
                observed[idle] += length
        started, previous = True, now
        if best == gpu_count:
            in_window += window_opens[w]
            w += 1
            continue
        gap = offsets[best] + edge[best] // 2
        if edge[best] % 2 == 0:
            idle += 1
            out[0, gap] -= any_ns
            out[1, gap] -= all_ns
            heads[best] = ends[gap]
        else:
            idle -= 1
            out[0, gap] += any_ns
            out[1, gap] += all_ns
            if gap + 1 < offsets[best + 1]:
                heads[best] = starts[gap + 1]
            else:
                heads[best] = NO_EDGE
                remaining -= 1
        edge[best] += 1
    return out, observed


def two_gpu_sweep(
    windows: pl.DataFrame,
    gaps_by_gpu: dict[int, GpuGaps],
    co: CoIdle,
) -> Sweep:
    """:func:`sweep_edges` for two GPUs, from the co-idle time alone.

    Inside a gap of one GPU, "another GPU idle" is the other GPU idle, and, as gaps
    lie inside windows, "every other GPU in its window idle" too. Over the common
    window, both are idle for the co-idle time and one is for the rest of their
    idle time.
    """
    (a, own_a), (b, own_b) = gaps_by_gpu.items()
    start = windows.get_column(WINDOW_START).max()
    end = max(windows.get_column(WINDOW_END).min(), start)  # type: ignore[type-var]
    span = np.array([start, end], dtype=np.int64)
    idle = sum(int(np.diff(own.idle_before(span))[0]) for own in (own_a, own_b))
    both = co.pairs[a, b]
    return Sweep(
        any={a: co.idle[a], b: co.idle[b]},
        all={a: co.idle[a], b: co.idle[b]},
        observed_ns=[end - start - idle + both, idle - 2 * both, both],  # type: ignore[operator]
    )
