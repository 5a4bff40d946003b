"""Imbalance across GPUs on hand-built traces and real exports (docs/metrics/balance.md)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from conftest import SHARED_TRACES, cori_rank_files, with_string_names
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from nsysan import model
from nsysan.analyze import balance_iterations
from nsysan.analyze.balance import (
    KERNEL_DIFF_TOP_N,
    OTHER_KERNELS,
    ImbalanceResult,
    find_iterations,
    measure_imbalance,
)
from nsysan.analyze.busy import measure_busy
from nsysan.errors import SettingsError
from nsysan.intervals import clip_to_windows, overlap_with, total_length, union_intervals
from nsysan.settings import Settings

START, END = "start_ns", "end_ns"
_OP = {"source": 0, "pid": 100, "context_id": 1, "stream_id": 7, "correlation_id": 0}


def _table(
    rows: Iterable[Mapping[str, Any]], schema: model.Schema, **defaults: Any
) -> pl.DataFrame:
    filled = [{**defaults, **r} for r in rows]
    return model.conform(pl.DataFrame(filled), schema) if filled else model.empty_frame(schema)


def _trace(
    kernels: Iterable[Mapping[str, Any]],
    nvtx: Iterable[Mapping[str, Any]] = (),
    cuda_api: Iterable[Mapping[str, Any]] = (),
) -> model.Trace:
    tables = {name: model.empty_frame(schema) for name, schema in model.TABLE_SCHEMAS.items()}
    rows = [{**_OP, "device_id": k["gpu"], "name": k.get("short_name"), **k} for k in kernels]
    tables["kernels"] = _table(rows, model.KERNELS)
    tables["nvtx"] = _table(
        nvtx, model.NVTX, source=0, pid=100, tid=100, event_type="NvtxPushPopRange"
    )
    tables["cuda_api"] = _table(cuda_api, model.CUDA_API, source=0, pid=100, tid=100)
    gpus = sorted(set(tables["kernels"]["gpu"].to_list()))
    tables["gpus"] = _table(({"gpu": g, "gpu_key": f"gpu{g}"} for g in gpus), model.GPUS)
    tables["sources"] = _table([{"source": 0, "offset_ns": 0}], model.SOURCES)
    return model.Trace(**tables, capabilities=model.Capabilities(present={}, missing=()))


def _k(gpu: int, start: int, end: int, name: str, **extra: Any) -> dict[str, Any]:
    return {"gpu": gpu, "start_ns": start, "end_ns": end, "short_name": name, **extra}


def _measure(trace: model.Trace, **options: Any) -> ImbalanceResult:
    s = Settings(**options)
    busy = measure_busy(trace, s)
    return measure_imbalance(trace, busy.intervals, busy.windows, s)


# --- per-GPU load and the kernel diff --------------------------------------------------

SMALL = _trace(
    [
        _k(0, 0, 30, "gemm"),
        _k(0, 30, 50, "softmax"),
        _k(0, 50, 60, "ncclKernel_AllReduce_RING_LL_Sum_float"),
        _k(1, 0, 20, "gemm"),
        _k(1, 25, 35, "softmax"),
    ]
)


def test_per_gpu_busy_compute_and_nccl() -> None:
    r = _measure(SMALL)
    rows = r.per_gpu.select("gpu", "window_ns", "busy_ns", "compute_ns", "nccl_ns", "kernel_ns")
    assert rows.rows() == [(0, 60, 60, 50, 10, 60), (1, 35, 30, 30, 0, 30)]
    assert r.busy_efficiency == pytest.approx(45 / 60)
    assert r.busy_max_over_mean == pytest.approx(60 / 45)
    assert r.compute_efficiency == pytest.approx(40 / 50)
    assert r.compute_max_over_mean == pytest.approx(1.25)
    assert (r.most_loaded_gpu, r.least_loaded_gpu) == (0, 1)


def test_kernel_diff_explains_the_compute_difference() -> None:
    r = _measure(SMALL)
    diff = r.kernel_diff.select("short_name", "most_ns", "least_ns", "diff_ns", "diff_share")
    assert diff.rows() == [("gemm", 30, 20, 10, 0.5), ("softmax", 20, 10, 10, 0.5)]
    assert r.kernel_diff_total_ns == r.compute_diff_ns == 20


def test_kernel_diff_keeps_top_n_and_sums_the_rest() -> None:
    names = [f"k{i:02d}" for i in range(KERNEL_DIFF_TOP_N + 3)]
    kernels = [_k(0, 100 * i, 100 * i + 10 + i, n) for i, n in enumerate(names)]
    kernels += [_k(1, 100 * i, 100 * i + 10, n) for i, n in enumerate(names)]
    r = _measure(_trace(kernels))
    assert r.kernel_diff.height == KERNEL_DIFF_TOP_N + 1
    assert r.kernel_diff.item(-1, "name") == OTHER_KERNELS
    assert r.kernel_diff.item(0, "short_name") == names[-1]  # the largest difference first
    assert r.kernel_diff["diff_ns"].sum() == r.kernel_diff_total_ns == sum(range(len(names)))
    assert r.kernel_diff["diff_share"].sum() == pytest.approx(1.0)


def test_nccl_is_matched_case_insensitively_on_the_short_name() -> None:
    trace = _trace(
        [_k(0, 0, 10, "NCCLDevKernel_Generic"), _k(0, 20, 30, "gemm"), _k(1, 0, 10, "gemm")]
    )
    r = _measure(trace)
    assert r.per_gpu.filter(pl.col("gpu") == 0).select("compute_ns", "nccl_ns").row(0) == (10, 10)


@settings(max_examples=15, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2), st.integers(0, 500), st.integers(0, 60), st.sampled_from("abcd")
        ),
        min_size=1,
        max_size=25,
    )
)
def test_kernel_diff_always_sums_to_the_total(rows: list[tuple[int, int, int, str]]) -> None:
    r = _measure(_trace([_k(g, s, s + d, n) for g, s, d, n in rows]))
    assert r.kernel_diff["diff_ns"].sum() == r.kernel_diff_total_ns
    most, least = r.most_loaded_gpu, r.least_loaded_gpu
    sums = r.per_gpu.select("gpu", "kernel_ns", "nccl_ns")
    assert r.compute_efficiency is None or 0 < r.compute_efficiency <= 1
    assert r.busy_max_over_mean is None or r.busy_max_over_mean >= 1
    compute = r.per_gpu.select("gpu", "compute_ns").rows_by_key("gpu")
    assert compute[most][0][0] >= compute[least][0][0]
    assert sums.height == r.per_gpu.height


# --- drift ------------------------------------------------------------------------------


def test_drift_busy_share_per_window_and_leader_change() -> None:
    # GPU 0 busy in the first half, GPU 1 in the second, both windows [0, 200].
    trace = _trace(
        [_k(0, 0, 100, "a"), _k(0, 200, 200, "a"), _k(1, 0, 0, "a"), _k(1, 100, 200, "a")]
    )
    r = _measure(trace)
    assert r.drift.height == 20 * 2
    first, last = r.drift_windows.row(0, named=True), r.drift_windows.row(19, named=True)
    assert (first["start_ns"], first["end_ns"], first["leader_gpu"]) == (0, 10, 0)
    assert (last["start_ns"], last["end_ns"], last["leader_gpu"]) == (190, 200, 1)
    assert r.drift_windows["spread_share"].to_list() == [1.0] * 20
    assert r.leader_changes == 1 and r.leaders == (0, 1)
    trend = dict(r.per_gpu.select("gpu", "busy_share_trend").rows())
    assert trend[0] < -1 and trend[1] > 1  # a step from 1 to 0 (and back), fitted linearly


def test_drift_needs_at_least_20_windows() -> None:
    with pytest.raises(SettingsError, match="at least 20"):
        _measure(SMALL, drift_windows=19)


def test_drift_window_count_follows_settings() -> None:
    r = _measure(SMALL, drift_windows=30)
    assert r.drift_windows.height == 30
    assert r.drift_windows["end_ns"].to_list()[-1] == 60


# --- iterations and pipeline bubbles ----------------------------------------------------


def _pipeline(nvtx: bool) -> model.Trace:
    # Two stages, iterations of 100 ns: stage 0 busy [0, 60), stage 1 busy [40, 100).
    kernels = []
    for i in range(3):
        base = 100 * i
        kernels += [_k(0, base, base + 60, "fwd0"), _k(1, base + 40, base + 100, "fwd1")]
    steps = [{"start_ns": 100 * i, "end_ns": 100 * i + 100, "text": "step"} for i in range(3)]
    return _trace(kernels, nvtx=steps if nvtx else ())


def test_pipeline_fill_and_drain_from_nvtx_iterations() -> None:
    r = _measure(_pipeline(nvtx=True))
    assert (r.iteration_source, r.iteration_label) == ("nvtx", "step")
    assert r.iterations.select("start_ns", "end_ns").rows() == [(0, 100), (100, 200), (200, 300)]
    per_gpu = r.bubbles_per_gpu.select("gpu", "iterations", "fill_ns", "drain_ns", "idle_ns")
    assert per_gpu.rows() == [(0, 3, 0, 120, 120), (1, 3, 120, 0, 120)]
    assert r.bubble_share == pytest.approx(0.4)
    assert (r.fill_share, r.drain_share) == (pytest.approx(0.2), pytest.approx(0.2))
    assert r.bubble_reason == ""


def test_nvtx_iterations_map_to_gpu_time_through_launches() -> None:
    # CPU ranges run ahead of the GPU; the kernels they launch mark the GPU iteration.
    kernels, api, steps = [], [], []
    for i in range(3):
        kernels.append(_k(0, 1000 + 100 * i, 1050 + 100 * i, "a", correlation_id=i + 1))
        api.append(
            {
                "start_ns": 10 * i + 1,
                "end_ns": 10 * i + 2,
                "name": "cudaLaunchKernel",
                "correlation_id": i + 1,
            }
        )
        steps.append({"start_ns": 10 * i, "end_ns": 10 * i + 10, "text": "step"})
    kernels.append(_k(1, 1000, 1280, "b"))
    r = _measure(_trace(kernels, nvtx=steps, cuda_api=api))
    assert r.iteration_source == "nvtx"
    assert r.iterations.select("start_ns", "end_ns").rows() == [
        (1000, 1100),
        (1100, 1200),
        (1200, 1250),
    ]


def test_nccl_nvtx_ranges_are_not_iterations() -> None:
    trace = _trace(
        [_k(0, 0, 60, "a"), _k(1, 0, 50, "a")],
        nvtx=[
            {"start_ns": 10 * i, "end_ns": 10 * i + 9, "text": "ncclGroupEnd", "domain": "NCCL"}
            for i in range(6)
        ],
    )
    iterations, source, _ = find_iterations(trace, measure_busy(trace, Settings()).windows)
    assert iterations.is_empty() and source is None


def test_repeated_kernel_sequence_gives_iterations() -> None:
    # A long wait before each "load", then "fwd" and "bwd": period 3, starting at load.
    kernels = []
    for i in range(5):
        base = 1000 * i
        kernels += [
            _k(0, base + 500, base + 600, "load"),
            _k(0, base + 610, base + 700, "fwd"),
            _k(0, base + 710, base + 800, "bwd"),
            _k(1, base + 620, base + 900, "fwd"),
        ]
    r = _measure(_trace(kernels))
    assert r.iteration_source == "kernel_sequence"
    assert r.iteration_label is not None and "every 3 kernels from load" in r.iteration_label
    assert r.iterations["start_ns"].to_list() == [500, 1500, 2500, 3500]
    assert r.iterations["end_ns"].to_list() == [1500, 2500, 3500, 4500]
    gpu1 = r.bubbles.filter(pl.col("gpu") == 1)
    assert gpu1["fill_ns"].to_list() == [120] * 4
    assert gpu1["drain_ns"].to_list() == [600] * 4


def test_no_iteration_boundaries_is_not_applicable() -> None:
    r = _measure(SMALL)
    assert r.iteration_source is None
    assert r.bubble_reason.startswith("not applicable")
    assert r.bubbles.is_empty() and r.bubble_share is None


def test_long_periods_take_the_same_phase(monkeypatch: pytest.MonkeyPatch) -> None:
    # Short periods take the median gap phase by phase, long ones by grouping.
    kernels = []
    for i in range(6):
        base = 1000 * i
        kernels += [
            _k(0, base + 100 + 100 * j, base + 150 + 100 * j, name)
            for j, name in enumerate("abcde")
        ]
    trace = _trace(kernels)
    looped = _measure(trace)
    monkeypatch.setattr(balance_iterations, "MEDIAN_LOOP_PHASES", 0)
    grouped = _measure(trace)
    assert looped.iteration_label == grouped.iteration_label
    assert looped.iteration_label is not None and "every 5 kernels from a" in looped.iteration_label
    assert_frame_equal(looped.iterations, grouped.iterations)


# --- regression: the implementation before per-GPU unions (kept as the reference) -------


def _reference(trace: model.Trace, settings_: Settings, iterations: pl.DataFrame) -> dict[str, Any]:
    """Per-GPU load, drift, bubbles and the kernel diff as the first implementation
    computed them: grouped unions, ``overlap_with`` and as-of joins by GPU."""
    busy = measure_busy(trace, settings_)
    w = (
        busy.windows.group_by("gpu")
        .agg(pl.col("window_start_ns").min(), pl.col("window_end_ns").max())
        .select(pl.col("gpu").cast(pl.Int32), "window_start_ns", "window_end_ns")
        .sort("gpu")
    )
    b = union_intervals(
        clip_to_windows(busy.intervals.select(pl.col("gpu").cast(pl.Int32), START, END), w, "gpu"),
        "gpu",
    )
    kernels = (
        trace.kernels.drop_nulls(["gpu", START, END])
        .join(w, on="gpu")
        .filter(
            (pl.col(END) >= pl.col("window_start_ns")) & (pl.col(START) <= pl.col("window_end_ns"))
        )
        .with_columns(
            pl.max_horizontal(START, "window_start_ns").alias(START),
            pl.min_horizontal(END, "window_end_ns").alias(END),
            pl.col("short_name").fill_null("").str.contains("(?i)nccl").alias("nccl"),
        )
        .with_columns((pl.col(END) - pl.col(START)).alias("duration_ns"))
    )
    parts = [
        total_length(b, "gpu", name="busy_ns"),
        total_length(
            kernels.filter(~pl.col("nccl")).select("gpu", START, END), "gpu", name="compute_ns"
        ),
        total_length(
            kernels.filter(pl.col("nccl")).select("gpu", START, END), "gpu", name="nccl_ns"
        ),
        kernels.group_by("gpu").agg(
            pl.col("duration_ns").sum().alias("kernel_ns"),
            pl.len().cast(pl.Int64).alias("kernel_count"),
        ),
    ]
    per_gpu = w.select("gpu")
    for part in parts:
        per_gpu = per_gpu.join(part, on="gpu", how="left")
    per_gpu = per_gpu.fill_null(0).sort("gpu")

    start, end = int(w["window_start_ns"].min()), int(w["window_end_ns"].max())  # type: ignore[arg-type]
    count, span = settings_.drift_windows, end - start
    edges = pl.DataFrame({"window": pl.int_range(count, eager=True, dtype=pl.Int64)}).with_columns(
        (start + (pl.col("window") * span) // count).alias(START),
        (start + ((pl.col("window") + 1) * span) // count).alias(END),
    )
    drift = overlap_with(edges.join(w.select("gpu"), how="cross"), b, by="gpu", name="busy_ns")

    cells = iterations.join(w.select("gpu"), how="cross").sort(START)
    with_busy = overlap_with(cells, b, by="gpu", name="busy_ns")
    bs = b.sort(START)

    def asof(df: pl.DataFrame, on: str, strategy: str, names: dict[str, str]) -> pl.DataFrame:
        return df.join_asof(
            bs.select("gpu", *[pl.col(c).alias(n) for c, n in names.items()]),
            left_on=on,
            right_on=names[START],
            by="gpu",
            strategy=strategy,  # type: ignore[arg-type]
            check_sortedness=False,
        )

    found = asof(
        asof(
            asof(with_busy, START, "backward", {START: "_s0", END: "_e0"}),
            START,
            "forward",
            {START: "_s1"},
        )
        .with_columns((pl.col(END) - 1).alias("_probe"))
        .sort("_probe"),
        "_probe",
        "backward",
        {START: "_s2", END: "_e2"},
    )
    length = pl.col(END) - pl.col(START)
    first = pl.when(pl.col("_e0") > pl.col(START)).then(pl.col(START)).otherwise(pl.col("_s1"))
    has_busy = first.is_not_null() & (first < pl.col(END))
    bubbles = found.select(
        "iteration",
        "gpu",
        "busy_ns",
        pl.when(has_busy)
        .then(first - pl.col(START))
        .otherwise(length)
        .cast(pl.Int64)
        .alias("fill_ns"),
        pl.when(has_busy)
        .then(pl.col(END) - pl.min_horizontal("_e2", END))
        .otherwise(0)
        .cast(pl.Int64)
        .alias("drain_ns"),
    ).sort("iteration", "gpu")

    per_name = (
        kernels.filter(~pl.col("nccl"))
        .group_by("name", "gpu")
        .agg(pl.col("duration_ns").sum().alias("time_ns"), pl.len().cast(pl.Int64).alias("count"))
    )
    return {"per_gpu": per_gpu, "drift": drift, "bubbles": bubbles, "per_name": per_name}


@st.composite
def _balance_traces(draw: st.DrawFn) -> model.Trace:
    """Random kernels (GPU 2 only when GPUs 0 and 1 repeat a kernel sequence)."""
    periodic = draw(st.booleans())
    kernels = []
    for _ in range(draw(st.integers(1, 30))):
        start = draw(st.integers(0, 400))
        gpu = 2 if periodic else draw(st.integers(0, 2))
        name = draw(st.sampled_from(["a", "b", "c", "ncclX"]))
        kernels.append(_k(gpu, start, start + draw(st.integers(0, 40)), name))
    if periodic:
        t = 0
        for i in range(draw(st.integers(3, 12))):
            for gpu in range(2):
                start = t + draw(st.integers(0, 6))
                kernels.append(_k(gpu, start, start + draw(st.integers(1, 9)), "xyz"[i % 3]))
            t += draw(st.integers(10, 30))
    return _trace(kernels)


@settings(max_examples=30, deadline=None)
@given(_balance_traces())
def test_matches_the_reference_implementation(trace: model.Trace) -> None:
    r = _measure(trace)
    ref = _reference(with_string_names(trace), Settings(), r.iterations)
    columns = ["gpu", "busy_ns", "compute_ns", "nccl_ns", "kernel_ns", "kernel_count"]
    assert r.per_gpu.select(columns).rows() == ref["per_gpu"].select(columns).rows()
    assert r.drift.select("window", "gpu", "busy_ns").rows() == (
        ref["drift"].sort("window", "gpu").select("window", "gpu", "busy_ns").rows()
    )
    got = r.bubbles.select("iteration", "gpu", "busy_ns", "fill_ns", "drain_ns")
    assert got.rows() == ref["bubbles"].rows()
    per_name = ref["per_name"]
    for gpu, prefix in ((r.most_loaded_gpu, "most"), (r.least_loaded_gpu, "least")):
        expected = {
            name: (time_ns, count) for name, g, time_ns, count in per_name.rows() if g == gpu
        }
        shown = r.kernel_diff.filter(pl.col("name") != OTHER_KERNELS)
        for name, time_ns, count in shown.select("name", f"{prefix}_ns", f"{prefix}_count").rows():
            assert expected.get(name, (0, 0)) == (time_ns, count)


@settings(max_examples=30, deadline=None)
@given(_balance_traces())
def test_without_the_per_iteration_table_every_other_result_is_the_same(
    trace: model.Trace,
) -> None:
    s = Settings()
    busy = measure_busy(trace, s)
    full = measure_imbalance(trace, busy.intervals, busy.windows, s)
    lean = measure_imbalance(trace, busy.intervals, busy.windows, s, per_iteration_table=False)
    assert lean.bubbles.is_empty() and lean.bubbles.schema == full.bubbles.schema
    for name in ImbalanceResult.__dataclass_fields__:
        if name != "bubbles":
            a, b = getattr(full, name), getattr(lean, name)
            assert a.equals(b) if isinstance(a, pl.DataFrame) else a == b, name


def test_without_the_per_iteration_table_the_bubble_sums_stay() -> None:
    trace = _pipeline(nvtx=True)
    s = Settings()
    busy = measure_busy(trace, s)
    lean = measure_imbalance(trace, busy.intervals, busy.windows, s, per_iteration_table=False)
    assert lean.bubbles.is_empty() and lean.bubble_share == pytest.approx(0.4)
    assert lean.bubbles_per_gpu["fill_ns"].to_list() == [0, 120]


@settings(max_examples=15, deadline=None)
@given(_balance_traces(), st.randoms(use_true_random=False))
def test_result_does_not_depend_on_kernel_order(trace: model.Trace, rng: Any) -> None:
    # Kernels in the trace's (gpu, start) order skip the sorts; any other order sorts.
    # Kernels with equal bounds have no order, so the trace keeps one of them.
    kernels = trace.kernels.unique(["gpu", "start_ns", "end_ns"], keep="first", maintain_order=True)
    trace = dataclasses.replace(trace, kernels=kernels)
    shuffled = dataclasses.replace(
        trace, kernels=kernels.sample(fraction=1.0, shuffle=True, seed=rng.randrange(1000))
    )
    a, b = _measure(trace), _measure(shuffled)
    for name in ("per_gpu", "drift", "iterations", "bubbles", "bubbles_per_gpu"):
        assert_frame_equal(getattr(a, name), getattr(b, name))
    assert (a.iteration_label, a.kernel_diff_total_ns) == (
        b.iteration_label,
        b.kernel_diff_total_ns,
    )


@settings(max_examples=15, deadline=None)
@given(_balance_traces())
def test_busy_need_not_be_a_union(trace: model.Trace) -> None:
    # The busy union is taken as it is; any other busy intervals are clipped and merged.
    busy = measure_busy(trace, Settings())
    raw = trace.kernels.select("gpu", START, END).drop_nulls()
    a = measure_imbalance(trace, busy.intervals, busy.windows)
    b = measure_imbalance(trace, raw, busy.windows)
    for name in ("per_gpu", "drift", "iterations", "bubbles", "bubbles_per_gpu"):
        assert_frame_equal(getattr(a, name), getattr(b, name))


# --- real exports -----------------------------------------------------------------------

T039 = SHARED_TRACES / "T039-gpu-poisson-solver" / "trace.sqlite"


def _real(paths: list[Path]) -> ImbalanceResult:
    from nsysan import load_trace

    if not all(p.is_file() for p in paths) or not paths:
        pytest.skip("real traces not found in ../shared/traces")
    return _measure(load_trace(paths))


@pytest.fixture(scope="module")
def t039() -> ImbalanceResult:
    return _real([T039])


@pytest.fixture(scope="module")
def cori() -> ImbalanceResult:
    return _real(cori_rank_files())


@pytest.mark.shared
def test_t039_imbalance(t039: ImbalanceResult) -> None:
    # docs/metrics/balance.md#t039: GPU 0 also runs every NCCL SendRecv and a small
    # boundary kernel; the split kernel is the same on both GPUs.
    per_gpu = t039.per_gpu.select("gpu", "busy_ns", "compute_ns", "nccl_ns", "kernel_count")
    assert per_gpu.rows() == [
        (0, 2_125_193_468, 1_583_918_368, 541_275_100, 3000),
        (1, 1_569_338_305, 1_569_338_305, 0, 1000),
    ]
    assert t039.busy_efficiency == pytest.approx(0.869222, abs=1e-6)
    assert t039.busy_max_over_mean == pytest.approx(1.150453, abs=1e-6)
    assert t039.compute_efficiency == pytest.approx(0.995397, abs=1e-6)
    assert t039.compute_max_over_mean == pytest.approx(1.004624, abs=1e-6)
    assert (t039.most_loaded_gpu, t039.least_loaded_gpu) == (0, 1)
    diff = t039.kernel_diff.select("short_name", "most_ns", "least_ns", "diff_ns")
    assert diff.rows() == [
        ("poisson_boundary", 15_477_347, 0, 15_477_347),
        ("poisson_split_MPI", 1_568_441_021, 1_569_338_305, -897_284),
    ]
    assert t039.kernel_diff["diff_ns"].sum() == t039.kernel_diff_total_ns == 14_580_063
    assert t039.compute_diff_ns == 14_580_063
    assert t039.iteration_source == "kernel_sequence"
    assert t039.iterations.height == 999
    # GPU 1 waits while GPU 0 runs the SendRecv at the start of every step.
    fill = dict(t039.bubbles_per_gpu.select("gpu", "fill_share").rows())
    assert fill[1] == pytest.approx(0.2558, abs=1e-4) and fill[0] == 0.0


@pytest.mark.shared
def test_cori_imbalance(cori: ImbalanceResult) -> None:
    # docs/metrics/balance.md#cori: the same 40 kernels per rank, 2.4x more time on GPU 4.
    assert (cori.most_loaded_gpu, cori.least_loaded_gpu) == (4, 2)
    assert cori.compute_efficiency == pytest.approx(0.640086, abs=1e-6)
    assert cori.compute_max_over_mean == pytest.approx(1.562290, abs=1e-6)
    assert cori.kernel_diff["diff_ns"].sum() == cori.kernel_diff_total_ns == 98_544_598
    assert cori.kernel_diff["short_name"].to_list() == [
        "nvkernel_ppush__F1L664_1_",
        "nvkernel_cpush__F1L1123_2_",
        "nvkernel_grid1__F1L1731_3_",
    ]
    assert cori.leaders == (4,) and cori.leader_changes == 0
    assert cori.drift_windows.height == 20
    assert cori.iteration_source == "kernel_sequence" and cori.iterations.height == 9


# --- synthetic scenarios with known ground truth (nsysan.simulate) -----------------------


def _simulated(name: str, folder: Path, scale: float = 0.1) -> tuple[ImbalanceResult, Any]:
    simulate = pytest.importorskip("nsysan.simulate", reason="scenario generator not available")
    if not hasattr(simulate, "generate"):
        pytest.skip("nsysan.simulate.generate is not available yet")
    from nsysan import load_trace

    path = folder / f"{name}.sqlite"
    truth = simulate.generate(name, path, seed=0, scale=scale)
    return _measure(load_trace([path])), truth


def test_tp_heads_compute_skew_and_its_kernels(tmp_path: Path) -> None:
    # Seed 4.1: 80 heads on 8 GPUs, ranks 0-1 hold more heads: ~12% compute skew.
    r, truth = _simulated("tp-heads", tmp_path)
    assert r.compute_max_over_mean == pytest.approx(truth.numbers["compute_skew"], abs=1e-3)
    assert r.most_loaded_gpu in truth.flagged_gpus
    top = r.kernel_diff.head(len(truth.flagged_kernels))["short_name"].to_list()
    assert set(top) == set(truth.flagged_kernels)
    assert r.kernel_diff["diff_ns"].sum() == r.kernel_diff_total_ns


def test_pp_bubble_fill_grows_and_drain_shrinks_along_the_pipeline(tmp_path: Path) -> None:
    r, truth = _simulated("pp-bubble", tmp_path)
    assert r.iteration_source == "nvtx"
    assert r.bubble_share == pytest.approx(truth.numbers["bubble_share_mean"], abs=0.02)
    stages = r.bubbles_per_gpu.sort("gpu")
    assert stages["fill_share"].is_sorted() and stages["fill_share"][0] == 0.0
    assert stages["drain_share"].is_sorted(descending=True)


def test_dp_long_tail_drifts_to_one_gpu(tmp_path: Path) -> None:
    # Seed 4.2: round-robin hands GPU 2 the long generations; the others run dry.
    r, truth = _simulated("dp-long-tail", tmp_path, scale=0.25)
    last_quarter = (
        r.drift.filter(pl.col("window") >= 15).group_by("gpu").agg(pl.col("busy_share").mean())
    )
    share = dict(last_quarter.rows())
    long_rank = truth.flagged_gpus[0]
    assert share.pop(long_rank) == pytest.approx(
        truth.numbers["long_rank_busy_last_quarter"], abs=0.01
    )
    assert max(share.values()) == pytest.approx(truth.numbers["other_busy_last_quarter_mean"])
    trend = dict(r.per_gpu.select("gpu", "busy_share_trend").rows())
    assert max(trend, key=trend.__getitem__) == long_rank
    assert r.spread_trend > 0.2  # type: ignore[operator]
    assert r.drift_windows["leader_gpu"][-1] == long_rank
    assert r.most_loaded_gpu == long_rank


@pytest.mark.parametrize("pid", [7, -7], ids=["packed", "joined"])  # negative ids do not pack
def test_launch_starts_pair_each_kernel_with_every_call_of_its_id(pid: int) -> None:
    kernels = pl.DataFrame(
        {
            "source": pl.Series([0, 0, 0, 1], dtype=pl.Int32),
            "pid": pl.Series([pid, pid, pid, pid], dtype=pl.Int32),
            "correlation_id": [10, 11, 12, 10],
            "start_ns": [100, 200, 300, 400],
            "end_ns": [150, 250, 350, 450],
        }
    )
    cuda_api = pl.DataFrame(
        {
            "source": pl.Series([0, 0, 0, 0, 1], dtype=pl.Int32),
            "pid": pl.Series([pid, pid, pid, pid + 1, pid], dtype=pl.Int32),
            # id 11 has a runtime and a driver call; id 12 no call of this process.
            "correlation_id": [10, 11, 11, 12, 10],
            "start_ns": [90, 180, 185, 290, 395],
        }
    )
    got = balance_iterations._launch_starts(kernels, cuda_api)
    assert got.columns == ["source", "pid", "start_ns", "end_ns", "launch_ns"]
    assert sorted(got.select("start_ns", "launch_ns").rows()) == [
        (100, 90),
        (200, 180),
        (200, 185),
        (400, 395),
    ]
    assert got["launch_ns"].is_sorted()
