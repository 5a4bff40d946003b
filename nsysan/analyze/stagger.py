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

Everything is a sweep over sorted gap boundaries and as-of lookups of cumulative
idle time; Python loops run over GPUs and GPU pairs, never over gaps. The per-gap
"other GPUs" step costs ``O(G * N)`` lookups for ``G`` GPUs and ``N`` gaps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

import polars as pl

from nsysan.intervals import clip_to_windows

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


# Plans here are sorts and as-of joins over millions of rows; the in-memory engine
# runs them faster than the streaming one (polars' default).
_ENGINE: Final = "in-memory"

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
_GAP_BOUNDS = {"_s": pl.Int64, "_e": pl.Int64}
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


def _gaps_by_gpu(gaps: pl.DataFrame, windows: pl.DataFrame) -> dict[int, pl.DataFrame]:
    """Per GPU of ``windows``, its gaps clipped to its window, of positive length, sorted.

    Columns ``_s``, ``_e`` and ``_before`` (the GPU's gap time before ``_s``). Gaps
    that overlap an earlier gap of their GPU are an error. One table per GPU: no join
    or grouping over millions of gaps, and as-of joins need no ``by``.
    """
    # The library's checks (bounds in order, one valid window per GPU) run on the only
    # rows that can fail them.
    clip_to_windows(gaps.filter(pl.col(END) < pl.col(START)), windows, by=GPU)
    step = pl.col(START).diff()
    in_order = (step > 0) | ((step == 0) & (pl.col(END).diff() >= 0))
    length = pl.col(END) - pl.col(START)
    by_gpu, overlapping = {}, 0
    for gpu, start, end in windows.iter_rows():
        own = (
            gaps.filter((pl.col(GPU) == gpu) & (pl.col(END) >= start) & (pl.col(START) <= end))
            .select(pl.col(START).clip(lower_bound=start), pl.col(END).clip(upper_bound=end))
            .filter(pl.col(END) > pl.col(START))
        )
        if not own.select(in_order.all()).item():
            own = own.sort(START, END)
        overlapping += own.select((pl.col(START) < pl.col(END).shift(1)).sum()).item()
        by_gpu[gpu] = own.select(
            pl.col(START).alias("_s"),
            pl.col(END).alias("_e"),
            (length.cum_sum() - length).alias("_before"),
        )
    if overlapping:
        raise ValueError(f"{overlapping} gap(s) overlap an earlier gap of the same GPU")
    return by_gpu


def _idle_before(frame: pl.LazyFrame, at: str, gaps: pl.DataFrame, name: str) -> pl.LazyFrame:
    """``frame`` (in time order of ``at``) with ``name``: the gap time in ``gaps`` before ``at``.

    ``gaps`` is one GPU's table from ``_gaps_by_gpu``.
    """
    found = frame.join_asof(
        gaps.lazy(), left_on=at, right_on="_s", strategy="backward", check_sortedness=False
    )
    inside = pl.min_horizontal(pl.col(at) - pl.col("_s"), pl.col("_e") - pl.col("_s"))
    return found.with_columns((pl.col("_before") + inside).fill_null(0).alias(name)).drop(
        "_s", "_e", "_before"
    )


def _idle_inside(spans: pl.DataFrame, gaps_by_gpu: dict[int, pl.DataFrame], name: str) -> pl.Series:
    """Gap time of ``spans.gpu`` inside ``[start_ns, end_ns]`` of each span row."""
    rows = spans.select(GPU, START, END).with_row_index("_row")
    parts = []
    for gpu, gaps in gaps_by_gpu.items():
        own = rows.lazy().filter(pl.col(GPU) == gpu)
        own = _idle_before(own.sort(START), START, gaps, "_i0")
        own = _idle_before(own.sort(END), END, gaps, "_i1")
        parts.append(own.select("_row", (pl.col("_i1") - pl.col("_i0")).alias(name)))
    if not parts:
        return pl.Series(name, [], dtype=pl.Int64)
    return pl.concat(pl.collect_all(parts, engine=_ENGINE)).sort("_row").get_column(name)


def _sweep(
    windows: pl.DataFrame, gaps_by_gpu: dict[int, pl.DataFrame]
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A sweep over every gap and window boundary in time order.

    Each boundary ``t`` opens an elementary segment up to the next one, with ``idle``
    GPUs in a gap and ``in_window`` GPUs inside their window. Returns, per boundary,
    ``cum_any`` and ``cum_all``: the integrals over all earlier segments of "at least
    two GPUs idle" and "every GPU in its window idle, at least two in one" (all rows of
    one instant hold the same values, the integrals up to that instant); and per
    ``idle`` count the time (``observed_ns``) with every GPU inside its window.
    """
    bounds = [g.select(*_GAP_BOUNDS) for g in gaps_by_gpu.values()]
    gaps = pl.concat([pl.DataFrame(schema=_GAP_BOUNDS), *bounds])

    def events(times: pl.DataFrame, d_idle: int, d_win: int) -> pl.DataFrame:
        return times.select(
            pl.first().alias("t"),
            pl.lit(d_idle, pl.Int8).alias("d_idle"),
            pl.lit(d_win, pl.Int8).alias("d_win"),
        )

    # Narrow types: at millions of boundaries the sweep is bound by memory traffic.
    segments = (
        pl.concat(
            [
                events(gaps.select("_s"), 1, 0),
                events(gaps.select("_e"), -1, 0),
                events(windows.select(WINDOW_START), 0, 1),
                events(windows.select(WINDOW_END), 0, -1),
            ]
        )
        .lazy()
        # Ties need no order: the segments between events of one instant have length 0.
        .sort("t")
        .select(
            "t",
            pl.col("d_idle").cast(pl.Int32).cum_sum().alias("idle"),
            pl.col("d_win").cast(pl.Int32).cum_sum().alias("in_window"),
            (pl.col("t").shift(-1) - pl.col("t")).fill_null(0).alias("len_ns"),
        )
    )
    others_any = pl.col("idle") >= 2
    others_all = (pl.col("idle") == pl.col("in_window")) & (pl.col("in_window") >= 2)
    integrals = segments.select(
        "t",
        *[
            pl.when(inside)
            .then(pl.col("len_ns"))
            .otherwise(0)
            .cum_sum()
            .shift(1, fill_value=0)
            .alias(name)
            for name, inside in (("cum_any", others_any), ("cum_all", others_all))
        ],
    )
    observed = (
        segments.filter((pl.col("in_window") == windows.height) & (pl.col("len_ns") > 0))
        .group_by("idle")
        .agg(pl.col("len_ns").sum().alias("observed_ns"))
        .select(pl.col("idle").cast(pl.Int64), "observed_ns")
    )
    seg, counts = pl.collect_all([integrals, observed], engine=_ENGINE)
    return seg, counts


def _co_column(other: int) -> str:
    return f"_co_{other}"


def _per_gap(gaps_by_gpu: dict[int, pl.DataFrame], seg: pl.DataFrame) -> dict[int, pl.DataFrame]:
    """Per GPU, its rows of the per-gap table plus ``_co_<other>`` for every other GPU.

    ``_co_<other>``: the other GPU's gap time inside the gap, from as-of lookups into
    its gaps. The shares are integrals of the sweep over the gap.
    """
    lookup = seg.lazy().select("t", "cum_any", "cum_all")
    dur = pl.col("duration_ns").cast(pl.Float64)
    plans = []
    for gpu, own in gaps_by_gpu.items():
        co = [_co_column(other) for other in gaps_by_gpu if other != gpu]
        frame = own.lazy().select(
            pl.lit(gpu, pl.Int32).alias(GPU),
            pl.col("_s").alias(START),
            pl.col("_e").alias(END),
            (pl.col("_e") - pl.col("_s")).alias("duration_ns"),
        )
        for other, gaps in gaps_by_gpu.items():
            if other == gpu:
                continue
            # A GPU's gaps are disjoint: its gap starts and ends are each in time order.
            frame = _idle_before(frame, START, gaps, "_co_start")
            frame = _idle_before(frame, END, gaps, "_co_end")
            frame = frame.with_columns(
                (pl.col("_co_end") - pl.col("_co_start")).alias(_co_column(other))
            )
        for side, at in (("0", START), ("1", END)):
            frame = frame.join_asof(
                lookup.rename({c: f"{c}_{side}" for c in ("t", "cum_any", "cum_all")}),
                left_on=at,
                right_on=f"t_{side}",
                strategy="backward",
                check_sortedness=False,
            )
        # The gap's own GPU is idle all along: the integral of idle GPUs over the gap is
        # its length plus the co-idle time of every other GPU.
        idle = pl.sum_horizontal("duration_ns", *co)
        plans.append(
            frame.select(
                GPU,
                START,
                END,
                "duration_ns",
                pl.sum_horizontal(pl.lit(0, pl.Int64), *[pl.col(c) > 0 for c in co])
                .cast(pl.Int64)
                .alias("others_idle"),
                (idle / dur - 1.0).alias("others_idle_mean"),
                ((pl.col("cum_any_1") - pl.col("cum_any_0")) / dur).alias("others_any_idle_share"),
                ((pl.col("cum_all_1") - pl.col("cum_all_0")) / dur).alias("others_all_idle_share"),
                *co,
            )
        )
    return dict(zip(gaps_by_gpu, pl.collect_all(plans, engine=_ENGINE), strict=True))


def _co_idle(per_gap: dict[int, pl.DataFrame]) -> pl.DataFrame:
    """Co-idle time of ordered GPU pairs: ``gpu``, ``other``, ``co_idle_ns``."""
    rows = [
        (gpu, other, int(frame.get_column(_co_column(other)).sum()))
        for gpu, frame in per_gap.items()
        for other in per_gap
        if other != gpu
    ]
    return pl.DataFrame(
        rows, schema={GPU: pl.Int32, "other": pl.Int32, "co_idle_ns": pl.Int64}, orient="row"
    )


def _pair_table(
    windows: pl.DataFrame, gaps_by_gpu: dict[int, pl.DataFrame], ordered_co_idle: pl.DataFrame
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


def _per_gpu(windows: pl.DataFrame, per_gap: dict[int, pl.DataFrame]) -> pl.DataFrame:
    dur = pl.col("duration_ns")
    total = dur.sum()
    weighted = {
        name: pl.when(total > 0).then((pl.col(name) * dur).sum() / total)
        for name in ("others_idle_mean", "others_any_idle_share", "others_all_idle_share")
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
                )
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
    windows: pl.DataFrame, gaps_by_gpu: dict[int, pl.DataFrame], observed: pl.DataFrame
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
            {"idle_gpus": list(range(g + 1)), "expected_share": expected},
            schema={"idle_gpus": pl.Int64, "expected_share": pl.Float64},
        )
        .join(observed.rename({"idle": "idle_gpus"}), on="idle_gpus", how="left")
        .with_columns(pl.col("observed_ns").fill_null(0))
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


def measure_stagger(gaps: pl.DataFrame, windows: pl.DataFrame) -> StaggerResult:
    """Compare how the GPUs' gaps overlap with what independent gaps would give.

    :param gaps: ``gpu``, ``start_ns``, ``end_ns`` (other columns ignored); the gaps of
        one GPU must not overlap each other.
    :param windows: one row per GPU: ``gpu``, ``window_start_ns``, ``window_end_ns``.
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
    seg, idle_time = _sweep(w, gaps_by_gpu)
    per_gap_by_gpu = _per_gap(gaps_by_gpu, seg)
    pairs = _pair_table(w, gaps_by_gpu, _co_idle(per_gap_by_gpu))
    per_gap = pl.concat(
        [
            pl.DataFrame(schema=_PER_GAP_SCHEMA),
            *[frame.select(*_PER_GAP_SCHEMA) for frame in per_gap_by_gpu.values()],
        ]
    )
    per_gpu = _per_gpu(w, per_gap_by_gpu)
    idle_count, all_gpu = _all_gpu(w, gaps_by_gpu, idle_time)

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
    others = per_gap.select(
        ((pl.col(c) * pl.col("duration_ns")).sum() / pl.col("duration_ns").sum()).alias(c)
        for c in ("others_any_idle_share", "others_all_idle_share")
    )
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
        gaps=per_gap,
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
