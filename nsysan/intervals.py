"""Interval algebra on polars tables: union, complement, intersection, overlap.

Every analysis of GPU time reduces to these few operations: busy time is the
*union* of operation intervals, gaps are its *complement* inside a window, NCCL
overlap with compute is an *intersection*, and host attribution asks how much of
one interval is *covered* by a set of others. See docs/metrics/gaps.md.

Definitions (all per group, the group being the values of the ``by`` columns):

* An interval is ``[start, end]`` with integer ends and ``start <= end``; its
  length is ``end - start``. Rows with a null bound are ignored; ``end < start``
  is a ``ValueError`` (the model never holds such rows).
* **Union** merges intervals that overlap *or touch* (``next.start <= max end so
  far``): ``[0, 5]`` and ``[5, 9]`` become ``[0, 9]``. The result is disjoint,
  with positive space between consecutive intervals, sorted by start.
* **Zero-length intervals** (``start == end``) are *points of activity*. They add
  nothing to any length, and they vanish into an interval that contains or touches
  them, but an isolated one is kept as a zero-length member of the union, so it
  splits the gap around it in two. That is how Nsight Systems' ``gpu_gaps`` rule
  treats an operation that starts and ends at the same nanosecond (its gaps run
  from one operation's end to the next operation's start), and it keeps
  ``union`` and ``complement_in`` exact inverses.
* **Complement** inside a window yields only gaps of positive length.
* **Intersection** yields only intervals of positive length (touching intervals
  and points do not intersect).

All functions are vectorised (sorts, cumulative maxima, as-of joins), never loop
over rows in Python, and never modify their inputs. Input already in group and
start order (a trace's kernels, a union passed on) is not sorted again: one check
replaces the sort, and the result is the same.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

__all__ = [
    "union_intervals",
    "complement_in",
    "clip_to_windows",
    "intersect_intervals",
    "total_length",
    "overlap_with",
    "sort_if_needed",
    "union_one_unit",
    "union_length",
    "is_union_inside",
]

START = "start_ns"
END = "end_ns"
WINDOW_START = "window_start_ns"
WINDOW_END = "window_end_ns"

# Key column used internally when the caller groups by nothing.
_ALL = "__nsysan_all"


def _keys(by: str | Sequence[str]) -> list[str]:
    return [by] if isinstance(by, str) else list(by)


def _validated(df: pl.DataFrame, by: list[str], start: str, end: str) -> pl.DataFrame:
    """The ``by``/start/end columns of ``df`` without null bounds; rejects ``end < start``."""
    missing = [c for c in (*by, start, end) if c not in df.columns]
    if missing:
        raise ValueError(f"interval table lacks column(s) {missing}; it has {df.columns}")
    out = df.select(*by, start, end).drop_nulls([start, end])
    inverted = out.filter(pl.col(end) < pl.col(start)).height
    if inverted:
        raise ValueError(f"{inverted} interval(s) end before they start ({end} < {start})")
    return out


def _grouped(df: pl.DataFrame, by: list[str]) -> tuple[pl.DataFrame, list[str]]:
    """``df`` and the key columns to group on (a constant key when ``by`` is empty)."""
    if by:
        return df, by
    return df.with_columns(pl.lit(0, dtype=pl.Int8).alias(_ALL)), [_ALL]


def _ungrouped(df: pl.DataFrame) -> pl.DataFrame:
    return df.drop(_ALL) if _ALL in df.columns else df


def _sorted_by_group(df: pl.DataFrame, keys: list[str], *cols: str) -> pl.DataFrame:
    # A stable sort by keys then cols; rows already in that order are returned as they are.
    return sort_if_needed(df, *keys, *cols)


def _group_changed(keys: list[str]) -> pl.Expr:
    """True on the first row of each group of a table sorted by ``keys``."""
    # The first row is marked on its own: a null key equals the shift's missing value.
    changed = [pl.col(k).ne_missing(pl.col(k).shift(1)) for k in keys]
    return pl.any_horizontal(pl.int_range(pl.len()) == 0, *changed)


def _union(df: pl.DataFrame, keys: list[str], start: str, end: str) -> pl.DataFrame:
    ordered = _sorted_by_group(df, keys, start)
    # Intervals already apart (a union passed on, kernels that never overlap or touch)
    # are their own union: one comparison instead of the sweep below.
    apart = _group_changed(keys) | (pl.col(start) > pl.col(end).shift(1))
    if ordered.select(apart.all()).item():
        return ordered.select(*keys, start, end)
    # Ties in start need no order: the running maximum of ends absorbs them.
    ordered = ordered.with_columns(pl.col(end).cum_max().over(keys).alias("_reach"))
    ordered = ordered.with_columns(
        (_group_changed(keys) | (pl.col(start) > pl.col("_reach").shift(1))).alias("_opens")
    ).with_columns(pl.col("_opens").shift(-1, fill_value=True).alias("_closes"))
    starts = ordered.filter(pl.col("_opens")).select(*keys, start)
    ends = ordered.filter(pl.col("_closes")).select(pl.col("_reach").alias(end))
    return pl.concat([starts, ends], how="horizontal")


def union_intervals(
    df: pl.DataFrame,
    by: str | Sequence[str] = (),
    start: str = START,
    end: str = END,
) -> pl.DataFrame:
    """Merge overlapping and touching intervals per group.

    Returns the ``by`` columns plus ``start``/``end``: disjoint intervals sorted by
    group and start (isolated zero-length intervals are kept as points).
    """
    by_cols = _keys(by)
    data, keys = _grouped(_validated(df, by_cols, start, end), by_cols)
    if data.is_empty():
        return _ungrouped(data)
    return _ungrouped(_union(data, keys, start, end))


def _windows_checked(
    windows: pl.DataFrame, by: list[str], window_start: str, window_end: str
) -> pl.DataFrame:
    missing = [c for c in (*by, window_start, window_end) if c not in windows.columns]
    if missing:
        raise ValueError(f"window table lacks column(s) {missing}; it has {windows.columns}")
    w = windows.select(*by, window_start, window_end)
    if w.select(pl.col(window_start).is_null() | pl.col(window_end).is_null()).to_series().any():
        raise ValueError("window bounds must not be null")
    if w.filter(pl.col(window_end) < pl.col(window_start)).height:
        raise ValueError(f"a window ends before it starts ({window_end} < {window_start})")
    groups = w.select(by).unique().height if by else 1
    if w.height > groups:
        raise ValueError(f"more than one window per group {by}")
    return w


def _with_windows(
    iv: pl.DataFrame, w: pl.DataFrame, keys: list[str], window_start: str, window_end: str
) -> pl.DataFrame:
    """``iv`` with its group's window bounds appended: an inner join on ``keys``.

    When both tables are in key order (one run of rows per GPU, as the trace's
    kernels come) the runs are matched instead of every row: the join's rows in the
    join's order, without hashing millions of keys.
    """
    if _runs_can_match(iv, w, keys, window_start, window_end) and (
        _in_order(w, keys) and _in_order(iv, keys)
    ):
        return _with_windows_of_runs(iv, w, keys, window_start, window_end)
    return iv.join(w, on=keys, how="inner")


def _runs_can_match(
    iv: pl.DataFrame, w: pl.DataFrame, keys: list[str], window_start: str, window_end: str
) -> bool:
    return all(iv.schema[k] == w.schema[k] for k in keys) and all(
        w.schema[c].is_integer() and c not in iv.columns for c in (window_start, window_end)
    )


def _with_windows_of_runs(
    iv: pl.DataFrame, w: pl.DataFrame, keys: list[str], window_start: str, window_end: str
) -> pl.DataFrame:
    """``iv`` (in key order) with its group's window bounds; rows without a window dropped."""
    firsts = iv.select(_group_changed(keys).arg_true()).to_series().to_numpy()
    runs = iv.select(pl.col(keys).gather(firsts)).join(
        w, on=keys, how="left", maintain_order="left"
    )
    rows_per_run = np.diff(firsts, append=iv.height)
    out = iv.with_columns(
        pl.Series(
            col,
            np.repeat(runs.get_column(col).fill_null(0).to_numpy(), rows_per_run),
            dtype=w.schema[col],
        )
        for col in (window_start, window_end)
    )
    has_window = runs.get_column(window_start).is_not_null().to_numpy()
    if not has_window.all():
        out = out.filter(pl.Series(np.repeat(has_window, rows_per_run)))
    return out


def _clip(
    iv: pl.DataFrame,
    w: pl.DataFrame,
    keys: list[str],
    start: str,
    end: str,
    window_start: str,
    window_end: str,
) -> pl.DataFrame:
    return _clipped(
        _with_windows(iv, w, keys, window_start, window_end), start, end, window_start, window_end
    ).select(*keys, start, end)


def _clipped(
    bounded: pl.DataFrame, start: str, end: str, window_start: str, window_end: str
) -> pl.DataFrame:
    """The rows of ``bounded`` (intervals with their window) that reach their window, clipped."""
    return bounded.filter(
        (pl.col(end) >= pl.col(window_start)) & (pl.col(start) <= pl.col(window_end))
    ).with_columns(
        pl.max_horizontal(start, window_start).alias(start),
        pl.min_horizontal(end, window_end).alias(end),
    )


def clip_to_windows(
    intervals: pl.DataFrame,
    windows: pl.DataFrame,
    by: str | Sequence[str] = (),
    start: str = START,
    end: str = END,
    window_start: str = WINDOW_START,
    window_end: str = WINDOW_END,
) -> pl.DataFrame:
    """The parts of ``intervals`` inside their group's window (one window per group).

    Intervals of groups without a window are dropped. Intervals that only touch a
    window's edge are kept as zero-length points at that edge.
    """
    by_cols = _keys(by)
    iv = _validated(intervals, by_cols, start, end)
    w = _windows_checked(windows, by_cols, window_start, window_end)
    iv, keys = _grouped(iv, by_cols)
    w, _ = _grouped(w, by_cols)
    return _ungrouped(_clip(iv, w, keys, start, end, window_start, window_end))


def complement_in(
    intervals: pl.DataFrame,
    windows: pl.DataFrame,
    by: str | Sequence[str] = (),
    start: str = START,
    end: str = END,
    window_start: str = WINDOW_START,
    window_end: str = WINDOW_END,
) -> pl.DataFrame:
    """The gaps: maximal parts of each group's window covered by none of its intervals.

    ``intervals`` need not be disjoint. ``windows`` has one row per group (the
    ``by`` columns plus ``window_start``/``window_end``); a group with a window and
    no intervals is one gap as long as its window. Returns the ``by`` columns plus
    ``start``/``end`` of every gap of positive length, sorted by group and start.
    """
    by_cols = _keys(by)
    iv = _validated(intervals, by_cols, start, end)
    w = _windows_checked(windows, by_cols, window_start, window_end)
    iv, keys = _grouped(iv, by_cols)
    w, _ = _grouped(w, by_cols)
    bounds = {iv.schema[start], iv.schema[end], w.schema[window_start], w.schema[window_end]}
    one_integer_type = len(bounds) == 1 and bounds.pop().is_integer()
    if one_integer_type and _runs_can_match(iv, w, keys, window_start, window_end):
        gaps = _gaps_in_order(iv, w, keys, start, end, window_start, window_end)
        return _ungrouped(gaps)
    clipped = _clip(iv, w, keys, start, end, window_start, window_end)
    # Points at both window edges make the leading and trailing gaps ordinary
    # "between two intervals" gaps.
    edges = pl.concat(
        [
            w.select(*keys, pl.col(window_start).alias(start), pl.col(window_start).alias(end)),
            w.select(*keys, pl.col(window_end).alias(start), pl.col(window_end).alias(end)),
        ]
    ).cast(clipped.schema)  # type: ignore[arg-type]
    ordered = _sorted_by_group(pl.concat([clipped, edges]), keys, start).with_columns(
        pl.col(end).cum_max().over(keys).shift(1).alias("_reach")
    )
    gaps = ordered.filter(~_group_changed(keys) & (pl.col(start) > pl.col("_reach"))).select(
        *keys, pl.col("_reach").alias(start), pl.col(start).alias(end)
    )
    return _ungrouped(gaps)


def _gaps_in_order(
    iv: pl.DataFrame,
    w: pl.DataFrame,
    keys: list[str],
    start: str,
    end: str,
    window_start: str,
    window_end: str,
) -> pl.DataFrame:
    """:func:`complement_in` in one sweep over the intervals in group and start order.

    Within a group, an interval opens a gap when it starts after the furthest end
    before it (the window start, for the group's first); the group's furthest end
    leaves one up to the window end. Windows then matter only at each group's edges,
    so they are looked up once per group, not per interval, unless some interval
    sticks out of its window and must be clipped first. Bounds share one integer
    type, keys their types.
    """
    ordered = _sorted_by_group(iv, keys, start)
    sweep = _Sweep(ordered, w, keys, start, end, window_start, window_end)
    if not sweep.inside:
        ordered = _clipped(
            _with_windows_of_runs(ordered, w, keys, window_start, window_end),
            start,
            end,
            window_start,
            window_end,
        ).select(*keys, start, end)
        sweep = _Sweep(ordered, w, keys, start, end, window_start, window_end)
    runs = sweep.runs
    before = sweep.reach.shift(1).scatter(sweep.firsts, runs.get_column(window_start))
    # A group's last gap runs from its furthest end to its window's end. It goes after
    # the gap before the group's last row: positions 2 row + 1 and 2 row.
    trailing = (
        runs.with_columns(
            sweep.reach.gather(sweep.lasts).alias(start),
            pl.Series("_pos", 2 * sweep.lasts.astype(np.int64) + 1),
        )
        .filter(pl.col(window_end) > pl.col(start))
        .select(*keys, start, pl.col(window_end).alias(end), "_pos")
    )
    position = [] if trailing.is_empty() else [(2 * pl.int_range(pl.len())).alias("_pos")]
    gaps = ordered.select(*keys, before.alias(start), pl.col(start).alias(end), *position).filter(
        pl.col(end) > pl.col(start)
    )
    if position:
        gaps = gaps.merge_sorted(trailing, "_pos").drop("_pos")
    # A window without intervals is one gap; it joins the others in group order.
    idle = (
        w.join(runs.select(keys), on=keys, how="anti")
        .filter(pl.col(window_end) > pl.col(window_start))
        .select(*keys, pl.col(window_start).alias(start), pl.col(window_end).alias(end))
    )
    if idle.is_empty():
        return gaps
    return sort_if_needed(pl.concat([gaps, idle]), *keys)


class _Sweep:
    """The groups of intervals sorted by group and start, with their windows.

    ``firsts``/``lasts``: row numbers of each group's first and last interval;
    ``runs``: one row per group (keys and window bounds, null without a window);
    ``reach``: per row, the furthest end so far in its group; ``inside``: whether
    every group has a window that holds all its intervals.
    """

    def __init__(
        self,
        ordered: pl.DataFrame,
        w: pl.DataFrame,
        keys: list[str],
        start: str,
        end: str,
        window_start: str,
        window_end: str,
    ) -> None:
        first = _group_changed(keys)
        # The furthest end so far is the end itself when intervals are already apart
        # (a union, such as busy time).
        apart = ordered.select((first | (pl.col(start) > pl.col(end).shift(1))).all()).item()
        reach = pl.col(end) if apart else pl.col(end).cum_max().over(keys)
        self.reach = ordered.select(reach).to_series()
        self.firsts = ordered.select(first.arg_true()).to_series().to_numpy()
        self.lasts = np.append(self.firsts[1:] - 1, ordered.height - 1)[: self.firsts.size]
        self.runs = ordered.select(pl.col(keys).gather(self.firsts)).join(
            w, on=keys, how="left", maintain_order="left"
        )
        held = self.runs.select(
            pl.col(window_start).is_not_null().all()
            & (ordered.get_column(start).gather(self.firsts) >= pl.col(window_start)).all()
            & (self.reach.gather(self.lasts) <= pl.col(window_end)).all()
        )
        self.inside = bool(held.item())


def intersect_intervals(
    a: pl.DataFrame,
    b: pl.DataFrame,
    by: str | Sequence[str] = (),
    start: str = START,
    end: str = END,
) -> pl.DataFrame:
    """Time covered by both ``a`` and ``b``, per group: disjoint intervals of positive length."""
    by_cols = _keys(by)
    parts = []
    for df in (a, b):
        u = union_intervals(df, by_cols, start, end).filter(pl.col(end) > pl.col(start))
        parts.append(u.select(*by_cols, pl.col(start).alias("_t"), pl.lit(1, pl.Int64).alias("_d")))
        parts.append(u.select(*by_cols, pl.col(end).alias("_t"), pl.lit(-1, pl.Int64).alias("_d")))
    events, keys = _grouped(pl.concat(parts), by_cols)
    # Ends sort before starts at the same instant, so touching intervals never
    # reach depth 2.
    ordered = _sorted_by_group(events, keys, "_t", "_d").with_columns(
        pl.col("_d").cum_sum().over(keys).alias("_depth"),
        pl.col("_t").shift(-1).over(keys).alias("_next"),
    )
    out = ordered.filter((pl.col("_depth") == 2) & (pl.col("_next") > pl.col("_t"))).select(
        *keys, pl.col("_t").alias(start), pl.col("_next").alias(end)
    )
    return _ungrouped(out)


def total_length(
    df: pl.DataFrame,
    by: str | Sequence[str] = (),
    start: str = START,
    end: str = END,
    name: str = "length_ns",
) -> pl.DataFrame:
    """Length of the union of the intervals, per group (overlaps counted once).

    Groups with no intervals are absent, except that with no ``by`` columns the
    result is always one row (0 for an empty table).
    """
    by_cols = _keys(by)
    u = union_intervals(df, by_cols, start, end)
    length = (pl.col(end) - pl.col(start)).sum().alias(name)
    if not by_cols:
        return u.select(length)
    return u.group_by(by_cols, maintain_order=True).agg(length)


def overlap_with(
    a: pl.DataFrame,
    b: pl.DataFrame,
    by: str | Sequence[str] = (),
    start: str = START,
    end: str = END,
    name: str = "overlap_ns",
) -> pl.DataFrame:
    """``a`` with a column ``name``: how much of each row's interval the union of ``b`` covers.

    ``b`` is matched per group; rows of ``a`` keep their order and columns. The
    overlap is null where the row of ``a`` has a null bound.
    """
    by_cols = _keys(by)
    if name in a.columns:
        raise ValueError(f"column {name!r} already exists in the interval table")
    _validated(a, by_cols, start, end)
    u, keys = _grouped(union_intervals(b, by_cols, start, end), by_cols)
    # Covered length up to instant t = covered length of the union's earlier
    # intervals + the part of the last interval that starts at or before t.
    covered = (
        u.with_columns((pl.col(end) - pl.col(start)).alias("_len"))
        .with_columns((pl.col("_len").cum_sum().over(keys) - pl.col("_len")).alias("_before"))
        .select(*keys, pl.col(start).alias("_s"), "_len", "_before")
        .sort("_s")
    )
    rows, _ = _grouped(a.select(*by_cols, start, end), by_cols)
    rows = rows.with_row_index("_row")

    def covered_at(col: str) -> pl.Series:
        probes = rows.select("_row", *keys, pl.col(col).alias("_t")).drop_nulls("_t").sort("_t")
        hit = probes.join_asof(
            covered,
            left_on="_t",
            right_on="_s",
            by=keys,
            strategy="backward",
            check_sortedness=False,
        )
        value = pl.col("_before") + pl.min_horizontal(pl.col("_t") - pl.col("_s"), pl.col("_len"))
        hit = hit.select("_row", value.fill_null(0).alias("_c"))
        out = pl.repeat(None, rows.height, dtype=hit.schema["_c"], eager=True)
        return out.scatter(hit.get_column("_row"), hit.get_column("_c"))

    overlap = covered_at(end) - covered_at(start)
    return a.with_columns(overlap.cast(a.schema[start]).alias(name))


def _in_order(df: pl.DataFrame, by: Sequence[str]) -> bool:
    """Whether ``df.sort(by, maintain_order=True)`` would leave ``df`` as it is (nulls first)."""
    in_order = pl.lit(True)
    for col in reversed(by):
        this, prev = pl.col(col), pl.col(col).shift(1)
        after = (this > prev).fill_null(False) | (prev.is_null() & this.is_not_null())
        in_order = after | (this.eq_missing(prev) & in_order)
    return bool(df.select(in_order.slice(1).all()).item())


def sort_if_needed(df: pl.DataFrame, *by: str) -> pl.DataFrame:
    """``df`` sorted by the ``by`` columns (nulls first).

    Rows already in that order (the trace's kernel order) cost one check; others one
    stable one-column sort per column, least significant first, several times faster
    than one multi-column sort.
    """
    if _in_order(df, by):
        return df
    for col in reversed(by):
        df = df.sort(col, maintain_order=True)
    return df


def union_one_unit(intervals: pl.DataFrame) -> pl.DataFrame:
    """One unit's (e.g. one GPU's) ``start_ns``/``end_ns`` intervals merged, sorted by start.

    Overlapping or touching intervals merge. The result also has ``_before``: the
    union's time before each merged interval, for as-of lookups of covered time.
    Faster than :func:`union_intervals` when the caller already split by unit.
    """
    if not intervals.get_column(START).is_sorted():
        intervals = intervals.sort(START)
    length = pl.col(END) - pl.col(START)
    no_nulls = not intervals.select(START, END).null_count().sum_horizontal().item()
    apart = (pl.col(START) > pl.col(END).shift(1)).slice(1).all()
    if no_nulls and intervals.select(apart).item():
        # Already disjoint (a union passed on): its own union.
        return intervals.select(START, END, (length.cum_sum() - length).alias("_before"))
    opens = (pl.col(START) > pl.col("_reach").shift(1)).fill_null(True)
    marked = intervals.with_columns(pl.col(END).cum_max().alias("_reach")).with_columns(
        opens.alias("_opens")
    )
    union = pl.DataFrame(
        {
            START: marked.filter(pl.col("_opens")).get_column(START),
            END: marked.filter(pl.col("_opens").shift(-1, fill_value=True)).get_column("_reach"),
        }
    )
    return union.with_columns((length.cum_sum() - length).alias("_before"))


def union_length(start: pl.Expr, end: pl.Expr) -> pl.Expr:
    """Length of the union of intervals given in start order, without merging them.

    Each interval adds its part past the furthest end of the intervals before it.
    """
    reach = end.cum_max().shift(1)
    return (end - pl.max_horizontal(start, reach)).clip(lower_bound=0).sum()


def is_union_inside(intervals: pl.DataFrame, window_start: int, window_end: int) -> bool:
    """Whether ``intervals`` (``start_ns``/``end_ns``) already are a union inside the window.

    True when no bound is null and they lie in ``[window_start, window_end]`` in time
    order with positive space between them, as a busy union handed in is; then they
    need no clipping or merging.
    """
    s, e = pl.col(START), pl.col(END)
    check = (
        (s.null_count() + e.null_count() == 0)
        & (s.min() >= window_start)
        & (e.max() <= window_end)
        & (s <= e).all()
        & (s > e.shift(1)).all()
    )
    return bool(intervals.select(check).item())
