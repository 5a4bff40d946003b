"""Load over time: bursts, starvation, long-tail latency."""

from __future__ import annotations

import json

import polars as pl
import pytest
from conftest import REPO

from nsysan import model
from nsysan.analysis import analyze
from nsysan.analyze.load import measure_load
from nsysan.diagnose import diagnose
from nsysan.diagnose.facts import Facts
from nsysan.diagnose.load_facts import TailFact
from nsysan.diagnose.load_rules import long_tail_latency
from nsysan.diagnose.resource_facts import ResourceFacts
from nsysan.ingest import load_trace
from nsysan.report.view import build_view

FIXTURES = REPO / "fixtures"
TRUTH = json.loads((FIXTURES / "ground_truth.json").read_text())


def _frame(rows: list[tuple], cols: dict) -> pl.DataFrame:  # type: ignore[type-arg]
    return pl.DataFrame(rows, schema=cols, orient="row")


def test_bursts_and_starvation_on_hand_made_tables() -> None:
    windows = _frame(
        [(0, 0, 1000), (1, 0, 1000)],
        {"gpu": pl.Int32, "window_start_ns": pl.Int64, "window_end_ns": pl.Int64},
    )
    # One request per 20 ns window on GPU 0 and 1 alternately, then 12 at 500..519 to GPU 1.
    reqs = [(i % 2, i * 20) for i in range(50)] + [(1, 500 + i) for i in range(12)]
    requests = _frame(
        [(g, t, t + 5) for g, t in reqs],
        {"gpu": pl.Int32, "start_ns": pl.Int64, "end_ns": pl.Int64},
    )
    busy = _frame(
        [(0, 0, 1000), (1, 0, 400)], {"gpu": pl.Int32, "start_ns": pl.Int64, "end_ns": pl.Int64}
    )
    kernels = model.conform(
        pl.DataFrame({"gpu": [0], "start_ns": [0], "end_ns": [1]}), model.KERNELS
    )
    host_gaps = _frame(
        [(1, 400, 1000, 600, 500), (1, 0, 3, 3, 3)],
        {
            "gpu": pl.Int32,
            "start_ns": pl.Int64,
            "end_ns": pl.Int64,
            "duration_ns": pl.Int64,
            "blocking_os_ns": pl.Int64,
        },
    )
    import nsysan.analyze.load as load_mod

    old = load_mod.STARVATION_MIN_NS
    load_mod.STARVATION_MIN_NS = 100  # a hand-made scale
    try:
        r = measure_load(busy, windows, kernels, requests, host_gaps)
    finally:
        load_mod.STARVATION_MIN_NS = old
    assert r.kind == "requests"
    assert r.windows.height == 100  # 50 windows x 2 GPUs
    assert r.bursts.height == 1
    b = r.bursts.row(0, named=True)
    assert (b["start_ns"], b["load"], b["median_load"], b["top_gpu"]) == (500, 13, 1.0, 1)
    assert b["top_share"] == pytest.approx(13 / 13)
    assert b["top_busy_before"] == 0.0  # GPU 1 idle from 400 on
    s = r.starved.row(0, named=True)
    assert (s["gpu"], s["duration_ns"], s["others_busy_share"]) == (1, 600, 1.0)
    assert s["wait_share"] == pytest.approx(500 / 600)
    assert r.per_gpu.filter(pl.col("gpu") == 1)["starved_share"][0] == pytest.approx(0.6)


def _covered_by_all_others(busy: pl.DataFrame, gaps: pl.DataFrame) -> list[int]:
    """Reference: each gap's time covered by the union of every other GPU's busy time."""
    out = []
    for g, s, e in gaps.select("gpu", "start_ns", "end_ns").iter_rows():
        others = sorted(busy.filter(pl.col("gpu") != g).select("start_ns", "end_ns").iter_rows())
        covered, reach = 0, s
        for a, b in others:
            a, b = max(a, reach), min(b, e)
            if b > a:
                covered += b - a
                reach = b
        out.append(covered)
    return out


@pytest.mark.parametrize("seed", range(20))
def test_starvation_coverage_equals_the_whole_union_of_other_gpus(seed: int) -> None:
    """Only the busy intervals meeting a long gap are merged; coverage stays exact."""
    import random

    import nsysan.analyze.load as load_mod

    rng = random.Random(seed)
    rows = []
    for g in range(rng.randint(2, 4)):
        t = rng.randint(0, 50)
        for _ in range(rng.randint(0, 30)):
            start = t + rng.randint(0, 40)  # touching or apart: a union's intervals
            t = start + rng.randint(1, 60)
            rows.append((g, start, t))
    busy = _frame(rows, {"gpu": pl.Int32, "start_ns": pl.Int64, "end_ns": pl.Int64})
    gaps = []
    for _ in range(rng.randint(1, 12)):
        g, s = rng.randint(0, 3), rng.randint(0, 1500)
        e = s + rng.randint(1, 400)
        gaps.append((g, s, e, e - s, e - s))
    host_gaps = _frame(
        gaps,
        {
            "gpu": pl.Int32,
            "start_ns": pl.Int64,
            "end_ns": pl.Int64,
            "duration_ns": pl.Int64,
            "blocking_os_ns": pl.Int64,
        },
    )
    old = (load_mod.STARVATION_MIN_NS, load_mod.STARVATION_OTHERS_BUSY)
    load_mod.STARVATION_MIN_NS, load_mod.STARVATION_OTHERS_BUSY = 1, 0.0
    try:
        starved = load_mod._starved(busy, host_gaps)
    finally:
        load_mod.STARVATION_MIN_NS, load_mod.STARVATION_OTHERS_BUSY = old
    if busy["gpu"].n_unique() < 2:
        assert starved.is_empty()
        return
    expected = host_gaps.with_columns(
        pl.Series("covered", _covered_by_all_others(busy, host_gaps), dtype=pl.Int64)
    ).filter(pl.col("gpu").is_in(busy["gpu"].unique().implode()))
    got = starved.with_columns(
        (pl.col("others_busy_share") * pl.col("duration_ns")).round().cast(pl.Int64).alias("c")
    )
    assert sorted(got.select("gpu", "start_ns", "end_ns", "c").iter_rows()) == sorted(
        expected.select("gpu", "start_ns", "end_ns", "covered").iter_rows()
    )


def test_generated_request_burst_equals_its_ground_truth() -> None:
    truth = TRUTH["request-burst"]
    analysis = analyze(load_trace(FIXTURES / "request-burst.sqlite", launch_config=False))
    load = analysis.load
    assert load.kind == "requests"
    assert load.bursts.height == truth["numbers"]["burst_windows"]
    top = load.bursts.sort("load", descending=True).row(0, named=True)
    assert top["load"] == truth["numbers"]["burst_load"]
    assert top["top_gpu"] == truth["numbers"]["burst_top_gpu"]
    assert top["top_share"] == pytest.approx(truth["numbers"]["burst_top_share"])
    assert top["median_load"] == truth["numbers"]["median_window_load"]
    starved = {r["gpu"]: r["starved_share"] for r in load.per_gpu.iter_rows(named=True)}
    requests = {r["gpu"]: r["requests"] for r in analysis.steps.per_gpu.iter_rows(named=True)}
    for gpu in truth["gpus"]:
        assert starved[gpu["gpu"]] == pytest.approx(gpu["extra"]["starved_share"], rel=1e-9)
        assert requests[gpu["gpu"]] == gpu["extra"]["requests"]
    d = diagnose(analysis)
    assert [f.rule_id for f in d.findings] == ["request-burst", "gpu-starvation"]
    assert "100.0% of them went to GPU 1" in d.findings[0].claim["en"]
    zh = next(s for s in build_view(analysis, d, "zh").sections if s.key == "load")
    assert zh.series and zh.tables[0].rows[0][4] == "GPU 1"


def test_dp_long_tail_starvation_while_gpu2_works() -> None:
    analysis = analyze(load_trace(FIXTURES / "dp-long-tail.sqlite", launch_config=False))
    per = {r["gpu"]: r["starved_share"] for r in analysis.load.per_gpu.iter_rows(named=True)}
    assert per[2] == 0.0 and min(per[g] for g in (0, 1, 3)) > 0.4
    ids = [f.rule_id for f in diagnose(analysis).findings]
    assert ids[0] == "dp-long-tail" and "gpu-starvation" in ids


def test_long_tail_rule_needs_enough_requests_and_a_wide_tail() -> None:
    def facts(ratio: float, n: int) -> Facts:
        tail = TailFact(0, "request", n, 1_000_000, int(ratio * 1_000_000), 9_000_000, ratio, 5_000)
        return Facts(gpu_count=1, resources=ResourceFacts(tails=(tail,)))

    assert long_tail_latency(facts(3.9, 100)) is None
    assert long_tail_latency(facts(6.0, 19)) is None
    f = long_tail_latency(facts(6.0, 100))
    assert f is not None and f.rule_id == "long-tail-latency"
    assert "request latency p99 is 6.0× the median" in f.claim["en"]


def test_balanced_has_no_load_finding() -> None:
    analysis = analyze(load_trace(FIXTURES / "balanced.sqlite", launch_config=False))
    assert analysis.load.kind == "kernels" and analysis.load.starved.is_empty()
    assert diagnose(analysis).findings == ()
