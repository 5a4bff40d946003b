"""Host-side attribution of gap time: hand-built traces, a brute-force reference, real exports."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from conftest import single_file_traces
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

import nsysan
from nsysan import model
from nsysan.analyze.busy import measure_busy
from nsysan.analyze.gaps import measure_gaps
from nsysan.analyze.host import (
    CAUSES,
    GIL_SWITCH_INTERVAL_NS,
    HOST_CAUSES,
    NVTX_CROSSING,
    HostResult,
    attribute_gaps,
    descheduled_intervals,
)
from nsysan.settings import Settings

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


def rng(start: int, end: int, text: str, **kw: Any) -> dict[str, Any]:
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
