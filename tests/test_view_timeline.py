"""The report timeline's per-GPU busy arrays and their bins."""

from __future__ import annotations

import random

import numpy as np
import polars as pl
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from nsysan.report.view_timeline import _binned_busy, _per_gpu

# Per GPU 0..2, cuts of a line whose consecutive pairs are disjoint busy intervals.
_cuts = st.lists(
    st.lists(st.integers(0, 300), max_size=20, unique=True).map(sorted), min_size=3, max_size=3
)


@hsettings(max_examples=200, deadline=None)
@given(_cuts, st.booleans(), st.randoms())
def test_each_gpu_gets_its_intervals_in_start_order_grouped_or_not(
    cuts: list[list[int]], shuffle: bool, rnd: random.Random
) -> None:
    rows = [(g, a, b) for g, c in enumerate(cuts) for a, b in zip(c[::2], c[1::2], strict=False)]
    if shuffle:
        rnd.shuffle(rows)  # not grouped by GPU: masks and a sort per GPU
    table = pl.DataFrame(
        rows, schema={"gpu": pl.Int32, "start_ns": pl.Int64, "end_ns": pl.Int64}, orient="row"
    )
    per_gpu = _per_gpu(table, [0, 1, 2, 7])
    edges = np.arange(0, 330, 30, dtype=np.int64)
    for g, c in enumerate(cuts):
        starts, ends = per_gpu[g]
        assert starts.tolist() == c[::2][: len(c) // 2] and ends.tolist() == c[1::2]
        busy = [
            sum(
                1
                for t in range(lo, hi)
                for a, b in zip(c[::2], c[1::2], strict=False)
                if a <= t < b
            )
            for lo, hi in zip(edges[:-1], edges[1:], strict=True)
        ]
        assert _binned_busy(starts, ends, edges).tolist() == busy
    assert per_gpu[7][0].size == 0  # a GPU without rows
