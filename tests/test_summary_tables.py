"""Without detail tables, the per-event tables nothing but the full JSON reads are
emptied as their analyses end, and everything the report, the diagnosis and the
summary document show stays the same."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from nsysan.analysis import analyze
from nsysan.analyze.cpu import HOST_GAP_COLUMNS as CPU_HOST_GAP_COLUMNS
from nsysan.analyze.host import LEAN_GAP_COLUMNS
from nsysan.analyze.host_causes import CAUSES
from nsysan.analyze.load import HOST_GAP_COLUMNS as LOAD_HOST_GAP_COLUMNS
from nsysan.ingest import load_trace
from nsysan.report.document import analysis_document

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.mark.parametrize(
    "name",
    # The demo's false balance; NCCL collectives; scheduling rows (the CPU analysis
    # reads the per-gap host table); many requests and steps.
    ["case-study", "comm-bound", "gil-blocked", "request-burst"],
)
def test_summary_analysis_shows_what_the_full_one_shows(name: str) -> None:
    trace = load_trace([FIXTURES / f"{name}.sqlite"])
    full = analyze(trace, detail_tables=True)
    lean = analyze(trace, detail_tables=False)

    assert full.host is not None and lean.host is not None
    assert full.host.gaps.height > 0
    assert lean.host.gaps.is_empty()
    # What the CPU and load analyses read (the steady-state sums below are summed
    # without a column per gap), then emptied.
    assert lean.host.gaps.columns == ["gpu", *LEAN_GAP_COLUMNS]
    assert "cuda_api_ns" not in lean.host.gaps.columns
    assert full.steps is not None and lean.steps is not None
    assert full.steps.steps.height > 0
    assert lean.steps.steps.is_empty()
    if name == "comm-bound":
        assert full.nccl is not None and lean.nccl is not None
        assert full.nccl.instance_kernels.height > 0
        assert lean.nccl.instance_kernels.is_empty() and lean.nccl.instances.is_empty()
        assert lean.nccl.matched_instances == full.nccl.matched_instances > 0

    # The steady-state causes the diagnosis reads come from the per-gap table before
    # it is emptied: the same in both.
    assert lean.steady_causes is not None
    assert lean.steady_causes.equals(full.steady_causes)
    assert lean.steady_causes["gap_ns"].sum() > 0
    assert full.dominant is not None
    causes = [f"{c}_ns" for c in CAUSES]
    for gpu, steady_start in full.dominant.per_gpu.select("gpu", "steady_start_ns").iter_rows():
        steady = full.host.gaps.filter(
            (pl.col("gpu") == gpu) & (pl.col("start_ns") >= steady_start)
        )
        sums = lean.steady_causes.filter(pl.col("gpu") == gpu)
        assert sums["gap_ns"].sum() == steady["duration_ns"].sum()
        for cause in causes:
            assert sums[cause].sum() == steady[cause].sum(), cause
    summary, from_full = analysis_document(lean), analysis_document(full)
    assert summary["findings"], "every fixture has a finding to compare"
    assert summary == from_full


def test_the_lean_gap_table_holds_every_column_the_cpu_and_load_analyses_read() -> None:
    # They look a column up by name and count a missing one as 0: one left out of the
    # lean table would silently zero their figures.
    read = {*CPU_HOST_GAP_COLUMNS, *LOAD_HOST_GAP_COLUMNS}
    assert read <= {"gpu", *LEAN_GAP_COLUMNS}
