"""``time_units_open`` against a brute-force count of every nanosecond, in one merge and
in blocks of time."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from nsysan.interval_arrays import time_units_open

# A unit's intervals: cuts of [0, 80) taken in pairs, so disjoint and in time order;
# equal cuts give touching intervals and empty ones are dropped, as a union's are.
unit_cuts = st.lists(st.integers(0, 80), max_size=12).map(sorted)


def as_unit(cuts: list[int]) -> tuple[np.ndarray, np.ndarray]:
    pairs = [(s, e) for s, e in zip(cuts[0::2], cuts[1::2], strict=False) if e > s]
    return (
        np.array([s for s, _ in pairs], dtype=np.int64),
        np.array([e for _, e in pairs], dtype=np.int64),
    )


@settings(max_examples=200, deadline=None)
@given(st.lists(unit_cuts, min_size=1, max_size=6), st.integers(0, 6), st.integers(0, 6))
def test_time_units_open_counts_every_nanosecond(
    cuts: list[list[int]], low: int, width: int
) -> None:
    units = [as_unit(c) for c in cuts]
    bounds = [t for starts, ends in units for t in (*starts.tolist(), *ends.tolist())]
    # From the first bound of any unit to the last: before and after is not in view.
    span = range(min(bounds), max(bounds)) if bounds else range(0)
    inside_at = [
        sum(any(s <= t < e for s, e in zip(*unit, strict=True)) for unit in units) for t in span
    ]
    expected = sum(low <= n <= low + width for n in inside_at)
    assert time_units_open(units, low, low + width) == expected
    # Merged a block of time at a time (a block of one interval, or a few).
    for block in (1, 2, 5):
        assert time_units_open(units, low, low + width, block_intervals=block) == expected


def test_time_units_open_on_two_gpus() -> None:
    a = (np.array([0, 10], dtype=np.int64), np.array([5, 20], dtype=np.int64))
    b = (np.array([3], dtype=np.int64), np.array([12], dtype=np.int64))
    empty = (np.array([], dtype=np.int64), np.array([], dtype=np.int64))
    # One GPU busy: [0,3) [5,10) [12,20); both: [3,5) [10,12).
    assert time_units_open([a, b, empty], low=1, high=1) == 3 + 5 + 8
    assert time_units_open([a, b], low=2, high=2) == 2 + 2
    assert time_units_open([a, b], low=0, high=0) == 0
    assert time_units_open([empty, empty], low=0, high=2) == 0
