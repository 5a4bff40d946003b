"""Intervals held as numpy arrays: union, clipping, row look-ups and sweeps.

The polars tables of :mod:`nsysan.intervals` are what the analyses pass each other;
these helpers serve the loops that already hold one unit's (one GPU's, one
thread's) bounds as int64 arrays, where a table per unit would cost more than the
work. The conventions are the same: an interval is ``[start, end]`` with integer
ends, and a union merges intervals that overlap or touch.

:func:`merge_arrays` takes intervals in any order; :func:`time_before`,
:func:`time_units_open`, :func:`clip_disjoint` and :func:`rows_meeting` take them in
time order (starts and
ends both ascending, as a union's are): the first merges several units' bound lists
in one compiled pass, the others find rows by binary search. None modifies its
inputs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nsysan.compiled import NO_EDGE, compiled

__all__ = [
    "merge_arrays",
    "time_before",
    "time_units_open",
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


def time_before(starts: np.ndarray, ends: np.ndarray, instants: np.ndarray) -> np.ndarray:
    """Per instant, the time of the disjoint intervals (in time order) before it: a
    running sum of their lengths and a binary search per instant."""
    before = np.concatenate(([0], np.cumsum(ends - starts)))
    i = np.searchsorted(starts, instants, side="right") - 1
    j = np.clip(i, 0, None)
    inside = np.clip(np.minimum(instants, ends[j]) - starts[j], 0, None)
    return np.where(i >= 0, before[j] + inside, 0)


# Above this many intervals in all, time_units_open merges the units' bounds a block of
# time at a time: the copy of every unit's bounds side by side was +0.66 GB at 20M
# kernels (the dashboard's kernel unions).
BLOCK_INTERVALS = 1 << 20


def time_units_open(
    units: Sequence[tuple[np.ndarray, np.ndarray]],
    low: int,
    high: int,
    block_intervals: int = BLOCK_INTERVALS,
) -> int:
    """Total time during which at least ``low`` and at most ``high`` of the ``units``
    are inside one of their intervals, from the first bound of any unit to the last.

    Each unit is ``(starts, ends)``, int64 arrays of disjoint intervals in time order
    (a union's, clipped), so its bounds are already sorted: one compiled merge of the
    units' bound lists, no sort of every bound. Units without intervals count as
    never inside. Past ``block_intervals`` intervals, and with ``low`` at least 1, the
    merge runs over blocks of time of about that many intervals each.
    """
    total = sum(len(starts) for starts, _ in units)
    if total == 0:
        return 0
    if low < 1 or total <= block_intervals:
        return _time_open(units, low, high)
    # With low >= 1 a time with no unit inside never counts, so the total splits
    # exactly at any instants: an interval across one counts on each side of it.
    biggest = max((starts for starts, _ in units), key=len)
    step = -(-len(biggest) * block_intervals // total)
    first = min(int(starts[0]) for starts, _ in units if len(starts))
    last = max(int(ends[-1]) for _, ends in units if len(ends))
    edges = np.unique(np.concatenate(([first], biggest[step::step], [last])))
    return sum(
        _time_open([clip_disjoint(s, e, lo, hi) for s, e in units], low, high)
        for lo, hi in zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True)
    )


def _time_open(units: Sequence[tuple[np.ndarray, np.ndarray]], low: int, high: int) -> int:
    """:func:`time_units_open` in one merge."""
    offsets = np.zeros(len(units) + 1, dtype=np.int64)
    np.cumsum([len(starts) for starts, _ in units], out=offsets[1:])
    if offsets[-1] == 0:
        return 0
    starts = np.concatenate([starts for starts, _ in units]).astype(np.int64, copy=False)
    ends = np.concatenate([ends for _, ends in units]).astype(np.int64, copy=False)
    return int(_time_open_between(starts, ends, offsets, low, high))


@compiled
def _time_open_between(starts, ends, offsets, low, high):  # type: ignore[no-untyped-def]
    units = len(offsets) - 1
    edge = np.zeros(units, dtype=np.int64)  # the next bound: 2 * interval + (0 start, 1 end)
    heads = np.full(units, NO_EDGE, dtype=np.int64)
    for u in range(units):
        if offsets[u] < offsets[u + 1]:
            heads[u] = starts[offsets[u]]
    inside = 0
    total = 0
    previous = NO_EDGE
    while True:
        unit = -1
        at = NO_EDGE
        for u in range(units):
            if heads[u] < at:
                at = heads[u]
                unit = u
        if unit < 0:
            return total
        # Bounds of one instant need no order: what lies between them has length 0.
        if previous != NO_EDGE and low <= inside <= high:
            total += at - previous
        previous = at
        k = edge[unit]
        row = offsets[unit] + k // 2
        if k % 2 == 0:
            inside += 1
            heads[unit] = ends[row]
        else:
            inside -= 1
            heads[unit] = starts[row + 1] if row + 1 < offsets[unit + 1] else NO_EDGE
        edge[unit] = k + 1


def rows_by_unit(units: np.ndarray, wanted: Sequence[int]) -> dict[int, slice | np.ndarray]:
    """Where the rows of each unit of ``wanted`` are in ``units`` (e.g. a gpu column).

    A slice when the rows are grouped by unit in ascending order (the kernels' and
    gaps' order), found by binary search; otherwise a boolean mask.
    """
    if np.all(units[1:] >= units[:-1]):
        # The units searched for in the column's own type: a list of Python ints would
        # have numpy cast the whole column to int64 for each search (5M rows a GPU).
        keys = np.asarray(wanted, dtype=units.dtype)
        firsts = np.searchsorted(units, keys, side="left").tolist()
        stops = np.searchsorted(units, keys, side="right").tolist()
        return {u: slice(a, b) for u, a, b in zip(wanted, firsts, stops, strict=True)}
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
