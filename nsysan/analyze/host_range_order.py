"""The order of a group's NVTX ranges: by thread, then start, ranges opened at one
instant outermost (longest) first.

Part of host attribution (:func:`nsysan.analyze.host_timeline.nvtx_ranges`). Ranges
come from an export in about that order: a thread's rows in start order, threads
interleaved or (from the table cache) one after another, and now and then a row out of
place. A main thread holds millions of them (10M at 20M kernels of the scale8
workload, where two rows of a thread sit ~700 s before their time), so a full sort is
the last resort: ranges in order are left as they are, and a few rows out of place are
merged back into the rest, which is in order.
"""

from __future__ import annotations

import itertools
from typing import Final

import numpy as np
import polars as pl

from nsysan.compiled import compiled

__all__ = ["in_order", "in_range_order", "range_order"]

# Rows out of place are merged back while they are at most this share of the ranges;
# beyond it, the sort.
_MERGED_SHARE: Final = 1 / 8
# in_order joins runs of consecutive rows while they hold this many rows each on
# average; shorter runs are gathered row by row.
_RUN_ROWS: Final = 64


def range_order(thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray | None:
    """The permutation sorting ranges by thread, start, then end descending (stable: as
    ``np.lexsort((-end, start, thread))``); None when they are in that order already.

    - In order (one compiled pass says so): nothing is sorted or copied.
    - A few rows out of place, all too early in the table or all too late (one row
      moved, say): the others are in order; the few are sorted and merged back (two
      compiled passes and a sort of the few, not a sort of millions and its copies).
    - Otherwise, threads interleaved in about time order: a stable sort by the small
      thread number, then by start within the threads whose ranges are out of order
      (nearly sorted: timsort takes them in about one pass), is the whole sort unless
      two ranges open at one instant with the inner one first (then the three-key sort).
    """
    if in_range_order(thread, start, end):
        return None  # also when there are none
    merged = _merged_order(thread, start, end)
    if merged is not None:
        return merged
    narrow = thread.astype(np.uint16) if thread.max() < 1 << 16 else thread
    order = np.argsort(narrow, kind="stable")
    t, s = thread[order], start[order]
    cuts = [0, *(np.flatnonzero(t[1:] != t[:-1]) + 1), len(t)]
    for lo, hi in itertools.pairwise(cuts):
        if np.any(s[lo + 1 : hi] < s[lo : hi - 1]):
            by_start = np.argsort(s[lo:hi], kind="stable")
            order[lo:hi], s[lo:hi] = order[lo:hi][by_start], s[lo:hi][by_start]
    e = end[order]
    if not np.any((t[1:] == t[:-1]) & (s[1:] == s[:-1]) & (e[1:] > e[:-1])):
        return order
    return np.lexsort((-end, start, thread))


def in_order(frame: pl.DataFrame, order: np.ndarray) -> pl.DataFrame:
    """``frame``'s rows in ``order`` (a :func:`range_order`), a column at a time, each
    column of ``frame`` dropped from it once put in order: the rows are held about once,
    not twice (millions of a main thread's ranges at 20M kernels).

    A few rows merged back leave the order a few runs of consecutive rows: each column
    is then its runs' slices joined, a copy at memory speed, not a gather of every row
    (15-34 ms against 57-65 ms for 2.5M ranges of four columns).
    """
    if not len(order):
        return frame
    firsts = _run_starts(order)
    if len(firsts) * _RUN_ROWS > len(order):
        return pl.DataFrame([frame.drop_in_place(c).gather(order) for c in frame.columns])
    runs = [(int(order[a]), b - a) for a, b in itertools.pairwise([*firsts.tolist(), len(order)])]
    return pl.DataFrame(
        [
            pl.concat([column.slice(at, rows) for at, rows in runs], rechunk=True)
            for column in (frame.drop_in_place(c) for c in frame.columns)
        ]
    )


@compiled
def _run_starts(order):  # type: ignore[no-untyped-def]
    """The positions where a run of consecutive rows of ``order`` starts (0 first)."""
    count = 1 if len(order) else 0
    for i in range(1, len(order)):
        count += order[i] != order[i - 1] + 1
    found = np.empty(count, dtype=np.int64)
    k = 0
    for i in range(len(order)):
        if i == 0 or order[i] != order[i - 1] + 1:
            found[k] = i
            k += 1
    return found


def _merged_order(thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray | None:
    """:func:`range_order` of ranges of which few are out of place; None when more than
    :data:`_MERGED_SHARE` of them are.

    Rows out of place are either those after some later row (a row too early in the
    table), or those before some earlier row (a row too late): the smaller set is
    taken. The rest are then in order, by construction; the set is sorted (stably)
    and merged in, ties going to the earlier row, which gives the stable sort's order.
    """
    limit = int(len(start) * _MERGED_SHARE)
    out, few = _out_of_place(thread, start, end, limit)
    if not few:
        return None
    moved = np.flatnonzero(out)
    moved = moved[np.lexsort((-end[moved], start[moved], thread[moved]))]
    return _merge(thread, start, end, out, moved)


@compiled
def _before(thread, start, end, i, j):  # type: ignore[no-untyped-def]
    """Whether range ``i`` sorts strictly before range ``j`` (thread, start, end descending)."""
    if thread[i] != thread[j]:
        return thread[i] < thread[j]
    if start[i] != start[j]:
        return start[i] < start[j]
    return end[i] > end[j]


@compiled
def _out_of_place(thread, start, end, limit):  # type: ignore[no-untyped-def]
    """The rows out of place (a mask), the fewer of: the rows that sort after some later
    row, and the rows that sort before some earlier row; and whether that is at most
    ``limit`` rows. A pass stops once its rows pass the limit (or the other set's count)."""
    n = len(start)
    after_later = np.zeros(n, dtype=np.bool_)
    later = 0
    least = n - 1  # the row of the least key after i
    for i in range(n - 2, -1, -1):
        if _before(thread, start, end, least, i):
            after_later[i] = True
            later += 1
            if later > limit:
                break
        else:
            least = i
    # The other set must be smaller still to be taken.
    bound = min(limit, later - 1)
    before_earlier = np.zeros(n, dtype=np.bool_)
    earlier = 0
    most = 0  # the row of the greatest key before i
    for i in range(1, n):
        if _before(thread, start, end, i, most):
            before_earlier[i] = True
            earlier += 1
            if earlier > bound:
                break
        else:
            most = i
    if earlier <= bound:
        return before_earlier, True
    return after_later, later <= limit


@compiled
def _merge(thread, start, end, out, moved):  # type: ignore[no-untyped-def]
    """The rows not ``out`` (in order) and the ``moved`` rows (sorted) as one order; at
    equal keys, the earlier row first."""
    n = len(start)
    order = np.empty(n, dtype=np.int64)
    k = 0
    m = 0
    for i in range(n):
        if out[i]:
            continue
        while m < len(moved) and (
            _before(thread, start, end, moved[m], i)
            or (moved[m] < i and not _before(thread, start, end, i, moved[m]))
        ):
            order[k] = moved[m]
            k += 1
            m += 1
        order[k] = i
        k += 1
    while m < len(moved):
        order[k] = moved[m]
        k += 1
        m += 1
    return order


@compiled
def in_range_order(thread, start, end):  # type: ignore[no-untyped-def]
    """Whether rows are sorted by thread, then start, then end descending (one pass,
    no copy)."""
    for i in range(1, len(start)):
        if thread[i] != thread[i - 1]:
            if thread[i] < thread[i - 1]:
                return False
        elif start[i] != start[i - 1]:
            if start[i] < start[i - 1]:
                return False
        elif end[i] > end[i - 1]:
            return False
    return True
