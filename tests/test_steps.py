"""Step and request latency, throughput, and `compare` before/after."""

from __future__ import annotations

import json
import math

import polars as pl
import pytest
from conftest import REPO, SHARED_TRACES
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from nsysan import model
from nsysan.analysis import NO_STEPS, analyze
from nsysan.analyze.steps import measure_steps
from nsysan.diagnose import diagnose
from nsysan.diff import diff_documents
from nsysan.diff.text import render_text
from nsysan.ingest import load_trace
from nsysan.report.document import analysis_document
from nsysan.report.jsonout import to_jsonable
from nsysan.report.view import build_view

FIXTURES = REPO / "fixtures"
TRUTH = json.loads((FIXTURES / "ground_truth.json").read_text())


def _nvtx(rows: list[tuple[int, str, int, int]]) -> pl.DataFrame:
    """(pid, text, start, end) rows as a model NVTX table (source 0)."""
    df = pl.DataFrame(
        [(0, pid, pid, s, e, text, None) for pid, text, s, e in rows],
        schema=list(model.NVTX),
        orient="row",
    )
    return model.conform(df, model.NVTX)


def test_nvtx_steps_and_requests_per_gpu() -> None:
    nvtx = _nvtx(
        [
            (7, "step", 0, 10), (7, "step", 10, 30), (7, "step", 30, 40), (7, "step", 40, 140),
            (8, "step", 0, 50),  # another process, another GPU
            (7, "request 1", 0, 100), (7, "Request 2", 20, 40), (7, "requested", 0, 5),
            (7, "step", 500, 510),  # outside GPU 0's window
        ]
    )  # fmt: skip
    procs = pl.DataFrame({"gpu": [0, 1], "source": [0, 0], "pid": [7, 8]})
    windows = pl.DataFrame(
        {"gpu": [0, 1], "window_start_ns": [0, 0], "window_end_ns": [200, 200]},
        schema={"gpu": pl.Int32, "window_start_ns": pl.Int64, "window_end_ns": pl.Int64},
    )
    r = measure_steps(nvtx, procs, windows, None, None, "nvtx", "step")
    g0 = r.gpu(0)
    assert g0 is not None
    assert (g0["steps"], g0["steps_per_s"]) == (4, 4 * 1e9 / 140)
    assert (g0["step_p50_ns"], g0["step_p90_ns"], g0["step_max_ns"]) == (10, 100, 100)
    assert g0["step_tail_ratio"] == 10.0
    # "requested" is not a request range: the text must start with the word "request".
    assert (g0["requests"], g0["request_p50_ns"], g0["request_max_ns"]) == (2, 20, 100)
    assert r.gpu(1)["steps"] == 1 and r.gpu(1)["requests"] is None  # type: ignore[index]
    assert r.slowest.filter(pl.col("gpu") == 0)["start_ns"].to_list()[:2] == [40, 10]
    assert r.slowest["over_median"][0] == 10.0


def test_generated_launch_bound_steps_equal_the_ground_truth() -> None:
    extra = TRUTH["launch-bound"]["gpus"][0]["extra"]
    analysis = analyze(load_trace(FIXTURES / "launch-bound.sqlite", launch_config=False))
    row = analysis.steps.gpu(0)
    assert row["source"] == "nvtx" and row["label"] == "decode_step"
    assert row["steps"] == extra["steps"]
    assert row["steps_per_s"] == pytest.approx(extra["steps_per_s"], rel=1e-12)
    for key in ("step_p50_ns", "step_p99_ns", "step_max_ns"):
        assert row[key] == extra[key], key


def test_dp_long_tail_requests_match_the_ground_truth() -> None:
    analysis = analyze(load_trace(FIXTURES / "dp-long-tail.sqlite", launch_config=False))
    for gpu in TRUTH["dp-long-tail"]["gpus"]:
        row = analysis.steps.gpu(gpu["gpu"])
        done = gpu["extra"]["requests_done"]
        assert (row["requests"] or 0) == done
        if done:
            assert row["request_max_ns"] / 1e6 >= gpu["extra"]["request_latency_p99_ms"] - 1e-6


def test_compare_reports_throughput_after_the_fix(tmp_path) -> None:  # type: ignore[no-untyped-def]
    docs = []
    for name in ("case-study", "case-study-fixed"):
        analysis = analyze(load_trace(FIXTURES / f"{name}.sqlite", launch_config=False))
        assert set(analysis.steps.per_gpu["steps"]) == {TRUTH[name]["numbers"]["steps_per_gpu"]}
        docs.append(to_jsonable(analysis_document(analysis)))
    result = diff_documents(*docs)
    assert result["throughput_unit"] == "steps/s"
    for row in result["gpus"]:
        m = row["measures"]["steps_per_s"]
        assert m["relative"] == pytest.approx(m["after"] / m["before"] - 1)
        assert 0.35 < m["relative"] < 0.55  # ~50 ms -> ~35 ms per step
        assert row["measures"]["kernels_per_s"]["relative"] > 0.35
    text = render_text(result)
    assert "throughput (steps/s): 19.27 -> 28.02  +45.4%" in text  # mean over GPUs
    assert "steps" in docs[0]["results"] and docs[0]["results"]["steps"][
        "omitted_event_tables"
    ] == ["steps", "requests"]


def test_report_section_names_the_slowest_steps() -> None:
    analysis = analyze(load_trace(FIXTURES / "case-study.sqlite", launch_config=False))
    for lang in ("en", "zh"):
        section = next(
            s for s in build_view(analysis, diagnose(analysis), lang).sections if s.key == "steps"
        )
        assert not section.unavailable
        assert section.tables[0].rows[0][:3] == ("GPU 0", "20", "19.6")
        slow = analysis.steps.slowest.filter(pl.col("gpu") == 0).row(0, named=True)
        assert section.tables[1].rows[0][0] == "GPU 0" and slow["over_median"] >= 1.0


def test_without_iterations_the_report_says_how_to_get_steps() -> None:
    path = SHARED_TRACES / "T028-nsight-systems-deep-dive" / "trace.sqlite"
    if not path.exists():
        pytest.skip(f"real traces not found at {SHARED_TRACES}")
    analysis = analyze(load_trace(path, launch_config=False))
    assert analysis.unavailable["steps"] == NO_STEPS
    assert analysis.steps.per_gpu["kernels_per_s"][0] == pytest.approx(283_813, rel=1e-4)
    zh = next(
        s for s in build_view(analysis, diagnose(analysis), "zh").sections if s.key == "steps"
    )
    assert "NVTX" in zh.unavailable and "没有步" in zh.unavailable
    assert "decode_step" in analysis.unavailable["steps"]


def test_t039_steps_from_the_kernel_sequence() -> None:
    path = SHARED_TRACES / "T039-gpu-poisson-solver" / "trace.sqlite"
    if not path.exists():
        pytest.skip(f"real traces not found at {SHARED_TRACES}")
    analysis = analyze(load_trace(path, launch_config=False))
    per = analysis.steps.per_gpu
    assert set(per["source"]) == {"kernel_sequence"}
    assert set(per["steps"]) == {999}
    assert per["step_p50_ns"][0] == pytest.approx(2.05e6, rel=0.01)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 900), st.sampled_from([1, 5, 5, 20, 70])), max_size=40),
    st.lists(st.tuples(st.integers(0, 500), st.integers(1, 600)), min_size=1, max_size=3),
)
def test_kernel_sequence_steps_match_their_definitions(
    spans: list[tuple[int, int]], windows_rows: list[tuple[int, int]]
) -> None:
    # Iterations common to all GPUs (ties in length on purpose); windows per GPU.
    iterations = (
        pl.DataFrame(
            {"start_ns": [s for s, _ in spans], "end_ns": [s + d for s, d in spans]},
            schema={"start_ns": pl.Int64, "end_ns": pl.Int64},
        )
        .unique()
        .sort("start_ns", "end_ns")
    )
    windows = pl.DataFrame(
        {
            "gpu": list(range(len(windows_rows))),
            "window_start_ns": [s for s, _ in windows_rows],
            "window_end_ns": [s + d for s, d in windows_rows],
        },
        schema={"gpu": pl.Int32, "window_start_ns": pl.Int64, "window_end_ns": pl.Int64},
    )
    processes = pl.DataFrame(schema={"gpu": pl.Int32, "source": pl.Int32, "pid": pl.Int32})
    r = measure_steps(
        _nvtx([]), processes, windows, None, iterations, "kernel_sequence", "every 3 kernels"
    )
    # Without the step table (the summary), every other figure is the same.
    lean = measure_steps(
        _nvtx([]), processes, windows, None, iterations, "kernel_sequence", "every 3 kernels",
        step_table=False,
    )  # fmt: skip
    assert lean.steps.is_empty() and lean.steps.schema == r.steps.schema
    assert_frame_equal(lean.per_gpu, r.per_gpu)
    assert_frame_equal(lean.slowest, r.slowest)
    for gpu, (w0, length) in enumerate(windows_rows):
        inside = [(s, e) for s, e in iterations.iter_rows() if e > w0 and s < w0 + length]
        row = r.per_gpu.filter(pl.col("gpu") == gpu).row(0, named=True)
        assert row["steps"] == len(inside)
        mine = r.steps.filter(pl.col("gpu") == gpu)
        assert mine["start_ns"].to_list() == sorted(s for s, _ in inside)
        assert mine["step"].to_list() == list(range(len(inside)))
        slow = r.slowest.filter(pl.col("gpu") == gpu)
        if not inside:
            assert row["step_p50_ns"] is None and slow.height == 0
            continue
        lengths = sorted(e - s for s, e in inside)
        n = len(lengths)
        for q, name in ((0.5, "step_p50_ns"), (0.9, "step_p90_ns"), (0.99, "step_p99_ns")):
            assert row[name] == lengths[max(math.ceil(n * q), 1) - 1], name
        assert row["step_max_ns"] == lengths[-1]
        first, last = min(s for s, _ in inside), max(e for _, e in inside)
        assert row["steps_per_s"] == pytest.approx(n * 1e9 / (last - first))
        # Longest first, the earlier of equal lengths first.
        want = sorted(inside, key=lambda se: (-(se[1] - se[0]), se[0]))[:5]
        assert list(zip(slow["start_ns"], slow["end_ns"], strict=True)) == want
        # The quotient itself, not a product with the median's reciprocal.
        assert slow["over_median"].to_list() == [(e - s) / row["step_p50_ns"] for s, e in want]


def test_over_median_is_the_quotient_on_one_gpu() -> None:
    # One GPU: polars would divide by its joined median as a product with the
    # reciprocal, 1.0045969005522446 here instead of the quotient.
    lengths = [90_300_409, 90_300_409, 90_715_511]
    starts = [0, 100_000_000, 200_000_000]
    iterations = pl.DataFrame(
        {"start_ns": starts, "end_ns": [s + d for s, d in zip(starts, lengths, strict=True)]},
        schema={"start_ns": pl.Int64, "end_ns": pl.Int64},
    )
    windows = pl.DataFrame(
        {"gpu": [0], "window_start_ns": [0], "window_end_ns": [400_000_000]},
        schema={"gpu": pl.Int32, "window_start_ns": pl.Int64, "window_end_ns": pl.Int64},
    )
    processes = pl.DataFrame(schema={"gpu": pl.Int32, "source": pl.Int32, "pid": pl.Int32})
    r = measure_steps(_nvtx([]), processes, windows, None, iterations, "kernel_sequence", "x")
    assert r.slowest["over_median"][0] == 90_715_511 / 90_300_409 == 1.0045969005522444
