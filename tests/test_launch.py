"""Launch overhead and launch configuration: hand-made tables, T028 and cori-8rank-a."""

from __future__ import annotations

import math

import polars as pl
import pytest
from conftest import SHARED_TRACES, cori_rank_files
from hypothesis import given, settings
from hypothesis import strategies as st

from nsysan import model
from nsysan.analysis import analyze
from nsysan.analyze.launch import measure_launch
from nsysan.diagnose import diagnose
from nsysan.ingest import load_trace
from nsysan.report.view import build_view


def _kernels(rows: list[tuple[int, int, int]]) -> pl.DataFrame:
    """(gpu, start, end) rows as a model kernels table."""
    df = pl.DataFrame(
        rows, schema={"gpu": pl.Int32, "start_ns": pl.Int64, "end_ns": pl.Int64}, orient="row"
    )
    return model.conform(df, model.KERNELS)


def _config(
    gpu: int, name: str, grid: tuple[int, int, int], block: tuple[int, int, int], n: int, total: int
) -> dict:  # type: ignore[type-arg]
    return {
        "source": 0, "pid": 1, "gpu": gpu, "device_id": gpu, "short_name": name,
        "grid_x": grid[0], "grid_y": grid[1], "grid_z": grid[2],
        "block_x": block[0], "block_y": block[1], "block_z": block[2],
        "launches": n, "total_ns": total,
    }  # fmt: skip


def test_measures_on_a_hand_made_gpu() -> None:
    # GPU 0: window [0, 100 µs); kernels of 2, 2, 2, 50 µs and one starting outside.
    kernels = _kernels(
        [
            (0, 0, 2_000),
            (0, 5_000, 7_000),
            (0, 8_000, 10_000),
            (0, 40_000, 90_000),
            (0, 100_000, 110_000),
        ]
    )
    gaps = pl.DataFrame(
        {"gpu": [0, 0, 0], "duration_ns": [3_000, 1_000, 30_000]},
        schema={"gpu": pl.Int32, "duration_ns": pl.Int64},
    )
    windows = pl.DataFrame(
        {"gpu": [0], "window_start_ns": [0], "window_end_ns": [100_000]},
        schema={"gpu": pl.Int32, "window_start_ns": pl.Int64, "window_end_ns": pl.Int64},
    )
    configs = model.conform(
        pl.DataFrame(
            [
                _config(0, "tiny", (1, 1, 1), (256, 1, 1), 3, 6_000),
                _config(0, "big", (1024, 1, 1), (1, 1, 1), 2, 60_000),
                _config(0, "warp", (8, 1, 1), (16, 1, 1), 1, 30_000),
            ]
        ),
        model.LAUNCH_CONFIGS,
    )
    r = measure_launch(kernels, gaps, windows, configs)
    row = r.per_gpu.row(0, named=True)
    assert row["kernels"] == 4
    assert row["kernel_ns"] == 56_000
    assert row["launch_rate"] == pytest.approx(4 / 100e-6)
    assert row["kernel_p50_ns"] == 2_000  # nearest rank: 2 of 4 kernels at or below
    assert row["kernel_p99_ns"] == 50_000
    assert row["small_kernel_count"] == 3
    assert row["small_kernel_share"] == pytest.approx(0.75)
    assert row["small_kernel_time_share"] == pytest.approx(6_000 / 56_000)
    assert (row["gap_count"], row["short_gap_count"], row["short_gap_ns"]) == (3, 2, 4_000)
    assert row["short_gap_share"] == pytest.approx(0.04)
    assert row["launch_bound"] is False  # µs gaps are 4% of the window
    hist = dict(zip(r.durations["label"], r.durations["count"], strict=True))
    assert hist == {"<1 µs": 0, "1–10 µs": 3, "10–100 µs": 1, "0.1–1 ms": 0, "≥1 ms": 0}
    cfg = {row["short_name"]: row for row in r.configs.iter_rows(named=True)}
    assert list(r.configs["short_name"]) == ["big", "warp", "tiny"]  # by kernel time
    assert cfg["big"]["one_thread_blocks"] and cfg["big"]["blocks"] == 1024
    assert cfg["warp"]["sub_warp_blocks"] and not cfg["warp"]["one_thread_blocks"]
    assert cfg["tiny"]["single_block"] and not cfg["tiny"]["sub_warp_blocks"]
    # Over the GPU's kernel time in the kernel table (all of it: 2+2+2+50+10 µs).
    assert cfg["big"]["time_share"] == pytest.approx(60 / 66)


def test_launch_bound_needs_both_small_kernels_and_us_gaps() -> None:
    # 10 kernels of 1 µs, 9 gaps of 2 µs in a 28 µs window: 64% of it in µs gaps.
    kernels = _kernels([(0, i * 3_000, i * 3_000 + 1_000) for i in range(10)])
    gaps = pl.DataFrame(
        {"gpu": [0] * 9, "duration_ns": [2_000] * 9},
        schema={"gpu": pl.Int32, "duration_ns": pl.Int64},
    )
    windows = pl.DataFrame(
        {"gpu": [0], "window_start_ns": [0], "window_end_ns": [28_000]},
        schema={"gpu": pl.Int32, "window_start_ns": pl.Int64, "window_end_ns": pl.Int64},
    )
    r = measure_launch(kernels, gaps, windows, model.empty_frame(model.LAUNCH_CONFIGS))
    assert r.per_gpu["launch_bound"].to_list() == [True]
    assert r.per_gpu["short_gap_share"][0] == pytest.approx(18 / 28)
    assert not r.configs_available and r.configs.is_empty()
    # The same kernels with 20 µs gaps: small kernels, but the gaps are not launch-scale.
    slow = pl.DataFrame(
        {"gpu": [0] * 9, "duration_ns": [20_000] * 9},
        schema={"gpu": pl.Int32, "duration_ns": pl.Int64},
    )
    assert measure_launch(kernels, slow, windows, model.empty_frame(model.LAUNCH_CONFIGS)).per_gpu[
        "launch_bound"
    ].to_list() == [False]


def _real(paths: list) -> tuple:  # type: ignore[type-arg]
    if not all(p.exists() for p in paths):
        pytest.skip(f"real traces not found at {SHARED_TRACES}")
    # As the CLI loads without --ncu: grid/block only as the SQL aggregate.
    trace = load_trace(paths, launch_config=False)
    assert trace.kernels["grid_x"].null_count() == trace.kernels.height
    analysis = analyze(trace)
    return analysis, diagnose(analysis)


def test_t028_is_launch_bound() -> None:
    analysis, d = _real([SHARED_TRACES / "T028-nsight-systems-deep-dive" / "trace.sqlite"])
    row = analysis.launch.per_gpu.row(0, named=True)
    assert row["kernels"] == 1010
    assert row["kernel_p50_ns"] == 1823
    assert row["small_kernel_share"] == 1.0
    assert row["short_gap_count"] == 1006 and row["gap_count"] == 1009
    assert row["short_gap_share"] == pytest.approx(0.4551, abs=1e-4)
    assert row["launch_bound"] is True
    cfg = analysis.launch.configs.row(0, named=True)
    assert (cfg["short_name"], cfg["blocks"], cfg["threads_per_block"]) == ("vectorAdd", 1, 256)
    assert cfg["single_block"] and cfg["launches"] == 1010
    assert d.findings[0].rule_id == "launch-bound"


def test_cori_names_the_one_thread_blocks() -> None:
    analysis, d = _real(cori_rank_files())
    configs = analysis.launch.configs
    assert configs.height == 24  # 3 kernels on each of 8 GPUs
    assert configs["one_thread_blocks"].all()
    assert set(configs["blocks"]) == {1024}
    assert analysis.launch.per_gpu["launch_bound"].sum() == 0  # ms-long kernels
    f = next(f for f in d.findings if f.rule_id == "launch-config")
    assert f.severity == "warning"
    assert f.claim["en"].startswith(
        "On GPU 0–7, kernels launched with one thread per block take 100.0% of kernel time: "
        "nvkernel_ppush__F1L664_1_, nvkernel_cpush__F1L1123_2_, nvkernel_grid1__F1L1731_3_ "
        "with grid 1024×1×1 and block 1×1×1"
    )
    assert "one lane of each 32-lane warp" in f.claim["en"]
    assert "每个线程块只有一个线程" in f.claim["zh"]


def test_report_section_and_json_fields(tmp_path) -> None:  # type: ignore[no-untyped-def]
    analysis, d = _real([SHARED_TRACES / "T028-nsight-systems-deep-dive" / "trace.sqlite"])
    for lang in ("en", "zh"):
        view = build_view(analysis, d, lang)
        section = next(s for s in view.sections if s.key == "launch")
        assert not section.unavailable
        overhead = section.tables[0]
        assert overhead.rows[0][:2] == ("GPU 0", "1,010 (284k)")
        shapes = section.tables[2]
        assert shapes.rows[0][1:3] == ("vectorAdd", "1×1×1 / 256×1×1")
    from nsysan.report.document import analysis_document

    doc = analysis_document(analysis)
    launch = doc["results"]["launch"]
    assert launch["per_gpu"][0]["launch_bound"] is True
    assert launch["configs"][0]["single_block"] is True
    assert doc["inputs"][0]["cpu_cores"] == 12


def test_generated_launch_bound_equals_its_ground_truth() -> None:
    import json

    from conftest import REPO

    truth = json.loads((REPO / "fixtures" / "ground_truth.json").read_text())["launch-bound"]
    analysis = analyze(load_trace(REPO / "fixtures" / "launch-bound.sqlite", launch_config=False))
    for gpu in truth["gpus"]:
        row = analysis.launch.gpu(gpu["gpu"])
        extra = gpu["extra"]
        assert row is not None
        assert row["kernels"] == extra["kernels"]
        assert row["kernel_p50_ns"] == extra["kernel_p50_ns"]
        assert row["small_kernel_share"] == pytest.approx(extra["small_kernel_share"], abs=1e-12)
        assert row["short_gap_count"] == extra["short_gap_count"]
        assert row["short_gap_share"] == pytest.approx(extra["short_gap_share"], rel=1e-9)
        assert row["launch_rate"] == pytest.approx(extra["launch_rate"], rel=1e-9)
        assert row["launch_bound"] is True
    assert [f.rule_id for f in diagnose(analysis).findings] == ["launch-bound"]


def _reference_stats(kernels: list[tuple[int, int, int]], window: tuple[int, int]) -> dict:  # type: ignore[type-arg]
    """Per GPU, the statistics and buckets by their definitions, in plain Python."""
    edges = (1_000, 10_000, 100_000, 1_000_000)
    out = {}
    for gpu in sorted({g for g, _, _ in kernels}):
        d = sorted(e - s for g, s, e in kernels if g == gpu and window[0] <= s < window[1])
        if not d:
            continue
        n = len(d)

        def rank(q: float, d: list[int] = d, n: int = n) -> int:
            return d[max(math.ceil(n * q), 1) - 1]

        buckets = [0] * (len(edges) + 1)
        times = [0] * (len(edges) + 1)
        for x in d:
            b = next((i for i, edge in enumerate(edges) if x < edge), len(edges))
            buckets[b] += 1
            times[b] += x
        out[gpu] = {
            "kernels": n,
            "kernel_ns": sum(d),
            "kernel_p50_ns": rank(0.5),
            "kernel_p90_ns": rank(0.9),
            "kernel_p99_ns": rank(0.99),
            "small_kernel_count": sum(x < 10_000 for x in d),
            "buckets": buckets,
            "times": times,
        }
    return out


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2),
            st.integers(-5_000, 3_000_000),
            st.sampled_from(
                [0, 1, 999, 1_000, 1_001, 9_999, 10_000, 99_999, 100_000, 10**6, 2 * 10**6]
            )
            | st.integers(0, 3_000_000),
        ),
        max_size=60,
    )
)
def test_statistics_and_buckets_match_their_definitions(rows: list[tuple[int, int, int]]) -> None:
    kernels = [(g, s, s + d) for g, s, d in rows]
    window = (0, 2_500_000)
    windows = pl.DataFrame(
        {"gpu": [0, 1, 2], "window_start_ns": [window[0]] * 3, "window_end_ns": [window[1]] * 3},
        schema={"gpu": pl.Int32, "window_start_ns": pl.Int64, "window_end_ns": pl.Int64},
    )
    gaps = pl.DataFrame(schema={"gpu": pl.Int32, "duration_ns": pl.Int64})
    r = measure_launch(
        _kernels(kernels) if kernels else _kernels([]),
        gaps,
        windows,
        model.conform(pl.DataFrame(), model.LAUNCH_CONFIGS),
    )
    expected = _reference_stats(kernels, window)
    for row in r.per_gpu.iter_rows(named=True):
        want = expected.get(row["gpu"])
        if want is None:
            assert row["kernels"] == 0 and row["kernel_p50_ns"] is None
            continue
        for name in ("kernels", "kernel_ns", "kernel_p50_ns", "kernel_p90_ns", "kernel_p99_ns"):
            assert row[name] == want[name], name
        assert row["small_kernel_count"] == want["small_kernel_count"]
    assert r.per_gpu.schema["kernels"] == pl.UInt32
    for gpu in (0, 1, 2):
        mine = r.durations.filter(pl.col("gpu") == gpu)
        want = expected.get(gpu, {"buckets": [0] * 5, "times": [0] * 5})
        assert mine["count"].to_list() == want["buckets"]
        assert mine["time_ns"].to_list() == want["times"]
