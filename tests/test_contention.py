"""GPU-metrics contention views: units, sample-and-hold means, clock drops, DRAM pressure."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsysan import model
from nsysan.analyze.contention import (
    DRAM_PRESSURE_SHARE,
    SAMPLE_HOLD_MAX_STEPS,
    SERIES_MAX_POINTS,
    ContentionResult,
    measure_contention,
    metric_key,
)
from nsysan.settings import Settings

T028 = "T028-nsight-systems-deep-dive/trace.sqlite"
SETTINGS = Settings()


def _metrics(rows: list[tuple[int, int, str, float]]) -> pl.DataFrame:
    """GPU metrics from (gpu, time_ns, metric, value) rows, in the model's schema."""
    df = pl.DataFrame(
        rows,
        schema={"gpu": pl.Int32, "time_ns": pl.Int64, "metric": pl.String, "value": pl.Float64},
        orient="row",
    )
    return model.conform(
        df.with_columns(pl.lit(0).alias("source"), pl.lit(7).alias("type_id")), model.GPU_METRICS
    )


def _series(gpu: int, metric: str, values: list[float], step: int = 100, t0: int = 0):
    return [(gpu, t0 + i * step, metric, v) for i, v in enumerate(values)]


def _windows(*rows: tuple[int, int, int]) -> pl.DataFrame:
    return pl.DataFrame(
        rows,
        schema={"gpu": pl.Int32, "window_start_ns": pl.Int64, "window_end_ns": pl.Int64},
        orient="row",
    )


def _busy(*rows: tuple[int, int, int]) -> pl.DataFrame:
    return pl.DataFrame(
        rows, schema={"gpu": pl.Int32, "start_ns": pl.Int64, "end_ns": pl.Int64}, orient="row"
    )


def _gpus(*names: str, clock_hz: int = 1_410_000_000) -> pl.DataFrame:
    return model.conform(
        pl.DataFrame(
            {
                "gpu": list(range(len(names))),
                "name": list(names),
                "clock_rate_hz": [clock_hz] * len(names),
            }
        ),
        model.GPUS,
    )


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("SM Active", "sm_active"),
        ("GR Active", "gr_active"),
        ("GR Active [Throughput %]", "gr_active"),
        ("sm issue", "sm_issue"),
        ("Tensor Active", "tensor_active"),
        ("Tensor Active / FP16 Active", "tensor_active"),
        ("DRAM Read Throughput", "dram_read"),
        ("DRAM Read Bandwidth [Throughput %]", "dram_read"),
        ("DRAM Write Throughput", "dram_write"),
        ("PCIe RX Throughput", "pcie_rx"),
        ("PCIe Read Throughput", "pcie_rx"),
        ("PCIe TX Throughput", "pcie_tx"),
        ("NVLink RX Throughput", "nvlink_rx"),
        ("NVLink TX Responses User Data [Throughput %]", "nvlink_tx"),
        ("GPC Clock Frequency", "gpc_clock"),
        ("SYS Clock Frequency", "sys_clock"),
        ("PCIe Read Requests to BAR1", None),
        ("Compute Warps in Flight", None),
        ("Unallocated Warps in Active SMs", None),
    ],
)
def test_metric_names_are_matched_with_their_variants(name: str, key: str | None) -> None:
    assert metric_key(name) == key


def test_no_gpu_metrics_is_unavailable_with_the_capability_reason() -> None:
    caps = model.Capabilities(
        present={"gpu_metrics": False},
        missing=(
            "no NVTX ranges: x",
            "no GPU metrics: SM activity, clocks and bandwidth unavailable",
        ),
    )
    result = measure_contention(
        model.empty_frame(model.GPU_METRICS),
        _windows((0, 0, 100)),
        SETTINGS,
        busy=_busy(),
        capabilities=caps,
    )
    assert not result.available
    assert result.reason == "no GPU metrics: SM activity, clocks and bandwidth unavailable"
    for table in (result.summary, result.series, result.clocks, result.clock_drops, result.memory):
        assert table.is_empty()
    assert result.value(0, "sm_active") is None


def test_metrics_not_matched_to_a_gpu_are_unavailable_not_zero() -> None:
    rows = _metrics(_series(0, "SM Active", [50.0] * 5)).with_columns(
        pl.lit(None, pl.Int32).alias("gpu")
    )
    result = measure_contention(rows, _windows((0, 0, 500)), SETTINGS, busy=_busy((0, 0, 500)))
    assert not result.available
    assert "matched to a GPU" in (result.reason or "")
    assert result.metrics_found.get_column("samples").to_list() == [5]


def test_sample_holds_until_the_next_one_and_means_are_time_weighted() -> None:
    # [0,100)=10%, [100,200)=30%, [200,300)=50% (the last sample holds one median step).
    metrics = _metrics(_series(0, "SM Active", [10.0, 30.0, 50.0]))
    result = measure_contention(
        metrics, _windows((0, 50, 250)), SETTINGS, busy=_busy((0, 100, 200))
    )
    row = result.summary.filter(pl.col("key") == "sm_active").row(0, named=True)
    assert row["unit"] == "share"
    assert row["covered_ns"] == 200
    assert row["coverage_share"] == pytest.approx(1.0)
    assert row["window_mean"] == pytest.approx((50 * 0.10 + 100 * 0.30 + 50 * 0.50) / 200)
    assert row["busy_covered_ns"] == 100
    assert row["busy_mean"] == pytest.approx(0.30)
    assert (row["min"], row["max"]) == pytest.approx((0.10, 0.50))
    assert row["samples"] == 3


def test_a_pause_in_sampling_is_not_filled_with_a_stale_value() -> None:
    rows = _series(0, "GR Active", [80.0] * 5) + [
        (0, 5_000, "GR Active", 80.0),
        (0, 5_100, "GR Active", 80.0),
    ]
    result = measure_contention(
        _metrics(rows), _windows((0, 0, 5_200)), SETTINGS, busy=_busy((0, 0, 5_200))
    )
    row = result.summary.filter(pl.col("key") == "gr_active").row(0, named=True)
    # 5 samples of 100 ns, the 5th held SAMPLE_HOLD_MAX_STEPS steps, then 2 more.
    assert row["covered_ns"] == 4 * 100 + SAMPLE_HOLD_MAX_STEPS * 100 + 2 * 100
    assert row["coverage_share"] < 1.0


def test_clocks_in_hz_become_mhz_and_mhz_stay() -> None:
    rows = _series(0, "GPC Clock Frequency", [1.41e9] * 4) + _series(
        1, "GPC Clock Frequency", [1410.0] * 4
    )
    result = measure_contention(
        _metrics(rows),
        _windows((0, 0, 400), (1, 0, 400)),
        SETTINGS,
        busy=_busy((0, 0, 400), (1, 0, 400)),
    )
    assert result.value(0, "gpc_clock") == pytest.approx(1410.0)
    assert result.value(1, "gpc_clock") == pytest.approx(1410.0)
    units = dict(result.metrics_found.select("gpu", "stored_unit").iter_rows())
    assert units == {0: "Hz", 1: "MHz"}
    assert any("Hz" in n for n in result.notes)


def test_idle_clock_dips_are_not_drops_but_busy_ones_are() -> None:
    # 1400 MHz busy, 800 MHz while idle (not throttling), 1100 MHz while busy (a drop).
    clock = [1400.0, 1400.0, 800.0, 800.0, 1100.0, 1100.0, 1400.0, 1400.0]
    busy = _busy((0, 0, 200), (0, 400, 500), (0, 550, 800))
    result = measure_contention(
        _metrics(_series(0, "GPC Clock Frequency", clock)),
        _windows((0, 0, 800)),
        SETTINGS,
        busy=busy,
        gpus=_gpus("A100"),
    )
    clocks = result.clocks.row(0, named=True)
    assert clocks["reference_clock_mhz"] == pytest.approx(1400.0)
    assert clocks["rated_clock_mhz"] == pytest.approx(1410.0)
    assert clocks["drop_threshold_mhz"] == pytest.approx(1400.0 * (1 - SETTINGS.clock_drop_share))
    assert clocks["busy_clock_ns"] == 200 + 100 + 250
    assert clocks["drop_busy_ns"] == 100 + 50
    assert clocks["drop_busy_share"] == pytest.approx(150 / 550)
    assert clocks["busy_clock_min_mhz"] == pytest.approx(1100.0)
    assert clocks["drop_count"] == 1
    drops = result.clock_drops.to_dicts()
    # The idle dip at 200-400 merges with the busy one into one low-clock run.
    assert drops == [
        {"gpu": 0, "start_ns": 200, "end_ns": 600, "busy_ns": 150, "min_clock_mhz": 800.0}
    ]


def test_a_gpu_throttled_all_along_is_caught_against_its_peers() -> None:
    rows = _series(0, "GPC Clock Frequency", [1410.0] * 4) + _series(
        1, "GPC Clock Frequency", [1100.0] * 4
    )
    windows = _windows((0, 0, 400), (1, 0, 400))
    busy = _busy((0, 0, 400), (1, 0, 400))
    same = measure_contention(
        _metrics(rows), windows, SETTINGS, busy=busy, gpus=_gpus("A100", "A100")
    )
    shares = same.clocks.select("gpu", "drop_busy_share").rows()
    assert shares == [(0, 0.0), (1, 1.0)]
    assert same.clock_drops.select("gpu", "start_ns", "end_ns", "busy_ns").rows() == [
        (1, 0, 400, 400)
    ]
    # A different model is not held to another GPU's clock.
    mixed = measure_contention(
        _metrics(rows), windows, SETTINGS, busy=busy, gpus=_gpus("A100", "L4")
    )
    assert mixed.clocks.select("gpu", "drop_busy_share").rows() == [(0, 0.0), (1, 0.0)]


def test_dram_pressure_counts_busy_time_with_read_plus_write_at_the_threshold() -> None:
    read = [40.0, 40.0, 10.0, 10.0]
    write = [30.0, 20.0, 10.0, 10.0]  # totals 70, 60, 20, 20 %
    rows = _series(0, "DRAM Read Throughput", read) + _series(0, "DRAM Write Throughput", write)
    result = measure_contention(
        _metrics(rows), _windows((0, 0, 400)), SETTINGS, busy=_busy((0, 50, 150), (0, 300, 400))
    )
    memory = result.memory.row(0, named=True)
    assert DRAM_PRESSURE_SHARE == 0.6
    assert memory["busy_dram_ns"] == 200
    assert memory["pressure_busy_ns"] == 100  # 50 ns at 70% and 50 ns at exactly 60%
    assert memory["pressure_busy_share"] == pytest.approx(0.5)
    assert memory["busy_dram_mean_share"] == pytest.approx((50 * 0.7 + 50 * 0.6 + 100 * 0.2) / 200)
    assert result.value(0, "dram") == pytest.approx((70 + 60 + 20 + 20) / 400)


def test_the_canonical_name_wins_when_several_match_one_key() -> None:
    rows = _series(0, "NVLink RX Responses User Data", [90.0] * 3) + _series(
        0, "NVLink RX Throughput", [20.0] * 3
    )
    result = measure_contention(
        _metrics(rows), _windows((0, 0, 300)), SETTINGS, busy=_busy((0, 0, 300))
    )
    used = result.metrics_found.filter(pl.col("used")).get_column("metric").to_list()
    assert used == ["NVLink RX Throughput"]
    assert result.value(0, "nvlink_rx") == pytest.approx(0.20)


def test_series_bins_are_bounded_and_exact() -> None:
    step = 10
    n = 5 * SERIES_MAX_POINTS
    values = [float(i % 7) * 10 for i in range(n)]
    result = measure_contention(
        _metrics(_series(0, "SM Active", values, step=step)),
        _windows((0, 0, n * step)),
        SETTINGS,
        busy=_busy((0, 0, n * step)),
    )
    series = result.series.filter(pl.col("key") == "sm_active")
    assert series.height <= SERIES_MAX_POINTS
    assert result.bin_ns == n * step // SERIES_MAX_POINTS
    first = series.row(0, named=True)
    per_bin = result.bin_ns // step
    assert first["value"] == pytest.approx(sum(values[:per_bin]) / per_bin / 100)


@settings(max_examples=30, deadline=None)
@given(
    values=st.lists(st.floats(0, 100, allow_nan=False), min_size=2, max_size=40),
    start=st.integers(0, 500),
    length=st.integers(1, 4000),
)
def test_series_average_back_to_the_window_mean(
    values: list[float], start: int, length: int
) -> None:
    metrics = _metrics(_series(0, "GR Active", values))
    result = measure_contention(
        metrics,
        _windows((0, start, start + length)),
        SETTINGS,
        busy=_busy((0, start, start + length)),
    )
    summary = result.summary.filter(pl.col("key") == "gr_active")
    series = result.series.filter(pl.col("key") == "gr_active")
    if summary.is_empty():
        assert series.get_column("value").null_count() == series.height
        return
    row = summary.row(0, named=True)
    values_seen = series.get_column("value").drop_nulls()
    assert values_seen.min() >= row["min"] - 1e-12
    assert values_seen.max() <= row["max"] + 1e-12
    if row["coverage_share"] == 1.0:
        # Bins tile the window: their length-weighted mean is the window mean.
        weighted = series.select(
            (pl.col("value") * (pl.col("bin_end_ns") - pl.col("bin_start_ns"))).sum() / length
        ).item()
        assert weighted == pytest.approx(row["window_mean"], rel=1e-9, abs=1e-12)


# --- real trace ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def t028(shared_traces: Path) -> tuple[model.Trace, ContentionResult]:
    from nsysan import load_trace
    from nsysan.analyze.busy import measure_busy

    trace = load_trace([shared_traces / T028])
    busy = measure_busy(trace, SETTINGS)
    result = measure_contention(
        trace.gpu_metrics,
        busy.windows,
        SETTINGS,
        busy=busy.intervals,
        gpus=trace.gpus,
        capabilities=trace.capabilities,
    )
    return trace, result


@pytest.mark.shared
def test_t028_metrics_found(t028: tuple[model.Trace, ContentionResult]) -> None:
    _, result = t028
    assert result.available
    found = result.metrics_found
    assert found.height == 14
    assert set(found.filter(pl.col("key").is_null()).get_column("metric")) == {
        "Unallocated Warps in Active SMs",
        "Vertex/Tess/Geometry Warps in Flight",
        "Pixel Warps in Flight",
        "Compute Warps in Flight",
    }
    assert found.get_column("samples").unique().to_list() == [4085]
    stored = dict(
        found.filter(pl.col("key").is_not_null()).select("metric", "stored_unit").iter_rows()
    )
    assert stored["GPC Clock Frequency"] == "Hz"  # 1.41e9, not MHz
    assert stored["SM Active"] == "percent"


@pytest.mark.shared
def test_t028_numbers_checked_by_hand(t028: tuple[model.Trace, ContentionResult]) -> None:
    # Window 342145325..345704005 (first to last vectorAdd kernel); a hand loop over
    # GPU_METRICS with sample-and-hold gives GR Active 87.4007 %, SM Active 1 %,
    # GPC clock 1395006989 Hz.
    _, result = t028
    assert result.value(0, "gr_active") == pytest.approx(0.8740067637, abs=1e-9)
    assert result.value(0, "sm_active") == pytest.approx(0.01)
    assert result.value(0, "gpc_clock") == pytest.approx(1395.006989, abs=1e-6)
    assert result.value(0, "gpc_clock", "busy_mean") == pytest.approx(1395.0082, abs=1e-3)
    assert result.value(0, "gr_active", "coverage_share") == pytest.approx(1.0)
    clocks = result.clocks.row(0, named=True)
    assert clocks["reference_clock_mhz"] == pytest.approx(1410.438764, abs=1e-6)
    assert clocks["rated_clock_mhz"] == 1410.0
    assert clocks["busy_clock_min_mhz"] == pytest.approx(1394.57843, abs=1e-5)
    # No drop: the A100 held ~1395 MHz while kernels ran (its 210 MHz idle clock
    # before the kernels is outside the window and would not count anyway).
    assert clocks["drop_busy_ns"] == 0
    assert clocks["drop_busy_share"] == 0.0
    assert result.clock_drops.is_empty()
    memory = result.memory.row(0, named=True)
    assert memory["pressure_busy_share"] == 0.0
    assert memory["busy_dram_mean_share"] == pytest.approx(0.0197, abs=1e-4)


# --- simulated traces -------------------------------------------------------------------


def test_simulated_throttling_is_seen(tmp_path: Path) -> None:
    try:
        from nsysan.simulate import generate
    except ImportError:
        pytest.skip("nsysan.simulate.generate is not available yet (another module's work)")
    from nsysan import load_trace
    from nsysan.analyze.busy import measure_busy

    path = tmp_path / "throttled.sqlite"
    truth = generate("throttled", path, seed=0, scale=0.25)
    trace = load_trace([path])
    busy = measure_busy(trace, SETTINGS)
    result = measure_contention(
        trace.gpu_metrics,
        busy.windows,
        SETTINGS,
        busy=busy.intervals,
        gpus=trace.gpus,
        capabilities=trace.capabilities,
    )
    assert result.available
    clocks = result.clocks
    assert clocks.get_column("reference_clock_mhz").min() == pytest.approx(
        truth.numbers["clock_mhz_start"], abs=1.0
    )
    dropped = tuple(clocks.filter(pl.col("drop_busy_share") > 0).get_column("gpu").to_list())
    assert dropped == truth.flagged_gpus
    throttled = clocks.filter(pl.col("gpu").is_in(list(truth.flagged_gpus)))
    assert throttled.get_column("drop_busy_share").min() > 0.3
    assert throttled.get_column("busy_clock_min_mhz").max() == pytest.approx(
        truth.numbers["clock_mhz_throttled"], abs=10.0
    )
    # One drop interval per throttled GPU, starting after the ramp down began.
    drops = result.clock_drops
    assert drops.get_column("gpu").to_list() == list(truth.flagged_gpus)
    assert drops.get_column("start_ns").min() > truth.numbers["throttle_start_ns"]
