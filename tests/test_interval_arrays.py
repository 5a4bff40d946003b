"""``time_where_open`` against a brute-force count of every nanosecond."""

from __future__ import annotations

from unittest import mock

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from nsysan import interval_arrays
from nsysan.interval_arrays import time_where_open


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 60), st.integers(0, 20)), max_size=40),
    st.integers(0, 4),
    st.integers(1, 4),
)
def test_time_where_open_counts_every_nanosecond(
    spans: list[tuple[int, int]], low: int, width: int
) -> None:
    starts = np.array([s for s, _ in spans], dtype=np.int64)
    ends = np.array([s + d for s, d in spans], dtype=np.int64)
    open_at = [sum(s <= t < e for s, e in zip(starts, ends, strict=True)) for t in range(90)]
    expected = sum(low <= n < low + width for n in open_at)
    if low == 0:  # the count before the first and after the last bound is not time in view
        inside = [t for t in range(90) if any(s <= t for s in starts) and any(t < e for e in ends)]
        expected = sum(low <= open_at[t] < low + width for t in inside)

    def keep(n: np.ndarray) -> np.ndarray:
        return (n >= low) & (n < low + width)

    assert time_where_open(starts, ends, keep) == expected
    with mock.patch.object(interval_arrays, "_SEGMENT_BLOCK", 3):  # several blocks
        assert time_where_open(starts, ends, keep) == expected
