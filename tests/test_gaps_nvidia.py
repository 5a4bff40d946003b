"""Gaps and time utilization equal Nsight Systems' own ``nsys analyze`` reports, row for row.

The references (``reference/<file>/gpu_gaps_all.csv``, ``gpu_gaps_500ms.csv``,
``gpu_time_util.csv``) were produced by nsys 2024.2.3 on every export; an empty
file means the rule found nothing (or the export has no GPU work).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import polars as pl
import pytest
from conftest import cori_rank_files, reference_dir, single_file_traces

from nsysan import model
from nsysan.analyze.busy import measure_busy, nvidia_gpu_time_util, nvidia_operations
from nsysan.analyze.gaps import measure_gaps, nvidia_gpu_gaps
from nsysan.ingest import load_trace
from nsysan.intervals import clip_to_windows, complement_in, intersect_intervals, total_length
from nsysan.settings import Settings

ALL_FILES = single_file_traces() + cori_rank_files()

GAP_COLUMNS = {
    "Row#": "row",
    "Duration (ns)": "duration_ns",
    "Start (ns)": "start_ns",
    "PID": "pid",
    "Device ID": "device_id",
    "Context ID": "context_id",
}
UTIL_COLUMNS = {
    "Row#": "row",
    "In-Use (%)": "in_use_pct",
    "Duration (ns)": "duration_ns",
    "Start (ns)": "start_ns",
    "PID": "pid",
    "Device ID": "device_id",
    "Context ID": "context_id",
}


def _id(p: Path) -> str:
    return f"{p.parent.name}/{p.name}"


@cache
def _trace(path: Path) -> model.Trace:
    return load_trace([path])


def _reference(path: Path, report: str, columns: dict[str, str]) -> pl.DataFrame:
    """NVIDIA's report as a typed frame with our column names (empty file: no rows)."""
    csv = reference_dir(path) / f"{report}.csv"
    schema = {name: pl.Float64 if name == "in_use_pct" else pl.Int64 for name in columns.values()}
    if csv.stat().st_size == 0:
        return pl.DataFrame(schema=schema)
    return pl.read_csv(csv).rename(columns).select(columns.values()).cast(schema)  # type: ignore[arg-type]


def _ours(df: pl.DataFrame, columns: dict[str, str]) -> pl.DataFrame:
    schema = {name: pl.Float64 if name == "in_use_pct" else pl.Int64 for name in columns.values()}
    return df.select(columns.values()).cast(schema)  # type: ignore[arg-type]


def _assert_same(ours: pl.DataFrame, ref: pl.DataFrame) -> None:
    if ours.equals(ref):
        return
    only_ours = ours.join(ref, on=ours.columns, how="anti")
    only_ref = ref.join(ours, on=ref.columns, how="anti")
    pytest.fail(
        f"{ours.height} rows vs NVIDIA's {ref.height}; ours only:\n{only_ours.head(5)}\n"
        f"NVIDIA's only:\n{only_ref.head(5)}"
    )


@pytest.mark.shared
@pytest.mark.parametrize("path", ALL_FILES, ids=_id)
@pytest.mark.parametrize(("report", "min_gap_ms"), [("gpu_gaps_all", 0), ("gpu_gaps_500ms", 500)])
def test_gpu_gaps_reproduce_nsys_row_for_row(path: Path, report: str, min_gap_ms: int) -> None:
    ops = nvidia_operations(_trace(path))
    ours = _ours(nvidia_gpu_gaps(ops, min_gap_ms=min_gap_ms), GAP_COLUMNS)
    _assert_same(ours, _reference(path, report, GAP_COLUMNS))


@pytest.mark.shared
@pytest.mark.parametrize("path", ALL_FILES, ids=_id)
def test_gpu_time_util_reproduces_nsys_row_for_row(path: Path) -> None:
    ours = _ours(nvidia_gpu_time_util(nvidia_operations(_trace(path))), UTIL_COLUMNS)
    _assert_same(ours, _reference(path, "gpu_time_util", UTIL_COLUMNS))


@pytest.mark.shared
@pytest.mark.parametrize("path", ALL_FILES, ids=_id)
def test_nvidia_busy_mode_gap_list_is_nsys_gap_list(path: Path) -> None:
    busy = measure_busy(_trace(path), Settings(busy_mode="nvidia"))
    gaps = measure_gaps(busy.intervals, busy.summary, busy.keys)
    keys = ["pid", "device_id", "start_ns", "duration_ns"]
    ours = gaps.gaps.select(keys).cast(pl.Int64).sort(keys)
    ref = _reference(path, "gpu_gaps_all", GAP_COLUMNS).select(keys).sort(keys)
    _assert_same(ours, ref)
    summary = gaps.summary
    assert (summary["busy_ns"] + summary["gap_ns"] == summary["window_ns"]).all()


@pytest.mark.shared
def test_ranks_loaded_together_match_each_rank_report(shared_traces: Path) -> None:
    """On one timeline each rank's gaps are its own report's, shifted by its offset."""
    trace = load_trace(cori_rank_files())
    gaps = nvidia_gpu_gaps(nvidia_operations(trace), min_gap_ms=0)
    for source, path, offset in trace.sources.select("source", "path", "offset_ns").rows():
        mine = gaps.filter(pl.col("source") == source).with_columns(
            pl.col("start_ns") - offset, pl.int_range(1, pl.len() + 1).alias("row")
        )
        _assert_same(_ours(mine, GAP_COLUMNS), _reference(Path(path), "gpu_gaps_all", GAP_COLUMNS))


@pytest.mark.shared
@pytest.mark.parametrize("path", ALL_FILES, ids=_id)
def test_kernels_mode_gaps_relate_to_nvidia_gaps(path: Path) -> None:
    """nsysan's default counts only kernels as busy; the difference is the other GPU work.

    Inside each GPU's kernel window W: every NVIDIA gap lies inside a kernels-mode
    gap, and kernels-mode gap time = NVIDIA gap time + time of memcpy, memset and
    profiler overhead that no kernel overlaps.
    """
    trace = _trace(path)
    busy = measure_busy(trace, Settings())
    kernel_gaps = measure_gaps(busy.intervals, busy.summary, busy.keys)
    windows = busy.windows
    ops = nvidia_operations(trace)
    if windows.is_empty():
        assert kernel_gaps.gaps.is_empty()
        return
    nvidia_gaps = clip_to_windows(nvidia_gpu_gaps(ops, min_gap_ms=0), windows, "gpu").filter(
        pl.col("end_ns") > pl.col("start_ns")
    )
    inside = total_length(intersect_intervals(nvidia_gaps, kernel_gaps.gaps, "gpu"), "gpu")
    assert inside.equals(total_length(nvidia_gaps, "gpu"))

    idle_for_nvidia = total_length(complement_in(ops, windows, "gpu"), "gpu", name="nvidia_gap")
    other_work = total_length(
        clip_to_windows(ops.filter(pl.col("kind") != "kernel"), windows, "gpu"), "gpu"
    )
    not_overlapping_kernels = (
        other_work.join(
            total_length(
                intersect_intervals(
                    clip_to_windows(ops.filter(pl.col("kind") != "kernel"), windows, "gpu"),
                    busy.intervals,
                    "gpu",
                ),
                "gpu",
                name="covered",
            ),
            on="gpu",
            how="left",
        )
        .fill_null(0)
        .select("gpu", (pl.col("length_ns") - pl.col("covered")).alias("other_ns"))
    )
    table = (
        kernel_gaps.summary.select("gpu", "gap_ns")
        .join(idle_for_nvidia, on="gpu", how="left")
        .join(not_overlapping_kernels, on="gpu", how="left")
        .fill_null(0)
    )
    assert (table["gap_ns"] == table["nvidia_gap"] + table["other_ns"]).all(), table
