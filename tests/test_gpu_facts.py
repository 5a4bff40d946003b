"""The time of a GPU's gaps under its copies (the copy-bound evidence of a finding)."""

from __future__ import annotations

import random

import polars as pl
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from nsysan.diagnose.gpu_facts import _covered

# Cuts of a line: consecutive pairs are disjoint gaps (unordered in the table).
_cuts = st.lists(st.integers(0, 200), max_size=30, unique=True).map(sorted)
# Busy intervals (start, length), overlapping and in any order.
_busy = st.lists(st.tuples(st.integers(0, 200), st.integers(1, 40)), max_size=30)


@hsettings(max_examples=300, deadline=None)
@given(_cuts, _busy, st.randoms())
def test_covered_is_the_gap_time_under_any_busy_interval(
    cuts: list[int], busy: list[tuple[int, int]], rnd: random.Random
) -> None:
    gaps = [(a, b) for a, b in zip(cuts[::2], cuts[1::2], strict=False)]
    rnd.shuffle(gaps)
    want = sum(1 for a, b in gaps for t in range(a, b) if any(s <= t < s + n for s, n in busy))
    gap_table = pl.DataFrame(
        {"start_ns": [g[0] for g in gaps], "end_ns": [g[1] for g in gaps]},
        schema={"start_ns": pl.Int64, "end_ns": pl.Int64},
    )
    busy_table = pl.DataFrame(
        {"start_ns": [s for s, _ in busy], "end_ns": [s + n for s, n in busy]},
        schema={"start_ns": pl.Int64, "end_ns": pl.Int64},
    )
    assert _covered(gap_table, busy_table) == want
