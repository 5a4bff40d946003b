"""The interval algebra against a brute-force reference, and its invariants."""

from __future__ import annotations

import time

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nsysan.intervals import (
    clip_to_windows,
    complement_in,
    intersect_intervals,
    overlap_with,
    total_length,
    union_intervals,
    union_one_unit,
)

PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

Rows = list[tuple[int, int, int]]  # (group, start, end)


def frame(rows: Rows) -> pl.DataFrame:
    return pl.DataFrame(
        rows, schema={"g": pl.Int32, "start_ns": pl.Int64, "end_ns": pl.Int64}, orient="row"
    )


def as_rows(df: pl.DataFrame) -> Rows:
    return [tuple(r) for r in df.select("g", "start_ns", "end_ns").sort("g", "start_ns").rows()]


def windows_frame(wins: dict[int, tuple[int, int]]) -> pl.DataFrame:
    return pl.DataFrame(
        [(g, s, e) for g, (s, e) in wins.items()],
        schema={"g": pl.Int32, "window_start_ns": pl.Int64, "window_end_ns": pl.Int64},
        orient="row",
    )


# --- brute-force references: plain Python over tiny integer intervals ---------------


def ref_union(rows: Rows) -> Rows:
    out: Rows = []
    for g in sorted({r[0] for r in rows}):
        merged: list[list[int]] = []
        for s, e in sorted((r[1], r[2]) for r in rows if r[0] == g):
            if merged and s <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([s, e])
        out += [(g, s, e) for s, e in merged]
    return out


def ref_gaps(rows: Rows, wins: dict[int, tuple[int, int]]) -> Rows:
    out: Rows = []
    for g, (ws, we) in sorted(wins.items()):
        inside = [
            (g, max(s, ws), min(e, we)) for gg, s, e in rows if gg == g and e >= ws and s <= we
        ]
        cursor = ws
        for _, s, e in ref_union(inside) + [(g, we, we)]:
            if s > cursor:
                out.append((g, cursor, s))
            cursor = max(cursor, e)
    return out


def cells(rows: Rows, g: int) -> set[int]:
    """Unit cells [t, t+1) covered by the group's intervals (points cover none)."""
    return {t for gg, s, e in rows if gg == g for t in range(s, e)}


def ref_intersection(a: Rows, b: Rows) -> Rows:
    out: Rows = []
    for g in sorted({r[0] for r in a} | {r[0] for r in b}):
        both = sorted(cells(a, g) & cells(b, g))
        runs: list[list[int]] = []
        for t in both:
            if runs and runs[-1][1] == t:
                runs[-1][1] = t + 1
            else:
                runs.append([t, t + 1])
        out += [(g, s, e) for s, e in runs]
    return out


# --- strategies ------------------------------------------------------------------------

interval = st.tuples(
    st.integers(0, 2),
    st.integers(0, 40),
    st.one_of(st.just(0), st.integers(0, 12)),
).map(lambda t: (t[0], t[1], t[1] + t[2]))
interval_sets = st.lists(interval, max_size=25)
windows_st = st.dictionaries(
    st.integers(0, 3),
    st.tuples(st.integers(0, 30), st.integers(0, 30)).map(lambda t: (t[0], t[0] + t[1])),
    min_size=1,
    max_size=4,
)


# --- properties ------------------------------------------------------------------------


@PROPERTY
@given(interval_sets)
def test_union_matches_reference(rows: Rows) -> None:
    assert as_rows(union_intervals(frame(rows), "g")) == ref_union(rows)


@PROPERTY
@given(interval_sets)
def test_union_is_idempotent_and_disjoint(rows: Rows) -> None:
    once = union_intervals(frame(rows), "g")
    assert union_intervals(once, "g").equals(once)
    following = once.with_columns(pl.col("start_ns").shift(-1).over("g").alias("next"))
    assert following.filter(pl.col("next") <= pl.col("end_ns")).is_empty()


@PROPERTY
@given(interval_sets, st.randoms(use_true_random=False))
def test_results_do_not_depend_on_row_order(rows: Rows, rnd: object) -> None:
    shuffled = list(rows)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    wins = windows_frame({0: (0, 30), 1: (5, 45), 2: (10, 12)})
    assert union_intervals(frame(shuffled), "g").equals(union_intervals(frame(rows), "g"))
    assert complement_in(frame(shuffled), wins, "g").equals(complement_in(frame(rows), wins, "g"))


@PROPERTY
@given(interval_sets, windows_st)
def test_complement_matches_reference(rows: Rows, wins: dict[int, tuple[int, int]]) -> None:
    got = complement_in(frame(rows), windows_frame(wins), "g")
    assert as_rows(got) == ref_gaps(rows, wins)
    assert got.filter(pl.col("end_ns") <= pl.col("start_ns")).is_empty()


@PROPERTY
@given(interval_sets, windows_st)
def test_busy_plus_gap_equals_window(rows: Rows, wins: dict[int, tuple[int, int]]) -> None:
    w = windows_frame(wins)
    busy = total_length(clip_to_windows(frame(rows), w, "g"), "g", name="busy")
    gap = total_length(complement_in(frame(rows), w, "g"), "g", name="gap")
    table = (
        w.join(busy, on="g", how="left")
        .join(gap, on="g", how="left")
        .fill_null(0)
        .with_columns((pl.col("window_end_ns") - pl.col("window_start_ns")).alias("window"))
    )
    assert (table["busy"] + table["gap"] == table["window"]).all()
    assert (table["busy"] <= table["window"]).all()
    # Gaps never overlap busy time.
    gaps = complement_in(frame(rows), w, "g")
    assert intersect_intervals(gaps, frame(rows), "g").is_empty()


@PROPERTY
@given(interval_sets, interval_sets)
def test_intersection_matches_reference(a: Rows, b: Rows) -> None:
    assert as_rows(intersect_intervals(frame(a), frame(b), "g")) == ref_intersection(a, b)


@PROPERTY
@given(interval_sets, interval_sets)
def test_overlap_matches_cell_count(a: Rows, b: Rows) -> None:
    got = overlap_with(frame(a), frame(b), "g")
    expected = [len(set(range(s, e)) & cells(b, g)) for g, s, e in a]
    assert got["overlap_ns"].to_list() == expected
    assert got.drop("overlap_ns").equals(frame(a))


@PROPERTY
@given(interval_sets)
def test_total_length_counts_overlaps_once(rows: Rows) -> None:
    got = dict(total_length(frame(rows), "g").rows())
    assert got == {g: len(cells(rows, g)) for g in {r[0] for r in rows}}


# --- edge cases --------------------------------------------------------------------------


def test_touching_intervals_merge_and_leave_no_gap() -> None:
    df = frame([(0, 0, 5), (0, 5, 9)])
    assert as_rows(union_intervals(df, "g")) == [(0, 0, 9)]
    assert complement_in(df, windows_frame({0: (0, 9)}), "g").is_empty()


def test_nested_intervals_count_once() -> None:
    df = frame([(0, 0, 10), (0, 2, 3), (0, 4, 10)])
    assert as_rows(union_intervals(df, "g")) == [(0, 0, 10)]
    assert total_length(df, "g")["length_ns"].to_list() == [10]


def test_isolated_zero_length_interval_splits_a_gap() -> None:
    df = frame([(0, 0, 2), (0, 5, 5), (0, 8, 10)])
    assert as_rows(union_intervals(df, "g")) == [(0, 0, 2), (0, 5, 5), (0, 8, 10)]
    gaps = complement_in(df, windows_frame({0: (0, 10)}), "g")
    assert as_rows(gaps) == [(0, 2, 5), (0, 5, 8)]
    assert total_length(df, "g")["length_ns"].to_list() == [4]


def test_zero_length_interval_inside_or_touching_vanishes() -> None:
    df = frame([(0, 0, 4), (0, 2, 2), (0, 4, 4), (0, 0, 0)])
    assert as_rows(union_intervals(df, "g")) == [(0, 0, 4)]


def test_zero_length_at_window_edge_adds_no_gap() -> None:
    gaps = complement_in(frame([(0, 0, 0), (0, 3, 5)]), windows_frame({0: (0, 5)}), "g")
    assert as_rows(gaps) == [(0, 0, 3)]


def test_touching_intervals_do_not_intersect() -> None:
    assert intersect_intervals(frame([(0, 0, 5)]), frame([(0, 5, 9)]), "g").is_empty()
    assert intersect_intervals(frame([(0, 3, 3)]), frame([(0, 0, 9)]), "g").is_empty()


def test_window_without_intervals_is_one_gap_and_other_groups_are_ignored() -> None:
    gaps = complement_in(frame([(1, 0, 5)]), windows_frame({0: (2, 7)}), "g")
    assert as_rows(gaps) == [(0, 2, 7)]


def test_empty_and_ungrouped_inputs() -> None:
    empty = frame([])
    assert union_intervals(empty, "g").is_empty()
    assert total_length(empty)["length_ns"].to_list() == [0]
    ungrouped = pl.DataFrame({"start_ns": [0, 3, 20], "end_ns": [5, 8, 30]})
    w = pl.DataFrame({"window_start_ns": [0], "window_end_ns": [40]})
    assert union_intervals(ungrouped).rows() == [(0, 8), (20, 30)]
    assert complement_in(ungrouped, w).rows() == [(8, 20), (30, 40)]


def test_null_bounds_are_ignored_and_inverted_intervals_rejected() -> None:
    df = pl.DataFrame({"g": [0, 0], "start_ns": [0, None], "end_ns": [5, 9]})
    assert union_intervals(df, "g").rows() == [(0, 0, 5)]
    assert overlap_with(df, df, "g")["overlap_ns"].to_list() == [5, None]
    with pytest.raises(ValueError, match="end before they start"):
        union_intervals(frame([(0, 5, 3)]), "g")


def test_bad_windows_are_rejected() -> None:
    with pytest.raises(ValueError, match="more than one window"):
        complement_in(frame([]), windows_frame({0: (0, 5)}).vstack(windows_frame({0: (1, 2)})), "g")
    with pytest.raises(ValueError, match="ends before it starts"):
        complement_in(frame([]), windows_frame({0: (5, 1)}), "g")


def test_inputs_are_not_modified() -> None:
    a = frame([(0, 5, 9), (0, 0, 6), (1, 3, 3)])
    b = frame([(0, 4, 7)])
    a_copy, b_copy = a.clone(), b.clone()
    union_intervals(a, "g")
    complement_in(a, windows_frame({0: (0, 10)}), "g")
    intersect_intervals(a, b, "g")
    overlap_with(a, b, "g")
    assert a.equals(a_copy) and b.equals(b_copy)


def test_custom_column_names_and_multiple_keys() -> None:
    df = pl.DataFrame({"s": [1, 1], "p": [7, 8], "t0": [0, 0], "t1": [4, 4]})
    got = union_intervals(df, ["s", "p"], start="t0", end="t1")
    assert got.columns == ["s", "p", "t0", "t1"] and got.height == 2


@pytest.mark.slow
def test_five_million_intervals_are_fast() -> None:
    rng = np.random.default_rng(0)
    n = 5_000_000
    start = rng.integers(0, 10_000_000_000, n)
    df = pl.DataFrame(
        {
            "gpu": rng.integers(0, 8, n).astype(np.int32),
            "start_ns": start,
            "end_ns": start + rng.integers(0, 5_000, n),
        }
    )
    windows = pl.DataFrame(
        {
            "gpu": np.arange(8, dtype=np.int32),
            "window_start_ns": [0] * 8,
            "window_end_ns": [10_000_000_000] * 8,
        }
    )
    t0 = time.perf_counter()
    busy = union_intervals(df, "gpu")
    complement_in(busy, windows, "gpu")
    elapsed = time.perf_counter() - t0
    # A guard against row loops or quadratic joins, with room for a loaded 2-core box.
    assert elapsed < 10.0, f"union + complement of 5M intervals took {elapsed:.1f}s"


# --- the sorted fast paths equal the previous implementation ------------------------------
#
# ``_reference_*`` are the implementations before the fast paths (sort every time,
# hash-join every row): results must stay identical, row order and dtypes included.


def _reference_sorted(df: pl.DataFrame, keys: list[str], col: str) -> pl.DataFrame:
    return df.sort(col, maintain_order=True).sort(keys, maintain_order=True)


def _reference_changed(keys: list[str]) -> pl.Expr:
    return pl.any_horizontal([pl.col(k).ne_missing(pl.col(k).shift(1)) for k in keys]).fill_null(
        True
    )


def _reference_union(df: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    df = df.select(*keys, "start_ns", "end_ns").drop_nulls(["start_ns", "end_ns"])
    ordered = _reference_sorted(df, keys, "start_ns").with_columns(
        pl.col("end_ns").cum_max().over(keys).alias("_reach")
    )
    ordered = ordered.with_columns(
        (_reference_changed(keys) | (pl.col("start_ns") > pl.col("_reach").shift(1))).alias(
            "_opens"
        )
    ).with_columns(pl.col("_opens").shift(-1, fill_value=True).alias("_closes"))
    starts = ordered.filter(pl.col("_opens")).select(*keys, "start_ns")
    ends = ordered.filter(pl.col("_closes")).select(pl.col("_reach").alias("end_ns"))
    return pl.concat([starts, ends], how="horizontal")


def _reference_clip(iv: pl.DataFrame, w: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    iv = iv.select(*keys, "start_ns", "end_ns").drop_nulls(["start_ns", "end_ns"])
    return (
        iv.join(w, on=keys, how="inner")
        .filter(
            (pl.col("end_ns") >= pl.col("window_start_ns"))
            & (pl.col("start_ns") <= pl.col("window_end_ns"))
        )
        .select(
            *keys,
            pl.max_horizontal("start_ns", "window_start_ns").alias("start_ns"),
            pl.min_horizontal("end_ns", "window_end_ns").alias("end_ns"),
        )
    )


def _reference_complement(iv: pl.DataFrame, w: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    clipped = _reference_clip(iv, w, keys)
    edges = pl.concat(
        [
            w.select(*keys, pl.col(c).alias("start_ns"), pl.col(c).alias("end_ns"))
            for c in ("window_start_ns", "window_end_ns")
        ]
    ).cast(clipped.schema)  # type: ignore[arg-type]
    ordered = _reference_sorted(pl.concat([clipped, edges]), keys, "start_ns").with_columns(
        pl.col("end_ns").cum_max().over(keys).shift(1).alias("_reach")
    )
    return ordered.filter(
        ~_reference_changed(keys) & (pl.col("start_ns") > pl.col("_reach"))
    ).select(*keys, pl.col("_reach").alias("start_ns"), pl.col("start_ns").alias("end_ns"))


def _reference_union_one_unit(intervals: pl.DataFrame) -> pl.DataFrame:
    if not intervals.get_column("start_ns").is_sorted():
        intervals = intervals.sort("start_ns")
    opens = (pl.col("start_ns") > pl.col("_reach").shift(1)).fill_null(True)
    marked = intervals.with_columns(pl.col("end_ns").cum_max().alias("_reach")).with_columns(
        opens.alias("_opens")
    )
    union = pl.DataFrame(
        {
            "start_ns": marked.filter(pl.col("_opens")).get_column("start_ns"),
            "end_ns": marked.filter(pl.col("_opens").shift(-1, fill_value=True)).get_column(
                "_reach"
            ),
        }
    )
    length = pl.col("end_ns") - pl.col("start_ns")
    return union.with_columns((length.cum_sum() - length).alias("_before"))


def _identical(got: pl.DataFrame, expected: pl.DataFrame) -> None:
    assert got.schema == expected.schema
    assert got.equals(expected), (got, expected)


# Groups may be null; some windows have no intervals, some intervals no window.
nullable_interval = st.tuples(
    st.one_of(st.none(), st.integers(0, 2)),
    st.integers(0, 40),
    st.one_of(st.just(0), st.integers(0, 12)),
).map(lambda t: (t[0], t[1], t[1] + t[2]))
nullable_windows = st.dictionaries(
    st.one_of(st.none(), st.integers(0, 3)),
    st.tuples(st.integers(0, 30), st.integers(0, 30)).map(lambda t: (t[0], t[0] + t[1])),
    min_size=1,
    max_size=5,
)


def _in_group_order(df: pl.DataFrame) -> pl.DataFrame:
    return df.sort("g", "start_ns", "end_ns", nulls_last=False)


@PROPERTY
@given(
    st.lists(nullable_interval, max_size=30),
    nullable_windows,
    st.randoms(use_true_random=False),
)
def test_sorted_and_unsorted_input_match_the_reference(
    rows: Rows, wins: dict[int, tuple[int, int]], rnd: object
) -> None:
    shuffled = list(rows)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    w = windows_frame(wins)  # type: ignore[arg-type]
    for iv in (frame(shuffled), _in_group_order(frame(rows))):
        # The previous union failed on null groups (it never marked their first row).
        keyed = iv.filter(pl.col("g").is_not_null())
        _identical(union_intervals(keyed, "g"), _reference_union(keyed, ["g"]))
        _identical(complement_in(iv, w, "g"), _reference_complement(iv, w, ["g"]))
        for win in (w, w.sort("g"), w.sort("g", descending=True)):
            _identical(clip_to_windows(iv, win, "g"), _reference_clip(iv, win, ["g"]))
    ordered = _in_group_order(frame(rows))
    assert union_intervals(ordered, "g").equals(union_intervals(frame(shuffled), "g"))
    assert complement_in(ordered, w, "g").equals(complement_in(frame(shuffled), w, "g"))


@PROPERTY
@given(interval_sets, windows_st)
def test_other_integer_types_and_mixed_types_match_the_reference(
    rows: Rows, wins: dict[int, tuple[int, int]]
) -> None:
    iv = _in_group_order(frame(rows))
    w = windows_frame(wins)
    narrow = iv.cast({"start_ns": pl.Int32, "end_ns": pl.Int32})
    narrow_w = w.cast({"window_start_ns": pl.Int32, "window_end_ns": pl.Int32})
    for a, b in ((narrow, narrow_w), (narrow, w), (iv, narrow_w)):
        _identical(complement_in(a, b, "g"), _reference_complement(a, b, ["g"]))
        _identical(clip_to_windows(a, b, "g"), _reference_clip(a, b, ["g"]))
        _identical(union_intervals(a, "g"), _reference_union(a, ["g"]))


@PROPERTY
@given(interval_sets)
def test_union_of_already_disjoint_intervals_is_themselves(rows: Rows) -> None:
    once = union_intervals(frame(rows), "g")
    _identical(union_intervals(once, "g"), _reference_union(once, ["g"]))
    ungrouped = once.drop("g").with_columns(pl.lit(0, pl.Int8).alias("_all"))
    _identical(union_intervals(once.drop("g")), _reference_union(ungrouped, ["_all"]).drop("_all"))


@PROPERTY
@given(interval_sets, st.randoms(use_true_random=False))
def test_union_one_unit_matches_the_reference(rows: Rows, rnd: object) -> None:
    one = [(0, s, e) for _, s, e in rows]
    rnd.shuffle(one)  # type: ignore[attr-defined]
    for iv in (frame(one), _in_group_order(frame(one))):
        iv = iv.select("start_ns", "end_ns")
        _identical(union_one_unit(iv), _reference_union_one_unit(iv))
        disjoint = union_one_unit(iv).select("start_ns", "end_ns")
        _identical(union_one_unit(disjoint), _reference_union_one_unit(disjoint))


def test_union_one_unit_with_null_bounds_matches_the_reference() -> None:
    iv = pl.DataFrame({"start_ns": [0, 12, 15], "end_ns": [10, None, 20]})
    _identical(union_one_unit(iv), _reference_union_one_unit(iv))


def test_multiple_and_string_keys_match_the_reference() -> None:
    iv = pl.DataFrame(
        {
            "host": ["a", "a", "a", "b", "b", None],
            "dev": [0, 0, 1, 0, 0, 0],
            "start_ns": [0, 3, 1, 5, 9, 0],
            "end_ns": [2, 4, 8, 6, 20, 5],
        }
    )
    w = pl.DataFrame(
        {
            "host": ["b", "a", "a", "c", None],
            "dev": [0, 1, 0, 0, 0],
            "window_start_ns": [0, 0, 1, 2, 0],
            "window_end_ns": [30, 5, 10, 7, 9],
        }
    )
    keys = ["host", "dev"]
    for df in (iv, iv.sort([*keys, "start_ns"], nulls_last=False)):
        _identical(complement_in(df, w, keys), _reference_complement(df, w, keys))
        _identical(union_intervals(df, keys), _reference_union(df, keys))
        for win in (w, w.sort(keys, nulls_last=False)):
            _identical(clip_to_windows(df, win, keys), _reference_clip(df, win, keys))


def test_null_groups_are_groups_of_their_own() -> None:
    iv = pl.DataFrame(
        {"g": [None, None, 1, None], "start_ns": [0, 3, 0, 10], "end_ns": [5, 8, 2, 10]},
        schema={"g": pl.Int32, "start_ns": pl.Int64, "end_ns": pl.Int64},
    )
    assert union_intervals(iv, "g").rows() == [(None, 0, 8), (None, 10, 10), (1, 0, 2)]
    w = windows_frame({1: (0, 6)})
    assert clip_to_windows(iv, w, "g").rows() == [(1, 0, 2)]
    assert complement_in(iv, w, "g").rows() == [(1, 2, 6)]
