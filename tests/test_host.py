"""Host-side attribution of gap time: hand-built traces, a brute-force reference, real exports."""

from __future__ import annotations

import functools
import random
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import polars.selectors as cs
import pytest
from conftest import REPO, cori_rank_files, single_file_traces, with_string_names
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

import nsysan
from nsysan import model
from nsysan.analyze import host as host_module
from nsysan.analyze import host_launch
from nsysan.analyze.busy import measure_busy
from nsysan.analyze.gaps import measure_gaps
from nsysan.analyze.host import (
    LEAN_GAP_COLUMNS,
    HostResult,
    attribute_gaps,
)
from nsysan.analyze.host_causes import (
    BLOCKING_OS_CALLS,
    CAUSE_LABELS,
    CAUSES,
    CUDA_SYNC_APIS,
    HOST_CAUSES,
    HOST_TABLES,
    NVTX_CROSSING,
    NVTX_NO_TEXT,
    unavailable_causes,
)
from nsysan.analyze.host_gil import (
    GIL_KEYS,
    GIL_LONG_WAIT_NS,
    GIL_MIN_SHARE,
    GIL_MIN_WAITS,
    GIL_SWITCH_INTERVAL_NS,
    GIL_TOLERANCE_NS,
    GIL_WAIT_CALLS,
)
from nsysan.analyze.host_launch import KIND_ORDER
from nsysan.analyze.host_sums import long_shares, nvtx_table, per_gpu_sums
from nsysan.analyze.host_tables import THREAD_KEYS, THREAD_NUMBER
from nsysan.analyze.host_timeline import descheduled_intervals, host_segments
from nsysan.settings import BusyMode, Settings

PID = 100
TID = 100


def _table(
    rows: Iterable[Mapping[str, Any]] | pl.DataFrame, schema: model.Schema, **defaults: Any
) -> pl.DataFrame:
    if isinstance(rows, pl.DataFrame):
        fill = [pl.lit(v).alias(k) for k, v in defaults.items() if k not in rows.columns]
        return model.conform(rows.with_columns(fill), schema)
    filled = [{**defaults, **r} for r in rows]
    if not filled:
        return model.empty_frame(schema)
    return model.conform(pl.DataFrame(filled), schema)


Rows = Iterable[Mapping[str, Any]] | pl.DataFrame


def make_trace(
    kernels: Rows = (),
    cuda_api: Rows = (),
    osrt: Rows = (),
    sched: Rows = (),
    nvtx: Rows = (),
    memcpy: Rows = (),
    absent: Iterable[str] = (),
) -> model.Trace:
    """A Trace from a few rows per table; ``absent`` tables are reported missing even if empty.

    Tables left empty but not in ``absent`` count as present (traced, no events).
    """
    op = {"source": 0, "pid": PID, "gpu": 0, "device_id": 0, "context_id": 1, "stream_id": 7}
    thread = {"source": 0, "pid": PID, "tid": TID}
    tables = {name: model.empty_frame(schema) for name, schema in model.TABLE_SCHEMAS.items()}
    tables["kernels"] = _table(kernels, model.KERNELS, **op)
    tables["memcpy"] = _table(memcpy, model.MEMCPY, **op)
    tables["cuda_api"] = _table(cuda_api, model.CUDA_API, **thread)
    tables["osrt"] = _table(osrt, model.OSRT, **thread)
    tables["sched"] = _table(sched, model.SCHED, **thread)
    tables["nvtx"] = _table(nvtx, model.NVTX, event_type="NvtxPushPopRange", **thread)
    gpus = sorted(set(tables["kernels"]["gpu"].to_list()))
    tables["gpus"] = _table(({"gpu": g, "gpu_key": f"gpu{g}"} for g in gpus), model.GPUS)
    tables["sources"] = _table([{"source": 0, "offset_ns": 0}], model.SOURCES)
    absent = set(absent)
    present = {t: t not in absent for t in model.EVENT_TABLES}
    return model.Trace(**tables, capabilities=model.Capabilities(present=present, missing=()))


def run(trace: model.Trace, settings: Settings | None = None) -> HostResult:
    settings = settings or Settings()
    busy = measure_busy(trace, settings)
    gaps = measure_gaps(busy.intervals, busy.summary, busy.keys)
    return attribute_gaps(trace, gaps.gaps, settings, gaps.keys)


def two_kernels(corr: int = 2) -> list[dict[str, Any]]:
    """Kernel A [0, 100) and B [1000, 1100) on GPU 0: one gap [100, 1000)."""
    return [
        {"start_ns": 0, "end_ns": 100, "correlation_id": 1},
        {"start_ns": 1_000, "end_ns": 1_100, "correlation_id": corr},
    ]


def launch(
    start: int, end: int, corr: int = 2, name: str = "cudaLaunchKernel", **kw: Any
) -> dict[str, Any]:
    return {"correlation_id": corr, "start_ns": start, "end_ns": end, "name": name, **kw}


def api(start: int, end: int, name: str, **kw: Any) -> dict[str, Any]:
    return {"correlation_id": 900 + start, "start_ns": start, "end_ns": end, "name": name, **kw}


def os_call(start: int, end: int, name: str, **kw: Any) -> dict[str, Any]:
    return {"start_ns": start, "end_ns": end, "name": name, "nesting_level": 0, **kw}


def off_cpu(out: int, back: int, **kw: Any) -> list[dict[str, Any]]:
    return [
        {"time_ns": out, "is_sched_in": False, "cpu": 0, **kw},
        {"time_ns": back, "is_sched_in": True, "cpu": 0, **kw},
    ]


def rng(start: int, end: int, text: str | None, **kw: Any) -> dict[str, Any]:
    return {"start_ns": start, "end_ns": end, "text": text, **kw}


def only_gap(result: HostResult) -> dict[str, Any]:
    assert result.gaps.height == 1
    return result.gaps.row(0, named=True)


def cause_ns(row: Mapping[str, Any]) -> dict[str, int]:
    return {c: row[f"{c}_ns"] for c in CAUSES if row[f"{c}_ns"]}


# --- primary class and the time split --------------------------------------------


def test_every_cause_and_precedence_in_one_gap() -> None:
    trace = make_trace(
        kernels=two_kernels(),
        cuda_api=[
            launch(-50, -40, corr=1),
            launch(900, 950),
            api(50, 300, "cudaStreamSynchronize_v3020"),
            api(480, 520, "cudaMalloc"),
        ],
        osrt=[os_call(250, 500, "pthread_mutex_lock"), os_call(510, 560, "write")],
        sched=off_cpu(450, 700),
        nvtx=[rng(600, 850, "tokenizer")],
    )
    row = only_gap(run(trace))
    assert row["primary"] == "launched_late"
    assert (row["source"], row["pid"], row["tid"]) == (0, PID, TID)
    assert (row["next_kind"], row["next_correlation_id"], row["launch_name"]) == (
        "kernel",
        2,
        "cudaLaunchKernel",
    )
    # sync [100,300) > mutex [300,500) > cudaMalloc [500,520) > write [520,560)
    # > off CPU [560,700) > tokenizer [700,850) > nothing [850,900); then the launch call
    # [900,950) and the queued kernel [950,1000).
    assert cause_ns(row) == {
        "cuda_sync": 200,
        "blocking_os": 200,
        "cuda_api": 20,
        "os_call": 40,
        "descheduled": 140,
        "nvtx": 150,
        "unattributed": 50,
        "launch_call": 50,
        "gpu_wait": 50,
    }
    assert row["cause"] == "cuda_sync"  # ties go to the earlier cause in CAUSES
    assert row["nvtx_text"] == "tokenizer"


@pytest.mark.parametrize("detail", [True, False])
def test_causes_of_a_host_portion_longer_than_32_bits_of_nanoseconds(detail: bool) -> None:
    # A host portion's causes are held in 32 bits where the longest portion fits (most
    # traces); a longer one (here 3 s in a synchronizing call) keeps 64.
    second = 1_000_000_000
    trace = make_trace(
        kernels=[
            {"start_ns": 0, "end_ns": 100, "correlation_id": 1},
            {"start_ns": 4 * second, "end_ns": 4 * second + 100, "correlation_id": 2},
        ],
        cuda_api=[
            api(100, 3 * second + 100, "cudaDeviceSynchronize"),
            launch(4 * second - 50, 4 * second - 10),
        ],
    )
    busy = measure_busy(trace, Settings())
    gaps = measure_gaps(busy.intervals, busy.summary, busy.keys)
    steady = pl.DataFrame({"gpu": [0], "steady_start_ns": [0]})
    result = attribute_gaps(
        trace, gaps.gaps, Settings(), gaps.keys, per_gap_detail=detail, steady_starts=lambda: steady
    )
    row = only_gap(result)
    assert row["cuda_sync_ns"] == 3 * second
    expected = {"cuda_sync": 3 * second, "unattributed": second - 150, "launch_call": 40}
    assert expected == {c: result.per_gpu[f"{c}_ns"][0] for c in expected}
    assert result.per_gpu["gpu_wait_ns"][0] == 10
    assert result.steady is not None
    assert result.steady["cuda_sync_ns"].to_list() == [3 * second]
    assert result.steady["gap_ns"].to_list() == [4 * second - 100]


@pytest.mark.parametrize(("big", "packed"), [(2**20, True), (2**45, False)])
def test_ids_too_wide_to_pack_give_the_same_attribution(
    big: int, packed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Look-ups pack (source, pid, id) and (source, pid, tid) into one integer when they
    # fit in 62 bits; wider ids take the join path. Both must agree. Process and thread
    # ids are nsys's 24-bit fields (Int32 in the model); correlation ids can be wider.
    def trace(pid: int, tid: int, corr: int) -> model.Trace:
        who = {"pid": pid, "tid": tid}
        kernels = [
            {"start_ns": 0, "end_ns": 100, "correlation_id": corr + 1, "pid": pid},
            {"start_ns": 1_000, "end_ns": 1_100, "correlation_id": corr + 2, "pid": pid},
            {"start_ns": 1_000, "end_ns": 1_050, "correlation_id": corr + 3, "pid": pid},
            {"start_ns": 2_000, "end_ns": 2_100, "correlation_id": corr + 4, "pid": pid},
        ]
        calls = [
            launch(-50, -40, corr=corr + 1, **who),
            launch(900, 950, corr=corr + 2, **who),
            launch(890, 960, corr=corr + 2, **who),
            launch(10, 20, corr=corr + 3, **who),
            launch(1_500, 1_600, corr=corr + 4, **who),
            api(1_200, 1_400, "cudaStreamSynchronize", **who),
        ]
        return make_trace(
            kernels=kernels,
            cuda_api=calls,
            osrt=[os_call(250, 500, "pthread_mutex_lock", **who)],
            sched=off_cpu(450, 700, **who),
            nvtx=[rng(600, 850, "tokenizer", **who)],
        )

    ids = ["pid", "tid", "next_correlation_id"]
    small = run(trace(PID, TID, 0))
    unpacked = []
    original = host_launch._launch_of_unpacked
    monkeypatch.setattr(
        host_launch,
        "_launch_of_unpacked",
        lambda *a: unpacked.append(1) or original(*a),  # type: ignore[func-returns-value]
    )
    pid = min(big, 2**24 - 2)
    wide = run(trace(pid, pid + 1, big))
    assert bool(unpacked) is not packed
    assert wide.gaps["pid"].unique().to_list() == [pid]
    assert wide.gaps["next_correlation_id"].drop_nulls().min() > big
    assert_frame_equal(small.gaps.drop(ids), wide.gaps.drop(ids))
    assert_frame_equal(small.per_gpu, wide.per_gpu)
    assert_frame_equal(small.nvtx, wide.nvtx)
    assert small.per_gpu["cuda_sync_ns"].item() > 0 and small.per_gpu["nvtx_ns"].item() > 0


def test_work_queued_before_the_gap_is_a_gpu_side_wait() -> None:
    trace = make_trace(kernels=two_kernels(), cuda_api=[launch(10, 20)])
    row = only_gap(run(trace))
    assert row["primary"] == "gpu_wait"
    assert cause_ns(row) == {"gpu_wait": 900}
    assert row["cause"] == "gpu_wait"


def test_launch_call_in_flight_when_the_gap_begins() -> None:
    row = only_gap(run(make_trace(kernels=two_kernels(), cuda_api=[launch(90, 150)])))
    assert row["primary"] == "gpu_wait"  # the call started before the gap
    assert cause_ns(row) == {"launch_call": 50, "gpu_wait": 850}


def test_launch_ending_after_the_kernel_started() -> None:
    row = only_gap(run(make_trace(kernels=two_kernels(), cuda_api=[launch(400, 1_050)])))
    assert row["primary"] == "launched_late"
    assert cause_ns(row) == {"unattributed": 300, "launch_call": 600}


def test_slack_only_moves_the_label() -> None:
    trace = make_trace(kernels=two_kernels(), cuda_api=[launch(95, 99)])
    strict = only_gap(run(trace))
    slack = only_gap(run(trace, Settings(launch_slack_ns=10)))
    assert strict["primary"] == "gpu_wait"
    assert slack["primary"] == "launched_late"
    assert cause_ns(strict) == cause_ns(slack) == {"gpu_wait": 900}


def test_no_launch_record() -> None:
    row = only_gap(run(make_trace(kernels=two_kernels(corr=7), cuda_api=[launch(400, 450)])))
    assert row["primary"] == "no_launch_record"
    assert row["tid"] is None and row["next_correlation_id"] == 7
    assert cause_ns(row) == {"no_launch_record": 900}


def test_gap_not_ended_by_an_operation_has_no_launch_record() -> None:
    trace = make_trace(kernels=two_kernels(), cuda_api=[launch(400, 450)])
    gaps = pl.DataFrame({"gpu": [0], "start_ns": [1_100], "end_ns": [1_500]}).cast(
        {"gpu": pl.Int32, "start_ns": pl.Int64, "end_ns": pl.Int64}
    )
    row = only_gap(attribute_gaps(trace, gaps))
    assert row["primary"] == "no_launch_record" and row["next_kind"] is None
    assert cause_ns(row) == {"no_launch_record": 400}


def test_duplicate_api_rows_use_the_earliest_call() -> None:
    # Some exports hold the runtime call twice under one correlation id (T002).
    trace = make_trace(kernels=two_kernels(), cuda_api=[launch(500, 520), launch(480, 530)])
    row = only_gap(run(trace))
    assert (row["launch_start_ns"], row["launch_end_ns"]) == (480, 530)


def test_identical_api_rows_use_the_first_in_the_table() -> None:
    calls = [launch(480, 530, tid=7), launch(480, 530, tid=8, name="cuLaunchKernel")]
    row = only_gap(run(make_trace(kernels=two_kernels(), cuda_api=calls)))
    assert (row["tid"], row["launch_name"]) == (7, "cudaLaunchKernel")


def test_tied_next_operations_pick_the_smallest_correlation_id() -> None:
    kernels = [
        {"start_ns": 0, "end_ns": 100, "correlation_id": 1},
        {"start_ns": 1_000, "end_ns": 1_100, "correlation_id": 5, "stream_id": 8},
        {"start_ns": 1_000, "end_ns": 1_050, "correlation_id": 3},
    ]
    trace = make_trace(kernels=kernels, cuda_api=[launch(10, 20, corr=5), launch(600, 700, corr=3)])
    row = only_gap(run(trace))
    assert row["next_correlation_id"] == 3 and row["primary"] == "launched_late"


def test_a_kernel_ends_the_gap_before_a_memcpy_starting_with_it() -> None:
    trace = make_trace(
        kernels=two_kernels(corr=5),
        memcpy=[{"start_ns": 1_000, "end_ns": 1_010, "correlation_id": 4, "copy_kind": "HtoD"}],
        cuda_api=[launch(10, 20, corr=4, name="cudaMemcpyAsync"), launch(600, 610, corr=5)],
    )
    for mode in ("kernels", "nvidia"):
        gaps = pl.DataFrame({"gpu": [0], "start_ns": [100], "end_ns": [1_000]}).cast(
            {"gpu": pl.Int32, "start_ns": pl.Int64, "end_ns": pl.Int64}
        )
        row = only_gap(attribute_gaps(trace, gaps, Settings(busy_mode=mode)))
        assert (row["next_kind"], row["next_correlation_id"], row["primary"]) == (
            "kernel",
            5,
            "launched_late",
        )


def test_nvidia_mode_gaps_per_process_device_end_at_a_memcpy() -> None:
    trace = make_trace(
        # nvidia mode drops operations that start at 0 in the file's clock.
        kernels=[{"start_ns": 10, "end_ns": 100, "correlation_id": 1}],
        memcpy=[{"start_ns": 1_000, "end_ns": 1_100, "correlation_id": 2, "copy_kind": "HtoD"}],
        cuda_api=[launch(700, 750, name="cudaMemcpyAsync")],
    )
    result = run(trace, Settings(busy_mode="nvidia"))
    row = only_gap(result)
    assert (row["source"], row["pid"], row["device_id"], row["gpu"]) == (0, PID, 0, 0)
    assert row["next_kind"] == "memcpy" and row["primary"] == "launched_late"
    assert cause_ns(row) == {"unattributed": 600, "launch_call": 50, "gpu_wait": 250}


def test_one_thread_feeding_two_gpus() -> None:
    kernels = [
        {"gpu": 0, "start_ns": 0, "end_ns": 100, "correlation_id": 1},
        {"gpu": 0, "start_ns": 1_000, "end_ns": 1_100, "correlation_id": 2},
        {"gpu": 1, "device_id": 1, "start_ns": 0, "end_ns": 300, "correlation_id": 3},
        {"gpu": 1, "device_id": 1, "start_ns": 800, "end_ns": 900, "correlation_id": 4},
    ]
    trace = make_trace(
        kernels=kernels,
        cuda_api=[launch(950, 960, corr=2), launch(700, 710, corr=4)],
        nvtx=[rng(200, 600, "sampling")],
    )
    result = run(trace)
    by_gpu = {r["gpu"]: cause_ns(r) for r in result.gaps.iter_rows(named=True)}
    # GPU 0 waits while the thread launches GPU 1's kernel at [700, 710).
    assert by_gpu[0] == {
        "cuda_api": 10,
        "nvtx": 400,
        "unattributed": 440,
        "launch_call": 10,
        "gpu_wait": 40,
    }
    assert by_gpu[1] == {"nvtx": 300, "unattributed": 100, "launch_call": 10, "gpu_wait": 90}
    assert result.nvtx.select("gpu", "text", "nvtx_ns").rows() == [
        (0, "sampling", 400),
        (1, "sampling", 300),
    ]


def test_empty_gap_table() -> None:
    trace = make_trace(kernels=[{"start_ns": 0, "end_ns": 100, "correlation_id": 1}])
    result = run(trace)
    assert result.gaps.is_empty() and result.nvtx.is_empty()
    assert result.per_gpu.row(0, named=True)["gap_ns"] == 0
    assert result.per_gpu.row(0, named=True)["gpu_wait_share"] is None


# --- GIL signature --------------------------------------------------------------


def gil_waits(start: int, count: int, last_ns: int, tid: int = TID) -> list[dict[str, Any]]:
    """``count`` timed-out 5 ms waits then one woken after ``last_ns``, 1 µs apart."""
    rows, t = [], start
    for _ in range(count):
        rows.append(
            os_call(t, t + GIL_SWITCH_INTERVAL_NS + 60_000, "pthread_cond_timedwait", tid=tid)
        )
        t += GIL_SWITCH_INTERVAL_NS + 61_000
    rows.append(os_call(t, t + last_ns, "pthread_cond_timedwait", tid=tid))
    return rows


def gil_trace(waits: list[dict[str, Any]]) -> model.Trace:
    end = max(w["end_ns"] for w in waits) + 10_000
    kernels = [
        {"start_ns": 0, "end_ns": 100, "correlation_id": 1},
        {"start_ns": end + 5_000, "end_ns": end + 6_000, "correlation_id": 2},
    ]
    return make_trace(
        kernels=kernels,
        cuda_api=[launch(end, end + 3_000)],
        nvtx=[rng(100, end, "tokenizer")],
        osrt=waits,
    )


def test_repeated_switch_interval_waits_are_the_gil_signature() -> None:
    waits = gil_waits(1_000, 3, 2_000_000)
    result = run(gil_trace(waits))
    row = only_gap(result)
    gil_ns = sum(w["end_ns"] - w["start_ns"] for w in waits)
    assert row["gil_wait_ns"] == gil_ns  # the woken last wait is part of it
    assert row["blocking_os_ns"] == 0
    assert row["cause"] == "gil_wait" and row["nvtx_text"] == "tokenizer"
    assert result.gil_threads.select("tid", "call", "gil_waits").rows() == [
        (TID, "pthread_cond_timedwait", 3)
    ]
    nvtx = result.nvtx.row(0, named=True)
    assert nvtx["covered_ns"] > nvtx["nvtx_ns"] > 0  # the waits outrank the range


def test_too_few_switch_interval_waits_are_plain_blocking_calls() -> None:
    row = only_gap(run(gil_trace(gil_waits(1_000, 2, 2_000_000))))
    assert row["gil_wait_ns"] == 0 and row["blocking_os_ns"] > 0


def test_waits_of_many_lengths_are_no_signature() -> None:
    waits = gil_waits(1_000, 3, 100)
    t = waits[-1]["end_ns"] + 1_000
    for i in range(6):  # 20, 30, ... 70 ms: long waits that are not slices
        waits.append(os_call(t, t + (i + 2) * 10_000_000, "pthread_cond_timedwait"))
        t = waits[-1]["end_ns"] + 1_000
    row = only_gap(run(gil_trace(waits)))
    assert row["gil_wait_ns"] == 0


# --- innermost NVTX text --------------------------------------------------------


def test_innermost_range_names_the_time() -> None:
    trace = make_trace(
        kernels=two_kernels(),
        cuda_api=[launch(900, 910)],
        nvtx=[
            rng(50, 950, "step"),
            rng(200, 400, "tokenizer"),
            rng(250, 300, "encode"),
            rng(500, 600, "sampling"),
        ],
    )
    result = run(trace)
    assert result.nvtx.select("text", "nvtx_ns").rows() == [
        ("step", 500),
        ("tokenizer", 150),
        ("sampling", 100),
        ("encode", 50),
    ]
    assert only_gap(result)["nvtx_text"] == "step"


def test_unclosed_pushes_nest() -> None:
    # T053 pushes "test" 1000 times and never pops: every range ends at the trace end.
    ranges = [rng(100 + 10 * i, 5_000, "test") for i in range(50)] + [rng(700, 800, "inner")]
    trace = make_trace(kernels=two_kernels(), cuda_api=[launch(900, 910)], nvtx=ranges)
    assert run(trace).nvtx.select("text", "nvtx_ns").rows() == [("test", 700), ("inner", 100)]


def test_crossing_ranges_are_marked() -> None:
    trace = make_trace(
        kernels=two_kernels(),
        cuda_api=[launch(900, 910)],
        nvtx=[
            rng(100, 500, "a", event_type="NvtxStartEndRange"),
            rng(300, 800, "b", event_type="NvtxStartEndRange"),
        ],
    )
    assert dict(run(trace).nvtx.select("text", "nvtx_ns").rows()) == {"a": 200, "b": 500}


def test_unresolvable_crossing_ranges_are_marked() -> None:
    # After 500 only "c" is open, but neither the nesting depth nor the most recent
    # start ("b", closed) finds it.
    se = {"event_type": "NvtxStartEndRange"}
    trace = make_trace(
        kernels=two_kernels(),
        cuda_api=[launch(900, 910)],
        nvtx=[rng(100, 500, "a", **se), rng(150, 800, "c", **se), rng(200, 300, "b", **se)],
    )
    texts = dict(run(trace).nvtx.select("text", "nvtx_ns").rows())
    assert texts == {"a": 50, "c": 250, "b": 100, NVTX_CROSSING: 300}


def test_other_threads_do_not_count() -> None:
    trace = make_trace(
        kernels=two_kernels(),
        cuda_api=[launch(900, 910), api(100, 900, "cudaDeviceSynchronize", tid=7)],
        nvtx=[rng(100, 900, "tokenizer", tid=7)],
        osrt=[os_call(100, 900, "futex", tid=7)],
        sched=off_cpu(100, 900, tid=7),
    )
    assert cause_ns(only_gap(run(trace))) == {
        "unattributed": 800,
        "launch_call": 10,
        "gpu_wait": 90,
    }


def test_host_segments_cut_the_feeding_thread_at_every_edge() -> None:
    trace = make_trace(
        cuda_api=[api(50, 300, "cudaStreamSynchronize"), api(480, 520, "cudaMalloc")],
        osrt=[os_call(250, 500, "pthread_mutex_lock"), os_call(510, 560, "write")],
        sched=off_cpu(450, 700),
        nvtx=[rng(600, 850, "tokenizer")],
    )
    thread = trace.cuda_api.select(THREAD_KEYS).unique().with_row_index(THREAD_NUMBER)
    segments = host_segments(trace, thread)
    assert segments.drop(THREAD_NUMBER).rows() == [
        (50, 250, "cuda_sync", None),
        (250, 300, "cuda_sync", None),
        (300, 450, "blocking_os", None),
        (450, 480, "blocking_os", None),
        (480, 500, "blocking_os", None),
        (500, 510, "cuda_api", None),
        (510, 520, "cuda_api", None),
        (520, 560, "os_call", None),
        (560, 600, "descheduled", None),
        (600, 700, "descheduled", "tokenizer"),
        (700, 850, "nvtx", "tokenizer"),
    ]


def test_descheduled_intervals_pair_out_with_next_in() -> None:
    sched = _table(
        [
            {"time_ns": 0, "is_sched_in": True},
            {"time_ns": 10, "is_sched_in": False},
            {"time_ns": 30, "is_sched_in": True},
            {"time_ns": 40, "is_sched_in": False},
            {"time_ns": 45, "is_sched_in": False},
            {"time_ns": 60, "is_sched_in": True},
            {"time_ns": 70, "is_sched_in": False},
        ],
        model.SCHED,
        source=0,
        pid=PID,
        tid=TID,
        cpu=0,
    )
    got = descheduled_intervals(sched).select("start_ns", "end_ns").rows()
    assert got == [(10, 30), (45, 60)]


# --- missing tables -------------------------------------------------------------


def test_missing_tables_are_unavailable_and_never_guessed() -> None:
    trace = make_trace(
        kernels=two_kernels(),
        cuda_api=[launch(900, 950), api(100, 200, "cudaStreamSynchronize")],
        nvtx=[rng(300, 400, "tokenizer")],
        absent=("osrt", "sched"),
    )
    result = run(trace)
    assert set(result.unavailable_causes) == {"gil_wait", "blocking_os", "os_call", "descheduled"}
    assert any("no OS runtime trace" in u for u in result.unavailable)
    assert any("no thread scheduling events" in u for u in result.unavailable)
    assert cause_ns(only_gap(result)) == {
        "cuda_sync": 100,
        "nvtx": 100,
        "unattributed_no_data": 600,
        "launch_call": 50,
        "gpu_wait": 50,
    }


def test_traced_but_empty_tables_leave_plain_unattributed() -> None:
    row = only_gap(run(make_trace(kernels=two_kernels(), cuda_api=[launch(900, 950)])))
    assert row["unattributed_ns"] == 800 and row["unattributed_no_data_ns"] == 0


def test_without_cuda_api_nothing_is_known() -> None:
    trace = make_trace(
        kernels=two_kernels(),
        nvtx=[rng(100, 900, "tokenizer")],
        absent=("cuda_api",),
    )
    result = run(trace)
    row = only_gap(result)
    assert row["primary"] == "no_data"
    assert cause_ns(row) == {"unattributed_no_data": 900}
    assert {"cuda_sync", "cuda_api", "launch_call", "gpu_wait"} <= set(result.unavailable_causes)
    assert result.per_gpu.row(0, named=True)["unattributed_no_data_share"] == 1.0


# --- brute-force reference ------------------------------------------------------

_LAYER_ROWS = {
    "cuda_sync": ("cuda_api", "cudaDeviceSynchronize"),
    "cuda_api": ("cuda_api", "cudaMalloc"),
    "blocking_os": ("osrt", "sem_wait"),
    "os_call": ("osrt", "read"),
    "nvtx": ("nvtx", "phase"),
}

spans = st.lists(
    st.tuples(st.integers(0, 400), st.integers(1, 200)).map(lambda t: (t[0], t[0] + t[1])),
    max_size=4,
)


@hsettings(max_examples=40, deadline=None)
@given(
    layers=st.fixed_dictionaries({k: spans for k in _LAYER_ROWS}),
    off=st.lists(st.integers(0, 600), max_size=8, unique=True),
    launch_at=st.tuples(st.integers(0, 500), st.integers(0, 200)),
)
def test_matches_instant_by_instant_reference(
    layers: dict[str, list[tuple[int, int]]],
    off: list[int],
    launch_at: tuple[int, int],
) -> None:
    # Gap [100, 500) between kernels; the launch call [L, L + d).
    kernels = [
        {"start_ns": 0, "end_ns": 100, "correlation_id": 1},
        {"start_ns": 500, "end_ns": 600, "correlation_id": 2},
    ]
    lo, dur = launch_at
    rows: dict[str, list[dict[str, Any]]] = {
        "cuda_api": [launch(lo, lo + dur)],
        "osrt": [],
        "nvtx": [],
    }
    for cause, (table, name) in _LAYER_ROWS.items():
        for s, e in layers[cause]:
            row = {"start_ns": s, "end_ns": e, "name": name, "text": name}
            if table == "cuda_api":
                row["correlation_id"] = 10_000 + len(rows["cuda_api"])
            rows[table].append(row)
    times = sorted(off)
    outs = list(zip(times[::2], times[1::2], strict=False))
    sched = [r for o, i in outs for r in off_cpu(o, i)]
    trace = make_trace(kernels=kernels, sched=sched, **rows)
    got = cause_ns(only_gap(run(trace)))

    covering = {c: layers.get(c, []) for c in HOST_CAUSES}
    covering["descheduled"] = outs
    expected: dict[str, int] = {}
    for t in range(100, 500):
        if t < lo:
            cause = next(
                (c for c in HOST_CAUSES if any(s <= t < e for s, e in covering[c])), "unattributed"
            )
        elif t < lo + dur:
            cause = "launch_call"
        else:
            cause = "gpu_wait"
        expected[cause] = expected.get(cause, 0) + 1
    assert got == expected


# --- scale ----------------------------------------------------------------------


def test_many_gaps_without_python_loops() -> None:
    n = 50_000
    starts = pl.int_range(0, n, eager=True) * 1_000
    kernels = pl.DataFrame(
        {
            "start_ns": starts,
            "end_ns": starts + 400,
            "correlation_id": pl.int_range(1, n + 1, eager=True),
        }
    )
    trace = make_trace(
        kernels=kernels,
        cuda_api=kernels.select(
            "correlation_id",
            (pl.col("start_ns") - 300).alias("start_ns"),
            (pl.col("start_ns") - 200).alias("end_ns"),
            pl.lit("cudaLaunchKernel").alias("name"),
        ),
        nvtx=kernels.select(
            (pl.col("start_ns") - 550).alias("start_ns"),
            (pl.col("start_ns") - 350).alias("end_ns"),
            pl.lit("sampling").alias("text"),
        ),
    )
    result = run(trace)
    assert result.gaps.height == n - 1
    per_gpu = result.per_gpu.row(0, named=True)
    # Per gap [400, 1000): 50 unattributed, 200 sampling, 50 more, 100 launch, 200 queued.
    assert per_gpu["nvtx_ns"] == 200 * (n - 1)
    assert per_gpu["unattributed_ns"] == 100 * (n - 1)
    assert per_gpu["launch_call_ns"] == 100 * (n - 1)
    assert per_gpu["gpu_wait_ns"] == 200 * (n - 1)


# --- real exports ---------------------------------------------------------------

_CAUSE_TABLES = {
    "cuda_api": {"cuda_sync", "cuda_api", "launch_call", "gpu_wait"},
    "osrt": {"gil_wait", "blocking_os", "os_call"},
    "sched": {"descheduled"},
    "nvtx": {"nvtx"},
}


@functools.cache
def real(path: Path) -> tuple[model.Trace, HostResult]:
    trace = nsysan.load_trace([path])
    return trace, run(trace)


def _with_kernels() -> list[Path]:
    return [p for p in single_file_traces() if p.parent.name not in _NO_KERNELS]


# Folders whose exports hold no kernel rows (traces/INDEX.tsv).
_NO_KERNELS = {"T010-alpa", "T019-cardiac-simulation", "T078-qcu", "T082-jacc-jl", "T128-uvmtorch"}


@pytest.mark.shared
@pytest.mark.parametrize("path", _with_kernels(), ids=lambda p: p.parent.name)
def test_real_trace_invariants(path: Path) -> None:
    trace, result = real(path)
    gaps = result.gaps
    assert gaps.select(pl.sum_horizontal(f"{c}_ns" for c in CAUSES)).to_series().to_list() == (
        gaps["duration_ns"].to_list()
    )
    with_gaps = result.per_gpu.filter(pl.col("gap_ns") > 0)
    totals = with_gaps.select(pl.sum_horizontal(f"{c}_share" for c in CAUSES)).to_series()
    assert totals.to_list() == pytest.approx([1.0] * with_gaps.height)
    expected = set().union(
        *(causes for table, causes in _CAUSE_TABLES.items() if not trace.capabilities.has(table))
    )
    assert set(result.unavailable_causes) == expected
    for table, causes in _CAUSE_TABLES.items():
        if not trace.capabilities.has(table):
            assert (
                gaps.select(pl.sum_horizontal(f"{c}_ns" for c in causes)).to_series() == 0
            ).all()


def _shared(name: str) -> Path:
    path = single_file_traces()[0].parent.parent / name / "trace.sqlite"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    return path


@pytest.mark.shared
def test_t001_cloverleaf_waits_in_sync_and_file_writes() -> None:
    # Checked by hand on the gap [542648423, 543796740): cudaDeviceSynchronize returns
    # 1997 ns in; fflush (5630 ns) and five write() calls (1083718 ns) follow, during
    # which the thread is off CPU ten times (all inside the calls, so no "descheduled");
    # launch call [543785417, 543796157), kernel at 543796740. No NVTX in the trace, so
    # the 45649 ns left are "no data".
    _, result = real(_shared("T001-pipit"))
    row = result.gaps.filter(pl.col("start_ns") == 542_648_423).row(0, named=True)
    assert cause_ns(row) == {
        "cuda_sync": 1_997,
        "os_call": 1_089_348,
        "unattributed_no_data": 45_649,
        "launch_call": 10_740,
        "gpu_wait": 583,
    }
    gpu = result.per_gpu.row(0, named=True)
    assert (gpu["gap_count"], gpu["gap_ns"], gpu["launched_late_count"]) == (
        1_311,
        47_936_167,
        1_311,
    )
    assert (gpu["cuda_sync_ns"], gpu["os_call_ns"], gpu["gpu_wait_ns"]) == (
        20_534_298,
        12_520_246,
        4_653_535,
    )
    assert gpu["dominant_cause"] == "cuda_sync"
    assert result.unavailable_causes == ("nvtx",)


@pytest.mark.shared
def test_t028_back_to_back_launches_queue_ahead() -> None:
    # A benchmark loop: every kernel was launched before the previous one ended, so
    # the ~1.7 µs gaps are GPU-side, apart from one launch call still running.
    _, result = real(_shared("T028-nsight-systems-deep-dive"))
    gpu = result.per_gpu.row(0, named=True)
    assert (gpu["gap_count"], gpu["gpu_wait_count"]) == (1_009, 1_009)
    assert (gpu["gpu_wait_ns"], gpu["launch_call_ns"]) == (1_673_754, 53_645)


@pytest.mark.shared
def test_t053_nvfuser_gaps_are_jit_compilation() -> None:
    _, result = real(_shared("T053-profiling"))
    gpu = result.per_gpu.row(0, named=True)
    assert gpu["dominant_cause"] == "nvtx" and gpu["nvtx_share"] > 0.9
    assert result.unavailable_causes == ("descheduled",)
    top = result.nvtx.row(0, named=True)
    assert top["text"].startswith("executor_utils::Nvrtc::Compile")
    # The one CompileProgram range [3228828206, 3379280078) has no child range; seven
    # signal() calls inside it (18665 ns) outrank it.
    assert (top["covered_ns"], top["nvtx_ns"]) == (150_451_872, 150_433_207)
    longest = result.gaps.sort("duration_ns", descending=True).row(0, named=True)
    assert longest["launch_name"] == "cuLaunchKernel"
    assert longest["cuda_api_ns"] == 287_957  # cuModuleLoadDataEx, 3379468283..3379756240


# --- the case-study simulation ---------------------------------------------------


def test_case_study_simulation_is_host_bound_with_the_gil_signature(tmp_path: Path) -> None:
    simulate = pytest.importorskip("nsysan.simulate")
    generate = getattr(simulate, "generate", None)
    if generate is None:
        pytest.skip("nsysan.simulate.generate is not there yet (another helper is writing it)")
    out = tmp_path / "case-study.sqlite"
    truth = generate("case-study", out, seed=0, scale=0.25)
    result = run(nsysan.load_trace([out]))
    assert result.per_gpu.height == 4
    nvtx = {(g, t): ns for g, t, ns in result.nvtx.select("gpu", "text", "nvtx_ns").rows()}
    for gpu in result.per_gpu.iter_rows(named=True):
        expected = truth.gpu(gpu["gpu"]).extra
        assert gpu["host_share"] > 0.95
        assert gpu["dominant_cause"] in ("gil_wait", "nvtx")
        # The generator's own accounting: its GIL waits and NVTX ranges over the gaps.
        assert gpu["gil_wait_share"] == pytest.approx(expected["gil_wait_share"], abs=0.01)
        for text in ("tokenizer", "sampling"):
            share = nvtx[(gpu["gpu"], text)] / gpu["gap_ns"]
            assert share == pytest.approx(expected[f"{text}_share"], abs=0.01)
    assert result.gil_threads.height == 4


# --- the rewrite for speed against the previous implementation --------------------
# attribute_gaps was rewritten for speed (sorted look-ups with as-of joins, running
# totals instead of an interval join per cause). The previous version, kept below
# verbatim but for names and docstrings, must give the same result on every trace.


def both(trace: model.Trace, mode: BusyMode) -> tuple[HostResult, HostResult]:
    """The result of ``attribute_gaps`` and of the previous implementation."""
    settings = Settings(busy_mode=mode)
    busy = measure_busy(trace, settings)
    gaps = measure_gaps(busy.intervals, busy.summary, busy.keys)
    return (
        attribute_gaps(trace, gaps.gaps, settings, gaps.keys),
        ref_attribute_gaps(with_string_names(trace), gaps.gaps, settings, gaps.keys),
    )


def assert_same_result(new: HostResult, old: HostResult) -> None:
    # The per-gap labels became Enums, and names categoricals, after the previous
    # implementation.
    labels = cs.enum() | cs.categorical()
    assert_frame_equal(new.gaps.with_columns(labels.cast(pl.String)), old.gaps)
    assert_frame_equal(new.per_gpu, old.per_gpu)
    assert_frame_equal(new.shares, old.shares)
    assert_frame_equal(new.nvtx, old.nvtx)
    assert_frame_equal(new.gil_threads, old.gil_threads)
    assert new.unavailable == old.unavailable
    assert new.unavailable_causes == old.unavailable_causes


def busy_host(seed: int) -> model.Trace:
    """Two processes, three threads feeding two GPUs, with every kind of host interval."""
    r = random.Random(seed)
    threads = [(100, 100), (100, 101), (200, 200)]
    kernels: list[dict[str, Any]] = []
    memcpy: list[dict[str, Any]] = []
    cuda_api: list[dict[str, Any]] = []
    corr = {100: 0, 200: 0}
    for gpu in (0, 1):
        start = 1_000
        for _ in range(150):
            pid, tid = r.choice(threads)
            corr[pid] += 1
            duration = r.randint(1_000, 40_000)
            op = {"gpu": gpu, "device_id": gpu, "pid": pid, "correlation_id": corr[pid]}
            op |= {"start_ns": start, "end_ns": start + duration}
            if r.random() < 0.15:
                memcpy.append(op | {"copy_kind": "HtoD"})
            else:
                kernels.append(op)
            # Launched long before, just before or during the gap, twice, or not traced.
            for _ in range(r.choice([0, 1, 1, 1, 1, 1, 1, 2])):
                at = start - r.choice([r.randint(0, 5_000), r.randint(5_000, 2_000_000)])
                name = r.choice(["cudaLaunchKernel", "cuLaunchKernel_v2", "cudaMemcpyAsync"])
                cuda_api.append(
                    launch(at, at + r.randint(500, 20_000), corr[pid], name, pid=pid, tid=tid)
                )
            # The next operation starts with this one, right after it, or after a gap.
            start = r.choice(
                [
                    start,
                    start + duration + r.randint(1, 2_000),
                    start + duration + r.randint(2_000, 3_000_000),
                ]
            )
    end = max(op["end_ns"] for op in kernels + memcpy)

    def spans(n: int, longest: int) -> list[tuple[int, int]]:
        starts = (r.randint(0, end) for _ in range(n))
        return [(s, s + r.randint(1, longest)) for s in starts]

    osrt: list[dict[str, Any]] = []
    sched: list[dict[str, Any]] = []
    nvtx: list[dict[str, Any]] = []
    for pid, tid in threads:
        me = {"pid": pid, "tid": tid}
        for s, e in spans(40, 400_000):
            name = r.choice(["cudaStreamSynchronize_v3020", "cudaMemcpy", "cudaMalloc", "cudaFree"])
            cuda_api.append(api(s, e, name, **me))
        for s, e in spans(60, 300_000):
            name = r.choice(["pthread_mutex_lock", "poll", "futex", "write", "read@GLIBC_2.2.5"])
            osrt.append(os_call(s, e, name, nesting_level=r.choice([0, 0, 1]), **me))
        t = r.randint(0, end // 4)
        for _ in range(3 + r.randint(0, 3)):  # GIL-like waits, the last woken early
            osrt.append(
                os_call(t, t + GIL_SWITCH_INTERVAL_NS + 50_000, "pthread_cond_timedwait", **me)
            )
            t += GIL_SWITCH_INTERVAL_NS + 60_000
        osrt.append(os_call(t, t + 700_000, "pthread_cond_timedwait", **me))
        switches = sorted(r.randint(0, end) for _ in range(60))
        for i, at in enumerate(switches):
            sched.append({"time_ns": at, "is_sched_in": i % 2 == 1, "cpu": 0, **me})
        stack: list[int] = []
        t = 0
        for _ in range(40):  # push/pop ranges, properly nested, one never popped
            t += r.randint(1, 200_000)
            if stack and r.random() < 0.5:
                nvtx[stack.pop()]["end_ns"] = t
            else:
                stack.append(len(nvtx))
                nvtx.append(rng(t, end, r.choice(["step", "tokenizer", "sampling", None]), **me))
        for s, e in spans(8, 2_000_000):
            nvtx.append(rng(s, e, r.choice(["a", "b"]), event_type="NvtxStartEndRange", **me))
    return make_trace(
        kernels=kernels, memcpy=memcpy, cuda_api=cuda_api, osrt=osrt, sched=sched, nvtx=nvtx
    )


@pytest.mark.parametrize("mode", ["kernels", "nvidia"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_previous_implementation_on_a_busy_host(seed: int, mode: BusyMode) -> None:
    new, old = both(busy_host(seed), mode)
    assert new.gaps.height > 100 and new.gil_threads.height > 0
    assert_same_result(new, old)


@pytest.mark.parametrize("mode", ["kernels", "nvidia"])
@pytest.mark.parametrize("path", sorted((REPO / "fixtures").glob("*.sqlite")), ids=lambda p: p.stem)
def test_matches_previous_implementation_on_scenarios(path: Path, mode: BusyMode) -> None:
    assert_same_result(*both(nsysan.load_trace([path]), mode))


def assert_lean_is_the_full_result_in_part(trace: model.Trace, mode: BusyMode) -> None:
    settings = Settings(busy_mode=mode)
    busy = measure_busy(trace, settings)
    gaps = measure_gaps(busy.intervals, busy.summary, busy.keys)
    full = attribute_gaps(trace, gaps.gaps, settings, gaps.keys)
    lean = attribute_gaps(trace, gaps.gaps, settings, gaps.keys, per_gap_detail=False)
    assert full.gaps.height > 0
    assert_frame_equal(
        lean.gaps, full.gaps.select(list(dict.fromkeys([*gaps.keys, *LEAN_GAP_COLUMNS])))
    )
    for name in HostResult.__dataclass_fields__:
        if name != "gaps":
            a, b = getattr(full, name), getattr(lean, name)
            assert a.equals(b) if isinstance(a, pl.DataFrame) else a == b, name


@pytest.mark.parametrize("mode", ["kernels", "nvidia"])
def test_without_per_gap_detail_every_other_result_is_the_same(mode: BusyMode) -> None:
    assert_lean_is_the_full_result_in_part(busy_host(1), mode)
    for path in sorted((REPO / "fixtures").glob("*.sqlite")):
        assert_lean_is_the_full_result_in_part(nsysan.load_trace([path]), mode)


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("detail", [True, False])
def test_thread_groups_offered_to_the_pool_give_the_same_result(
    workers: int, detail: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = busy_host(2)
    settings = Settings()
    busy = measure_busy(trace, settings)
    gaps = measure_gaps(busy.intervals, busy.summary, busy.keys)
    alone = attribute_gaps(trace, gaps.gaps, settings, gaps.keys, per_gap_detail=detail)
    groups: list[int] = []
    group_time = host_module.thread_group_time

    def counted(*args: Any) -> Any:
        groups.append(1)
        return group_time(*args)

    monkeypatch.setattr(host_module, "thread_group_time", counted)
    # As analysis.py calls it: from inside one of the pool's own workers.
    with ThreadPoolExecutor(max_workers=workers) as pool:
        beside = pool.submit(
            attribute_gaps, trace, gaps.gaps, settings, gaps.keys, per_gap_detail=detail, pool=pool
        ).result(timeout=120)
    assert len(groups) >= 2  # several groups to share out
    for name in HostResult.__dataclass_fields__:
        a, b = getattr(alone, name), getattr(beside, name)
        assert a.equals(b) if isinstance(a, pl.DataFrame) else a == b, name


@pytest.mark.shared
@pytest.mark.parametrize("mode", ["kernels", "nvidia"])
@pytest.mark.parametrize(
    "paths",
    [[p] for p in single_file_traces()] + ([cori_rank_files()] if cori_rank_files() else []),
    ids=lambda ps: ps[0].parent.name,
)
def test_matches_previous_implementation_on_real_traces(paths: list[Path], mode: BusyMode) -> None:
    assert_same_result(*both(nsysan.load_trace(paths), mode))


# --- the previous implementation (the reference above) ---------------------------


def ref_base_name(name: pl.Expr) -> pl.Expr:
    return name.str.replace(r"@.*$", "").str.replace(r"(_v\d+|_pt(sz|ds))+$", "")


def ref_operations(trace: model.Trace) -> pl.DataFrame:
    cols = ["source", "pid", "device_id", "gpu", "correlation_id", "start_ns"]
    parts = [
        trace.table(table).select(*cols, pl.lit(rank, dtype=pl.Int8).alias("_kind_rank"))
        for rank, table in enumerate(("kernels", "memcpy", "memset"))
    ]
    return pl.concat(parts).drop_nulls(["gpu", "start_ns"])


def ref_next_operations(gaps: pl.DataFrame, ops: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Per gap (``_gap`` index): the operation starting exactly at the gap's end, if any."""
    first = (
        ops.sort(
            [*keys, "start_ns", "_kind_rank", "source", "pid", "correlation_id"], nulls_last=True
        )
        .unique(subset=[*keys, "start_ns"], keep="first", maintain_order=True)
        .select(
            *keys,
            pl.col("start_ns").alias("end_ns"),
            pl.col("source").alias("_op_source"),
            pl.col("pid").alias("_op_pid"),
            pl.col("correlation_id").alias("next_correlation_id"),
            pl.col("_kind_rank")
            .replace_strict(list(range(len(KIND_ORDER))), list(KIND_ORDER), return_dtype=pl.String)
            .alias("next_kind"),
        )
    )
    return (
        gaps.select("_gap", *keys, "end_ns")
        .join(first, on=[*keys, "end_ns"], how="inner")
        .select("_gap", "_op_source", "_op_pid", "next_correlation_id", "next_kind")
    )


def ref_launch_calls(cuda_api: pl.DataFrame, wanted: pl.DataFrame) -> pl.DataFrame:
    """The earliest CUDA API row per (source, pid, correlation id) in ``wanted``."""
    return (
        cuda_api.join(wanted, on=["source", "pid", "correlation_id"], how="semi")
        .drop_nulls(["start_ns", "end_ns"])
        .sort("start_ns", "end_ns")
        .unique(subset=["source", "pid", "correlation_id"], keep="first", maintain_order=True)
        .select(
            "source",
            "pid",
            "correlation_id",
            "tid",
            pl.col("name").alias("launch_name"),
            pl.col("start_ns").alias("launch_start_ns"),
            pl.col("end_ns").alias("launch_end_ns"),
        )
    )


def ref_descheduled_intervals(sched: pl.DataFrame) -> pl.DataFrame:
    """Per thread, ``[switch-out, next switch-in)``: ``source, pid, tid, start_ns, end_ns``."""
    ordered = sched.drop_nulls(["tid", "time_ns", "is_sched_in"]).sort(*THREAD_KEYS, "time_ns")
    nxt = ordered.with_columns(
        pl.col("time_ns").shift(-1).over(THREAD_KEYS).alias("_next_t"),
        pl.col("is_sched_in").shift(-1).over(THREAD_KEYS).alias("_next_in"),
    )
    return nxt.filter(~pl.col("is_sched_in") & pl.col("_next_in").fill_null(False)).select(
        *THREAD_KEYS, pl.col("time_ns").alias("start_ns"), pl.col("_next_t").alias("end_ns")
    )


def ref_gil_marked(osrt: pl.DataFrame) -> pl.DataFrame:
    """Outermost GIL-family waits with ``call`` (base name), ``_near`` and ``_long`` flags."""
    duration = pl.col("end_ns") - pl.col("start_ns")
    return (
        osrt.with_columns(ref_base_name(pl.col("name")).alias("call"))
        .filter(
            pl.col("call").is_in(list(GIL_WAIT_CALLS)) & (pl.col("nesting_level").fill_null(0) == 0)
        )
        .with_columns(
            ((duration - GIL_SWITCH_INTERVAL_NS).abs() <= GIL_TOLERANCE_NS).alias("_near"),
            (duration >= GIL_LONG_WAIT_NS).alias("_long"),
            (duration <= GIL_SWITCH_INTERVAL_NS + GIL_TOLERANCE_NS).alias("_slice"),
        )
    )


def ref_gil_threads(osrt: pl.DataFrame) -> pl.DataFrame:
    """Threads and wait calls whose durations pile up at, and stop at, the GIL switch interval."""
    duration = pl.col("end_ns") - pl.col("start_ns")
    per_call = (
        ref_gil_marked(osrt)
        .group_by(GIL_KEYS)
        .agg(
            pl.col("_near").sum().cast(pl.Int64).alias("gil_waits"),
            pl.col("_long").sum().cast(pl.Int64).alias("long_waits"),
            (pl.col("_long") & pl.col("_slice")).sum().cast(pl.Int64).alias("capped_waits"),
            duration.filter(pl.col("_slice")).sum().cast(pl.Int64).alias("gil_wait_ns"),
        )
    )
    # A thread waiting for the GIL never waits longer than one interval: the wait
    # times out and the thread asks again, so long waits stop at the interval.
    return per_call.filter(
        (pl.col("gil_waits") >= GIL_MIN_WAITS)
        & (pl.col("capped_waits") >= GIL_MIN_SHARE * pl.col("long_waits"))
    ).sort(GIL_KEYS)


def ref_positive(df: pl.DataFrame) -> pl.DataFrame:
    return df.drop_nulls(["start_ns", "end_ns"]).filter(pl.col("end_ns") > pl.col("start_ns"))


def ref_layers(trace: model.Trace, threads: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """Per host cause, the intervals of the feeding threads (``_th, start_ns, end_ns``)."""

    def own(df: pl.DataFrame) -> pl.DataFrame:
        return ref_positive(df.join(threads, on=list(THREAD_KEYS), how="inner"))

    cols = [THREAD_NUMBER, "start_ns", "end_ns"]
    api = own(trace.cuda_api).with_columns(
        ref_base_name(pl.col("name")).is_in(list(CUDA_SYNC_APIS)).alias("_sync")
    )
    osrt = own(trace.osrt).with_columns(ref_base_name(pl.col("name")).alias("_name"))
    is_blocking = pl.col("_name").is_in(list(BLOCKING_OS_CALLS))
    signature = ref_gil_threads(trace.osrt.join(threads, on=list(THREAD_KEYS), how="semi"))
    # The last wait of a GIL acquisition is woken early, so every slice-or-shorter
    # wait of the signature call counts, not only the ~5 ms ones.
    gil = (
        ref_gil_marked(osrt)
        .filter(pl.col("_slice"))
        .join(signature.select(GIL_KEYS), on=list(GIL_KEYS), how="semi")
    )
    return {
        "cuda_sync": api.filter(pl.col("_sync")).select(cols),
        "gil_wait": gil.select(cols),
        "blocking_os": osrt.filter(is_blocking).select(cols),
        "cuda_api": api.filter(~pl.col("_sync")).select(cols),
        "os_call": osrt.filter(~is_blocking).select(cols),
        "descheduled": own(
            ref_descheduled_intervals(trace.sched.join(threads, on=list(THREAD_KEYS), how="semi"))
        ).select(cols),
        "nvtx": own(trace.nvtx).select(cols),
    }


def ref_nvtx_ranges(trace: model.Trace, threads: pl.DataFrame) -> pl.DataFrame:
    """Feeding-thread NVTX ranges with their nesting depth (1 = outermost)."""
    ranges = (
        ref_positive(trace.nvtx.join(threads, on=list(THREAD_KEYS), how="inner"))
        .select(THREAD_NUMBER, "start_ns", "end_ns", pl.col("text").fill_null(NVTX_NO_TEXT))
        .sort([THREAD_NUMBER, "start_ns", "end_ns"], descending=[False, False, True])
        .with_columns(pl.int_range(pl.len()).over(THREAD_NUMBER).alias("_pos"))
    )
    ends = (
        ranges.select(THREAD_NUMBER, "end_ns")
        .sort(THREAD_NUMBER, "end_ns")
        .with_columns(pl.int_range(1, pl.len() + 1).over(THREAD_NUMBER).alias("_closed"))
        .group_by(THREAD_NUMBER, "end_ns")
        .agg(pl.col("_closed").max())
        .sort("end_ns")
    )
    # Depth = ranges opened so far (this one included) - ranges closed by its start;
    # exact for properly nested (push/pop) ranges.
    return (
        ranges.sort("start_ns")
        .join_asof(
            ends,
            left_on="start_ns",
            right_on="end_ns",
            by=THREAD_NUMBER,
            strategy="backward",
            check_sortedness=False,
        )
        .select(
            THREAD_NUMBER,
            "start_ns",
            pl.col("end_ns").alias("_range_end"),
            "text",
            (pl.col("_pos") + 1 - pl.col("_closed").fill_null(0)).cast(pl.Int64).alias("_depth"),
        )
        .sort("start_ns")
    )


def ref_host_segments(trace: model.Trace, threads: pl.DataFrame) -> pl.DataFrame:
    """The feeding threads' timelines cut into segments with one host cause each."""
    layers = ref_layers(trace, threads)
    events = pl.concat(
        [
            df.select(
                THREAD_NUMBER,
                pl.col(edge).alias("_t"),
                pl.lit(k, dtype=pl.Int8).alias("_layer"),
                pl.lit(step, dtype=pl.Int32).alias("_d"),
            )
            for k, df in enumerate(layers[cause] for cause in HOST_CAUSES)
            for edge, step in (("start_ns", 1), ("end_ns", -1))
        ]
    )
    empty = pl.DataFrame(
        schema={
            THREAD_NUMBER: threads.schema[THREAD_NUMBER],
            "start_ns": pl.Int64,
            "end_ns": pl.Int64,
            "cause": pl.String,
            "nvtx_text": pl.String,
        }
    )
    if events.is_empty():
        return empty
    depth = [f"_depth{k}" for k in range(len(HOST_CAUSES))]
    swept = (
        events.sort(THREAD_NUMBER, "_t")
        .with_columns(
            pl.when(pl.col("_layer") == k)
            .then(pl.col("_d"))
            .otherwise(0)
            .cum_sum()
            .over(THREAD_NUMBER)
            .alias(d)
            for k, d in enumerate(depth)
        )
        # The state after every event at an instant holds until the next instant.
        .group_by(THREAD_NUMBER, "_t", maintain_order=True)
        .agg(pl.col(d).last() for d in depth)
        .with_columns(pl.col("_t").shift(-1).over(THREAD_NUMBER).alias("end_ns"))
        .drop_nulls("end_ns")
        .filter(pl.col("end_ns") > pl.col("_t"))
        .select(
            THREAD_NUMBER,
            pl.col("_t").alias("start_ns"),
            "end_ns",
            pl.coalesce(
                pl.when(pl.col(d) > 0).then(pl.lit(cause))
                for d, cause in zip(depth, HOST_CAUSES, strict=True)
            ).alias("cause"),
            pl.col(depth[HOST_CAUSES.index("nvtx")]).cast(pl.Int64).alias("_depth"),
        )
        .filter(pl.col("cause").is_not_null())
    )
    ranges = ref_nvtx_ranges(trace, threads)
    latest = ranges.select(
        THREAD_NUMBER,
        "start_ns",
        pl.col("_range_end").alias("_any_end"),
        pl.col("text").alias("_any_text"),
    )
    named = (
        swept.sort("start_ns")
        .join_asof(
            ranges,
            on="start_ns",
            by=[THREAD_NUMBER, "_depth"],
            strategy="backward",
            check_sortedness=False,
        )
        .join_asof(
            latest, on="start_ns", by=THREAD_NUMBER, strategy="backward", check_sortedness=False
        )
        .with_columns(
            pl.when(pl.col("_depth") <= 0)
            .then(None)
            .when(pl.col("_range_end") >= pl.col("end_ns"))
            .then(pl.col("text"))
            # Only ranges that cross instead of nesting get here: the most recently
            # opened range if it is still open, else no single innermost range.
            .when(pl.col("_any_end") >= pl.col("end_ns"))
            .then(pl.col("_any_text"))
            .otherwise(pl.lit(NVTX_CROSSING))
            .alias("nvtx_text")
        )
    )
    return named.select(empty.columns).sort(THREAD_NUMBER, "start_ns")


def ref_overlaps(portions: pl.DataFrame, segments: pl.DataFrame) -> pl.DataFrame:
    """Interval join: ``_gap, cause, nvtx_text, overlap_ns`` for each portion x segment overlap."""
    segs = segments.sort(THREAD_NUMBER, "start_ns").with_row_index("_i")
    starts = segs.select(THREAD_NUMBER, pl.col("start_ns").alias("_s"), "_i").sort("_s")
    first_of_thread = segs.group_by(THREAD_NUMBER).agg(pl.col("_i").min().alias("_i_first"))
    probe = portions.select(
        "_gap", THREAD_NUMBER, pl.col("start_ns").alias("_a"), pl.col("end_ns").alias("_b")
    ).with_columns((pl.col("_b") - 1).alias("_b_last"))
    runs = (
        probe.sort("_a")
        .join_asof(
            starts,
            left_on="_a",
            right_on="_s",
            by=THREAD_NUMBER,
            strategy="backward",
            check_sortedness=False,
        )
        .rename({"_i": "_i0"})
        .drop("_s")
        .sort("_b_last")
        .join_asof(
            starts,
            left_on="_b_last",
            right_on="_s",
            by=THREAD_NUMBER,
            strategy="backward",
            check_sortedness=False,
        )
        .rename({"_i": "_i1"})
        .join(first_of_thread, on=THREAD_NUMBER, how="left")
        .with_columns(pl.coalesce("_i0", "_i_first").alias("_i0"))
        .filter(pl.col("_i1").is_not_null() & (pl.col("_i1") >= pl.col("_i0")))
        .select(
            "_gap", "_a", "_b", pl.int_ranges("_i0", pl.col("_i1") + 1, dtype=pl.UInt32).alias("_i")
        )
        .explode("_i")
    )
    overlap = pl.min_horizontal("end_ns", "_b") - pl.max_horizontal("start_ns", "_a")
    return (
        runs.join(segs.select("_i", "start_ns", "end_ns", "cause", "nvtx_text"), on="_i")
        .select("_gap", "cause", "nvtx_text", overlap.alias("overlap_ns"))
        .filter(pl.col("overlap_ns") > 0)
    )


def ref_clamp(col: str) -> pl.Expr:
    return pl.min_horizontal(pl.max_horizontal(pl.col(col), "start_ns"), "end_ns")


def ref_feeding_launches(trace: model.Trace, gaps: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """``gaps`` (with ``_gap``) plus the next operation and its launch call, where found."""
    nxt = ref_next_operations(gaps, ref_operations(trace), keys)
    launches = ref_launch_calls(
        trace.cuda_api,
        nxt.select(
            pl.col("_op_source").alias("source"),
            pl.col("_op_pid").alias("pid"),
            pl.col("next_correlation_id").alias("correlation_id"),
        ),
    )
    return (
        gaps.join(nxt, on="_gap", how="left")
        .join(
            launches,
            left_on=["_op_source", "_op_pid", "next_correlation_id"],
            right_on=["source", "pid", "correlation_id"],
            how="left",
        )
        .rename({"_op_source": "_feed_source", "_op_pid": "_feed_pid"})
    )


REF_LAUNCHED = pl.col("launch_start_ns").is_not_null()


def ref_classified(table: pl.DataFrame, has_api: bool, slack_ns: int) -> pl.DataFrame:
    """Adds ``primary``, ``duration_ns`` and the launch call clamped into the gap (``_l, _le``)."""
    return table.with_columns(
        pl.when(pl.lit(not has_api))
        .then(pl.lit("no_data"))
        .when(~REF_LAUNCHED)
        .then(pl.lit("no_launch_record"))
        .when(pl.col("launch_start_ns") >= pl.col("start_ns") - slack_ns)
        .then(pl.lit("launched_late"))
        .otherwise(pl.lit("gpu_wait"))
        .alias("primary"),
        (pl.col("end_ns") - pl.col("start_ns")).alias("duration_ns"),
        pl.when(REF_LAUNCHED).then(ref_clamp("launch_start_ns")).alias("_l"),
        pl.when(REF_LAUNCHED).then(ref_clamp("launch_end_ns")).alias("_le"),
    )


def ref_host_portions(table: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The feeding threads (``source, pid, tid, _th``) and the host portions of the gaps."""
    with_host = table.filter(REF_LAUNCHED & (pl.col("_l") > pl.col("start_ns")))
    threads = (
        with_host.select(
            pl.col("_feed_source").alias("source"), pl.col("_feed_pid").alias("pid"), "tid"
        )
        .unique()
        .sort(list(THREAD_KEYS))
        .with_row_index(THREAD_NUMBER)
    )
    portions = with_host.join(
        threads,
        left_on=["_feed_source", "_feed_pid", "tid"],
        right_on=list(THREAD_KEYS),
        how="inner",
    ).select("_gap", THREAD_NUMBER, "start_ns", pl.col("_l").alias("end_ns"))
    return threads, portions


def ref_split(
    table: pl.DataFrame, hits: pl.DataFrame, has_api: bool, no_host_data: bool
) -> pl.DataFrame:
    """Adds ``<cause>_ns`` for every cause, ``cause`` and ``nvtx_text`` to each gap."""
    per_cause = hits.group_by("_gap").agg(
        pl.col("overlap_ns").filter(pl.col("cause") == c).sum().alias(f"{c}_ns")
        for c in HOST_CAUSES
    )
    host_ns = [f"{c}_ns" for c in HOST_CAUSES]
    host_len = pl.when(REF_LAUNCHED).then(pl.col("_l") - pl.col("start_ns")).otherwise(0)
    rest = host_len - pl.sum_horizontal(host_ns)
    cause_ns = [f"{c}_ns" for c in CAUSES]
    return (
        table.join(per_cause, on="_gap", how="left")
        .join(ref_top_texts(hits), on="_gap", how="left")
        .with_columns(pl.col(c).fill_null(0) for c in host_ns)
        .with_columns(
            (pl.lit(0) if no_host_data else rest).alias("unattributed_ns"),
            (rest if no_host_data else pl.lit(0)).alias("unattributed_no_data_ns"),
            pl.when(REF_LAUNCHED)
            .then(pl.col("_le") - pl.col("_l"))
            .otherwise(0)
            .alias("launch_call_ns"),
            pl.when(REF_LAUNCHED)
            .then(pl.col("end_ns") - pl.col("_le"))
            .otherwise(0)
            .alias("gpu_wait_ns"),
            pl.when(REF_LAUNCHED)
            .then(0)
            .otherwise(pl.col("duration_ns"))
            .alias("no_launch_record_ns"),
            # The reference predates transfers as a cause (attribute_gaps without them).
            pl.lit(0).alias("gpu_transfer_ns"),
        )
        .with_columns(
            # Without a CUDA API table there is no launch to look for: nothing is known.
            *(
                ()
                if has_api
                else (
                    pl.col("no_launch_record_ns").alias("unattributed_no_data_ns"),
                    pl.lit(0).alias("no_launch_record_ns"),
                )
            )
        )
        .with_columns(pl.col(c).cast(pl.Int64) for c in cause_ns)
        .with_columns(
            pl.when(pl.col("duration_ns") > 0).then(ref_largest(cause_ns, CAUSES)).alias("cause")
        )
    )


def ref_largest(columns: Sequence[str], names: Sequence[str]) -> pl.Expr:
    """Name of the largest column per row (the first on a tie)."""
    return (
        pl.concat_list(columns)
        .list.arg_max()
        .replace_strict(list(range(len(names))), list(names), return_dtype=pl.String)
    )


def ref_text_time(hits: pl.DataFrame) -> pl.DataFrame:
    return (
        hits.filter(pl.col("nvtx_text").is_not_null())
        .group_by("_gap", "nvtx_text")
        .agg(
            pl.col("overlap_ns").sum().alias("covered_ns"),
            pl.col("overlap_ns").filter(pl.col("cause") == "nvtx").sum().alias("nvtx_ns"),
        )
    )


def ref_top_texts(hits: pl.DataFrame) -> pl.DataFrame:
    return (
        ref_text_time(hits)
        .sort(["covered_ns", "nvtx_text"], descending=[True, False])
        .unique(subset="_gap", keep="first", maintain_order=True)
        .select("_gap", "nvtx_text")
    )


def ref_attribute_gaps(
    trace: model.Trace, gaps: pl.DataFrame, settings: Settings, keys: Sequence[str]
) -> HostResult:
    """``attribute_gaps`` before the rewrite for speed."""
    keys = list(keys)
    caps = trace.capabilities
    missing = unavailable_causes(caps)
    has_api = caps.has("cuda_api")
    no_host_data = any(not caps.has(t) for t in HOST_TABLES)

    numbered = gaps.select(*keys, "start_ns", "end_ns").with_row_index("_gap")
    table = ref_classified(
        ref_feeding_launches(trace, numbered, keys),
        has_api,
        settings.launch_slack_ns,
    )
    threads, portions = ref_host_portions(table)
    hits = ref_overlaps(portions, ref_host_segments(trace, threads))
    table = ref_split(table, hits, has_api, no_host_data)

    feed = [
        *([pl.col("_feed_source").alias("source")] if "source" not in keys else []),
        *([pl.col("_feed_pid").alias("pid")] if "pid" not in keys else []),
    ]
    out = table.sort("_gap").select(
        *keys,
        "start_ns",
        "end_ns",
        "duration_ns",
        *feed,
        "tid",
        "next_kind",
        "next_correlation_id",
        "launch_name",
        "launch_start_ns",
        "launch_end_ns",
        "primary",
        "cause",
        "nvtx_text",
        *(f"{c}_ns" for c in CAUSES),
    )
    gpus = pl.concat(
        [trace.gpus.select(pl.col("gpu").cast(pl.Int32)), out.select(pl.col("gpu").cast(pl.Int32))]
    ).unique()
    per_gpu = per_gpu_sums(out, gpus)
    nvtx = nvtx_table(
        ref_text_time(hits).join(table.select("_gap", "gpu"), on="_gap"),
        per_gpu.select("gpu", "gap_ns"),
    )
    return HostResult(
        gaps=out,
        per_gpu=per_gpu,
        shares=long_shares(per_gpu),
        nvtx=nvtx,
        gil_threads=ref_gil_threads(trace.osrt.join(threads, on=list(THREAD_KEYS), how="semi")),
        unavailable=tuple(f"{CAUSE_LABELS[c]}: {why}" for c, why in missing.items()),
        unavailable_causes=tuple(missing),
    )


def test_thread_groups_hold_about_equal_portions_and_cover_every_thread() -> None:
    from nsysan.analyze.host_tables import in_group, thread_groups

    threads = pl.DataFrame(
        {"source": [0] * 6, "pid": [1, 1, 2, 3, 4, 5], "tid": [1, 2, 2, 3, 4, 5]}
    ).with_row_index(THREAD_NUMBER)
    # Thread 2 alone holds more than a quarter of the portions.
    per_thread = [10, 10, 60, 5, 5, 10]
    portions = pl.DataFrame(
        {
            "_gap": range(sum(per_thread)),
            THREAD_NUMBER: [th for th, n in enumerate(per_thread) for _ in range(n)],
        },
        schema={"_gap": pl.UInt32, THREAD_NUMBER: pl.UInt32},
    )
    runs = thread_groups(threads, portions)
    assert [r.tolist() for r in runs] == [[0, 1], [2], [3, 4, 5]]
    group, (kept,) = in_group(threads, runs[2], [portions])
    assert group[THREAD_NUMBER].to_list() == [0, 1, 2]
    assert group["pid"].to_list() == [3, 4, 5]
    assert kept is not None and kept.schema == portions.schema
    assert kept[THREAD_NUMBER].to_list() == [0] * 5 + [1] * 5 + [2] * 10
    assert kept["_gap"].to_list() == list(range(80, 100))
    # All threads in one run: the frames as given.
    whole, (same,) = in_group(threads, np.arange(6), [portions])
    assert whole is threads and same is portions
    # No feeding thread: one empty run, so attribution still runs once.
    empty = threads.head(0)
    assert [r.tolist() for r in thread_groups(empty, portions.head(0))] == [[]]
