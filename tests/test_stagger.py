"""Stagger: hand-computed frames, invariants, and the real 8-rank job (docs/metrics/stagger.md)."""

from __future__ import annotations

import itertools
import random
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from conftest import cori_rank_files
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from nsysan.analyze.stagger import (
    ALIGNED_MAX_SCORE,
    STAGGERED_MIN_SCORE,
    StaggerResult,
    measure_stagger,
)
from nsysan.intervals import clip_to_windows, overlap_with


def _windows(*bounds: tuple[int, int]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "gpu": list(range(len(bounds))),
            "window_start_ns": [b[0] for b in bounds],
            "window_end_ns": [b[1] for b in bounds],
        },
        schema={"gpu": pl.Int32, "window_start_ns": pl.Int64, "window_end_ns": pl.Int64},
    )


def _gaps(*rows: tuple[int, int, int]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "gpu": [r[0] for r in rows],
            "start_ns": [r[1] for r in rows],
            "end_ns": [r[2] for r in rows],
        },
        schema={"gpu": pl.Int32, "start_ns": pl.Int64, "end_ns": pl.Int64},
    )


def _pair(result: StaggerResult, a: int, b: int) -> dict[str, object]:
    return result.pairs.filter((pl.col("gpu_a") == a) & (pl.col("gpu_b") == b)).row(0, named=True)


# --- hand-computed ----------------------------------------------------------------------


def test_identical_gaps_are_aligned() -> None:
    gaps = _gaps((0, 10, 20), (0, 50, 60), (1, 10, 20), (1, 50, 60))
    r = measure_stagger(gaps, _windows((0, 100), (0, 100)))
    p = _pair(r, 0, 1)
    # idle 20 each of 100: expected co-idle 0.2 * 0.2 * 100 = 4; observed 20 = max.
    assert (p["idle_a_ns"], p["idle_b_ns"], p["co_idle_ns"]) == (20, 20, 20)
    assert p["expected_co_idle_ns"] == 4
    assert p["co_idle_ratio"] == pytest.approx(5.0)
    assert p["stagger_score"] == -1.0
    assert r.verdict == "aligned"
    assert (r.all_idle_ns, r.any_idle_ns, r.common_ns) == (20, 20, 100)
    assert r.expected_all_idle_share == pytest.approx(0.04)
    assert r.expected_any_idle_share == pytest.approx(0.36)
    assert r.gaps.get_column("others_idle").to_list() == [1, 1, 1, 1]
    assert r.gaps.get_column("others_all_idle_share").to_list() == [1.0] * 4


def test_alternating_disjoint_gaps_are_staggered() -> None:
    gaps = _gaps((0, 10, 20), (0, 50, 60), (1, 30, 40), (1, 70, 80))
    r = measure_stagger(gaps, _windows((0, 100), (0, 100)))
    p = _pair(r, 0, 1)
    assert p["co_idle_ns"] == 0
    assert p["stagger_score"] == 1.0
    assert r.verdict == "staggered"
    assert r.stagger_score == 1.0
    assert (r.all_idle_ns, r.any_idle_ns) == (0, 40)
    assert r.others_any_idle_share == 0.0
    assert r.gaps.get_column("others_idle").to_list() == [0, 0, 0, 0]
    assert r.idle_count.get_column("observed_ns").to_list() == [60, 40, 0]


def test_three_gpus_partial_overlap() -> None:
    # GPU 0 idle [0,10], GPU 1 [5,15], GPU 2 [8,20]; all windows [0,20].
    r = measure_stagger(_gaps((0, 0, 10), (1, 5, 15), (2, 8, 20)), _windows(*[(0, 20)] * 3))
    p01, p02, p12 = _pair(r, 0, 1), _pair(r, 0, 2), _pair(r, 1, 2)
    assert (p01["co_idle_ns"], p01["expected_co_idle_ns"], p01["stagger_score"]) == (5, 5, 0.0)
    assert p01["verdict"] == "independent"
    # 0-2: observed 2 = its minimum max(0, 10 + 12 - 20): as staggered as it can be.
    assert (p02["co_idle_ns"], p02["expected_co_idle_ns"], p02["min_co_idle_ns"]) == (2, 6, 2)
    assert p02["stagger_score"] == 1.0
    # 1-2: observed 7, expected 6, maximum 10: (6 - 7) / (10 - 6).
    assert p12["stagger_score"] == pytest.approx(-0.25)
    # Trace: O = 14, E = 17, O_min = 4 -> (17 - 14) / (17 - 4).
    assert r.co_idle_ns == 14 and r.expected_co_idle_ns == 17
    assert r.stagger_score == pytest.approx(3 / 13)
    assert r.verdict == "staggered"
    assert r.pairs["verdict"].to_list() == ["independent", "staggered", "aligned"]
    per_gap = r.gaps.sort("gpu")
    assert per_gap.get_column("others_idle").to_list() == [2, 2, 2]
    assert per_gap.get_column("others_idle_mean").to_list() == pytest.approx([0.7, 1.2, 0.75])
    assert per_gap.get_column("others_any_idle_share").to_list() == pytest.approx(
        [0.5, 1.0, 7 / 12]
    )
    assert per_gap.get_column("others_all_idle_share").to_list() == pytest.approx(
        [0.2, 0.2, 2 / 12]
    )
    # Time with k GPUs idle: k=1 [0,5)+[15,20), k=2 [5,8)+[10,15), k=3 [8,10).
    assert r.idle_count.get_column("observed_ns").to_list() == [0, 10, 8, 2]
    assert r.idle_count.get_column("expected_share").to_list() == pytest.approx(
        [0.1, 0.35, 0.4, 0.15]
    )
    assert (r.all_idle_ns, r.any_idle_ns) == (2, 20)


@pytest.mark.parametrize("gpus", [2, 3, 8])
def test_without_the_per_gap_table_every_other_result_is_the_same(gpus: int) -> None:
    rng = random.Random(gpus)
    rows = []
    for gpu in range(gpus):
        t = 0
        for _ in range(400):
            t += rng.randint(1, 50)
            end = t + rng.randint(1, 30)
            rows.append((gpu, t, end))
            t = end
    gaps, windows = _gaps(*rows), _windows(*[(0, 40_000)] * gpus)
    full = measure_stagger(gaps, windows)
    lean = measure_stagger(gaps, windows, per_gap_table=False)
    assert full.gaps.height == 400 * gpus and lean.gaps.is_empty()
    assert lean.gaps.schema == full.gaps.schema
    for field in StaggerResult.__dataclass_fields__:
        if field == "gaps":
            continue
        a, b = getattr(full, field), getattr(lean, field)
        assert a.equals(b) if isinstance(a, pl.DataFrame) else a == b, field


def test_pairs_are_measured_over_the_overlap_of_their_windows() -> None:
    gaps = _gaps((0, 40, 60), (1, 55, 65))
    r = measure_stagger(gaps, _windows((0, 100), (50, 150)))
    p = _pair(r, 0, 1)
    assert (p["common_start_ns"], p["common_end_ns"], p["common_ns"]) == (50, 100, 50)
    assert (p["idle_a_ns"], p["idle_b_ns"], p["co_idle_ns"]) == (10, 10, 5)
    assert p["expected_co_idle_share"] == pytest.approx(0.04)
    assert (r.common_start_ns, r.common_end_ns) == (50, 100)


def test_gaps_are_clipped_to_their_window() -> None:
    r = measure_stagger(_gaps((0, -50, 10), (1, 90, 500)), _windows((0, 100), (0, 100)))
    assert r.gaps.select("start_ns", "end_ns").rows() == [(0, 10), (90, 100)]


@pytest.mark.parametrize(
    ("gaps", "windows", "why"),
    [
        (_gaps((0, 10, 20)), _windows((0, 100)), "one GPU"),
        (_gaps(), _windows((0, 100), (0, 100)), "no gaps"),
        (_gaps((0, 10, 20), (1, 210, 220)), _windows((0, 100), (200, 300)), "no GPU pair"),
    ],
)
def test_not_applicable(gaps: pl.DataFrame, windows: pl.DataFrame, why: str) -> None:
    r = measure_stagger(gaps, windows)
    assert r.verdict == "not applicable"
    assert why in r.reason
    assert r.stagger_score is None


def test_overlapping_gaps_of_one_gpu_are_rejected() -> None:
    with pytest.raises(ValueError, match="overlap"):
        measure_stagger(_gaps((0, 10, 30), (0, 20, 40)), _windows((0, 100), (0, 100)))


def test_touching_gaps_are_allowed() -> None:
    # A zero-length kernel splits a gap in two touching gaps (intervals.py).
    r = measure_stagger(_gaps((0, 10, 20), (0, 20, 30), (1, 10, 30)), _windows((0, 100), (0, 100)))
    assert _pair(r, 0, 1)["co_idle_ns"] == 20


def test_random_independent_gaps_give_ratio_near_one() -> None:
    rng = random.Random(7)
    rows = []
    for gpu in range(4):
        bounds = sorted(rng.sample(range(10_000_000), 2000))
        rows += [(gpu, s, e) for s, e in zip(bounds[0::2], bounds[1::2], strict=True)]
    r = measure_stagger(_gaps(*rows), _windows(*[(0, 10_000_000)] * 4))
    assert r.co_idle_ratio == pytest.approx(1.0, abs=0.05)
    assert ALIGNED_MAX_SCORE < r.stagger_score < STAGGERED_MIN_SCORE  # type: ignore[operator]
    assert r.verdict == "independent"


# --- invariants -------------------------------------------------------------------------


@st.composite
def _scenes(draw: st.DrawFn) -> tuple[pl.DataFrame, pl.DataFrame]:
    count = draw(st.integers(1, 4))
    windows, rows = [], []
    for gpu in range(count):
        start = draw(st.integers(0, 50))
        windows.append((start, start + draw(st.integers(0, 100))))
        bounds = sorted(draw(st.sets(st.integers(-10, 160), max_size=12)))
        rows += [(gpu, s, e) for s, e in zip(bounds[0::2], bounds[1::2], strict=False)]
    return _gaps(*rows), _windows(*windows)


def _check_invariants(r: StaggerResult) -> None:
    p = r.pairs
    scores = p.get_column("stagger_score").drop_nulls()
    assert scores.is_empty() or (scores.min() >= -1.0 and scores.max() <= 1.0)  # type: ignore[operator]
    assert r.stagger_score is None or -1.0 <= r.stagger_score <= 1.0
    assert (p["co_idle_ns"] <= p["max_co_idle_ns"]).all()
    assert (
        p["max_co_idle_ns"] == p.select(pl.min_horizontal("idle_a_ns", "idle_b_ns")).to_series()
    ).all()
    assert (p["co_idle_ns"] >= p["min_co_idle_ns"]).all()
    assert (p["idle_a_ns"] <= p["common_ns"]).all() and (p["idle_b_ns"] <= p["common_ns"]).all()
    g = r.gaps
    eps = 1e-9
    for col in ("others_any_idle_share", "others_all_idle_share"):
        assert g[col].is_between(-eps, 1 + eps).all()
    assert (g["others_all_idle_share"] <= g["others_any_idle_share"] + eps).all()
    assert (g["others_idle"] <= r.gpu_count - 1).all()
    assert g["others_idle_mean"].is_between(-eps, g["others_idle"] + eps).all()
    if r.common_ns:
        assert r.idle_count["observed_ns"].sum() == r.common_ns
        assert sum(r.idle_count["expected_share"]) == pytest.approx(1.0)
        assert r.all_idle_ns <= r.any_idle_ns <= r.common_ns  # type: ignore[operator]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_scenes())
def test_invariants(scene: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    _check_invariants(measure_stagger(*scene))


@settings(max_examples=15, deadline=None)
@given(_scenes(), st.randoms(use_true_random=False))
def test_result_does_not_depend_on_row_order(
    scene: tuple[pl.DataFrame, pl.DataFrame], rng: random.Random
) -> None:
    gaps, windows = scene
    a = measure_stagger(gaps, windows)
    b = measure_stagger(
        gaps.sample(fraction=1.0, shuffle=True, seed=rng.randrange(1000)), windows.reverse()
    )
    for name in ("pairs", "gaps", "per_gpu", "idle_count"):
        assert getattr(a, name).equals(getattr(b, name)), name
    assert (a.stagger_score, a.verdict, a.co_idle_ns) == (b.stagger_score, b.verdict, b.co_idle_ns)


@settings(max_examples=15, deadline=None)
@given(_scenes())
def test_pair_table_is_symmetric(scene: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    gaps, windows = scene
    last = windows.height - 1
    flip = pl.lit(last, pl.Int32) - pl.col("gpu")
    a = measure_stagger(gaps, windows)
    b = measure_stagger(
        gaps.with_columns(flip.alias("gpu")), windows.with_columns(flip.alias("gpu"))
    )
    mirrored = b.pairs.select(
        (last - pl.col("gpu_b")).alias("gpu_a"),
        (last - pl.col("gpu_a")).alias("gpu_b"),
        pl.col("idle_b_ns").alias("idle_a_ns"),
        pl.col("idle_a_ns").alias("idle_b_ns"),
        "co_idle_ns",
        "common_ns",
        "stagger_score",
    ).sort("gpu_a", "gpu_b")
    assert a.pairs.select(mirrored.columns).equals(mirrored)
    assert a.stagger_score == pytest.approx(b.stagger_score)


# --- regression: the implementation before the per-GPU sweep (kept as the reference) ------


def _reference(gaps: pl.DataFrame, windows: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """Per-gap table, ordered co-idle and idle-count time as the first implementation
    computed them: ``overlap_with`` of every gap against every other GPU's gaps, and a
    sweep over boundaries aggregated per instant."""
    w = windows.sort("gpu")
    clipped = (
        clip_to_windows(gaps.select("gpu", "start_ns", "end_ns"), w, by="gpu")
        .filter(pl.col("end_ns") > pl.col("start_ns"))
        .sort("gpu", "start_ns", "end_ns")
        .with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("duration_ns"))
        .with_row_index("_gap")
    )
    gpus = w.select("gpu")
    others = gpus.join(gpus.rename({"gpu": "other"}), how="cross").filter(
        pl.col("gpu") != pl.col("other")
    )
    probes = clipped.select("_gap", "gpu", "start_ns", "end_ns").join(others, on="gpu")
    co = overlap_with(
        probes,
        clipped.select(pl.col("gpu").alias("other"), "start_ns", "end_ns"),
        by="other",
        name="co_idle_ns",
    )
    zero, one = pl.lit(0, pl.Int64), pl.lit(1, pl.Int64)
    events = pl.concat(
        [
            clipped.select(pl.col("start_ns").alias("t"), one.alias("d_idle"), zero.alias("d_win")),
            clipped.select(
                pl.col("end_ns").alias("t"), (-one).alias("d_idle"), zero.alias("d_win")
            ),
            w.select(
                pl.col("window_start_ns").alias("t"), zero.alias("d_idle"), one.alias("d_win")
            ),
            w.select(
                pl.col("window_end_ns").alias("t"), zero.alias("d_idle"), (-one).alias("d_win")
            ),
        ]
    )
    seg = (
        events.group_by("t")
        .agg(pl.col("d_idle", "d_win").sum())
        .sort("t")
        .with_columns(
            pl.col("d_idle").cum_sum().alias("idle"),
            pl.col("d_win").cum_sum().alias("in_window"),
            (pl.col("t").shift(-1) - pl.col("t")).fill_null(0).alias("len_ns"),
        )
    )
    any_idle = (pl.col("idle") >= 2).cast(pl.Int64)
    all_idle = ((pl.col("idle") == pl.col("in_window")) & (pl.col("in_window") >= 2)).cast(pl.Int64)
    weighted = {
        "cum_idle": pl.col("len_ns") * pl.col("idle"),
        "cum_any": pl.col("len_ns") * any_idle,
        "cum_all": pl.col("len_ns") * all_idle,
    }
    lookup = seg.select("t", *[(e.cum_sum() - e).alias(n) for n, e in weighted.items()])
    counts = co.group_by("_gap").agg((pl.col("co_idle_ns") > 0).sum().alias("others_idle"))
    dur = pl.col("duration_ns").cast(pl.Float64)

    def during(name: str) -> pl.Expr:
        return pl.col(f"{name}_1") - pl.col(f"{name}_0")

    per_gap = (
        clipped.join(lookup.rename(lambda c: f"{c}_0"), left_on="start_ns", right_on="t_0")
        .join(lookup.rename(lambda c: f"{c}_1"), left_on="end_ns", right_on="t_1")
        .join(counts, on="_gap", how="left")
        .sort("gpu", "start_ns")
        .select(
            "gpu",
            "start_ns",
            "end_ns",
            "duration_ns",
            pl.col("others_idle").fill_null(0).cast(pl.Int64),
            (during("cum_idle") / dur - 1.0).alias("others_idle_mean"),
            (during("cum_any") / dur).alias("others_any_idle_share"),
            (during("cum_all") / dur).alias("others_all_idle_share"),
        )
    )
    idle_time = (
        seg.filter((pl.col("in_window") == w.height) & (pl.col("len_ns") > 0))
        .group_by("idle")
        .agg(pl.col("len_ns").sum().alias("observed_ns"))
    )
    return {
        "gaps": per_gap,
        "co_idle": co.group_by("gpu", "other").agg(pl.col("co_idle_ns").sum()),
        "idle_time": idle_time,
    }


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_scenes())
def test_matches_the_reference_implementation(scene: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    _assert_matches_the_reference(*scene)


def _assert_matches_the_reference(gaps: pl.DataFrame, windows: pl.DataFrame) -> None:
    r = measure_stagger(gaps, windows)
    ref = _reference(gaps, windows)
    assert_frame_equal(r.gaps, ref["gaps"])
    pairs = r.pairs.select("gpu_a", "gpu_b", "co_idle_ns").sort("gpu_a", "gpu_b")
    expected = (
        pairs.select("gpu_a", "gpu_b")
        .join(
            ref["co_idle"].rename({"gpu": "gpu_a", "other": "gpu_b"}),
            on=["gpu_a", "gpu_b"],
            how="left",
        )
        .with_columns(pl.col("co_idle_ns").fill_null(0))
    )
    assert_frame_equal(pairs, expected)
    observed = dict(ref["idle_time"].rows())
    assert r.idle_count.select("idle_gpus", "observed_ns").rows() == [
        (k, observed.get(k, 0)) for k in r.idle_count.get_column("idle_gpus")
    ]


@st.composite
def _touching_scenes(draw: st.DrawFn) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Gaps that touch, have length 0, or cross window edges, in any row order."""
    count = draw(st.integers(1, 4))
    windows, rows = [], []
    for gpu in range(count):
        start = draw(st.integers(0, 50))
        windows.append((start, start + draw(st.integers(0, 100))))
        at = draw(st.integers(-10, 40))
        for step, length in draw(
            st.lists(st.tuples(st.integers(0, 15), st.integers(0, 20)), max_size=10)
        ):
            rows.append((gpu, at + step, at + step + length))
            at += step + length
    order = draw(st.permutations(range(len(rows))))
    return _gaps(*[rows[i] for i in order]), _windows(*windows)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_touching_scenes())
def test_touching_and_empty_gaps_match_the_reference(
    scene: tuple[pl.DataFrame, pl.DataFrame],
) -> None:
    _assert_matches_the_reference(*scene)


# --- the real 8-rank job ----------------------------------------------------------------


@pytest.fixture(scope="module")
def cori() -> StaggerResult:
    files = cori_rank_files()
    if len(files) != 8:
        pytest.skip("cori-8rank-a reports not found in ../shared/traces")
    from nsysan import load_trace
    from nsysan.analyze.busy import measure_busy
    from nsysan.analyze.gaps import measure_gaps
    from nsysan.settings import Settings

    trace = load_trace(files)
    busy = measure_busy(trace, Settings())
    gaps = measure_gaps(busy.intervals, busy.summary, busy.keys)
    return measure_stagger(gaps.gaps, busy.windows)


@pytest.mark.shared
def test_cori_gaps_are_aligned(cori: StaggerResult) -> None:
    # docs/metrics/stagger.md#cori: every rank computes in short bursts at the same
    # time and idles together in between (one MPI time step).
    assert cori.gpu_count == 8
    assert cori.verdict == "aligned"
    assert cori.stagger_score == pytest.approx(-0.9418, abs=1e-4)
    assert cori.co_idle_ratio == pytest.approx(1.0120, abs=1e-4)
    assert cori.all_idle_share == pytest.approx(0.97396, abs=1e-5)
    assert cori.any_idle_share == pytest.approx(0.99204, abs=1e-5)
    assert cori.expected_all_idle_share == pytest.approx(0.88261, abs=1e-5)
    assert cori.others_all_idle_share == pytest.approx(0.98900, abs=1e-5)
    assert cori.common_ns == 6_726_258_887
    assert cori.pairs.height == 28
    assert (cori.pairs.get_column("verdict") == "aligned").all()
    assert cori.pairs.get_column("stagger_score").max() < -0.85  # type: ignore[operator]
    assert cori.per_gpu.get_column("gap_count").to_list() == [39] * 8
    _check_invariants(cori)


# --- synthetic scenarios with known ground truth (nsysan.simulate) -----------------------


def _simulated(name: str, folder: Path) -> tuple[StaggerResult, Any]:
    simulate = pytest.importorskip("nsysan.simulate", reason="scenario generator not available")
    if not hasattr(simulate, "generate"):
        pytest.skip("nsysan.simulate.generate is not available yet")
    from nsysan import load_trace
    from nsysan.analyze.busy import measure_busy
    from nsysan.analyze.gaps import measure_gaps
    from nsysan.settings import Settings

    path = folder / f"{name}.sqlite"
    truth = simulate.generate(name, path, seed=0, scale=0.1)
    busy = measure_busy(load_trace([path]), Settings())
    gaps = measure_gaps(busy.intervals, busy.summary, busy.keys)
    return measure_stagger(gaps.gaps, busy.windows), truth


def test_case_study_gaps_are_staggered(tmp_path: Path) -> None:
    # Seed 4.5: the feeding threads take turns on the GIL, so one GPU's gap falls
    # where another GPU runs.
    result, truth = _simulated("case-study", tmp_path)
    assert result.verdict == "staggered"
    assert result.stagger_score > STAGGERED_MIN_SCORE  # type: ignore[operator]
    assert result.co_idle_ratio == pytest.approx(truth.numbers["stagger_ratio"], abs=0.02)


def test_collective_waits_are_aligned(tmp_path: Path) -> None:
    # TP ranks wait for each other inside the same all-reduce: a common cause.
    result, _ = _simulated("tp-heads", tmp_path)
    assert result.verdict == "aligned"


def _disjoint(cuts: list[int]) -> tuple[list[int], list[int]]:
    """Intervals from sorted cut points taken in pairs (adjacent ones where cuts repeat)."""
    points = sorted(cuts)[: len(cuts) // 2 * 2]
    starts, ends = points[0::2], points[1::2]
    kept = [(s, e) for s, e in zip(starts, ends, strict=True) if e > s]
    return [s for s, _ in kept], [e for _, e in kept]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 60), max_size=24), st.lists(st.integers(0, 60), max_size=24))
def test_pairwise_co_idle_equals_instant_by_instant_overlap(a: list[int], b: list[int]) -> None:
    from nsysan.analyze.stagger_sweep import GpuGaps, _co_idle_in_gaps

    (a_s, a_e), (b_s, b_e) = _disjoint(a), _disjoint(b)
    gaps_a = GpuGaps(np.array(a_s, dtype=np.int64), np.array(a_e, dtype=np.int64))
    gaps_b = GpuGaps(np.array(b_s, dtype=np.int64), np.array(b_e, dtype=np.int64))
    in_a, in_b = _co_idle_in_gaps(gaps_a, gaps_b)
    idle_a = {t for s, e in zip(a_s, a_e, strict=True) for t in range(s, e)}
    idle_b = {t for s, e in zip(b_s, b_e, strict=True) for t in range(s, e)}
    assert in_a.tolist() == [len(idle_b & set(range(s, e))) for s, e in zip(a_s, a_e, strict=True)]
    assert in_b.tolist() == [len(idle_a & set(range(s, e))) for s, e in zip(b_s, b_e, strict=True)]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 60), max_size=24), st.lists(st.integers(-5, 70), min_size=1, max_size=9)
)
def test_idle_before_an_instant_is_the_gap_time_before_it(cuts: list[int], at: list[int]) -> None:
    from nsysan.analyze.stagger_sweep import GpuGaps

    starts, ends = _disjoint(cuts)
    gaps = GpuGaps(np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64))
    idle = {t for s, e in zip(starts, ends, strict=True) for t in range(s, e)}
    expected = [sum(1 for t in idle if t < instant) for instant in at]
    assert gaps.idle_before(np.array(at, dtype=np.int64)).tolist() == expected


# The sweep as one stable sort of every edge (before it was compiled): the reference.
def _exclusive_cum_sum(values: Any) -> Any:
    """Sums of all earlier elements."""
    total = np.empty(len(values), dtype=np.int64)
    if len(values):
        total[0] = 0
        np.cumsum(values[:-1], out=total[1:])
    return total


def _reference_sweep(windows: pl.DataFrame, gaps_by_gpu: dict[Any, Any]) -> Any:
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
        # The gaps are disjoint, so start, end, start, end ... is time order.
        own_edges = times[end - 2 * len(own.starts) : end]
        own_edges[0::2], own_edges[1::2] = own.starts, own.ends
    times[gap_edges : gap_edges + g] = windows.get_column("window_start_ns").to_numpy()
    times[gap_edges + g :] = windows.get_column("window_end_ns").to_numpy()
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
    return any_ns, all_ns, observed


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 80), max_size=16), min_size=3, max_size=5),
    st.lists(st.tuples(st.integers(0, 40), st.integers(0, 60)), min_size=5, max_size=5),
)
def test_compiled_sweep_equals_one_sort_of_every_edge(
    cuts: list[list[int]], spans: list[tuple[int, int]]
) -> None:
    from nsysan.analyze.stagger_sweep import GpuGaps, sweep_edges

    gaps_by_gpu = {}
    for gpu, gpu_cuts in enumerate(cuts):
        starts, ends = _disjoint(gpu_cuts)
        gaps_by_gpu[gpu] = GpuGaps(np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64))
    windows = pl.DataFrame(
        {
            "gpu": list(gaps_by_gpu),
            "window_start_ns": [s for s, _ in spans[: len(cuts)]],
            "window_end_ns": [s + n for s, n in spans[: len(cuts)]],
        }
    )
    got = sweep_edges(windows, gaps_by_gpu)
    any_ns, all_ns, observed = _reference_sweep(windows, gaps_by_gpu)
    assert got.observed_ns == observed
    for gpu in gaps_by_gpu:
        assert got.any[gpu].tolist() == any_ns[gpu].tolist()
        assert got.all[gpu].tolist() == all_ns[gpu].tolist()
