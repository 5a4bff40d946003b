"""Host CPUs during GPU gaps: hand-made schedules, generated scenarios, real traces."""

from __future__ import annotations

import json

import polars as pl
import pytest
from conftest import REPO, SHARED_TRACES, cori_rank_files

from nsysan import model
from nsysan.analysis import NO_SCHED, analyze
from nsysan.analyze.cpu import measure_cpu, on_cpu_intervals
from nsysan.diagnose import diagnose
from nsysan.ingest import load_trace
from nsysan.report.view import build_view

FIXTURES = REPO / "fixtures"
TRUTH = json.loads((FIXTURES / "ground_truth.json").read_text())


def _sched(rows: list[tuple[int, int, int, int, bool]]) -> pl.DataFrame:
    """(tid, cpu, time, pid, in?) rows as a model SCHED table (source 0)."""
    df = pl.DataFrame(
        [(0, pid, tid, t, cpu, is_in) for tid, cpu, t, pid, is_in in rows],
        schema=list(model.SCHED),
        orient="row",
    )
    return model.conform(df, model.SCHED)


def test_on_cpu_intervals_pair_each_switch_in_with_the_next_switch_out() -> None:
    sched = _sched(
        [
            (1, 0, 0, 7, True), (1, 0, 10, 7, False), (1, 3, 15, 7, True), (1, 3, 30, 7, False),
            (2, 1, 5, 7, False),  # a switch-out with no switch-in before it: no interval
            (2, 1, 8, 7, True),  # a switch-in never closed: no interval
        ]
    )  # fmt: skip
    got = on_cpu_intervals(sched).sort("tid", "start_ns")
    assert got.select("tid", "cpu", "start_ns", "end_ns").rows() == [(1, 0, 0, 10), (1, 3, 15, 30)]


def _inputs(
    cores: int | None, sched: pl.DataFrame, gaps: list[tuple[int, int]], wait: int, desched: int
):  # type: ignore[no-untyped-def]
    sources = pl.DataFrame(
        {"source": [0], "path": ["/x/run.sqlite"], "host": ["node"], "cpu_cores": [cores]},
        schema={"source": pl.Int32, "path": pl.String, "host": pl.String, "cpu_cores": pl.Int32},
    )
    gpu_sources = pl.DataFrame(
        {"gpu": [0], "source": [0]}, schema={"gpu": pl.Int32, "source": pl.Int32}
    )
    windows = pl.DataFrame(
        {"gpu": [0], "window_start_ns": [0], "window_end_ns": [100]},
        schema={"gpu": pl.Int32, "window_start_ns": pl.Int64, "window_end_ns": pl.Int64},
    )
    g = pl.DataFrame(
        {"gpu": [0] * len(gaps), "start_ns": [s for s, _ in gaps], "end_ns": [e for _, e in gaps]},
        schema={"gpu": pl.Int32, "start_ns": pl.Int64, "end_ns": pl.Int64},
    ).with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("duration_ns"))
    host_gaps = g.with_columns(
        pl.lit(0, pl.Int32).alias("source"),
        pl.lit(7, pl.Int64).alias("pid"),
        pl.lit(1, pl.Int64).alias("tid"),
        pl.lit(wait, pl.Int64).alias("gil_wait_ns"),
        pl.lit(0, pl.Int64).alias("cuda_sync_ns"),
        pl.lit(0, pl.Int64).alias("blocking_os_ns"),
        pl.lit(desched, pl.Int64).alias("descheduled_ns"),
    )
    return measure_cpu(sched, sources, gpu_sources, windows, g, host_gaps)


def test_saturated_host_two_cores_full_during_the_gap() -> None:
    # 2 cores; the gap [40, 60): both cores run profiled threads during [45, 60).
    sched = _sched(
        [
            (1, 0, 0, 7, True), (1, 0, 40, 7, False), (1, 0, 70, 7, True), (1, 0, 100, 7, False),
            (2, 0, 40, 7, True), (2, 0, 70, 7, False),
            (3, 1, 45, 7, True), (3, 1, 90, 7, False),
        ]
    )  # fmt: skip
    r = _inputs(2, sched, [(40, 60)], wait=0, desched=20)
    host = r.hosts.row(0, named=True)
    assert (host["host"], host["cores"], host["cores_seen"]) == ("node", 2, 2)
    assert host["gap_ns"] == 20
    assert host["busy_cores_gap_mean"] == pytest.approx((20 + 15) / 20)
    assert host["busy_cores_mean"] == pytest.approx((100 + 45) / 100)
    assert host["saturated_gap_share"] == pytest.approx(15 / 20)
    assert host["verdict"] == "saturated"
    t = r.threads.row(0, named=True)
    assert (t["running_ns"], t["descheduled_share"]) == (0, 1.0)  # thread 1 off CPU in the gap
    cores = {c: s for c, s in r.cores.select("cpu", "gap_busy_share").rows()}
    assert cores == {0: 1.0, 1: 0.75}


def test_blocked_and_busy_verdicts_need_few_busy_cores() -> None:
    # 16 cores, one thread: off CPU in the gap, waiting the whole gap -> blocked.
    sched = _sched(
        [(1, 0, 0, 7, True), (1, 0, 40, 7, False), (1, 0, 60, 7, True), (1, 0, 100, 7, False)]
    )
    assert _inputs(16, sched, [(40, 60)], wait=20, desched=0).hosts["verdict"][0] == "blocked"
    # On CPU through the gap, no waits -> the feeding thread itself is busy.
    busy = _sched([(1, 0, 0, 7, True), (1, 0, 100, 7, False)])
    r = _inputs(16, busy, [(40, 60)], wait=0, desched=0)
    assert r.hosts["verdict"][0] == "feeding_thread_busy"
    assert r.threads["running_share"][0] == 1.0
    assert _inputs(16, sched, [(40, 60)], wait=0, desched=20).hosts["verdict"][0] == "off_cpu"
    # Without the host's core count the verdict is unknown (never a guess).
    assert _inputs(None, sched, [(40, 60)], wait=20, desched=0).hosts["verdict"][0] == "unknown"


@pytest.mark.parametrize(
    ("name", "verdict", "rule"),
    [("cpu-saturated", "saturated", "cpu-saturated"), ("gil-blocked", "blocked", "cpu-blocked")],
)
def test_generated_scenarios_equal_their_ground_truth(name: str, verdict: str, rule: str) -> None:
    truth = TRUTH[name]
    analysis = analyze(load_trace(FIXTURES / f"{name}.sqlite", launch_config=False))
    host = analysis.cpu.hosts.row(0, named=True)
    assert host["cores"] == truth["numbers"]["cores"] == 16
    assert host["busy_cores_gap_mean"] == pytest.approx(
        truth["numbers"]["busy_cores_gap_mean"], rel=1e-9
    )
    assert host["saturated_gap_share"] == pytest.approx(
        truth["numbers"]["saturated_gap_share"], abs=1e-12
    )
    assert host["verdict"] == verdict
    threads = {r["gpu"]: r for r in analysis.cpu.threads.iter_rows(named=True)}
    for gpu in truth["gpus"]:
        got, want = threads[gpu["gpu"]], gpu["extra"]
        assert got["running_share"] == pytest.approx(want["running_share"], rel=1e-9)
        assert got["descheduled_share"] == pytest.approx(want["descheduled_share"], abs=1e-9)
        # Host attribution's waits: GIL waits and synchronizing calls before the launch.
        assert got["waiting_share"] == pytest.approx(want["waiting_share"], abs=0.01)
    d = diagnose(analysis)
    assert d.findings[0].rule_id == rule
    assert "nsysan-sim-node0" in d.findings[0].claim["en"]


def test_balanced_and_other_scenarios_without_sched_say_what_to_capture() -> None:
    analysis = analyze(load_trace(FIXTURES / "balanced.sqlite", launch_config=False))
    assert analysis.cpu is None
    assert analysis.unavailable["cpu"] == NO_SCHED
    assert "--cpuctxsw=process-tree" in NO_SCHED
    view = build_view(analysis, diagnose(analysis), "zh")
    section = next(s for s in view.sections if s.key == "cpu")
    assert (
        "--cpuctxsw=process-tree" in section.unavailable
        and "没有线程调度事件" in section.unavailable
    )


def _real(paths: list) -> tuple:  # type: ignore[type-arg]
    if not all(p.exists() for p in paths):
        pytest.skip(f"real traces not found at {SHARED_TRACES}")
    analysis = analyze(load_trace(paths, launch_config=False))
    return analysis, diagnose(analysis)


def test_cori_feeding_threads_are_busy_on_one_core_of_80() -> None:
    analysis, d = _real(cori_rank_files())
    hosts = analysis.cpu.hosts
    assert hosts.height == 8  # no host names: each rank's file is its own host
    assert set(hosts["host"]) == {f"report{i}.sqlite" for i in range(1, 9)}
    assert set(hosts["cores"]) == {80}
    assert set(hosts["verdict"]) == {"feeding_thread_busy"}
    assert hosts["feeding_running_share"].min() == pytest.approx(0.9761, abs=1e-4)
    assert hosts["busy_cores_gap_mean"].max() < 1.05
    f = next(f for f in d.findings if f.rule_id == "feeding-thread-busy")
    assert "on CPU 97.6%–98.8% of their gap time" in f.claim["en"]
    assert "other programs' use of the cores is not seen" in f.claim["en"]


def test_t071_feeding_thread_off_cpu_without_osrt() -> None:
    analysis, d = _real([SHARED_TRACES / "T071-llama3-inference" / "trace.sqlite"])
    host = analysis.cpu.hosts.row(0, named=True)
    assert (host["cores"], host["verdict"]) == (20, "off_cpu")
    assert host["feeding_descheduled_share"] == pytest.approx(0.8468, abs=1e-4)
    f = next(f for f in d.findings if f.rule_id == "feeding-thread-off-cpu")
    assert f.severity == "info"
    assert "no OS-runtime calls" in f.claim["en"]


def test_trace_without_sched_names_what_is_missing() -> None:
    analysis, _ = _real([SHARED_TRACES / "T039-gpu-poisson-solver" / "trace.sqlite"])
    assert analysis.cpu is None
    assert "--cpuctxsw=process-tree" in analysis.unavailable["cpu"]
