"""Diagnosis: every scenario's intended top finding, none on the healthy control,
thresholds at their boundaries, and no unsupported claims on real traces."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from conftest import REPO, cori_rank_files, single_file_traces

from nsysan.analysis import analyze
from nsysan.diagnose import diagnose, diagnose_facts
from nsysan.diagnose.balance_rules import pipeline_bubble, rank_correlation
from nsysan.diagnose.facts import Facts
from nsysan.diagnose.nccl_rules import comm_bound
from nsysan.diagnose.stagger_rules import (
    DASHBOARD_BALANCED_SPREAD,
    GAP_SHARE_HIGH,
    false_balance,
)
from nsysan.ingest import load_trace
from nsysan.ingest.ncu import read_ncu_csv

FIXTURES = REPO / "fixtures"
GROUND_TRUTH = json.loads((FIXTURES / "ground_truth.json").read_text())


def _diagnose_fixture(name: str):  # type: ignore[no-untyped-def]
    path = FIXTURES / f"{name}.sqlite"
    csv = FIXTURES / f"{name}.ncu.csv"
    analysis = analyze(load_trace([path]), ncu=read_ncu_csv(csv) if csv.exists() else None)
    return analysis, diagnose(analysis)


@pytest.mark.parametrize("name", sorted(GROUND_TRUTH))
def test_each_scenario_yields_its_intended_top_finding(name: str) -> None:
    intended = GROUND_TRUTH[name]["top_finding"]
    _, diagnosis = _diagnose_fixture(name)
    ids = [f.rule_id for f in diagnosis.findings]
    if intended is None:
        assert ids == [], f"{name} is healthy but got {ids}"
        assert diagnosis.headline.rule_id is None
    else:
        assert ids and ids[0] == intended, f"{name}: expected {intended} first, got {ids}"
        assert diagnosis.headline.rule_id == intended


def test_case_study_headline_tells_the_story() -> None:
    analysis, diagnosis = _diagnose_fixture("case-study")
    text = diagnosis.headline.texts["en"]
    assert text.startswith("False balance: all 4 GPUs look")
    assert "staggered across GPUs" in text
    assert "host-side" in text and "GIL" in text
    gaps = analysis.gaps.summary["gap_share"].to_list()  # type: ignore[union-attr]
    assert all(0.30 <= g <= 0.40 for g in gaps)
    assert "假均衡" in diagnosis.headline.texts["zh"]
    verdicts = {m.myth_id: m.verdict for m in diagnosis.myths}
    assert verdicts["only-gpu-utilization"] == "does_not_hold"


def test_case_study_fixed_resolves_the_finding() -> None:
    from nsysan.diff import diff_documents
    from nsysan.report.document import analysis_document
    from nsysan.report.jsonout import to_jsonable

    before = to_jsonable(analysis_document(_diagnose_fixture("case-study")[0]))
    after = to_jsonable(analysis_document(_diagnose_fixture("case-study-fixed")[0]))
    result = diff_documents(before, after)
    assert [f["rule_id"] for f in result["findings"]["resolved"]] == ["false-balance"]
    assert result["overall"]["gap_share"]["before"] > 0.3
    assert result["overall"]["gap_share"]["after"] < 0.1


def _facts(**kw: object) -> Facts:
    base = dict(
        gpu_count=4,
        gpu_labels=("GPU 0", "GPU 1", "GPU 2", "GPU 3"),
        gap_share=(0.35, 0.35, 0.35, 0.35),
        dashboard_share=(0.65, 0.65, 0.65, 0.65),
        gr_active_share=(0.88, 0.87, 0.88, 0.87),
        dashboard_spread=0.01,
        stagger_verdict="staggered",
        stagger_score=0.5,
        host_share=0.9,
    )
    base.update(kw)
    return Facts(**base)  # type: ignore[arg-type]


def test_false_balance_thresholds() -> None:
    assert false_balance(_facts()) is not None
    assert false_balance(_facts(stagger_verdict="aligned")) is None
    assert false_balance(_facts(dashboard_spread=DASHBOARD_BALANCED_SPREAD + 0.01)) is None
    low = GAP_SHARE_HIGH - 0.01
    assert false_balance(_facts(gap_share=(low,) * 4)) is None
    assert false_balance(_facts(gpu_count=1, gpu_labels=("GPU 0",), gap_share=(0.35,))) is None


def test_missing_measurements_never_fire() -> None:
    empty = Facts(gpu_count=4)
    assert diagnose_facts(empty) == ()


def test_subsumed_findings_are_dropped() -> None:
    ids = [f.rule_id for f in diagnose_facts(_facts())]
    assert "false-balance" in ids and "host-bound-gaps" not in ids


def test_comm_bound_counts_transfer_not_waiting() -> None:
    assert comm_bound(_facts(nccl_share=0.4, nccl_wait_share=0.0)) is not None
    assert comm_bound(_facts(nccl_share=0.4, nccl_wait_share=0.9)) is None


def test_pipeline_needs_a_staircase() -> None:
    stairs = _facts(
        bubble_share=0.4,
        fill_share_per_gpu=(0.0, 0.1, 0.2, 0.3),
        drain_share_per_gpu=(0.3, 0.2, 0.1, 0.0),
    )
    assert pipeline_bubble(stairs) is not None
    shuffled = dataclasses.replace(stairs, fill_share_per_gpu=(0.3, 0.0, 0.2, 0.1))
    assert pipeline_bubble(shuffled) is None


def test_two_gpus_are_no_staircase() -> None:
    """Two independent GPUs, one idle longer at the start and the other at the end,
    rank as a perfect two-step staircase: not evidence of a pipeline."""
    two = _facts(
        gpu_count=2,
        bubble_share=0.4,
        fill_share_per_gpu=(0.05, 0.3),
        drain_share_per_gpu=(0.3, 0.05),
    )
    assert pipeline_bubble(two) is None
    three = dataclasses.replace(
        two,
        gpu_count=3,
        fill_share_per_gpu=(0.05, 0.15, 0.3),
        drain_share_per_gpu=(0.3, 0.15, 0.05),
    )
    assert pipeline_bubble(three) is not None


def test_rank_correlation() -> None:
    assert rank_correlation((1, 2, 3), (3, 2, 1)) == pytest.approx(-1.0)
    assert rank_correlation((1, 2, 3), (1, 2, 3)) == pytest.approx(1.0)
    assert rank_correlation((1,), (1,)) is None


REAL = [p for p in single_file_traces()]


@pytest.mark.shared
@pytest.mark.parametrize("path", REAL, ids=lambda p: p.parent.name)
def test_real_traces_get_only_supported_claims(path: Path) -> None:
    analysis = analyze(load_trace([path]))
    diagnosis = diagnose(analysis)
    ids = {f.rule_id for f in diagnosis.findings}
    gpus = analysis.trace.gpus.height
    if gpus < 2:
        # Cross-GPU claims need at least two GPUs.
        assert not ids & {
            "false-balance",
            "aligned-gaps",
            "static-split-skew",
            "moe-hot-expert",
            "pipeline-bubble",
            "dp-long-tail",
        }
    if analysis.contention is None or not analysis.contention.available:
        assert "clock-throttling" not in ids
    if analysis.bound is None:
        assert "memory-bound" not in ids
    if analysis.nccl is None or analysis.nccl.nccl_kernels == 0:
        assert not ids & {"comm-bound", "collective-skew"}
    for finding in diagnosis.findings:
        assert finding.evidence, finding.rule_id
        assert finding.claim["en"] and finding.claim["zh"]
    assert len(diagnosis.myths) == 4


@pytest.mark.shared
def test_cori_gaps_are_aligned_not_false_balance() -> None:
    diagnosis = diagnose(analyze(load_trace(cori_rank_files())))
    ids = [f.rule_id for f in diagnosis.findings]
    assert "aligned-gaps" in ids
    assert "false-balance" not in ids
