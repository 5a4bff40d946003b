"""The dominant gap's common steady window: time with every GPU inside a gap."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from nsysan.analyze.dominant import _all_idle


def _disjoint(draw: st.DrawFn) -> list[tuple[int, int]]:
    t, spans = 0, []
    for _ in range(draw(st.integers(0, 8))):
        t += draw(st.integers(0, 6))
        end = t + draw(st.integers(1, 8))
        spans.append((t, end))
        t = end
    return spans


@st.composite
def _gaps(draw: st.DrawFn) -> dict[int, list[tuple[int, int]]]:
    return {gpu: _disjoint(draw) for gpu in range(draw(st.integers(2, 4)))}


@settings(max_examples=80, deadline=None)
@given(_gaps(), st.integers(0, 20), st.integers(0, 60))
def test_all_idle_is_the_time_every_gpu_is_in_a_gap(
    gaps: dict[int, list[tuple[int, int]]], start: int, length: int
) -> None:
    rows = [(gpu, s, e) for gpu, spans in gaps.items() for s, e in spans]
    table = pl.DataFrame(
        rows, schema={"gpu": pl.Int32, "start_ns": pl.Int64, "end_ns": pl.Int64}, orient="row"
    )
    end = start + length
    expected = sum(
        all(any(s <= t < e for s, e in spans) for spans in gaps.values()) for t in range(start, end)
    )
    assert _all_idle(table, list(gaps), start, end) == expected
