"""CUDA graphs: graph-level executions are GPU work; node-level kernels belong to their launch.

The serving-graphs scenario writes one run at graph level and at node level
(nsysan.simulate.serving); nsysan must reproduce each file's ground truth and give both
levels the same busy share. A real export rewritten so that runs of kernels are graph
executions (tests/graph_rewrite.py) keeps its busy share.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from graph_rewrite import as_graph_trace

from nsysan import load_trace
from nsysan.analysis import Analysis, analyze
from nsysan.ingest.graphs import GRAPH_NAME_PREFIX, is_graph_work, with_graph_work
from nsysan.settings import Settings
from nsysan.simulate import GroundTruth, generate
from nsysan.simulate.serving import GRAPH_IDS

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures"
GROUND_TRUTH = json.loads((FIXTURES / "ground_truth.json").read_text())
LEVELS = ("serving-graphs", "serving-graphs-nodes")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Analysis, GroundTruth]]:
    """Both levels of one run, at a larger scale than the fixtures."""
    out = {}
    folder = tmp_path_factory.mktemp("serving")
    for name in LEVELS:
        truth = generate(name, folder / f"{name}.sqlite", seed=3, scale=0.3)
        out[name] = (analyze(load_trace(folder / f"{name}.sqlite")), truth)
    return out


@pytest.mark.parametrize("name", LEVELS)
def test_busy_gap_and_host_cause_equal_the_ground_truth(
    runs: dict[str, tuple[Analysis, GroundTruth]], name: str
) -> None:
    analysis, truth = runs[name]
    assert analysis.busy is not None and analysis.gaps is not None and analysis.host is not None
    busy = {r["gpu"]: r for r in analysis.busy.summary.iter_rows(named=True)}
    gaps = {r["gpu"]: r for r in analysis.gaps.summary.iter_rows(named=True)}
    host = {r["gpu"]: r for r in analysis.host.per_gpu.iter_rows(named=True)}
    assert sorted(busy) == [g.gpu for g in truth.gpus] == list(range(8))
    for g in truth.gpus:
        assert (busy[g.gpu]["window_start_ns"], busy[g.gpu]["window_end_ns"]) == (
            g.window_start_ns,
            g.window_end_ns,
        )
        assert busy[g.gpu]["busy_ns"] == g.busy_ns
        assert busy[g.gpu]["busy_share"] == pytest.approx(g.extra["busy_share"], abs=1e-12)
        assert gaps[g.gpu]["gap_share"] == pytest.approx(g.gap_share, abs=1e-12)
        # The late scheduler: gap time on the feeding thread inside its NVTX range.
        assert host[g.gpu]["nvtx_share"] == pytest.approx(g.extra["schedule_share"], abs=1e-9)
        assert host[g.gpu]["dominant_cause"] == "nvtx"
    # A GPU that replays graphs 90% of the time is not called idle.
    assert min(r["busy_share"] for r in busy.values()) > 0.9


def test_both_levels_give_the_same_busy_share(
    runs: dict[str, tuple[Analysis, GroundTruth]],
) -> None:
    graph, nodes = (runs[name][0].busy for name in LEVELS)
    assert graph is not None and nodes is not None
    for a, b in zip(
        graph.summary["busy_share"].to_list(), nodes.summary["busy_share"].to_list(), strict=True
    ):
        assert a == pytest.approx(b, rel=0.01)
    # The same run: the node level's kernels are the graph level's executions, node by node.
    g_truth, n_truth = (runs[name][1] for name in LEVELS)
    assert g_truth.numbers == {
        **n_truth.numbers,
        "busy_share_mean": g_truth.numbers["busy_share_mean"],
        "schedule_share_mean": g_truth.numbers["schedule_share_mean"],
    }


def test_graph_executions_are_named_counted_and_launched_by_cudaGraphLaunch(
    runs: dict[str, tuple[Analysis, GroundTruth]],
) -> None:
    analysis, truth = runs["serving-graphs"]
    replays = int(truth.numbers["graph_replays"])
    # Ingest keeps the kernel table as NVIDIA's kernel summary sees it...
    assert analysis.trace.graphs.height == 8 * replays
    work = analysis.trace.kernels.filter(is_graph_work(pl.col("name")))
    # ...and the analyses see every execution as one unit of GPU work on its GPU.
    assert work.height == 8 * replays
    names = set(work["name"].cast(pl.String).unique().to_list())
    assert names <= {f"{GRAPH_NAME_PREFIX}{g}" for g in GRAPH_IDS} and names
    per_gpu = work.group_by("gpu").len()
    assert per_gpu["len"].to_list() == [replays] * 8
    # Host attribution: a gap ending at a replay is fed by that replay's cudaGraphLaunch.
    assert analysis.host is not None
    ending_at_graph = analysis.host.gaps.join(
        work.select("gpu", pl.col("start_ns").alias("end_ns")), on=["gpu", "end_ns"]
    )
    assert ending_at_graph.height > 0
    assert set(ending_at_graph["launch_name"].cast(pl.String).unique()) == {"cudaGraphLaunch"}
    assert set(ending_at_graph["primary"].cast(pl.String).unique()) <= {
        "launched_late",
        "gpu_wait",
    }


def test_node_level_kernels_are_attributed_to_their_graph_launch(
    runs: dict[str, tuple[Analysis, GroundTruth]],
) -> None:
    analysis, _ = runs["serving-graphs-nodes"]
    assert analysis.trace.graphs.is_empty()
    assert analysis.host is not None
    launches = analysis.host.gaps.group_by(pl.col("launch_name").cast(pl.String)).len()
    by_name = dict(launches.iter_rows())
    # Gaps between the nodes of a replay (the GPU chaining its nodes) and before it.
    assert by_name["cudaGraphLaunch"] > by_name.get("cudaLaunchKernel", 0)
    inside = analysis.host.gaps.filter(
        (pl.col("launch_name").cast(pl.String) == "cudaGraphLaunch")
        & (pl.col("launch_end_ns") < pl.col("start_ns"))
    )
    # A node waits on the one before it, not on the host: GPU-side wait.
    assert inside.height > 0
    assert set(inside["primary"].cast(pl.String).unique()) == {"gpu_wait"}


def test_kernel_table_and_nvidia_mode_leave_graph_executions_out() -> None:
    """cuda_gpu_kern_sum and NVIDIA's gpu_gaps rule read the kernel table alone."""
    trace = load_trace(FIXTURES / "serving-graphs.sqlite")
    assert trace.graphs.height > 0
    assert trace.kernels.filter(is_graph_work(pl.col("name"))).is_empty()
    assert with_graph_work(trace).kernels.height == trace.kernels.height + trace.graphs.height
    analysis = analyze(trace, Settings(busy_mode="nvidia"))
    assert analysis.nvidia_busy is not None and analysis.busy is not None
    nvidia = analysis.nvidia_busy.summary["busy_ns"].sum()
    ours = analysis.busy.summary["busy_ns"].sum()
    # Prefill kernels (and copies) only: far less than the busy time with the graphs.
    assert nvidia < 0.5 * ours


def test_fixture_truth_names_the_graph_replays() -> None:
    truth = GROUND_TRUTH["serving-graphs"]
    trace = load_trace(FIXTURES / "serving-graphs.sqlite")
    assert trace.graphs.height == 8 * truth["numbers"]["graph_replays"]
    assert trace.capabilities.has("graphs")


@pytest.mark.shared
def test_real_export_with_kernel_runs_as_graphs_keeps_its_busy_share(
    shared_traces: Path, tmp_path: Path
) -> None:
    """T039 (2 GPUs): half its kernels become graph executions; busy share within 1%."""
    src = shared_traces / "T039-gpu-poisson-solver" / "trace.sqlite"
    before = src.read_bytes()
    counts = as_graph_trace(src, tmp_path / "graphs.sqlite")
    assert src.read_bytes() == before
    # Its solver launches kernels in back-to-back pairs on GPU 0: 999 pairs become graphs.
    assert counts == {"kernels": 4000, "graphs": 999, "converted": 1998}
    original = analyze(load_trace(src))
    rewritten = analyze(load_trace(tmp_path / "graphs.sqlite"))
    assert rewritten.trace.graphs.height == counts["graphs"]
    assert original.busy is not None and rewritten.busy is not None
    a = original.busy.summary.sort("gpu")
    b = rewritten.busy.summary.sort("gpu")
    assert a["gpu"].to_list() == b["gpu"].to_list() == [0, 1]
    for x, y in zip(a["busy_share"].to_list(), b["busy_share"].to_list(), strict=True):
        assert y == pytest.approx(x, rel=0.01)
        assert y >= x  # a graph execution also covers the spacing between its nodes
    assert rewritten.host is not None
    fed = rewritten.host.gaps.group_by(pl.col("launch_name").cast(pl.String)).len()
    assert dict(fed.iter_rows())["cudaGraphLaunch"] == counts["graphs"]


@pytest.mark.parametrize("name", LEVELS)
def test_report_lists_graph_work_per_gpu(name: str) -> None:
    from nsysan.diagnose import diagnose
    from nsysan.report.view import build_view

    analysis = analyze(load_trace(FIXTURES / f"{name}.sqlite"))
    view = build_view(analysis, diagnose(analysis), "en")
    gpus = next(s for s in view.sections if s.key == "gpus")
    table = next(t for t in gpus.tables if t.title == "CUDA graphs")
    replays = str(int(GROUND_TRUTH[name]["numbers"]["graph_replays"]))
    if name == "serving-graphs":
        # One row per GPU and captured graph; the executions add up to the replays.
        assert {r[1] for r in table.rows} == {f"{GRAPH_NAME_PREFIX}{g}" for g in GRAPH_IDS}
        per_gpu: dict[str, int] = {}
        for row in table.rows:
            per_gpu[row[0]] = per_gpu.get(row[0], 0) + int(row[3])
        assert per_gpu == {f"GPU {g}": int(replays) for g in range(8)}
        assert "kernels and CUDA graph executions" in gpus.tables[0].note
    else:
        # 29 nodes per replay, every replay's kernels counted on every GPU.
        assert {r[1:5] for r in table.rows} == {
            ("graph-node kernels", "node level", replays, str(29 * int(replays)))
        }


def test_info_counts_graph_executions_per_gpu() -> None:
    from nsysan.info import render_text, summarize

    summary = summarize(load_trace(FIXTURES / "serving-graphs.sqlite"))
    replays = int(GROUND_TRUTH["serving-graphs"]["numbers"]["graph_replays"])
    assert [g["graph_executions"] for g in summary["gpus"]] == [replays] * 8
    assert summary["counts"]["graphs"] == 8 * replays
    assert f"{replays} CUDA graph executions" in render_text(summary)


def test_graph_executions_take_part_in_imbalance_drift_and_stagger(
    runs: dict[str, tuple[Analysis, GroundTruth]],
) -> None:
    analysis, truth = runs["serving-graphs"]
    assert analysis.imbalance is not None and analysis.stagger is not None
    load = analysis.imbalance.per_gpu.sort("gpu")
    # Busy and compute time per GPU include the replays (no NCCL kernel is visible in them).
    assert load["busy_ns"].to_list() == [g.busy_ns for g in truth.gpus]
    assert load["kernel_count"].to_list() == [g.kernels for g in truth.gpus]
    assert all(c > 0.8 * b for c, b in zip(load["compute_ns"], load["busy_ns"], strict=True))
    # Drift windows see the GPUs busy through the replays, not idle.
    drift = analysis.imbalance.drift
    assert drift["busy_share"].median() > 0.85  # type: ignore[operator]
    # Stagger compares 8 GPUs whose gaps are the scheduler's, at the same times on all.
    assert analysis.stagger.gpu_count == 8
    assert analysis.stagger.verdict == "aligned"


@pytest.mark.parametrize("pid", [3, -3], ids=["packed", "joined"])  # negative ids do not pack
def test_node_kernels_are_those_of_a_graph_launch_but_no_graph_execution(pid: int) -> None:
    from nsysan.analyze.graphs import _launched_by

    def keys(rows: list[tuple[int, int, int | None]]) -> pl.DataFrame:
        return pl.DataFrame(
            rows,
            schema={"source": pl.Int32, "pid": pl.Int32, "correlation_id": pl.Int64},
            orient="row",
        )

    kernels = keys(
        [(0, pid, 1), (0, pid, 2), (0, pid, 2), (0, pid, 3), (1, pid, 1), (0, pid, None)]
    )
    kernels = kernels.with_columns(pl.int_range(pl.len()).alias("row"))
    calls = keys([(0, pid, 1), (0, pid, 2), (0, pid, None)])
    executions = keys([(0, pid, 2)])
    # Id 2 is a graph-level execution; id 3 no graph launch; source 1 another file.
    assert _launched_by(kernels, calls, executions)["row"].to_list() == [0]
    assert _launched_by(kernels, calls, executions.clear())["row"].to_list() == [0, 1, 2]
