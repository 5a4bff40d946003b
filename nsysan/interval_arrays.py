"""Intervals held as numpy arrays: union, clipping, row look-ups and sweeps.

The polars tables of :mod:`nsysan.intervals` are what the analyses pass each other;
these helpers serve the loops that already hold one unit's (one GPU's, one
thread's) bounds as int64 arrays, where a table per unit would cost more than the
work. The conventions are the same: an interval is ``[start, end]`` with integer
ends, and a union merges intervals that overlap or touch.

:func:`merge_arrays` and :func:`time_where_open` take intervals in any order;
:func:`clip_disjoint` and :func:`rows_meeting` take them in time order (starts
and ends both ascending, as a union's are) and find rows by binary search. None
modifies its inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

__all__ = [
    "merge_arrays",
    "time_where_open",
    "rows_by_unit",
    "clip_disjoint",
    "rows_meeting",
]


def merge_arrays(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sorted, disjoint union of intervals given as two numpy arrays."""
    if starts.size == 0:
        return starts, ends
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], np.maximum.accumulate(ends[order])
    opens = np.concatenate(([True], s[1:] > e[:-1]))
    closes = np.concatenate((opens[1:], [True]))
    return s[opens], e[closes]


# Elements per block when summing segment lengths (bounds the temporary arrays).
_SEGMENT_BLOCK = 1 << 20


def time_where_open(
    starts: np.ndarray, ends: np.ndarray, keep: Callable[[np.ndarray], np.ndarray]
) -> int:
    """Total time during which the number of open intervals satisfies ``keep``.

    ``starts`` and ``ends`` are the bounds of the intervals (int64 arrays, one pair per
    interval, in any order); ``keep`` maps an int32 array of counts to booleans. The
    count changes at instants only, so events at one instant need no order (what is
    between them has length 0). Exact in int64; at millions of intervals each array
    here is tens of MB, so the narrowest types, each freed once used, and the lengths
    summed in blocks.
    """
    count = len(starts)
    times = np.concatenate([starts, ends])
    if times.size == 0:
        return 0
    # Sorted runs (one set of intervals after another) merge fast in a stable sort.
    order = np.argsort(times, kind="stable")
    level = np.cumsum(np.where(order < count, np.int8(1), np.int8(-1)), dtype=np.int32)
    times = times[order]
    del order
    selected = keep(level[:-1])
    del level
    total = 0
    for lo in range(0, len(selected), _SEGMENT_BLOCK):
        hi = min(lo + _SEGMENT_BLOCK, len(selected))
        total += int((times[lo + 1 : hi + 1] - times[lo:hi])[selected[lo:hi]].sum())
    return total


def rows_by_unit(units: np.ndarray, wanted: Sequence[int]) -> dict[int, slice | np.ndarray]:
    """Where the rows of each unit of ``wanted`` are in ``units`` (e.g. a gpu column).

    A slice when the rows are grouped by unit in ascending order (the kernels' and
    gaps' order), found by binary search; otherwise a boolean mask.
    """
    if np.all(units[1:] >= units[:-1]):
        return {u: slice(*np.searchsorted(units, [u, u + 1])) for u in wanted}
    return {u: units == u for u in wanted}


def clip_disjoint(
    starts: np.ndarray, ends: np.ndarray, window_start: int, window_end: int
) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint intervals in time order clipped to ``[window_start, window_end]``.

    Intervals outside the window, or touching it only at an edge, are dropped. Only
    the first and last kept interval can cross the window's edges; the arrays are
    copied only when one of them is cut (the inputs may be read-only views).
    """
    rows = slice(
        np.searchsorted(ends, window_start, side="right"),
        np.searchsorted(starts, window_end, side="left"),
    )
    s, e = starts[rows], ends[rows]
    if len(s) and (s[0] < window_start or e[-1] > window_end):
        s, e = s.copy(), e.copy()
        s[0], e[-1] = max(s[0], window_start), min(e[-1], window_end)
    return s, e


def rows_meeting(
    starts: np.ndarray, ends: np.ndarray, window_starts: np.ndarray, window_ends: np.ndarray
) -> np.ndarray:
    """The rows of time-ordered intervals (starts and ends both ascending, as a union's
    are) that overlap one of the windows; a row meeting several windows comes once per
    window. Found as :func:`clip_disjoint` finds them for one window: two binary searches.
    """
    first = np.searchsorted(ends, window_starts, side="right")
    stop = np.searchsorted(starts, window_ends, side="left")
    count = np.maximum(stop - first, 0)
    before = np.cumsum(count) - count
    return np.arange(int(count.sum()), dtype=np.int64) + np.repeat(first - before, count)
