"""Device memory in use: hand-made events, the generated kv-cache-full scenario, absence."""

from __future__ import annotations

import json
import sqlite3

import polars as pl
import pytest
from conftest import REPO, SHARED_TRACES

from nsysan import model
from nsysan.analysis import NO_MEMORY, analyze
from nsysan.analyze.memory import measure_memory
from nsysan.diagnose import diagnose
from nsysan.ingest import load_trace
from nsysan.report.document import analysis_document
from nsysan.report.view import build_view
from nsysan.simulate import schema

FIXTURES = REPO / "fixtures"


def _frames(events: list[tuple[int, int]], gaps: list[tuple[int, int]]):  # type: ignore[no-untyped-def]
    usage = model.conform(
        pl.DataFrame(
            {
                "gpu": [0] * len(events),
                "time_ns": [t for t, _ in events],
                "bytes_delta": [d for _, d in events],
            }
        ),
        model.MEMORY_USAGE,
    )
    gpus = pl.DataFrame(
        {"gpu": [0], "total_memory_bytes": [1000]},
        schema={"gpu": pl.Int32, "total_memory_bytes": pl.Int64},
    )
    windows = pl.DataFrame(
        {"gpu": [0], "window_start_ns": [10], "window_end_ns": [110]},
        schema={"gpu": pl.Int32, "window_start_ns": pl.Int64, "window_end_ns": pl.Int64},
    )
    g = pl.DataFrame(
        {"gpu": [0] * len(gaps), "start_ns": [s for s, _ in gaps], "end_ns": [e for _, e in gaps]},
        schema={"gpu": pl.Int32, "start_ns": pl.Int64, "end_ns": pl.Int64},
    ).with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("duration_ns"))
    return usage, gpus, windows, g


def test_in_use_step_function_over_the_window() -> None:
    # 500 B before the window, +450 at 30 (95%), -300 at 80 (65%).
    usage, gpus, windows, gaps = _frames([(0, 500), (30, 450), (80, -300)], [(40, 50), (90, 100)])
    r = measure_memory(usage, gpus, windows, gaps).per_gpu.row(0, named=True)
    assert (r["events"], r["capacity_bytes"], r["start_bytes"], r["end_bytes"]) == (
        3,
        1000,
        500,
        650,
    )
    assert (r["peak_bytes"], r["peak_ns"], r["peak_share"]) == (950, 30, 0.95)
    assert r["mean_share"] == pytest.approx((500 * 20 + 950 * 50 + 650 * 30) / 100 / 1000)
    assert (r["near_full_ns"], r["near_full_share"]) == (50, 0.5)
    assert (r["gap_count"], r["near_full_gaps"], r["near_full_gap_ns"]) == (2, 1, 10)
    assert r["near_full_gap_share"] == 0.5


def test_generated_kv_cache_full_equals_its_ground_truth() -> None:
    truth = json.loads((FIXTURES / "ground_truth.json").read_text())["kv-cache-full"]
    analysis = analyze(load_trace(FIXTURES / "kv-cache-full.sqlite", launch_config=False))
    per = {r["gpu"]: r for r in analysis.memory.per_gpu.iter_rows(named=True)}
    for gpu in truth["gpus"]:
        got, want = per[gpu["gpu"]], gpu["extra"]
        assert got["peak_share"] == pytest.approx(want["peak_share"], rel=1e-12)
        assert got["near_full_share"] == pytest.approx(
            want["near_full_share"], rel=1e-12, abs=1e-15
        )
        assert got["near_full_gaps"] == want["near_full_gaps"]
        assert got["near_full_gap_share"] == pytest.approx(
            want["near_full_gap_share"], rel=1e-12, abs=1e-15
        )
    d = diagnose(analysis)
    assert d.findings[0].rule_id == "memory-pressure"
    assert (
        d.findings[0]
        .claim["en"]
        .startswith("GPU 2 runs with device memory at least 90% of 79.2 GiB")
    )
    view = build_view(analysis, d, "zh")
    section = next(s for s in view.sections if s.key == "memory")
    assert section.series and section.series[0].gpu_labels == ("GPU 0", "GPU 1", "GPU 2", "GPU 3")
    assert max(v for v in section.series[0].y[2] if v is not None) == pytest.approx(
        truth["gpus"][2]["extra"]["peak_share"], abs=1e-4
    )
    doc = analysis_document(analysis)
    assert doc["results"]["memory"]["omitted_event_tables"] == ["series"]
    assert doc["capabilities"]["present"]["memory_usage"] is True


def test_without_the_table_the_report_says_what_to_capture() -> None:
    analysis = analyze(load_trace(FIXTURES / "balanced.sqlite", launch_config=False))
    assert analysis.memory is None and analysis.unavailable["memory"] == NO_MEMORY
    assert "--cuda-memory-usage=true" in NO_MEMORY
    d = diagnose(analysis)
    assert d.findings == ()  # the healthy control stays silent
    zh = next(s for s in build_view(analysis, d, "zh").sections if s.key == "memory")
    assert (
        "--cuda-memory-usage=true" in zh.unavailable and "没有 CUDA 显存使用事件" in zh.unavailable
    )


def test_generator_columns_are_those_of_a_real_export() -> None:
    path = SHARED_TRACES / "T002-pipit" / "trace.sqlite"
    if not path.exists():
        pytest.skip(f"real traces not found at {SHARED_TRACES}")
    with sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True) as con:
        cols = [r[1] for r in con.execute("PRAGMA table_info(CUDA_GPU_MEMORY_USAGE_EVENTS)")]
    assert tuple(cols) == schema.columns("CUDA_GPU_MEMORY_USAGE_EVENTS")
    # The table is there but empty: "not captured", never "no memory in use".
    analysis = analyze(load_trace(path, launch_config=False))
    assert analysis.memory is None and analysis.unavailable["memory"] == NO_MEMORY
