"""Busy time, gaps, their distribution and NVIDIA's rules on tiny hand-built traces."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_window import make_trace

from nsysan.analyze.busy import (
    BusyResult,
    measure_busy,
    nvidia_gpu_time_util,
    nvidia_operations,
)
from nsysan.analyze.gaps import (
    GAP_BUCKET_EDGES_NS,
    GAP_BUCKET_LABELS,
    _buckets,
    measure_gaps,
    nvidia_gpu_gaps,
)
from nsysan.errors import SettingsError
from nsysan.intervals import clip_to_windows, complement_in, union_intervals
from nsysan.settings import Settings, WindowSpec
from nsysan.window import gpu_operations

FLUSH = "CUDA profiling data flush overhead"


def gaps_of(trace, **settings):  # type: ignore[no-untyped-def]
    busy = measure_busy(trace, Settings(**settings))
    return busy, measure_gaps(busy.intervals, busy.summary, busy.keys)


TWO_STREAMS = make_trace(
    kernels=[
        {"gpu": 0, "stream_id": 1, "start_ns": 0, "end_ns": 100},
        {"gpu": 0, "stream_id": 2, "start_ns": 50, "end_ns": 150},  # overlaps: counted once
        {"gpu": 0, "stream_id": 1, "start_ns": 150, "end_ns": 200},  # touches: no gap
        {"gpu": 0, "stream_id": 1, "start_ns": 1_200, "end_ns": 1_300},
        {"gpu": 1, "start_ns": 0, "end_ns": 10, "pid": 200},
        {"gpu": 1, "start_ns": 20_010, "end_ns": 20_020, "pid": 200},
    ],
    memcpy=[{"gpu": 0, "start_ns": 300, "end_ns": 700, "context_id": 5}],
)


def test_kernels_mode_busy_is_the_union_of_kernels() -> None:
    busy, gaps = gaps_of(TWO_STREAMS)
    assert busy.intervals.rows() == [
        (0, 0, 200),
        (0, 1_200, 1_300),
        (1, 0, 10),
        (1, 20_010, 20_020),
    ]
    assert gaps.gaps.rows() == [(0, 200, 1_200, 1_000), (1, 10, 20_010, 20_000)]
    summary = gaps.summary.rows(named=True)[0]
    assert summary == {
        "gpu": 0,
        "window_ns": 1_300,
        "busy_ns": 300,
        "gap_ns": 1_000,
        "gap_count": 1,
        "gap_share": 1_000 / 1_300,
        "kernel_active_share": 300 / 1_300,
    }


def test_nvidia_mode_adds_copies_and_keys_by_process_device() -> None:
    busy, gaps = gaps_of(TWO_STREAMS, busy_mode="nvidia")
    assert busy.keys == ("source", "pid", "device_id", "gpu")
    assert gaps.gaps.filter(pl.col("gpu") == 0).select("start_ns", "end_ns").rows() == [
        (200, 300),
        (700, 1_200),
    ]
    row = gaps.summary.row(0, named=True)
    # NVIDIA's rule drops the kernel that starts at 0: the window starts at 50.
    assert (row["window_ns"], row["busy_ns"], row["gap_ns"]) == (1_250, 650, 600)
    assert row["kernel_active_share"] == pytest.approx(250 / 1_250)


def test_distribution_buckets_are_decades_with_inclusive_lower_bounds() -> None:
    # Gaps of 999 ns, exactly 1000 ns and 12 s between 1-ns kernels.
    bounds = [(0, 1), (1_000, 1_001), (2_001, 2_002), (12_000_002_002, 12_000_002_003)]
    trace = make_trace(kernels=[{"gpu": 0, "start_ns": s, "end_ns": e} for s, e in bounds])
    _, gaps = gaps_of(trace)
    assert gaps.gaps["duration_ns"].to_list() == [999, 1_000, 12_000_000_000]
    dist = gaps.distribution
    assert dist["label"].to_list() == list(GAP_BUCKET_LABELS)
    counts = dict(zip(dist["label"], dist["count"], strict=True))
    assert counts == {**dict.fromkeys(GAP_BUCKET_LABELS, 0), "<1 µs": 1, "1–10 µs": 1, "≥10 s": 1}
    assert dist["total_ns"].sum() == gaps.summary["gap_ns"].sum()
    assert dist.filter(pl.col("label") == "≥10 s")["upper_ns"].to_list() == [None]


def test_overhead_counts_only_when_named_and_strictly_inside_the_process_range() -> None:
    trace = make_trace(
        kernels=[
            {"gpu": 0, "start_ns": 100, "end_ns": 200},
            {"gpu": 0, "start_ns": 1_000, "end_ns": 1_100},
            {"gpu": 1, "device_id": 1, "start_ns": 100, "end_ns": 1_100},
        ],
        overhead=[
            {"start_ns": 300, "end_ns": 400, "name": FLUSH},  # inside: busy on both devices
            {"start_ns": 500, "end_ns": 600, "name": "CUPTI: Buffer flush"},  # not counted
            {"start_ns": 700, "end_ns": 800, "name": FLUSH, "pid": 999},  # another process
            {"start_ns": 50, "end_ns": 150, "name": FLUSH},  # crosses the range start
            {"start_ns": 1_100, "end_ns": 1_500, "name": FLUSH},  # touches the end: no widening
        ],
    )
    ops = nvidia_operations(trace)
    overhead = ops.filter(pl.col("kind") == "overhead")
    assert overhead.select("device_id", "start_ns").sort("device_id").rows() == [(0, 300), (1, 300)]
    gaps = nvidia_gpu_gaps(ops, min_gap_ms=0)
    assert gaps.select("start_ns", "end_ns").rows() == [(400, 1_000), (200, 300)]


def test_nvidia_gap_threshold_is_strict_and_rows_are_longest_first() -> None:
    ms = 1_000_000
    trace = make_trace(
        kernels=[
            {"gpu": 0, "start_ns": 1, "end_ns": 2, "context_id": 3},
            {"gpu": 0, "start_ns": 2 + 500 * ms, "end_ns": 3 + 500 * ms, "context_id": 4},
        ],
        memcpy=[{"gpu": 0, "start_ns": 3 + 1_100 * ms, "end_ns": 4 + 1_100 * ms}],
    )
    every = nvidia_gpu_gaps(nvidia_operations(trace), min_gap_ms=0)
    assert every.select("row", "duration_ns", "context_id").rows() == [
        (1, 600 * ms, 4),  # opened by the end of the context-4 kernel
        (2, 500 * ms, 3),
    ]
    over_500 = nvidia_gpu_gaps(nvidia_operations(trace), min_gap_ms=500)
    assert over_500["duration_ns"].to_list() == [600 * ms]


def test_time_util_sums_concurrent_work_and_merges_low_chunks() -> None:
    trace = make_trace(
        kernels=[
            {"gpu": 0, "start_ns": 100, "end_ns": 110},
            {"gpu": 0, "stream_id": 2, "start_ns": 100, "end_ns": 110},  # chunk 0 at 200 %
            {"gpu": 0, "start_ns": 125, "end_ns": 130},  # chunk 2 at 50 %: not low
        ]
    )
    util = nvidia_gpu_time_util(nvidia_operations(trace), chunks=3)
    assert util.select("in_use_pct", "duration_ns", "start_ns").rows() == [(0.0, 10, 110)]


def test_time_util_uneven_chunks_weighted_mean_rounded_to_one_decimal() -> None:
    # Range 100..131 in 3 chunks of ceil(31/3) = 11 ns, the last cut to 9 ns:
    # 1/11, 0 and 1/9 in use, merged to (1 + 0 + 1) / 31 = 6.45 % -> 6.5.
    trace = make_trace(
        kernels=[
            {"gpu": 0, "start_ns": 100, "end_ns": 101},
            {"gpu": 0, "start_ns": 130, "end_ns": 131},
        ]
    )
    util = nvidia_gpu_time_util(nvidia_operations(trace), chunks=3)
    assert util.select("in_use_pct", "duration_ns", "start_ns").rows() == [(6.5, 31, 100)]
    with pytest.raises(ValueError, match="between 1 and 1000"):
        nvidia_gpu_time_util(nvidia_operations(trace), chunks=0)


def test_kernels_mode_gap_exceeds_nvidia_gap_by_non_kernel_work() -> None:
    _, kernels = gaps_of(TWO_STREAMS)
    _, nvidia = gaps_of(TWO_STREAMS, busy_mode="nvidia")
    k = kernels.summary.filter(pl.col("gpu") == 0).row(0, named=True)
    n = nvidia.summary.filter(pl.col("gpu") == 0).row(0, named=True)
    # The memcpy's 400 ns lie inside the kernel span: gap for nsysan's default,
    # busy for NVIDIA.
    assert k["gap_ns"] - n["gap_ns"] == 400


def test_explicit_window_clips_busy_time() -> None:
    busy, gaps = gaps_of(
        TWO_STREAMS, window=WindowSpec(kind="explicit", start_ns=100, end_ns=1_250)
    )
    row = gaps.summary.row(0, named=True)
    assert (row["window_ns"], row["busy_ns"], row["gap_ns"]) == (1_150, 150, 1_000)


def test_trace_without_gpu_work_gives_empty_results() -> None:
    busy, gaps = gaps_of(make_trace())
    assert busy.summary.is_empty() and gaps.gaps.is_empty() and gaps.distribution.is_empty()
    assert nvidia_gpu_gaps(nvidia_operations(make_trace()), 0).is_empty()
    assert nvidia_gpu_time_util(nvidia_operations(make_trace())).is_empty()


# --- the faster busy/gaps equal the previous implementation ------------------------------


def _reference_distribution(
    gaps: pl.DataFrame, units: pl.DataFrame, keys: list[str]
) -> pl.DataFrame:
    bucket = pl.sum_horizontal(
        [(pl.col("duration_ns") >= edge).cast(pl.Int32) for edge in GAP_BUCKET_EDGES_NS]
    ).cast(pl.Int32)
    counted = (
        gaps.with_columns(bucket.alias("bucket"))
        .group_by(*keys, "bucket")
        .agg(pl.len().cast(pl.Int64).alias("count"), pl.col("duration_ns").sum().alias("total_ns"))
    )
    return (
        units.select(keys)
        .unique()
        .join(_buckets(), how="cross")
        .join(counted, on=[*keys, "bucket"], how="left")
        .with_columns(pl.col("count").fill_null(0), pl.col("total_ns").fill_null(0))
        .sort(*keys, "bucket")
    )


def _reference_gaps(busy: BusyResult) -> tuple[pl.DataFrame, pl.DataFrame]:
    keys = list(busy.keys)
    gaps = complement_in(busy.intervals, busy.summary, keys).with_columns(
        (pl.col("end_ns") - pl.col("start_ns")).alias("duration_ns")
    )
    per_unit = gaps.group_by(keys).agg(
        pl.col("duration_ns").sum().alias("gap_ns"), pl.len().cast(pl.Int64).alias("gap_count")
    )
    table = (
        busy.summary.select(*keys, "window_ns", "busy_ns", "kernel_active_share")
        .join(per_unit, on=keys, how="left")
        .with_columns(pl.col("gap_ns").fill_null(0), pl.col("gap_count").fill_null(0))
        .with_columns(
            pl.when(pl.col("window_ns") > 0)
            .then(pl.col("gap_ns") / pl.col("window_ns"))
            .alias("gap_share")
        )
        .select(
            *keys, "window_ns", "busy_ns", "gap_ns", "gap_count", "gap_share", "kernel_active_share"
        )
        .sort(keys)
    )
    return gaps.sort(*keys, "start_ns"), table


kernel_rows = st.lists(
    st.tuples(
        st.integers(0, 2),
        st.integers(0, 20_000_000_000),
        st.sampled_from([0, 1, 500, 5_000, 2_000_000]),
    ),
    min_size=1,
    max_size=30,
)
window_specs = st.sampled_from(
    [
        WindowSpec(),
        WindowSpec(kind="common"),
        WindowSpec(kind="explicit", start_ns=1_000_000_000, end_ns=15_000_000_000),
        WindowSpec(kind="explicit", start_ns=0),
        WindowSpec(skip_warmup_ns=1),
    ]
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kernel_rows, window_specs, st.booleans())
def test_busy_and_gaps_match_the_reference_implementation(
    rows: list[tuple[int, int, int]], spec: WindowSpec, in_order: bool
) -> None:
    if in_order:
        rows = sorted(rows)
    trace = make_trace(
        kernels=[
            {"gpu": g, "start_ns": s, "end_ns": s + d, "stream_id": i}
            for i, (g, s, d) in enumerate(rows)
        ]
    )
    try:
        busy, gaps = gaps_of(trace, window=spec)
    except SettingsError:
        return
    windows = busy.windows
    expected_busy = union_intervals(
        clip_to_windows(gpu_operations(trace, "kernels"), windows, "gpu"), "gpu"
    )
    assert busy.intervals.equals(expected_busy) and busy.intervals.schema == expected_busy.schema
    expected_gaps, expected_summary = _reference_gaps(busy)
    assert gaps.gaps.equals(expected_gaps) and gaps.gaps.schema == expected_gaps.schema
    assert gaps.summary.equals(expected_summary) and gaps.summary.schema == expected_summary.schema
    expected_distribution = _reference_distribution(gaps.gaps, busy.summary, ["gpu"])
    assert gaps.distribution.equals(expected_distribution)
    assert gaps.distribution.schema == expected_distribution.schema
