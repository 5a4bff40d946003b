"""Stagger: are the gaps of different GPUs offset in time, or do they coincide?

Definition (docs/metrics/stagger.md):

* Inputs: the gap table (``gpu``, ``start_ns``, ``end_ns``; gaps of one GPU must not
  overlap) and the window table (``gpu``, ``window_start_ns``, ``window_end_ns``).
  Gaps are clipped to their GPU's window first.
* **Pair** ``(a, b)``, ``a < b``, over the *common window* of the pair
  ``[max(window starts), min(window ends)]`` of length ``L``: idle times ``I_a``,
  ``I_b`` (gap time inside it), observed co-idle ``O`` (time both are in a gap),
  co-idle expected if the two GPUs' gaps were independent ``E = I_a * I_b / L``
  (product of idle shares), ``co_idle_ratio = O / E``.
* **Stagger score** of a pair: ``O`` lies between ``O_min = max(0, I_a + I_b - L)``
  (gaps avoid each other as far as their lengths allow) and
  ``O_max = min(I_a, I_b)`` (the shorter idle time lies inside the longer one).
  ``score = (E - O) / (E - O_min)`` when ``O <= E``, else ``(E - O) / (O_max - E)``:
  in ``[-1, 1]``; +1 fully staggered, 0 independent, -1 fully aligned. It equals
  phi / |phi_max| of the two idle indicators, so swapping idle and busy gives the
  same score. The trace's score is the same formula on ``O``, ``E``, ``O_min``,
  ``O_max`` summed over all pairs with a common window.
* **Verdict**: "staggered" if ``score >= STAGGERED_MIN_SCORE``, "aligned" if
  ``score <= ALIGNED_MAX_SCORE``, else "independent"; "not applicable" with one GPU,
  no gaps, or no score (no pair window overlap, or idle shares of 0 or 1 only).
* **All GPUs**, over the window common to all GPUs: all-idle time (every GPU in a
  gap) and any-idle time (at least one), against independence
  (``L * prod(p_i)`` and ``L * (1 - prod(1 - p_i))``), and the time with exactly
  ``k`` GPUs idle against the Poisson-binomial distribution of the ``p_i``.
* **Per gap**: ``others_idle`` = how many other GPUs were in a gap at some moment
  of it; ``others_idle_mean`` = time-weighted mean number of other GPUs idle;
  ``others_any_idle_share`` / ``others_all_idle_share`` = share of the gap's time
  during which at least one / every other GPU (among those whose window covers
  that moment, at least one) was idle.

Method: each GPU's gaps become sorted numpy arrays. For every GPU pair, one stable
sort merges the two GPUs' gap boundaries; where each boundary lands gives the other
GPU's idle time up to it, hence the co-idle time of every gap. With three or more
GPUs the any/all shares and the idle-count times come from a sweep over all GPUs'
boundaries; with two, they follow from the co-idle time alone. Python loops run
over GPUs and GPU pairs, never over gaps: ``O(G * N)`` work for ``G`` GPUs and
``N`` gaps.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import numpy as np
import polars as pl

from nsysan.intervals import clip_disjoint, clip_to_windows, rows_by_unit

__all__ = [
    "ALIGNED_MAX_SCORE",
    "STAGGERED_MIN_SCORE",
    "StaggerResult",
    "StaggerVerdict",
    "measure_stagger",
]

# A score beyond +-0.2 means gaps avoid (or seek) each other a fifth of the way
# from independence to the most their lengths allow. Independent random gaps stay
# within +-0.07 from 50 gaps per GPU on, and the seed's case study (co-idle at
# 0.56-0.69 of independence) scores 0.31-0.45 (tests/test_stagger.py).
STAGGERED_MIN_SCORE = 0.2
ALIGNED_MAX_SCORE = -0.2

StaggerVerdict = Literal["aligned", "independent", "staggered", "not applicable"]

GPU = "gpu"
START = "start_ns"
END = "end_ns"
WINDOW_START = "window_start_ns"
WINDOW_END = "window_end_ns"


@dataclass(frozen=True)
class StaggerResult:
    """Gap overlap between GPUs compared with independence.

    ``pairs``: one row per GPU pair ``gpu_a < gpu_b``: ``common_start_ns``,
    ``common_end_ns``, ``common_ns``, ``idle_a_ns``, ``idle_b_ns``, ``idle_a_share``,
    ``idle_b_share``, ``co_idle_ns``, ``co_idle_share``, ``expected_co_idle_share``,
    ``expected_co_idle_ns``, ``co_idle_ratio``, ``min_co_idle_ns``,
    ``max_co_idle_ns``, ``stagger_score``, ``verdict``.
    ``gaps``: the input gaps (clipped to windows, sorted) with ``others_idle``,
    ``others_idle_mean``, ``others_any_idle_share``, ``others_all_idle_share``.
    ``per_gpu``: ``gap_count``, ``gap_ns`` and the gap-time-weighted per-gap numbers.
    ``idle_count``: over the all-GPU common window, for ``idle_gpus`` = 0..G:
    ``observed_ns``, ``observed_share``, ``expected_share`` (independence).
    Scalars: see docs/metrics/stagger.md; ``*_ns``/``*_share`` are None when the
    GPUs have no common window.
    """

    pairs: pl.DataFrame
    gaps: pl.DataFrame
    per_gpu: pl.DataFrame
    idle_count: pl.DataFrame
    gpu_count: int
    common_start_ns: int | None
    common_end_ns: int | None
    common_ns: int
    all_idle_ns: int | None
    any_idle_ns: int | None
    all_idle_share: float | None
    any_idle_share: float | None
    expected_all_idle_share: float | None
    expected_any_idle_share: float | None
    all_over_any_share: float | None
    others_any_idle_share: float | None
    others_all_idle_share: float | None
    co_idle_ns: int
    expected_co_idle_ns: int
    co_idle_ratio: float | None
    stagger_score: float | None
    verdict: StaggerVerdict
    reason: str


_PER_GAP_SCHEMA = {
    GPU: pl.Int32,
    START: pl.Int64,
    END: pl.Int64,
    "duration_ns": pl.Int64,
    "others_idle": pl.Int64,
    "others_idle_mean": pl.Float64,
    "others_any_idle_share": pl.Float64,
    "others_all_idle_share": pl.Float64,
}
# What the shares over all gaps are summed from (the rest of the per-gap table is
# kept only on request, measure_stagger's ``per_gap_table``).
_SHARE_COLUMNS = ("duration_ns", "others_any_idle_share", "others_all_idle_share")
_PER_GPU_SCHEMA = {
    GPU: pl.Int32,
    "gap_count": pl.Int64,
    "gap_ns": pl.Int64,
    "others_idle_mean": pl.Float64,
    "others_any_idle_share": pl.Float64,
    "others_all_idle_share": pl.Float64,
}


def _score(o: pl.Expr, e: pl.Expr, lo: pl.Expr, hi: pl.Expr) -> pl.Expr:
    """Where ``o`` lies between independence ``e`` and its bounds: +1 at ``lo``, -1 at ``hi``."""
    below = pl.when(e > lo).then((e - o) / (e - lo))
    above = pl.when(hi > e).then((e - o) / (hi - e))
    return pl.when(o <= e).then(below).otherwise(above).clip(-1.0, 1.0)


def _verdict(score: pl.Expr) -> pl.Expr:
    return (
        pl.when(score.is_null())
        .then(pl.lit("not applicable"))
        .when(score >= STAGGERED_MIN_SCORE)
        .then(pl.lit("staggered"))
        .when(score <= ALIGNED_MAX_SCORE)
        .then(pl.lit("aligned"))
        .otherwise(pl.lit("independent"))
    )


def _scalar_score(o: float, e: float, lo: float, hi: float) -> float | None:
    row = pl.DataFrame(
        {"o": [o], "e": [e], "lo": [lo], "hi": [hi]},
        schema={"o": pl.Float64, "e": pl.Float64, "lo": pl.Float64, "hi": pl.Float64},
    )
    value = row.select(_score(pl.col("o"), pl.col("e"), pl.col("lo"), pl.col("hi"))).item()
    return None if value is None else float(value)


@dataclass(frozen=True)
class _GpuGaps:
    """One GPU's gaps clipped to its window: of positive length, disjoint, in time order."""

    starts: np.ndarray
    ends: np.ndarray

    @cached_property
    def durations(self) -> np.ndarray:
        return self.ends - self.starts

    def write_edges(self, out: np.ndarray) -> None:
        """Start, end, start, end ... into ``out``: in time order, as the gaps are disjoint."""
        out[0::2], out[1::2] = self.starts, self.ends

    @cached_property
    def _idle_by_edges_before(self) -> np.ndarray:
        """Gap time before an instant ``t`` with ``m`` edges before it: ``[m] + t * (m & 1)``.

        ``m = 2j``: gaps ``0 .. j-1`` are over; ``m = 2j + 1``: gap ``j`` is open
        since ``starts[j]``.
        """
        table = np.empty(2 * len(self.starts) + 1, dtype=np.int64)
        table[0] = 0
        np.cumsum(self.durations, out=table[2::2])
        table[1::2] = table[0:-1:2] - self.starts
        return table

    def idle_at(self, at: np.ndarray, edges_before: np.ndarray) -> np.ndarray:
        """The GPU's gap time before each instant of ``at``, given how many of its
        ``edges`` come before the instant (an edge at the instant may count or not).

        Overwrites ``edges_before``.
        """
        idle = self._idle_by_edges_before[edges_before]
        edges_before &= 1
        edges_before *= at
        idle += edges_before
        return idle

    def idle_before(self, at: np.ndarray) -> np.ndarray:
        """The GPU's gap time before each instant of ``at`` (few instants)."""
        edges_before = np.searchsorted(self.starts, at) + np.searchsorted(self.ends, at)
        return self.idle_at(at, edges_before)


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


def _gaps_by_gpu(gaps: pl.DataFrame, windows: pl.DataFrame) -> dict[int, _GpuGaps]:
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
        by_gpu[g] = _GpuGaps(s, e)
        overlapping += overlaps
    if overlapping:
        raise ValueError(f"{overlapping} gap(s) overlap an earlier gap of the same GPU")
    return by_gpu


def _idle_inside(spans: pl.DataFrame, gaps_by_gpu: dict[int, _GpuGaps], name: str) -> pl.Series:
    """Gap time of ``spans.gpu`` inside ``[start_ns, end_ns]`` of each span row (few rows)."""
    idle = np.zeros(spans.height, dtype=np.int64)
    gpu, start, end = (spans.get_column(c).to_numpy() for c in (GPU, START, END))
    for g, own in gaps_by_gpu.items():
        rows = gpu == g
        idle[rows] = own.idle_before(end[rows]) - own.idle_before(start[rows])
    return pl.Series(name, idle, dtype=pl.Int64)


def _co_idle_in_gaps(a: _GpuGaps, b: _GpuGaps) -> tuple[np.ndarray, np.ndarray]:
    """Per gap of ``a`` the gap time of ``b`` inside it, and per gap of ``b`` that of ``a``."""
    split = 2 * len(a.starts)
    edges = np.empty(split + 2 * len(b.starts), dtype=np.int64)
    a.write_edges(edges[:split])
    b.write_edges(edges[split:])
    # A stable sort merges the two sorted runs of edges and keeps each run's order: the
    # k-th edge of ``a`` is the k-th row from ``a``, and the rows before it that are not
    # from ``a`` are the edges of ``b`` before it.
    from_a = np.argsort(edges, kind="stable") < split
    b_before = np.flatnonzero(from_a)
    b_before -= np.arange(split)
    a_before = np.flatnonzero(~from_a)
    a_before -= np.arange(len(edges) - split)
    b_idle = b.idle_at(edges[:split], b_before)
    a_idle = a.idle_at(edges[split:], a_before)
    return b_idle[1::2] - b_idle[0::2], a_idle[1::2] - a_idle[0::2]


@dataclass(frozen=True)
class _CoIdle:
    """Per GPU and gap, the other GPUs' gap time inside it (``idle``) and how many of
    them are idle some of it (``others``); per ordered pair ``(gpu, other)``, the
    other's gap time inside the GPU's gaps (``pairs``). Sums over the pairs as they
    are found: a per-gap array per pair of GPUs is not kept."""

    idle: dict[int, np.ndarray]
    others: dict[int, np.ndarray]
    pairs: dict[tuple[int, int], int]


def _co_idle_by_gap(gaps_by_gpu: dict[int, _GpuGaps]) -> _CoIdle:
    """:class:`_CoIdle` of every pair of GPUs."""
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
    return _CoIdle(idle=idle, others=others, pairs=pairs)


@dataclass(frozen=True)
class _Sweep:
    """Per GPU, the time inside each of its gaps with at least one other GPU idle
    (``any``) and with every other GPU in its window idle, at least one in one
    (``all``); ``observed_ns[k]``: the time with every GPU inside its window and
    ``k`` GPUs idle."""

    any: dict[int, np.ndarray]
    all: dict[int, np.ndarray]
    observed_ns: list[int]


def _exclusive_cum_sum(values: np.ndarray) -> np.ndarray:
    """Sums of all earlier elements."""
    total = np.empty(len(values), dtype=np.int64)
    if len(values):
        total[0] = 0
        np.cumsum(values[:-1], out=total[1:])
    return total


def _sweep(windows: pl.DataFrame, gaps_by_gpu: dict[int, _GpuGaps]) -> _Sweep:
    """A sweep over every gap and window boundary in time order.

    Each boundary opens an elementary segment up to the next one, with ``idle`` GPUs
    in a gap and ``in_window`` GPUs inside their window; integrals up to a boundary
    are sums over the segments before it. Ties need no order: the segments between
    boundaries of one instant have length 0.
    """
    gpus = list(gaps_by_gpu)
    g = windows.height
    edge_counts = [2 * len(own.starts) for own in gaps_by_gpu.values()]
    gap_edges = sum(edge_counts)
    times = np.empty(gap_edges + 2 * g, dtype=np.int64)
    for own, end in zip(gaps_by_gpu.values(), itertools.accumulate(edge_counts), strict=True):
        own.write_edges(times[end - 2 * len(own.starts) : end])
    times[gap_edges : gap_edges + g] = windows.get_column(WINDOW_START).to_numpy()
    times[gap_edges + g :] = windows.get_column(WINDOW_END).to_numpy()
    source = np.repeat(np.arange(len(gpus) + 1, dtype=np.int16), [*edge_counts, 2 * g])
    step = np.zeros(len(times), dtype=np.int8)  # +1 at a gap start, -1 at a gap end
    step[0:gap_edges:2], step[1:gap_edges:2] = 1, -1
    # The runs are sorted: a stable sort merges them (and keeps each GPU's edges in
    # their order, so its k-th edge is its k-th row below). Arrays are freed as soon
    # as they are used: at millions of gaps each is tens of MB.
    order = np.argsort(times, kind="stable")
    t = times[order]
    del times
    source, step = source[order], step[order]
    # Window boundaries are few: in_window is constant between them.
    window_rows = np.flatnonzero(order >= gap_edges)
    opens = np.where(order[window_rows] < gap_edges + g, 1, -1)
    del order
    idle = np.cumsum(step, dtype=np.int32)
    del step
    length = np.diff(t, append=t[-1:])
    del t

    bounds = [0, *window_rows.tolist(), len(length)]
    levels = [0, *np.cumsum(opens).tolist()]
    all_len = np.zeros(len(length), dtype=np.int64)
    observed = [0] * (g + 1)
    for lo, hi, in_window in zip(bounds[:-1], bounds[1:], levels, strict=True):
        if in_window >= 2:
            all_len[lo:hi] = np.where(idle[lo:hi] == in_window, length[lo:hi], 0)
        if in_window == g:
            for k in range(g + 1):
                observed[k] += int(length[lo:hi][idle[lo:hi] == k].sum())
    np.multiply(length, idle >= 2, out=length)
    del idle
    cum_any = _exclusive_cum_sum(length)
    del length
    cum_all = _exclusive_cum_sum(all_len)
    del all_len
    any_ns, all_ns = {}, {}
    for i, gpu in enumerate(gpus):
        rows = np.flatnonzero(source == i)
        any_ns[gpu] = cum_any[rows[1::2]] - cum_any[rows[0::2]]
        all_ns[gpu] = cum_all[rows[1::2]] - cum_all[rows[0::2]]
    return _Sweep(any=any_ns, all=all_ns, observed_ns=observed)


def _two_gpu_sweep(
    windows: pl.DataFrame,
    gaps_by_gpu: dict[int, _GpuGaps],
    co: _CoIdle,
) -> _Sweep:
    """:func:`_sweep` for two GPUs, from the co-idle time alone.

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
    return _Sweep(
        any={a: co.idle[a], b: co.idle[b]},
        all={a: co.idle[a], b: co.idle[b]},
        observed_ns=[end - start - idle + both, idle - 2 * both, both],  # type: ignore[operator]
    )


def _per_gap(
    gaps_by_gpu: dict[int, _GpuGaps], co: _CoIdle, sweep: _Sweep
) -> dict[int, pl.DataFrame]:
    """Per GPU, its rows of the per-gap table."""
    tables = {}
    for gpu, own in gaps_by_gpu.items():
        duration = own.durations
        dur = duration.astype(np.float64)
        # The gap's own GPU is idle all along: the integral of idle GPUs over the gap is
        # its length plus the co-idle time of every other GPU.
        idle = duration + co.idle[gpu]
        others_idle = co.others[gpu]
        idle_mean = idle / dur
        idle_mean -= 1.0
        any_share = sweep.any[gpu] / dur
        # With two GPUs both integrals are the co-idle time (_two_gpu_sweep).
        all_share = any_share if sweep.all[gpu] is sweep.any[gpu] else sweep.all[gpu] / dur
        columns = {
            GPU: np.full(len(duration), gpu, dtype=np.int32),
            START: own.starts,
            END: own.ends,
            "duration_ns": duration,
            "others_idle": others_idle,
            "others_idle_mean": idle_mean,
            "others_any_idle_share": any_share,
            "others_all_idle_share": all_share,
        }
        # One GPU per table: its column is sorted, as aggregations downstream may see.
        tables[gpu] = pl.DataFrame(columns, schema=_PER_GAP_SCHEMA).with_columns(
            pl.col(GPU).set_sorted()
        )
    return tables


def _co_idle(co: _CoIdle) -> pl.DataFrame:
    """Co-idle time of ordered GPU pairs: ``gpu``, ``other``, ``co_idle_ns``."""
    gpus = list(co.idle)
    rows = [(gpu, other, co.pairs[gpu, other]) for gpu in gpus for other in gpus if other != gpu]
    return pl.DataFrame(
        rows, schema={GPU: pl.Int32, "other": pl.Int32, "co_idle_ns": pl.Int64}, orient="row"
    )


def _pair_table(
    windows: pl.DataFrame, gaps_by_gpu: dict[int, _GpuGaps], ordered_co_idle: pl.DataFrame
) -> pl.DataFrame:
    w = windows.select(GPU, WINDOW_START, WINDOW_END)
    pairs = (
        w.join(w, how="cross", suffix="_b")
        .filter(pl.col(GPU) < pl.col(f"{GPU}_b"))
        .select(
            pl.col(GPU).alias("gpu_a"),
            pl.col(f"{GPU}_b").alias("gpu_b"),
            pl.max_horizontal(WINDOW_START, f"{WINDOW_START}_b").alias("common_start_ns"),
            pl.min_horizontal(WINDOW_END, f"{WINDOW_END}_b").alias("_end"),
        )
        .with_columns(
            pl.max_horizontal("common_start_ns", "_end").alias("common_end_ns"),
        )
        .with_columns((pl.col("common_end_ns") - pl.col("common_start_ns")).alias("common_ns"))
        .drop("_end")
        .sort("gpu_a", "gpu_b")
    )
    spans = {
        side: pairs.select(
            pl.col(f"gpu_{side}").alias(GPU),
            pl.col("common_start_ns").alias(START),
            pl.col("common_end_ns").alias(END),
        )
        for side in ("a", "b")
    }
    pairs = pairs.with_columns(
        _idle_inside(spans["a"], gaps_by_gpu, "idle_a_ns"),
        _idle_inside(spans["b"], gaps_by_gpu, "idle_b_ns"),
    )
    co = ordered_co_idle.rename({GPU: "gpu_a", "other": "gpu_b"})
    length = pl.col("common_ns").cast(pl.Float64)
    has_window = pl.col("common_ns") > 0
    # Products of ns values overflow Int64 beyond ~3 s each, hence floats.
    expected_share = (
        pl.col("idle_a_ns").cast(pl.Float64)
        / length
        * (pl.col("idle_b_ns").cast(pl.Float64) / length)
    )
    pairs = (
        pairs.join(co, on=["gpu_a", "gpu_b"], how="left")
        .with_columns(pl.col("co_idle_ns").fill_null(0))
        .with_columns(
            pl.when(has_window).then(pl.col("idle_a_ns") / length).alias("idle_a_share"),
            pl.when(has_window).then(pl.col("idle_b_ns") / length).alias("idle_b_share"),
            pl.when(has_window).then(pl.col("co_idle_ns") / length).alias("co_idle_share"),
            pl.when(has_window).then(expected_share).alias("expected_co_idle_share"),
            pl.when(has_window).then(expected_share * length).alias("_expected"),
            pl.max_horizontal(
                pl.lit(0, pl.Int64), pl.col("idle_a_ns") + pl.col("idle_b_ns") - pl.col("common_ns")
            ).alias("min_co_idle_ns"),
            pl.min_horizontal("idle_a_ns", "idle_b_ns").alias("max_co_idle_ns"),
        )
        .with_columns(
            pl.col("_expected").round().cast(pl.Int64).alias("expected_co_idle_ns"),
            pl.when(pl.col("_expected") > 0)
            .then(pl.col("co_idle_ns") / pl.col("_expected"))
            .alias("co_idle_ratio"),
            _score(
                pl.col("co_idle_ns").cast(pl.Float64),
                pl.col("_expected"),
                pl.col("min_co_idle_ns").cast(pl.Float64),
                pl.col("max_co_idle_ns").cast(pl.Float64),
            ).alias("stagger_score"),
        )
        .with_columns(_verdict(pl.col("stagger_score")).alias("verdict"))
    )
    return pairs.select(
        "gpu_a",
        "gpu_b",
        "common_start_ns",
        "common_end_ns",
        "common_ns",
        "idle_a_ns",
        "idle_b_ns",
        "idle_a_share",
        "idle_b_share",
        "co_idle_ns",
        "co_idle_share",
        "expected_co_idle_share",
        "expected_co_idle_ns",
        "_expected",
        "co_idle_ratio",
        "min_co_idle_ns",
        "max_co_idle_ns",
        "stagger_score",
        "verdict",
    )


def _all_is_any(gpu_count: int) -> list[pl.Expr]:
    """With two GPUs, the all-idle share of a gap is its any-idle share (_two_gpu_sweep):
    the expressions that copy it instead of summing it again."""
    if gpu_count != 2:
        return []
    return [pl.col("others_any_idle_share").alias("others_all_idle_share")]


def _per_gpu(windows: pl.DataFrame, per_gap: dict[int, pl.DataFrame]) -> pl.DataFrame:
    dur = pl.col("duration_ns")
    total = dur.sum()
    copied = _all_is_any(windows.height)
    weighted = {
        name: pl.when(total > 0).then((pl.col(name) * dur).sum() / total)
        for name in ("others_idle_mean", "others_any_idle_share", "others_all_idle_share")
        if name not in {c.meta.output_name() for c in copied}
    }
    # The schema first: a trace without GPUs has no frames.
    agg = pl.concat(
        [
            pl.DataFrame(schema=_PER_GPU_SCHEMA),
            *[
                frame.select(
                    pl.lit(gpu, pl.Int32).alias(GPU),
                    pl.len().cast(pl.Int64).alias("gap_count"),
                    total.alias("gap_ns"),
                    *[expr.alias(name) for name, expr in weighted.items()],
                ).with_columns(copied)
                for gpu, frame in per_gap.items()
            ],
        ]
    )
    return (
        windows.select(GPU)
        .join(agg, on=GPU, how="left")
        .with_columns(pl.col("gap_count", "gap_ns").fill_null(0))
        .sort(GPU)
    )


def _poisson_binomial(shares: list[float]) -> list[float]:
    """P(exactly k of the GPUs idle), k = 0..len(shares), for independent GPUs."""
    dist = [1.0]
    for p in shares:  # one step per GPU, not per gap
        dist = [
            (dist[k] if k < len(dist) else 0.0) * (1 - p) + (dist[k - 1] * p if k > 0 else 0.0)
            for k in range(len(dist) + 1)
        ]
    return dist


def _all_gpu(
    windows: pl.DataFrame, gaps_by_gpu: dict[int, _GpuGaps], observed_ns: list[int]
) -> tuple[pl.DataFrame, dict[str, int | float | None]]:
    g = windows.height
    start = windows.get_column(WINDOW_START).max()
    end = windows.get_column(WINDOW_END).min()
    empty_counts = pl.DataFrame(
        schema={
            "idle_gpus": pl.Int64,
            "observed_ns": pl.Int64,
            "observed_share": pl.Float64,
            "expected_share": pl.Float64,
        }
    )
    none: dict[str, int | float | None] = {
        "common_start_ns": None,
        "common_end_ns": None,
        "common_ns": 0,
        "all_idle_ns": None,
        "any_idle_ns": None,
        "all_idle_share": None,
        "any_idle_share": None,
        "expected_all_idle_share": None,
        "expected_any_idle_share": None,
        "all_over_any_share": None,
    }
    if g == 0 or start is None or end is None or end <= start:  # type: ignore[operator]
        return empty_counts, none
    length = int(end) - int(start)  # type: ignore[call-overload]
    spans = windows.select(
        GPU, pl.lit(start, pl.Int64).alias(START), pl.lit(end, pl.Int64).alias(END)
    )
    shares = (_idle_inside(spans, gaps_by_gpu, "idle_ns").cast(pl.Float64) / length).to_list()
    expected = _poisson_binomial(shares)
    counts = (
        pl.DataFrame(
            {
                "idle_gpus": list(range(g + 1)),
                "expected_share": expected,
                "observed_ns": observed_ns,
            },
            schema={"idle_gpus": pl.Int64, "expected_share": pl.Float64, "observed_ns": pl.Int64},
        )
        .with_columns((pl.col("observed_ns") / length).alias("observed_share"))
        .select("idle_gpus", "observed_ns", "observed_share", "expected_share")
    )
    all_idle = int(counts.filter(pl.col("idle_gpus") == g).get_column("observed_ns").sum())
    any_idle = int(counts.filter(pl.col("idle_gpus") >= 1).get_column("observed_ns").sum())
    return counts, {
        "common_start_ns": int(start),  # type: ignore[call-overload]
        "common_end_ns": int(end),  # type: ignore[call-overload]
        "common_ns": length,
        "all_idle_ns": all_idle,
        "any_idle_ns": any_idle,
        "all_idle_share": all_idle / length,
        "any_idle_share": any_idle / length,
        "expected_all_idle_share": expected[g],
        "expected_any_idle_share": 1.0 - expected[0],
        "all_over_any_share": all_idle / any_idle if any_idle else None,
    }


def measure_stagger(
    gaps: pl.DataFrame, windows: pl.DataFrame, per_gap_table: bool = True
) -> StaggerResult:
    """Compare how the GPUs' gaps overlap with what independent gaps would give.

    :param gaps: ``gpu``, ``start_ns``, ``end_ns`` (other columns ignored); the gaps of
        one GPU must not overlap each other.
    :param windows: one row per GPU: ``gpu``, ``window_start_ns``, ``window_end_ns``.
    :param per_gap_table: keep the per-gap table (``StaggerResult.gaps``, a row per
        gap: only ``analyze --detail full`` shows it); else it is empty, and every
        other field is the same.
    """
    w = windows.select(
        pl.col(GPU).cast(pl.Int32),
        pl.col(WINDOW_START).cast(pl.Int64),
        pl.col(WINDOW_END).cast(pl.Int64),
    ).sort(GPU)
    if w.get_column(GPU).is_duplicated().any():
        raise ValueError(
            "stagger compares physical GPUs and needs one window per GPU; with several "
            "process-devices on one GPU (nvidia busy mode) pass per-GPU gaps and windows"
        )
    gaps_by_gpu = _gaps_by_gpu(
        gaps.select(
            pl.col(GPU).cast(pl.Int32), pl.col(START).cast(pl.Int64), pl.col(END).cast(pl.Int64)
        ),
        w,
    )
    co = _co_idle_by_gap(gaps_by_gpu)
    sweep = _two_gpu_sweep(w, gaps_by_gpu, co) if w.height == 2 else _sweep(w, gaps_by_gpu)
    per_gap_by_gpu = _per_gap(gaps_by_gpu, co, sweep)
    pairs = _pair_table(w, gaps_by_gpu, _co_idle(co))
    # The shares over all gaps are summed over these columns, so they come out the
    # same with or without the rest of the table.
    kept = _PER_GAP_SCHEMA if per_gap_table else _SHARE_COLUMNS
    per_gap = pl.concat(
        [
            pl.DataFrame(schema={c: _PER_GAP_SCHEMA[c] for c in kept}),
            *[frame.select(*kept) for frame in per_gap_by_gpu.values()],
        ]
    )
    per_gpu = _per_gpu(w, per_gap_by_gpu)
    del per_gap_by_gpu
    idle_count, all_gpu = _all_gpu(w, gaps_by_gpu, sweep.observed_ns)

    valid = pairs.filter(pl.col("common_ns") > 0)
    observed = int(valid.get_column("co_idle_ns").sum())
    expected = float(valid.get_column("_expected").sum())
    score = (
        _scalar_score(
            float(observed),
            expected,
            float(valid.get_column("min_co_idle_ns").sum()),
            float(valid.get_column("max_co_idle_ns").sum()),
        )
        if valid.height
        else None
    )
    gap_total = int(per_gap.get_column("duration_ns").sum())
    copied = _all_is_any(w.height)
    others = per_gap.select(
        ((pl.col(c) * pl.col("duration_ns")).sum() / pl.col("duration_ns").sum()).alias(c)
        for c in ("others_any_idle_share", "others_all_idle_share")
        if c not in {c.meta.output_name() for c in copied}
    ).with_columns(copied)
    if w.height < 2:
        verdict, reason = "not applicable", "one GPU: there is no other GPU to compare gaps with"
    elif gap_total == 0:
        verdict, reason = "not applicable", "no gaps inside the analysis windows"
    elif score is None:
        verdict, reason = (
            "not applicable",
            ("no GPU pair has overlapping windows with an idle share strictly between 0 and 1"),
        )
    else:
        verdict = pl.select(_verdict(pl.lit(score))).item()
        reason = (
            f"stagger score {score:+.2f} (staggered >= {STAGGERED_MIN_SCORE}, "
            f"aligned <= {ALIGNED_MAX_SCORE}); co-idle {observed} ns vs "
            f"{expected:.0f} ns expected if independent"
        )
    return StaggerResult(
        pairs=pairs.drop("_expected"),
        gaps=per_gap if per_gap_table else pl.DataFrame(schema=_PER_GAP_SCHEMA),
        per_gpu=per_gpu,
        idle_count=idle_count,
        gpu_count=w.height,
        common_start_ns=all_gpu["common_start_ns"],  # type: ignore[arg-type]
        common_end_ns=all_gpu["common_end_ns"],  # type: ignore[arg-type]
        common_ns=all_gpu["common_ns"],  # type: ignore[arg-type]
        all_idle_ns=all_gpu["all_idle_ns"],  # type: ignore[arg-type]
        any_idle_ns=all_gpu["any_idle_ns"],  # type: ignore[arg-type]
        all_idle_share=all_gpu["all_idle_share"],
        any_idle_share=all_gpu["any_idle_share"],
        expected_all_idle_share=all_gpu["expected_all_idle_share"],
        expected_any_idle_share=all_gpu["expected_any_idle_share"],
        all_over_any_share=all_gpu["all_over_any_share"],
        others_any_idle_share=others.item(0, 0) if gap_total else None,
        others_all_idle_share=others.item(0, 1) if gap_total else None,
        co_idle_ns=observed,
        expected_co_idle_ns=round(expected),
        co_idle_ratio=observed / expected if expected > 0 else None,
        stagger_score=score,
        verdict=verdict,  # type: ignore[arg-type]
        reason=reason,
    )
