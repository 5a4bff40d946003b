"""NCCL share, overlap with compute and collective skew (docs/metrics/nccl.md)."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from conftest import reference_dir
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from nsysan import load_trace, model
from nsysan.analyze.nccl import (
    COLLECTIVES,
    OTHER,
    NcclResult,
    classify_nccl,
    measure_nccl,
    nccl_kernels,
)
from nsysan.analyze.nccl_instances import (
    INSTANCE_KEY,
    INSTANCE_READ,
    LAST_ARRIVAL,
    kernels_by_instance,
)
from nsysan.intervals import clip_to_windows, total_length, union_intervals

T039 = "T039-gpu-poisson-solver/trace.sqlite"


# -- name parsing ---------------------------------------------------------------------

NAMES = [
    # NCCL <= 2.7: nccl<Coll>[<Algo>][<Proto>]Kernel_<op>_<type>
    ("ncclAllReduceRingLLKernel_sum_f32", "AllReduce"),
    ("ncclAllReduceTreeLL128Kernel_sum_f16", "AllReduce"),
    ("ncclAllReduceRingKernel_sum_f32", "AllReduce"),
    ("ncclReduceScatterRingLLKernel_sum_f16", "ReduceScatter"),
    ("ncclReduceRingLLKernel_sum_f32", "Reduce"),
    ("ncclBroadcastRingLLKernel_copy_i8", "Broadcast"),
    ("ncclAllGatherRingLL128Kernel_copy_i8", "AllGather"),
    ("ncclSendRecvKernel_copy_i8", "SendRecv"),
    # NCCL 2.8-2.18: ncclKernel_<coll>_<algo>_<proto>_<redop>_<type>
    ("ncclKernel_AllReduce_RING_LL_Sum_float", "AllReduce"),
    ("ncclKernel_AllReduce_TREE_LL128_Sum_half", "AllReduce"),
    ("ncclKernel_AllReduce_COLLNET_DIRECT_SIMPLE_Sum___nv_bfloat16", "AllReduce"),
    ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t", "SendRecv"),
    ("ncclKernel_AllGather_RING_LL_Sum_int8_t", "AllGather"),
    ("ncclKernel_ReduceScatter_RING_SIMPLE_Sum_float", "ReduceScatter"),
    ("ncclKernel_Broadcast_RING_LL_Sum_int8_t", "Broadcast"),
    ("ncclKernel_Reduce_RING_LL_Sum_float", "Reduce"),
    # RCCL
    ("ncclKernel_AllToAllPivot_RING_SIMPLE_Sum_int8_t", "AllToAll"),
    ("ncclKernelDebug_AllReduce_RING_LL_Sum_float", "AllReduce"),
    ("ncclDevKernel_AllToAllPivot", "AllToAll"),
    ("ncclDevKernel_AlltoAllPivot_RING_SIMPLE", "AllToAll"),
    ("ncclDevKernel_Generic_4", OTHER),
    ("ncclDevKernel_Generic_1", OTHER),
    # NCCL >= 2.19: ncclDevKernel_<coll>[_<redop>_<ty>][_<algo>_<proto>]
    ("ncclDevKernel_AllReduce_Sum_f16_RING_LL", "AllReduce"),
    ("ncclDevKernel_AllReduce_Sum_bf16_TREE_LL", "AllReduce"),
    ("ncclDevKernel_AllReduce_Sum_u32_RING_LL", "AllReduce"),
    ("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL", "ReduceScatter"),
    ("ncclDevKernel_Reduce_Sum_f32_RING_LL", "Reduce"),
    ("ncclDevKernel_AllGather_RING_LL", "AllGather"),
    ("ncclDevKernel_AllGatherV_RING_LL", "AllGather"),
    ("ncclDevKernel_Broadcast_RING_LL", "Broadcast"),
    ("ncclDevKernel_SendRecv", "SendRecv"),
    ("ncclDevKernel_Generic", OTHER),
    # NCCL >= 2.27 symmetric-memory kernels
    ("ncclSymkDevKernel_AllReduce_AGxLL_R_sum_f32", "AllReduce"),
    ("ncclSymkDevKernel_AllGather_LL", "AllGather"),
    ("ncclSymkDevKernel_ReduceScatter_LD_avg_bf16", "ReduceScatter"),
    # unknown shapes of NCCL names
    ("ncclSomethingNew", OTHER),
    ("ncclDevKernel_Nop", OTHER),
    # demangled names and a failed demangling
    (
        "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm *, unsigned long, ncclWork *)",
        "SendRecv",
    ),
    ("void ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "AllReduce"),
    ("_Z23ncclDevKernel_Generic_424ncclDevKernelArgsStorageILm4096EE", OTHER),
    ("_Z38ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE", "AllReduce"),
]

NOT_NCCL = [
    "poisson_split_MPI",
    "ampere_sgemm_128x64_nn",
    "my_nccl_pack_kernel",
    "void at::native::vectorized_elementwise_kernel<4, nccl_like>(int)",
    "NCCLKernel_upper_case_is_not_nccl",
    "",
]


def _classified(short: list[str | None], name: list[str | None] | None = None) -> pl.DataFrame:
    frame = pl.DataFrame(
        {"short_name": short, "name": name if name is not None else [None] * len(short)},
        schema={"short_name": pl.String, "name": pl.String},
    )
    return classify_nccl(frame)


@pytest.mark.parametrize(("kernel", "collective"), NAMES)
def test_collective_parsed_from_name(kernel: str, collective: str) -> None:
    out = _classified([kernel])
    assert out.row(0, named=True) == {
        "short_name": kernel,
        "name": None,
        "is_nccl": True,
        "collective": collective,
    }


@pytest.mark.parametrize("kernel", NOT_NCCL)
def test_non_nccl_kernels(kernel: str) -> None:
    out = _classified([kernel])
    assert out["is_nccl"].to_list() == [False]
    assert out["collective"].to_list() == [None]


def test_demangled_name_used_when_short_name_missing() -> None:
    out = _classified(
        [None, None, "gemm"], ["ncclKernel_AllGather_RING_LL_Sum_int8_t(x)", None, None]
    )
    assert out["is_nccl"].to_list() == [True, False, False]
    assert out["collective"].to_list() == ["AllGather", None, None]


def test_every_collective_is_reachable() -> None:
    found = set(_classified([n for n, _ in NAMES])["collective"].to_list())
    assert found == {*COLLECTIVES, OTHER}


def test_classify_keeps_rows_and_columns() -> None:
    kernels = model.empty_frame(model.KERNELS)
    out = classify_nccl(kernels)
    assert out.columns == [*model.KERNELS, "is_nccl", "collective"]
    assert out.schema["is_nccl"] == pl.Boolean and out.schema["collective"] == pl.String


# -- inline frames ------------------------------------------------------------------

AR = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
AG = "ncclDevKernel_AllGather_RING_LL"
GEMM = "gemm"


def _kernels(rows: list[tuple[int, int, int, int, str]]) -> pl.DataFrame:
    """(gpu, stream, start, end, short_name) rows as a model kernels table."""
    frame = pl.DataFrame(
        rows,
        schema={
            "gpu": pl.Int32,
            "stream_id": pl.Int64,
            "start_ns": pl.Int64,
            "end_ns": pl.Int64,
            "short_name": pl.String,
        },
        orient="row",
    ).with_columns(
        pl.lit(0).alias("source"),
        pl.lit(100).alias("pid"),
        pl.col("gpu").alias("device_id"),
        pl.lit(1).alias("context_id"),
        pl.int_range(pl.len()).alias("correlation_id"),
        pl.col("short_name").alias("name"),
    )
    return model.conform(frame, model.KERNELS)


def _first_to_last(kernels: pl.DataFrame) -> pl.DataFrame:
    """Windows from the first to the last kernel of each GPU."""
    return kernels.group_by("gpu").agg(
        pl.col("start_ns").min().alias("window_start_ns"),
        pl.col("end_ns").max().alias("window_end_ns"),
    )


def _measure(kernels: pl.DataFrame, windows: pl.DataFrame | None = None) -> NcclResult:
    """measure_nccl with busy = union of all kernels, windows = first..last kernel per GPU."""
    if windows is None:
        windows = _first_to_last(kernels)
    return measure_nccl(kernels, union_intervals(kernels, by="gpu"), windows)


def _gpu(result: NcclResult, gpu: int) -> dict[str, Any]:
    return result.per_gpu.filter(pl.col("gpu") == gpu).row(0, named=True)


def test_last_gpu_of_a_tie_is_the_lowest() -> None:
    # One all-reduce on 3 GPUs: GPUs 2 and 1 start last, together.
    kernels = _kernels([(0, 7, 0, 100, AR), (1, 9, 40, 100, AR), (2, 9, 40, 100, AR)])
    r = _measure(kernels)
    assert r.instances.select("skew_ns", "last_gpu").rows() == [(40, 1)]


def test_known_skew_and_wait() -> None:
    # Three all-reduces on 2 GPUs. GPU 1 arrives late twice; the early GPU waits.
    kernels = _kernels(
        [
            (0, 7, 0, 100, AR),  # instance 0: GPU 1 starts 60 later, both end at 100
            (1, 9, 60, 100, AR),
            (0, 7, 200, 230, AR),  # instance 1: same start, same duration
            (1, 9, 200, 230, AR),
            (0, 7, 300, 400, AR),  # instance 2: GPU 0 starts 50 later
            (1, 9, 250, 400, AR),
            (0, 8, 0, 50, GEMM),
        ]
    )
    r = _measure(kernels)
    assert r.instances.select(
        "ordinal", "gpus", "skew_ns", "fastest_ns", "wait_ns", "last_gpu"
    ).rows() == [
        (0, 2, 60, 40, 60, 1),
        (1, 2, 0, 30, 0, None),
        (2, 2, 50, 100, 50, 0),
    ]
    ik = r.instance_kernels.sort("ordinal", "gpu")
    assert ik["wait_ns"].to_list() == [60, 0, 0, 0, 0, 50]
    assert ik["lag_ns"].to_list() == [0, 60, 0, 0, 50, 0]
    g0, g1 = _gpu(r, 0), _gpu(r, 1)
    assert (g0["wait_ns"], g1["wait_ns"]) == (60, 50)
    assert (g0["matched_kernel_ns"], g1["matched_kernel_ns"]) == (230, 220)
    assert g0["wait_share"] == pytest.approx(60 / 230)
    assert (g0["last_arrivals"], g1["last_arrivals"]) == (1, 1)
    assert (g0["arrival_lag_ns"], g1["arrival_lag_ns"]) == (50, 60)
    assert r.matched_instances == 3 and r.unmatched_kernels == 0
    # Order statistics: sorted skews are 0, 50, 60.
    assert (r.skew_median_ns, r.skew_p99_ns, r.skew_max_ns) == (50, 50, 60)
    assert r.wait_ns == 110
    assert r.wait_share == pytest.approx(110 / 450)
    # GPU 0: NCCL [0,100] [200,230] [300,400] = 230 ns; compute [0,50] overlaps 50 ns.
    assert (g0["nccl_ns"], g0["overlap_ns"], g0["busy_ns"], g0["window_ns"]) == (230, 50, 230, 400)
    assert g0["overlap_share"] == pytest.approx(50 / 230)
    assert g0["nccl_busy_share"] == 1.0 and g0["nccl_window_share"] == pytest.approx(230 / 400)
    assert (g1["overlap_ns"], g1["overlap_share"]) == (0, 0.0)


def test_mismatched_counts_are_reported() -> None:
    kernels = _kernels(
        [
            (0, 1, 0, 10, AR),
            (0, 1, 20, 30, AR),
            (0, 1, 40, 50, AR),
            (0, 1, 60, 70, AR),
            (1, 1, 5, 10, AR),
            (1, 1, 25, 30, AR),
            (1, 1, 45, 50, AR),
            (0, 1, 100, 110, AG),  # only one GPU runs AllGather: nothing to match it with
        ]
    )
    r = _measure(kernels)
    assert r.matched_instances == 3
    assert r.unmatched_kernels == 2
    assert _gpu(r, 0)["unmatched_kernels"] == 2 and _gpu(r, 1)["unmatched_kernels"] == 0
    assert _gpu(r, 0)["matched_kernels"] + _gpu(r, 0)["unmatched_kernels"] == 5
    m = r.matching.select("collective", "gpus", "min_count", "max_count", "unmatched_kernels")
    assert m.rows() == [("AllGather", 1, 1, 1, 1), ("AllReduce", 2, 3, 4, 1)]
    assert set(r.instances["skew_ns"].to_list()) == {5}
    per_coll = r.per_collective.filter(pl.col("gpu") == 0).select("collective", "nccl_kernels")
    assert per_coll.rows() == [("AllGather", 1), ("AllReduce", 4)]


def test_streams_pair_by_first_use_when_counts_agree() -> None:
    # Two communicators (streams) per GPU; GPU 1's stream ids differ and its second
    # communicator's kernels come first in time within each pair.
    kernels = _kernels(
        [
            (0, 10, 0, 10, AR),
            (0, 11, 5, 12, AR),
            (0, 10, 20, 30, AR),
            (1, 50, 1, 10, AR),
            (1, 51, 3, 12, AR),
            (1, 50, 22, 30, AR),
        ]
    )
    r = _measure(kernels)
    assert r.matching.select("stream_rank", "match_mode", "min_count").rows() == [
        (0, "stream", 2),
        (1, "stream", 1),
    ]
    starts = r.instance_kernels.sort("stream_rank", "ordinal", "gpu").select(
        "stream_rank", "ordinal", "gpu", "start_ns"
    )
    assert starts.rows() == [
        (0, 0, 0, 0),
        (0, 0, 1, 1),
        (0, 1, 0, 20),
        (0, 1, 1, 22),
        (1, 0, 0, 5),
        (1, 0, 1, 3),
    ]


def test_streams_pooled_when_counts_differ() -> None:
    kernels = _kernels(
        [
            (0, 10, 0, 10, AR),
            (0, 11, 20, 30, AR),
            (1, 50, 2, 10, AR),
            (1, 50, 21, 30, AR),
        ]
    )
    r = _measure(kernels)
    assert r.matching.select("stream_rank", "match_mode", "min_count").rows() == [
        (0, "collective", 2)
    ]
    assert r.instances["skew_ns"].to_list() == [2, 1]


def test_nccl_kernels_overlapping_each_other_count_once() -> None:
    kernels = _kernels(
        [
            (0, 1, 0, 100, AR),
            (0, 2, 50, 150, AG),
            (0, 3, 120, 200, GEMM),
        ]
    )
    r = _measure(kernels)
    g0 = _gpu(r, 0)
    assert (g0["nccl_kernels"], g0["nccl_kernel_ns"], g0["nccl_ns"]) == (2, 200, 150)
    assert (g0["overlap_ns"], g0["busy_ns"], g0["window_ns"]) == (30, 200, 200)
    per_coll = r.per_collective.select("collective", "nccl_ns", "overlap_ns").rows()
    assert per_coll == [("AllGather", 100, 30), ("AllReduce", 100, 0)]


def test_window_clips_time_and_scopes_instances() -> None:
    kernels = _kernels(
        [
            (0, 1, 0, 100, AR),
            (1, 1, 10, 100, AR),
            (0, 1, 200, 300, AR),
            (1, 1, 230, 300, AR),
        ]
    )
    windows = pl.DataFrame(
        {"gpu": [0, 1], "window_start_ns": [150, 150], "window_end_ns": [250, 250]},
        schema={"gpu": pl.Int32, "window_start_ns": pl.Int64, "window_end_ns": pl.Int64},
    )
    r = _measure(kernels, windows)
    g0, g1 = _gpu(r, 0), _gpu(r, 1)
    assert (g0["nccl_ns"], g1["nccl_ns"], g0["window_ns"]) == (50, 20, 100)
    assert (g0["nccl_kernels"], g1["nccl_kernels"]) == (1, 1)
    # Matching used the whole trace: the in-window instance is the second one.
    assert r.instances.select("ordinal", "skew_ns").rows() == [(1, 30)]
    assert (g0["wait_ns"], g1["wait_ns"]) == (30, 0)


def test_gpu_without_nccl_gets_zeros_and_no_kernels_at_all() -> None:
    kernels = _kernels([(0, 1, 0, 10, GEMM), (1, 1, 0, 10, AR)])
    r = _measure(kernels)
    g0 = _gpu(r, 0)
    assert (g0["nccl_ns"], g0["nccl_busy_share"], g0["overlap_share"]) == (0, 0.0, None)
    empty = _measure(_kernels([]))
    assert empty.per_gpu.is_empty() and empty.instances.is_empty()
    assert (empty.nccl_kernels, empty.skew_median_ns, empty.nccl_busy_share) == (0, None, None)


def test_rows_without_bounds_are_ignored() -> None:
    kernels = _kernels([(0, 1, 0, 10, AR), (1, 1, 2, 10, AR), (0, 1, 20, 30, AR)])
    broken = kernels.with_columns(
        pl.when(pl.col("start_ns") == 20).then(None).otherwise(pl.col("end_ns")).alias("end_ns")
    )
    r = _measure(broken)
    assert (r.nccl_kernels, r.matched_instances, r.unmatched_kernels) == (2, 1, 0)


# -- property tests -----------------------------------------------------------------

_NAMES = (AR, AR, AG, GEMM, GEMM)


@st.composite
def _kernel_rows(draw: st.DrawFn) -> list[tuple[int, int, int, int, str]]:
    n = draw(st.integers(0, 25))
    rows = []
    for _ in range(n):
        start = draw(st.integers(0, 60))
        rows.append(
            (
                draw(st.integers(0, 2)),
                draw(st.integers(1, 3)),
                start,
                start + draw(st.integers(0, 20)),
                draw(st.sampled_from(_NAMES)),
            )
        )
    return rows


def _covered(rows: list[tuple[int, int, int, int, str]], gpu: int, nccl: bool | None) -> set[int]:
    """Unit time slots [t, t+1) covered on ``gpu`` (nccl None: every kernel)."""
    return {
        t
        for g, _, s, e, n in rows
        if g == gpu and (nccl is None or (n != GEMM) == nccl)
        for t in range(s, e)
    }


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_kernel_rows())
def test_properties(rows: list[tuple[int, int, int, int, str]]) -> None:
    r = _measure(_kernels(rows))
    for g in r.per_gpu.iter_rows(named=True):
        nccl = _covered(rows, g["gpu"], True)
        compute = _covered(rows, g["gpu"], False)
        assert g["nccl_ns"] == len(nccl)
        assert g["overlap_ns"] == len(nccl & compute)
        assert 0 <= g["overlap_ns"] <= g["nccl_ns"] <= g["busy_ns"] <= g["window_ns"]
        assert g["nccl_kernels"] == g["matched_kernels"] + g["unmatched_kernels"]
        assert 0 <= g["wait_ns"] <= g["matched_kernel_ns"]
    ik = r.instance_kernels
    assert (ik["wait_ns"] >= 0).all() and (ik["wait_ns"] <= ik["duration_ns"]).all()
    assert (ik["lag_ns"] >= 0).all()
    assert (r.instances["skew_ns"] >= 0).all() and (r.instances["gpus"] >= 2).all()
    # Every instance has exactly one kernel on each GPU of its group.
    groups = r.matching.filter(pl.col("gpus") >= 2)
    assert r.matched_instances == int(groups["min_count"].sum() or 0)
    assert ik.height == int((groups["min_count"] * groups["gpus"]).sum() or 0)
    assert (
        r.instances.height == r.instances.select("collective", "stream_rank", "ordinal").n_unique()
    )
    # The collective table splits the per-GPU counts.
    by_gpu = r.per_collective.group_by("gpu").agg(pl.col("nccl_kernels", "wait_ns").sum())
    joined = r.per_gpu.join(by_gpu, on="gpu", suffix="_c", how="inner")
    assert (joined["nccl_kernels"] == joined["nccl_kernels_c"]).all()
    assert (joined["wait_ns"] == joined["wait_ns_c"]).all()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_kernel_rows())
def test_unordered_instance_kernels_change_nothing_else(
    rows: list[tuple[int, int, int, int, str]],
) -> None:
    # Without the detail, the matched kernels are not sorted (nothing shows them).
    kernels = _kernels(rows)
    busy, windows = union_intervals(kernels, by="gpu"), _first_to_last(kernels)
    ordered = measure_nccl(kernels, busy, windows)
    unordered = measure_nccl(kernels, busy, windows, ordered_kernels=False)
    for name in NcclResult.__dataclass_fields__:
        a, b = getattr(ordered, name), getattr(unordered, name)
        if name == "instance_kernels":
            assert_frame_equal(a, b, check_row_order=False)
        elif isinstance(a, pl.DataFrame):
            assert_frame_equal(a, b)
        else:
            assert a == b, name


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_kernel_rows())
def test_busy_need_not_be_a_union(rows: list[tuple[int, int, int, int, str]]) -> None:
    # The busy union is taken as it is; any other busy intervals are clipped and merged.
    kernels = _kernels(rows)
    windows = kernels.group_by("gpu").agg(
        (pl.col("start_ns").min() + 5).alias("window_start_ns"),
        (pl.col("end_ns").max() - 5)
        .clip(lower_bound=pl.col("start_ns").min() + 5)
        .alias("window_end_ns"),
    )
    union = measure_nccl(kernels, union_intervals(kernels, by="gpu"), windows)
    raw = measure_nccl(kernels, kernels.select("gpu", "start_ns", "end_ns"), windows)
    assert_frame_equal(union.per_gpu, raw.per_gpu)


def _reference_instances(matched: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """kernels_by_instance as window functions and a group-by over the instance's
    columns (the implementation before stop 39, kept as the reference)."""
    inst = list(INSTANCE_KEY)
    measured = (
        matched.select(INSTANCE_READ)
        .filter(pl.col("in_window").any().over(inst))
        .with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("duration_ns"))
        .with_columns(
            (pl.col("start_ns") - pl.col("start_ns").min().over(inst)).alias("lag_ns"),
            (pl.col("duration_ns") - pl.col("duration_ns").min().over(inst)).alias("wait_ns"),
        )
        .with_columns(
            (
                (pl.col("lag_ns") == pl.col("lag_ns").max().over(inst)) & (pl.col("lag_ns") > 0)
            ).alias(LAST_ARRIVAL)
        )
        .sort(*inst, "gpu")
        .select(
            *inst,
            "gpu",
            "stream_id",
            "start_ns",
            "end_ns",
            "duration_ns",
            "lag_ns",
            "wait_ns",
            "in_window",
            LAST_ARRIVAL,
        )  # fmt: skip
    )
    instances = (
        measured.group_by(inst)
        .agg(
            pl.len().cast(pl.Int64).alias("gpus"),
            pl.col("start_ns").min().alias("first_start_ns"),
            pl.col("start_ns").max().alias("last_start_ns"),
            pl.col("duration_ns").min().alias("fastest_ns"),
            pl.col("duration_ns").max().alias("slowest_ns"),
            pl.col("wait_ns").sum().alias("wait_ns"),
            pl.col("gpu")
            .sort_by("start_ns", "gpu", descending=[False, True])
            .last()
            .alias("last_gpu"),
        )
        .with_columns((pl.col("last_start_ns") - pl.col("first_start_ns")).alias("skew_ns"))
        .with_columns(pl.when(pl.col("skew_ns") > 0).then(pl.col("last_gpu")).alias("last_gpu"))
        .sort(inst)
    )
    return measured, instances


_instance_cells = st.lists(
    st.tuples(
        st.sampled_from(["AllGather", "AllReduce", "Broadcast"]),
        st.integers(0, 2),  # stream rank
        st.integers(0, 4),  # ordinal
        st.integers(0, 3),  # gpu
    ),
    unique=True,
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(_instance_cells, st.data())
def test_instances_equal_the_window_functions(
    cells: list[tuple[str, int, int, int]], data: st.DataObject
) -> None:
    """The compiled pass gives the instances and their kernels of the window functions
    and group-by, on any matched kernels: holes in the ordinals, ties of start and
    duration, instances without a kernel in a window."""
    times = data.draw(
        st.lists(
            st.tuples(st.integers(0, 60), st.integers(0, 20), st.booleans(), st.integers(0, 3)),
            min_size=len(cells),
            max_size=len(cells),
        )
    )
    matched = pl.DataFrame(
        [
            (*cell, stream, start, start + d, w)
            for cell, (start, d, w, stream) in zip(cells, times, strict=True)
        ],
        schema={
            "collective": pl.String,
            "stream_rank": pl.Int64,
            "ordinal": pl.Int64,
            "gpu": pl.Int32,
            "stream_id": pl.Int64,
            "start_ns": pl.Int64,
            "end_ns": pl.Int64,
            "in_window": pl.Boolean,
        },
        orient="row",
    )
    kernels, instances = kernels_by_instance(matched)
    expected_kernels, expected_instances = _reference_instances(matched)
    assert_frame_equal(kernels, expected_kernels)
    assert_frame_equal(instances, expected_instances)
    unordered, _ = kernels_by_instance(matched, ordered=False)
    assert_frame_equal(unordered.sort(*INSTANCE_KEY, "gpu"), expected_kernels)


# -- regression: the implementation before per-GPU unions (kept as the reference) -------


def _reference_times(
    kernels: pl.DataFrame, busy: pl.DataFrame, windows: pl.DataFrame
) -> pl.DataFrame:
    """Per (gpu, collective or "all"): kernels, kernel_ns, nccl_ns, overlap_ns, as the
    first implementation computed them (three unions: |NCCL ∩ compute| = |NCCL| +
    |compute| - |NCCL ∪ compute|), with busy_ns per GPU."""
    joined = (
        classify_nccl(kernels.drop_nulls(["gpu", "start_ns", "end_ns"]))
        .filter(pl.col("end_ns") >= pl.col("start_ns"))
        .join(windows, on="gpu")
        .filter(
            (pl.col("end_ns") >= pl.col("window_start_ns"))
            & (pl.col("start_ns") <= pl.col("window_end_ns"))
        )
        .select(
            "gpu",
            "collective",
            "is_nccl",
            pl.max_horizontal("start_ns", "window_start_ns").alias("start_ns"),
            pl.min_horizontal("end_ns", "window_end_ns").alias("end_ns"),
        )
    )
    one = joined.filter(pl.col("is_nccl")).drop("is_nccl")
    nccl = pl.concat([one, one.with_columns(pl.lit("all").alias("collective"))])
    keys = ["gpu", "collective"]
    counts = nccl.group_by(keys).agg(
        pl.len().cast(pl.Int64).alias("kernels"),
        (pl.col("end_ns") - pl.col("start_ns")).sum().alias("kernel_ns"),
    )
    compute = union_intervals(
        joined.filter(~pl.col("is_nccl")).select("gpu", "start_ns", "end_ns"), by="gpu"
    )
    compute_ns = compute.group_by("gpu").agg(
        (pl.col("end_ns") - pl.col("start_ns")).sum().alias("_compute_ns")
    )
    repeated = compute.join(counts.select(keys), on="gpu").select(nccl.columns)
    either = total_length(pl.concat([nccl, repeated]), by=keys, name="_either_ns")
    busy_ns = total_length(
        clip_to_windows(busy.select("gpu", "start_ns", "end_ns"), windows, by="gpu"),
        by="gpu",
        name="busy_ns",
    )
    return (
        counts.join(total_length(nccl, by=keys, name="nccl_ns"), on=keys, how="left")
        .join(compute_ns, on="gpu", how="left")
        .join(either, on=keys, how="left")
        .join(busy_ns, on="gpu", how="left")
        .with_columns(pl.col("nccl_ns", "_compute_ns", "_either_ns", "busy_ns").fill_null(0))
        .select(
            *keys,
            "kernels",
            "kernel_ns",
            "nccl_ns",
            (pl.col("nccl_ns") + pl.col("_compute_ns") - pl.col("_either_ns")).alias("overlap_ns"),
            "busy_ns",
        )
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_kernel_rows(), st.integers(0, 40), st.integers(0, 80))
def test_matches_the_reference_implementation(
    rows: list[tuple[int, int, int, int, str]], window_start: int, window_length: int
) -> None:
    kernels = _kernels(rows)
    windows = pl.DataFrame(
        {
            "gpu": [0, 1, 2],
            "window_start_ns": [window_start, 0, window_start],
            "window_end_ns": [window_start + window_length, 100, window_start + 2],
        },
        schema={"gpu": pl.Int32, "window_start_ns": pl.Int64, "window_end_ns": pl.Int64},
    )
    busy = union_intervals(kernels, by="gpu")
    r = measure_nccl(kernels, busy, windows)
    expected = _reference_times(kernels, busy, windows).sort("gpu", "collective")
    per_gpu = r.per_gpu.filter(pl.col("nccl_kernels") > 0).select(
        "gpu",
        pl.lit("all").alias("collective"),
        pl.col("nccl_kernels").alias("kernels"),
        pl.col("nccl_kernel_ns").alias("kernel_ns"),
        "nccl_ns",
        "overlap_ns",
        "busy_ns",
    )
    per_collective = r.per_collective.join(r.per_gpu.select("gpu", "busy_ns"), on="gpu").select(
        "gpu",
        "collective",
        pl.col("nccl_kernels").alias("kernels"),
        pl.col("nccl_kernel_ns").alias("kernel_ns"),
        "nccl_ns",
        "overlap_ns",
        "busy_ns",
    )
    got = pl.concat([per_gpu, per_collective]).sort("gpu", "collective")
    assert_frame_equal(got, expected, check_dtypes=False)


def test_classify_matches_row_by_row_classification() -> None:
    # Parsing each distinct name once must give every row what parsing it alone gives.
    pairs: list[tuple[str | None, str | None]] = [(k, None) for k, _ in NAMES]
    pairs += [(k, None) for k in NOT_NCCL]
    pairs += [(None, "ncclKernel_AllGather_RING_LL_Sum_int8_t(x)"), (None, None), ("gemm", "x")]
    rows = [pairs[i % len(pairs)] for i in range(7 * len(pairs))][::-1]
    frame = pl.DataFrame(rows, schema={"short_name": pl.String, "name": pl.String}, orient="row")
    alone = pl.concat([classify_nccl(frame.slice(i, 1)) for i in range(frame.height)])
    assert_frame_equal(classify_nccl(frame), alone)


@pytest.mark.parametrize("label_type", [pl.String, pl.Categorical()])
def test_nccl_kernels_are_the_classified_nccl_rows(label_type: pl.DataType) -> None:
    pairs: list[tuple[str | None, str | None]] = [(k, None) for k, _ in NAMES]
    pairs += [(k, None) for k in NOT_NCCL]
    pairs += [(None, "ncclKernel_AllGather_RING_LL_Sum_int8_t(x)"), (None, None), ("gemm", "x")]
    rows = [(i, *pairs[(i * 7) % len(pairs)]) for i in range(5 * len(pairs))]
    frame = pl.DataFrame(
        rows,
        schema={"start_ns": pl.Int64, "short_name": label_type, "name": label_type},
        orient="row",
    )
    expected = classify_nccl(frame).filter(pl.col("is_nccl")).drop("is_nccl")
    assert expected.height > len(NAMES)
    assert_frame_equal(nccl_kernels(frame), expected)
    assert nccl_kernels(frame.filter(pl.col("short_name") == "gemm")).is_empty()


# -- real trace T039: one process, 2 V100s, 1000 ncclKernel_SendRecv kernels ---------


@pytest.fixture(scope="module")
def t039(shared_traces: Path) -> tuple[NcclResult, Path]:
    from nsysan.analyze.busy import measure_busy
    from nsysan.settings import Settings
    from nsysan.window import resolve_windows

    path = shared_traces / T039
    trace = load_trace([path])
    settings_ = Settings()
    busy = measure_busy(trace, settings_)
    windows = resolve_windows(trace, settings_.window, settings_.busy_mode)
    return measure_nccl(trace.kernels, busy.intervals, windows), path


@pytest.mark.shared
def test_t039_nccl_time_equals_nvidia_kernel_sum(t039: tuple[NcclResult, Path]) -> None:
    r, path = t039
    ref = pl.read_csv(reference_dir(path) / "cuda_gpu_kern_sum.csv")
    nccl_ref = ref.filter(pl.col("Name").str.starts_with("nccl"))
    assert nccl_ref.height == 1
    total, instances = nccl_ref.row(0, named=True)["Total Time (ns)"], nccl_ref["Instances"][0]
    assert (total, instances) == (541_275_100, 1000)
    assert r.nccl_kernels == instances
    # No two NCCL kernels overlap, so the union equals NVIDIA's sum of durations.
    assert r.nccl_ns == total
    assert r.per_gpu.select("gpu", "nccl_kernels", "nccl_kernel_ns", "nccl_ns").rows() == [
        (0, 1000, 541_275_100, 541_275_100),
        (1, 0, 0, 0),
    ]
    assert r.per_collective.select("gpu", "collective", "nccl_kernels").rows() == [
        (0, "SendRecv", 1000)
    ]


@pytest.mark.shared
def test_t039_shares_and_overlap(t039: tuple[NcclResult, Path]) -> None:
    r, _ = t039
    g0 = r.per_gpu.row(0, named=True)
    # GPU 0 busy = 2 125 193 468 ns = the sum of all its kernels: nothing overlaps,
    # so the NCCL stream (28) never runs beside the compute stream (7).
    assert (g0["busy_ns"], g0["window_ns"]) == (2_125_193_468, 2_244_172_420)
    assert (g0["overlap_ns"], g0["overlap_share"]) == (0, 0.0)
    assert g0["nccl_busy_share"] == pytest.approx(541_275_100 / 2_125_193_468)  # 25.5%
    assert g0["nccl_window_share"] == pytest.approx(541_275_100 / 2_244_172_420)  # 24.1%
    assert r.nccl_busy_share == pytest.approx(541_275_100 / (2_125_193_468 + 1_569_338_305))


@pytest.mark.shared
def test_t039_instances_are_unmatched_not_dropped(t039: tuple[NcclResult, Path]) -> None:
    # Every SendRecv kernel ran on GPU 0; the peer's kernels are not in this trace, so
    # there is no instance to match and every kernel is reported as unmatched.
    r, _ = t039
    assert r.matching.select("collective", "gpus", "min_count", "unmatched_kernels").rows() == [
        ("SendRecv", 1, 1000, 1000)
    ]
    assert (r.matched_instances, r.unmatched_kernels) == (0, 1000)
    assert (r.skew_median_ns, r.skew_p99_ns, r.skew_max_ns) == (None, None, None)
    assert (r.wait_ns, r.wait_share) == (0, None)


# -- synthetic comm-bound trace -----------------------------------------------------


def test_comm_bound_simulation_is_found(tmp_path: Path) -> None:
    try:
        simulate = importlib.import_module("nsysan.simulate")
    except ImportError:
        simulate = None
    if simulate is None or not hasattr(simulate, "generate"):
        pytest.skip("nsysan.simulate.generate is not available yet (another module's work)")
    from nsysan.analyze.busy import measure_busy
    from nsysan.settings import Settings
    from nsysan.window import resolve_windows

    out = tmp_path / "comm-bound.sqlite"
    simulate.generate("comm-bound", out, seed=0)
    trace = load_trace([out])
    settings_ = Settings()
    busy = measure_busy(trace, settings_)
    r = measure_nccl(
        trace.kernels, busy.intervals, resolve_windows(trace, settings_.window, settings_.busy_mode)
    )
    assert r.per_gpu.height == 8
    assert r.nccl_busy_share is not None and r.nccl_busy_share > 0.3
    assert "AllReduce" in r.per_collective["collective"].to_list()
