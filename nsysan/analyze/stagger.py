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
``N`` gaps. The gap arrays and sweeps are :mod:`nsysan.analyze.stagger_sweep`.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Literal

import numpy as np
import polars as pl

from nsysan.analyze.stagger_sweep import (
    END,
    GPU,
    START,
    WINDOW_END,
    WINDOW_START,
    CoIdle,
    GpuGaps,
    Sweep,
    co_idle_by_gap,
    gap_arrays_by_gpu,
    idle_inside,
    sweep_edges,
    two_gpu_sweep,
)

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
# What the per-GPU figures read, too (_per_gpu).
_LEAN_COLUMNS = (*_SHARE_COLUMNS, "others_idle_mean")
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


def _per_gap(
    gaps_by_gpu: dict[int, GpuGaps], co: CoIdle, sweep: Sweep, whole: bool = True
) -> dict[int, pl.DataFrame]:
    """Per GPU, its rows of the per-gap table.

    Without ``whole``, only the columns the per-GPU figures and the shares over all
    gaps read (:data:`_LEAN_COLUMNS`), and each GPU's per-gap arrays of ``co`` and
    ``sweep`` are taken out of them once read: its rows replace them, rather than
    being held beside them until the end (at 5M gaps, ~0.1 GB less at the stagger's
    peak).
    """
    take = operator.getitem if whole else dict.pop
    kept = _PER_GAP_SCHEMA if whole else _LEAN_COLUMNS
    tables = {}
    for gpu, own in gaps_by_gpu.items():
        duration = own.durations
        dur = duration.astype(np.float64)
        # The gap's own GPU is idle all along: the integral of idle GPUs over the gap is
        # its length plus the co-idle time of every other GPU.
        idle = duration + take(co.idle, gpu)
        others_idle = take(co.others, gpu)
        idle_mean = idle / dur
        del idle
        idle_mean -= 1.0
        any_ns, all_ns = take(sweep.any, gpu), take(sweep.all, gpu)
        any_share = any_ns / dur
        # With two GPUs both integrals are the co-idle time (two_gpu_sweep).
        all_share = any_share if all_ns is any_ns else all_ns / dur
        del any_ns, all_ns, dur
        columns = {
            START: own.starts,
            END: own.ends,
            "duration_ns": duration,
            "others_idle": others_idle,
            "others_idle_mean": idle_mean,
            "others_any_idle_share": any_share,
            "others_all_idle_share": all_share,
        }
        if whole:
            columns[GPU] = np.full(len(duration), gpu, dtype=np.int32)
        table = pl.DataFrame(
            {name: columns[name] for name in kept},
            schema={name: _PER_GAP_SCHEMA[name] for name in kept},
        )
        # One GPU per table: its column is sorted, as aggregations downstream may see.
        tables[gpu] = table.with_columns(pl.col(GPU).set_sorted()) if whole else table
    return tables


def _co_idle(co: CoIdle) -> pl.DataFrame:
    """Co-idle time of ordered GPU pairs: ``gpu``, ``other``, ``co_idle_ns``."""
    gpus = list(co.idle)
    rows = [(gpu, other, co.pairs[gpu, other]) for gpu in gpus for other in gpus if other != gpu]
    return pl.DataFrame(
        rows, schema={GPU: pl.Int32, "other": pl.Int32, "co_idle_ns": pl.Int64}, orient="row"
    )


def _pair_table(
    windows: pl.DataFrame, gaps_by_gpu: dict[int, GpuGaps], ordered_co_idle: pl.DataFrame
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
        idle_inside(spans["a"], gaps_by_gpu, "idle_a_ns"),
        idle_inside(spans["b"], gaps_by_gpu, "idle_b_ns"),
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
    """With two GPUs, the all-idle share of a gap is its any-idle share (two_gpu_sweep):
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
    windows: pl.DataFrame, gaps_by_gpu: dict[int, GpuGaps], observed_ns: list[int]
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
    shares = (idle_inside(spans, gaps_by_gpu, "idle_ns").cast(pl.Float64) / length).to_list()
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
    gaps_by_gpu = gap_arrays_by_gpu(
        gaps.select(
            pl.col(GPU).cast(pl.Int32), pl.col(START).cast(pl.Int64), pl.col(END).cast(pl.Int64)
        ),
        w,
    )
    co = co_idle_by_gap(gaps_by_gpu)
    sweep = two_gpu_sweep(w, gaps_by_gpu, co) if w.height == 2 else sweep_edges(w, gaps_by_gpu)
    pairs = _pair_table(w, gaps_by_gpu, _co_idle(co))
    per_gap_by_gpu = _per_gap(gaps_by_gpu, co, sweep, whole=per_gap_table)
    del co
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
