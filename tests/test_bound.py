"""Memory- vs compute-bound classification and its join to nsys kernels."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from nsysan import model
from nsysan.analyze.bound import (
    BALANCED_POINTS,
    BOUND_PCT,
    GPU_CLASSES,
    LATENCY_PCT,
    classify_kernels,
    kernel_base_name,
    measure_bound,
    normalize_kernel_name,
    summarize_kernels,
)
from nsysan.ingest.ncu import read_ncu_csv

MEM = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
DRAM = "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"
SM = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
DURATION = "gpu__time_duration.sum"


def _ncu(**columns: list[object]) -> pl.DataFrame:
    n = len(next(iter(columns.values())))
    base: dict[str, list[object]] = {
        "id": list(range(n)),
        "kernel_name": [f"k{i}" for i in range(n)],
    }
    return pl.DataFrame(base | columns, strict=False)


def test_thresholds_are_ncus() -> None:
    assert (BOUND_PCT, LATENCY_PCT, BALANCED_POINTS) == (80.0, 60.0, 10.0)


@pytest.mark.parametrize(
    ("memory", "compute", "expected"),
    [
        (80.0, 75.0, "memory"),  # one unit at BOUND_PCT: it is the bound
        (79.9, 75.0, "balanced"),  # just under: 4.9 points apart
        (75.0, 80.0, "compute"),
        (80.0, 80.0, "compute"),  # tie above the bound: ncu says compute
        (95.0, 90.0, "memory"),  # both above: the higher one
        (59.9, 59.9, "latency"),  # both under LATENCY_PCT
        (59.9, 20.0, "latency"),
        (60.0, 20.0, "memory"),  # 60 is not under LATENCY_PCT: 40 points apart
        (70.0, 60.0, "memory"),  # exactly BALANCED_POINTS apart names the busier unit
        (60.0, 70.0, "compute"),
        (70.0, 60.1, "balanced"),  # 9.9 points apart
        (65.0, 65.0, "balanced"),
        (None, 50.0, "unclassified"),
        (50.0, None, "unclassified"),
        (float("nan"), 50.0, "unclassified"),
    ],
)
def test_sol_bottleneck_rule(memory: float | None, compute: float | None, expected: str) -> None:
    classes = classify_kernels(_ncu(**{MEM: [memory], SM: [compute]}))
    assert classes.item(0, "class") == expected


def test_memory_sol_falls_back_to_dram_and_missing_metrics_are_unclassified() -> None:
    dram_only = classify_kernels(_ncu(**{DRAM: [85.0], SM: [10.0]}))
    assert (
        dram_only.row(0, named=True).items()
        >= {
            "memory_sol_pct": 85.0,
            "memory_sol_metric": DRAM,
            "class": "memory",
        }.items()
    )
    nothing = classify_kernels(_ncu(**{DURATION: [1000.0]}))
    assert (
        nothing.row(0, named=True).items()
        >= {
            "memory_sol_pct": None,
            "compute_sol_pct": None,
            "intensity_flop_per_byte": None,
            "class": "unclassified",
        }.items()
    )


def test_intensity_from_instruction_counts() -> None:
    op = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum"
    frame = _ncu(
        **{
            op.format("dadd"): [10.0],
            op.format("dmul"): [20.0],
            op.format("dfma"): [5.0],
            op.format("fadd"): [1.0],
            op.format("fmul"): [1.0],
            op.format("ffma"): [1.0],
            op.format("hadd"): [7.0],  # half precision incomplete (no hmul/hfma): left out
            "dram__bytes.sum": [11.0],
        }
    )
    row = classify_kernels(frame).row(0, named=True)
    # FP64: 10 + 20 + 2*5 = 40; FP32: 1 + 1 + 2*1 = 4.
    assert row["flop"] == pytest.approx(44.0)
    assert row["intensity_flop_per_byte"] == pytest.approx(4.0)


def test_intensity_from_per_cycle_rates_and_half_weights() -> None:
    rate = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum.per_cycle_elapsed"
    frame = _ncu(
        **{
            rate.format("hadd"): [1.0],
            rate.format("hmul"): [1.0],
            rate.format("hfma"): [1.0],
            "smsp__cycles_elapsed.avg.per_second": [1e9],
            DURATION: [2000.0],  # 2 us
            "dram__bytes.sum.per_second": [4e9],
        }
    )
    row = classify_kernels(frame).row(0, named=True)
    # half2: 2 + 2 + 4 = 8 FLOP/cycle * 1e9 cycle/s * 2e-6 s = 16000 FLOP; 8000 bytes.
    assert row["flop"] == pytest.approx(16_000.0)
    assert row["dram_bytes"] == pytest.approx(8_000.0)
    assert row["intensity_flop_per_byte"] == pytest.approx(2.0)


@pytest.mark.shared
def test_intensity_on_a_real_full_set_report(shared_traces: Path) -> None:
    """C043 (--set full, ncu 2022.3): by hand from launch 0's raw values.

    FLOP/cycle = dadd 356.548845 + dmul 143.461771 + 2 * dfma 720.875947
    + fadd 0 + fmul 0 + 2 * ffma 72.152002 = 2086.066513; times 764.626560e6 cycle/s
    = 1.595054e12 FLOP/s; over dram__bytes.sum.per_second 931.125089e9 = 1.71304.
    """
    ncu = read_ncu_csv(shared_traces / "ncu" / "C043-gpu-poisson-solver" / "raw.csv")
    row = classify_kernels(ncu).row(0, named=True)
    assert row["intensity_flop_per_byte"] == pytest.approx(1.71304, rel=1e-5)
    assert row["class"] == "memory"  # memory 76.38%, compute 53.19%: 23 points apart


def test_summary_weights_launches_by_duration() -> None:
    frame = _ncu(**{MEM: [90.0, 50.0], SM: [10.0, 10.0], DURATION: [100.0, 300.0]}).with_columns(
        pl.lit("k").alias("kernel_name")
    )
    summary = summarize_kernels(classify_kernels(frame))
    row = summary.row(0, named=True)
    # (90*100 + 50*300) / 400 = 60: not under LATENCY_PCT, 50 points above compute.
    assert row["memory_sol_pct"] == pytest.approx(60.0)
    assert row["class"] == "memory"
    assert row["classes_seen"] == "latency,memory"
    assert row["ncu_launches"] == 2


def test_name_keys() -> None:
    names = pl.Series(
        [
            "void cub::CUB_200300_89_NS::DeviceScanInitKernel<cub::CUB_200300_89_NS::"
            "ScanTileState<int, (bool)1>>(T1, int)",
            "void cub::DeviceScanInitKernel<cub::ScanTileState<int, 1>>(T1, int)",
            "poisson_single_5(double *, double *, double, double, int)",
            "ampere_sgemm_128x64_nn",
        ]
    )
    frame = pl.DataFrame({"name": names})
    normalized = frame.select(normalize_kernel_name(pl.col("name"))).to_series().to_list()
    assert normalized[0] == normalized[1]
    bases = frame.select(kernel_base_name(pl.col("name"))).to_series().to_list()
    assert bases == [
        "DeviceScanInitKernel",
        "DeviceScanInitKernel",
        "poisson_single_5",
        "ampere_sgemm_128x64_nn",
    ]


def _kernels(rows: list[tuple[int, str, str, int, int]]) -> pl.DataFrame:
    """(gpu, demangled name, short name, grid_x, duration) -> a model KERNELS table."""
    starts = [1000 * i for i in range(len(rows))]
    return model.conform(
        pl.DataFrame(
            {
                "gpu": [r[0] for r in rows],
                "name": [r[1] for r in rows],
                "short_name": [r[2] for r in rows],
                "grid_x": [r[3] for r in rows],
                "grid_y": [1] * len(rows),
                "grid_z": [1] * len(rows),
                "block_x": [256] * len(rows),
                "block_y": [1] * len(rows),
                "block_z": [1] * len(rows),
                "start_ns": starts,
                "end_ns": [s + r[4] for s, r in zip(starts, rows, strict=True)],
            }
        ),
        model.KERNELS,
    )


VERSIONED_SCAN = "void cub::CUB_1_2_NS::Scan<cub::CUB_1_2_NS::Tile<int, (bool)1>>(T1)"


def test_measure_bound_join_levels_and_shares() -> None:
    ncu = pl.DataFrame(
        {
            "id": [0, 1, 2, 3, 4],
            "kernel_name": [
                "gemm(float *)",  # exact
                "void cub::Scan<cub::Tile<int, 1>>(T1)",  # normalized
                "void ns::agent<A>(T1)",  # short name, grid 10
                "void ns::agent<B>(T1)",  # short name, grid 20
                "mystery(int)",  # no SOL numbers
            ],
            "grid_x": [1, 1, 10, 20, 1],
            "grid_y": [1] * 5,
            "grid_z": [1] * 5,
            "block_x": [256] * 5,
            "block_y": [1] * 5,
            "block_z": [1] * 5,
            MEM: [20.0, 90.0, 85.0, 40.0, None],
            SM: [90.0, 10.0, 10.0, 100.0, None],
            DURATION: [1.0, 1.0, 1.0, 1.0, 1.0],
        }
    )
    kernels = _kernels(
        [
            (0, "gemm(float *)", "gemm", 1, 400),
            (0, VERSIONED_SCAN, "Scan", 1, 300),
            (0, "void ns::agent<A2>(T1)", "agent", 10, 200),  # config picks ncu id 2
            (0, "never_profiled()", "never_profiled", 1, 100),
            (1, "void ns::agent<A3>(T1)", "agent", 20, 500),  # config picks ncu id 3
            (1, "void ns::agent<A4>(T1)", "agent", 99, 300),  # no config: ids 2+3 pooled
            (1, "mystery(int)", "mystery", 1, 200),
        ]
    )  # fmt: skip
    result = measure_bound(kernels, classify_kernels(ncu))

    joins = result.kernels.select(
        "short_name", "grid_x", "join", "config_match", "ncu_ids", "class"
    )
    assert joins.rows() == [
        ("gemm", 1, "exact", True, [0], "compute"),
        ("Scan", 1, "normalized", True, [1], "memory"),
        ("agent", 10, "short_name", True, [2], "memory"),
        ("never_profiled", 1, None, None, None, "unjoined"),
        ("agent", 20, "short_name", True, [3], "compute"),
        # pooled: memory (85 + 40) / 2 = 62.5, compute (10 + 100) / 2 = 55: 7.5 apart
        ("agent", 99, "short_name", False, [2, 3], "balanced"),
        ("mystery", 1, "exact", True, [4], "unclassified"),
    ]
    gpu0, gpu1 = result.per_gpu.rows(named=True)
    assert gpu0["kernel_time_ns"] == 1000
    assert (gpu0["compute_share"], gpu0["memory_share"], gpu0["unjoined_share"]) == pytest.approx(
        (0.4, 0.5, 0.1)
    )
    assert gpu1["kernel_time_ns"] == 1000
    assert (
        gpu1["compute_share"],
        gpu1["balanced_share"],
        gpu1["unclassified_share"],
        gpu1["unjoined_share"],
    ) == pytest.approx((0.5, 0.3, 0.2, 0.0))
    shares = result.per_gpu.select(pl.sum_horizontal(f"{c}_share" for c in GPU_CLASSES))
    assert shares.to_series().to_list() == pytest.approx([1.0, 1.0])


def test_measure_bound_without_ncu_data_is_all_unjoined() -> None:
    kernels = _kernels([(0, "a()", "a", 1, 10), (0, "b()", "b", 1, 30)])
    empty = classify_kernels(
        pl.DataFrame(
            {"id": [], "kernel_name": []}, schema={"id": pl.Int64, "kernel_name": pl.String}
        )
    )
    result = measure_bound(kernels, empty)
    assert result.per_gpu.item(0, "unjoined_share") == 1.0
    assert result.per_gpu.item(0, "kernel_time_ns") == 40


def test_measure_bound_rejects_unknown_join_level() -> None:
    with pytest.raises(ValueError, match="unknown join level 'fuzzy'"):
        measure_bound(_kernels([]), classify_kernels(_ncu(**{MEM: [1.0]})), join_levels=["fuzzy"])


# --- T015 (nsys) + C012 (ncu): the same ICON graupel program ------------------------

T015_KERNEL_NS = 42_089_541  # sum of the 7 kernel durations in T015 (one GPU)
T015_MEMORY_NS = 3_336_336 + 6_674_335  # DeviceScanKernel + _kernel_agent grid 1199


@pytest.mark.shared
def test_t015_joined_to_c012(shared_traces: Path) -> None:
    """All 7 T015 kernels find their C012 launch, but not by full name.

    C012 profiled a float build (``graupel(..., float &, std::vector<float>...)``) of
    another CCCL version (no ``CUB_200300_89_NS`` inline namespace, ``thrust::``
    qualifiers dropped), T015 traced the double build. Only the two kernels without
    float/double in their template arguments (DeviceReduceSingleTileKernel,
    DeviceScanInitKernel: 1,568 + 992 ns) match by normalized name; the other five
    match by short name with the same grid and block. The two ``_kernel_agent`` with
    grid (40,1,1) pool C012 launches 4 and 6 (both latency-bound). Hence joined share
    100%; memory-bound = DeviceScanKernel (88.1% memory SOL) + the grid-1199
    ``_kernel_agent`` (76.6% memory vs 47.6% compute) = 23.8%; the rest latency.
    """
    from nsysan.ingest import load_trace

    trace = load_trace([shared_traces / "T015-isc25-icon-c" / "trace.sqlite"])
    ncu = classify_kernels(read_ncu_csv(shared_traces / "ncu" / "C012-isc25-icon-c" / "raw.csv"))

    result = measure_bound(trace.kernels, ncu)
    row = result.per_gpu.row(0, named=True)
    assert result.per_gpu.height == 1
    assert row["kernel_time_ns"] == T015_KERNEL_NS
    assert row["unjoined_share"] == 0.0
    assert row["memory_ns"] == T015_MEMORY_NS
    assert row["latency_ns"] == T015_KERNEL_NS - T015_MEMORY_NS
    assert row["memory_share"] == pytest.approx(0.237842, abs=1e-6)
    counts = dict(result.kernels.group_by("join").len().rows())
    assert counts == {"normalized": 2, "short_name": 5}
    assert result.kernels.get_column("config_match").all()

    exact_only = measure_bound(trace.kernels, ncu, join_levels=["exact"])
    assert exact_only.per_gpu.item(0, "unjoined_share") == 1.0
    by_name = measure_bound(trace.kernels, ncu, join_levels=["exact", "normalized"])
    assert by_name.per_gpu.item(0, "unjoined_ns") == T015_KERNEL_NS - (1_568 + 992)


def test_measure_bound_on_no_kernels_is_empty() -> None:
    ncu = classify_kernels(_ncu(**{MEM: [90.0], SM: [10.0]}))
    result = measure_bound(model.empty_frame(model.KERNELS), ncu)
    assert result.per_gpu.height == 0
    assert result.kernels.height == 0
    assert "unjoined_share" in result.per_gpu.columns
