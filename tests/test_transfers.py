"""Memory transfers per GPU, and gap time with a transfer running as its own cause.

docs/metrics/transfers.md defines the numbers; cori-8rank-a's NVIDIA reports
(cuda_gpu_mem_time_sum.csv) pin them on a real trace.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from conftest import cori_rank_files, reference_dir
from polars.testing import assert_frame_equal
from test_host import api, launch, make_trace, rng

from nsysan import load_trace
from nsysan.analysis import analyze
from nsysan.analyze.busy import measure_busy
from nsysan.analyze.gaps import measure_gaps
from nsysan.analyze.host import attribute_gaps
from nsysan.analyze.host_causes import CAUSES
from nsysan.analyze.transfers import measure_transfers, transfer_intervals
from nsysan.settings import Settings

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures"


def carved(trace: Any) -> Any:
    settings = Settings()
    busy = measure_busy(trace, settings)
    gaps = measure_gaps(busy.intervals, busy.summary, busy.keys)
    return attribute_gaps(
        trace, gaps.gaps, settings, gaps.keys, transfers=transfer_intervals(trace)
    )


def causes_of(row: dict[str, Any]) -> dict[str, int]:
    return {c: row[f"{c}_ns"] for c in CAUSES if row[f"{c}_ns"]}


def copy(start: int, end: int, kind: str = "DtoH", nbytes: int = 512) -> dict[str, Any]:
    return {"start_ns": start, "end_ns": end, "copy_kind": kind, "bytes": nbytes}


def test_transfer_time_leaves_the_causes_it_falls_in() -> None:
    """Gap [100, 1000): the thread syncs to 300, is in an NVTX range to 800, launches
    [800, 850); the kernel starts at 1000. Copies run [100, 250), [500, 600), [820, 840)
    and [900, 950)."""
    trace = make_trace(
        kernels=[
            {"start_ns": 0, "end_ns": 100, "correlation_id": 1},
            {"start_ns": 1_000, "end_ns": 1_100, "correlation_id": 2},
        ],
        cuda_api=[
            launch(-50, -40, corr=1),
            api(90, 300, "cudaStreamSynchronize"),
            launch(800, 850),
        ],
        nvtx=[rng(300, 800, "schedule")],
        memcpy=[copy(100, 250), copy(500, 600), copy(820, 840), copy(900, 950)],
    )
    (row,) = carved(trace).gaps.iter_rows(named=True)
    assert causes_of(row) == {
        "gpu_transfer": 150 + 100 + 20 + 50,
        "cuda_sync": 200 - 150,
        "nvtx": 500 - 100,
        "launch_call": 50 - 20,
        "gpu_wait": 150 - 50,
    }
    assert sum(causes_of(row).values()) == row["duration_ns"] == 900
    # Without the transfers the same gap is host-side and GPU-side only.
    plain = attribute_gaps(trace, row_gaps(trace), Settings(), ("gpu",))
    assert causes_of(plain.gaps.row(0, named=True)) == {
        "cuda_sync": 200,
        "nvtx": 500,
        "launch_call": 50,
        "gpu_wait": 150,
    }


def row_gaps(trace: Any) -> pl.DataFrame:
    busy = measure_busy(trace, Settings())
    return measure_gaps(busy.intervals, busy.summary, busy.keys).gaps


@pytest.mark.parametrize("seed", range(6))
def test_transfer_cause_matches_nanosecond_brute_force(seed: int) -> None:
    """Random kernels, launches, syncs, NVTX ranges and copies: every nanosecond of
    every gap gets the cause the definition gives it (docs/metrics/host.md#split)."""
    r = random.Random(seed)
    kernels, calls, ranges, copies = [], [], [], []
    t = 0
    for corr in range(1, 25):
        start = t + r.randint(0, 400)
        end = start + r.randint(10, 200)
        launch_at = start - r.randint(-300, 300) if corr > 1 else start - 50
        launch_at = min(launch_at, start - 5)
        calls.append(launch(launch_at, launch_at + r.randint(1, 5), corr=corr))
        kernels.append({"start_ns": start, "end_ns": end, "correlation_id": corr})
        t = end
    for _ in range(15):
        a = r.randint(0, t)
        calls.append(api(a, a + r.randint(1, 120), "cudaStreamSynchronize"))
        b = r.randint(0, t)
        ranges.append(rng(b, b + r.randint(1, 200), "step"))
        c = r.randint(0, t)
        copies.append(copy(c, c + r.randint(1, 150)))
    trace = make_trace(kernels=kernels, cuda_api=calls, nvtx=ranges, memcpy=copies)
    result = carved(trace)
    covered = {x for cp in copies for x in range(cp["start_ns"], cp["end_ns"])}
    syncing = {x for c in calls if c["name"] == "cudaStreamSynchronize" for x in range(c["start_ns"], c["end_ns"])}  # fmt: skip
    named = {x for g in ranges for x in range(g["start_ns"], g["end_ns"])}
    other_api = {x for c in calls if c["name"] == "cudaLaunchKernel" for x in range(c["start_ns"], c["end_ns"])}  # fmt: skip
    for row in result.gaps.iter_rows(named=True):
        expected: dict[str, int] = {}
        ls, le = row["launch_start_ns"], row["launch_end_ns"]
        for x in range(row["start_ns"], row["end_ns"]):
            if x in covered:
                cause = "gpu_transfer"
            elif x >= max(le, row["start_ns"]):
                cause = "gpu_wait"
            elif x >= max(ls, row["start_ns"]):
                cause = "launch_call"
            elif x in syncing:
                cause = "cuda_sync"
            elif x in other_api:
                cause = "cuda_api"
            elif x in named:
                cause = "nvtx"
            else:
                cause = "unattributed"
            expected[cause] = expected.get(cause, 0) + 1
        assert causes_of(row) == expected, row


def test_scenario_copies_in_gaps_are_their_own_cause() -> None:
    """serving-graphs: the token copy after each step runs in the gap that follows."""
    analysis = analyze(load_trace(FIXTURES / "serving-graphs.sqlite"))
    assert analysis.host is not None and analysis.transfers is not None
    per_gpu = analysis.host.per_gpu.sort("gpu")
    exposed = analysis.transfers.per_gpu.sort("gpu")
    # The copies never overlap a kernel here: all their window time is gap time.
    assert exposed["exposed_ns"].to_list() == exposed["transfer_ns"].to_list()
    assert per_gpu["gpu_transfer_ns"].to_list() == exposed["exposed_ns"].to_list()
    assert all(v > 0 for v in per_gpu["gpu_transfer_ns"].to_list())
    sums = per_gpu.select(pl.sum_horizontal(f"{c}_ns" for c in CAUSES)).to_series()
    assert sums.to_list() == per_gpu["gap_ns"].to_list()


@pytest.mark.shared
def test_cori_transfer_time_per_rank_equals_nvidia(shared_traces: Path) -> None:
    """Per rank and operation: count, total, min and max equal cuda_gpu_mem_time_sum.csv."""
    files = cori_rank_files()
    assert len(files) == 8
    analysis = analyze(load_trace(files))
    assert analysis.transfers is not None
    sources = analysis.trace.sources.select("source", "path")
    rank_of = (
        analysis.trace.memcpy.select("gpu", "source")
        .unique()
        .join(sources, on="source")
        .select("gpu", pl.col("path").map_elements(lambda p: Path(p), return_dtype=pl.Object))
    )
    assert rank_of.height == 8
    per_op = analysis.transfers.per_operation
    for gpu, path in rank_of.iter_rows():
        ref = pl.read_csv(reference_dir(path) / "cuda_gpu_mem_time_sum.csv")
        theirs = ref.select(
            pl.col("Operation").alias("operation"),
            pl.col("Count").cast(pl.Int64).alias("count"),
            pl.col("Total Time (ns)").cast(pl.Int64).alias("total_ns"),
            pl.col("Min (ns)").cast(pl.Int64).alias("min_ns"),
            pl.col("Max (ns)").cast(pl.Int64).alias("max_ns"),
        ).sort("operation")
        mine = (
            per_op.filter(pl.col("gpu") == gpu)
            .select("operation", "count", "total_ns", "min_ns", "max_ns")
            .sort("operation")
        )
        assert mine.equals(theirs), (path, mine, theirs)
    # Rank 1 (report1): 332 ms of transfers against 87 ms of kernels, 4.8% of its window.
    first = analysis.trace.sources.filter(pl.col("path").str.ends_with("report1.sqlite"))
    gpu = analysis.trace.memcpy.filter(pl.col("source") == first["source"][0])["gpu"][0]
    row = analysis.transfers.per_gpu.filter(pl.col("gpu") == gpu).row(0, named=True)
    assert row["total_ns"] == 266_752_199 + 64_944_856 + 187_580
    assert row["count"] == 3_531 + 410 + 130


def test_transfer_table_totals_direction_bytes() -> None:
    trace = make_trace(
        kernels=[
            {"start_ns": 0, "end_ns": 100, "correlation_id": 1},
            {"start_ns": 1_000, "end_ns": 1_100, "correlation_id": 2},
        ],
        memcpy=[copy(50, 150, "HtoD", 1_000), copy(400, 600, "DtoH", 64), copy(1_050, 1_300)],
    )
    busy = measure_busy(trace, Settings())
    result = measure_transfers(trace, busy.windows, busy.intervals)
    ops = {r["direction"]: r for r in result.per_operation.iter_rows(named=True)}
    assert ops["HtoD"]["operation"] == "[CUDA memcpy Host-to-Device]"
    assert (ops["HtoD"]["bytes"], ops["HtoD"]["total_ns"], ops["HtoD"]["window_ns"]) == (
        1_000,
        100,
        100,
    )
    # Window [0, 1100): the last copy's tail is outside it.
    assert (ops["DtoH"]["count"], ops["DtoH"]["total_ns"], ops["DtoH"]["window_ns"]) == (
        2,
        450,
        250,
    )
    (gpu,) = result.per_gpu.iter_rows(named=True)
    # In the window: [50,150) + [400,600) + [1050,1100); under kernels: [50,100), [1050,1100).
    assert (gpu["transfer_ns"], gpu["exposed_ns"]) == (350, 250)
    assert gpu["transfer_share"] == pytest.approx(350 / 1_100)


@pytest.mark.shared
def test_cori_report_shows_transfers_per_gpu_and_names_them() -> None:
    from nsysan.diagnose import diagnose
    from nsysan.report.view import build_view

    analysis = analyze(load_trace(cori_rank_files()))
    diagnosis = diagnose(analysis)
    heavy = next(f for f in diagnosis.findings if f.rule_id == "transfer-heavy")
    assert heavy.claim["en"].startswith(
        "GPU 0–7 spend 4.7%–4.8% of their window in memory copies and memsets"
    )
    assert "their transfer time is 1.90×–4.74× their kernel time" in heavy.claim["en"]
    # Its evidence links to the inline definition the report carries.
    from nsysan.report.glossary import definition_anchor

    assert {definition_anchor(e.source) for e in heavy.evidence} == {"#def-transfers"}
    view = build_view(analysis, diagnosis, "en")
    gpus = next(s for s in view.sections if s.key == "gpus")
    table = next(t for t in gpus.tables if t.title == "Memory transfers")
    assert [r[0] for r in table.rows] == [f"GPU {g}" for g in range(8)]
    assert all(
        r[2].startswith("HtoD ") and "DtoH " in r[2] and "memset " in r[2] for r in table.rows
    )
    # The host-side story no longer counts the copies: their gap time is its own cause.
    assert analysis.host is not None
    transfer = analysis.host.per_gpu["gpu_transfer_share"].to_list()
    assert all(0.04 < s < 0.07 for s in transfer), transfer


@pytest.mark.shared
def test_cori_attribution_in_thread_groups_equals_one_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Eight feeding processes, attributed a few threads at a time (bounded memory), give
    every number of the attribution with all threads at once, transfers carved out."""
    from nsysan.analyze import host as host_module
    from nsysan.analyze import host_tables

    trace = load_trace(cori_rank_files())
    grouped = carved(trace)
    seen: list[int] = []

    def one_group(threads: pl.DataFrame, portions: pl.DataFrame) -> list[Any]:
        runs = host_tables.thread_groups(threads, portions)
        seen.append(len(runs))
        return [np.arange(threads.height)]

    monkeypatch.setattr(host_module, "thread_groups", one_group)
    whole = carved(trace)
    assert seen and seen[0] >= 4  # the grouped run really had several groups
    for field in ("gaps", "per_gpu", "shares", "nvtx", "gil_threads"):
        assert_frame_equal(getattr(grouped, field), getattr(whole, field), check_exact=True)
    assert grouped.gaps["gpu_transfer_ns"].sum() > 0
