"""`nsysan diff` (alias `compare`): case-study vs case-study-fixed both ways, gates
(exit 4), `analyze --fail-on`, comparability warnings and --strict, the HTML page."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import REPO, run_cli

from nsysan import contract
from nsysan.diff import diff_documents, load_run
from nsysan.diff.gates import parse_gate
from nsysan.diff.measures import SHARE_MEASURES
from nsysan.errors import SettingsError

FIX = REPO / "fixtures"
CASE, FIXED = FIX / "case-study.sqlite", FIX / "case-study-fixed.sqlite"


@pytest.fixture(scope="module")
def docs() -> dict[str, dict]:  # type: ignore[type-arg]
    return {
        "case": load_run([CASE]),
        "fixed": load_run([FIXED]),
        "tp": load_run([FIX / "tp-heads.sqlite"]),
    }


def test_fix_resolves_false_balance_and_raises_throughput(docs: dict) -> None:  # type: ignore[type-arg]
    d = diff_documents(docs["case"], docs["fixed"], gates=["gap_share>+5pt", "throughput<-3%"])
    contract.validate(d)
    assert [f["rule_id"] for f in d["findings"]["resolved"]] == ["false-balance"]
    assert d["findings"]["new"] == [] and d["findings"]["remaining"] == []
    gap = d["overall"]["gap_share"]
    assert gap["before"] > 0.3 and gap["after"] < 0.1 and gap["delta"] < -0.2
    assert d["throughput_unit"] == "steps/s"
    assert d["overall"]["throughput"]["relative"] > 0.3  # 20 → 28 decode steps in ~1 s
    assert [g["gpu"] for g in d["gpus"]] == [0, 1, 2, 3]
    assert all(g["measures"]["gap_share"]["delta"] < -0.2 for g in d["gpus"])
    assert d["comparable"] == {"same_gpu_count": True, "kernel_name_overlap": 1.0, "warnings": []}
    assert not any(g["tripped"] for g in d["gates"])


def test_the_other_way_trips_every_gate(docs: dict) -> None:  # type: ignore[type-arg]
    gates = ["gap_share>+5pt", "throughput<-3%", "new_finding>=warning", "finding>=critical"]
    d = diff_documents(docs["fixed"], docs["case"], gates=gates)
    contract.validate(d)
    assert [f["rule_id"] for f in d["findings"]["new"]] == ["false-balance"]
    assert d["findings"]["resolved"] == []
    by = {g["expression"]: g for g in d["gates"]}
    assert all(g["tripped"] for g in d["gates"])
    assert by["gap_share>+5pt"]["value"] == pytest.approx(d["overall"]["gap_share"]["delta"] * 100)
    assert by["throughput<-3%"]["value"] < -25
    assert by["new_finding>=warning"]["value"] == "false-balance"
    # A gate past the change does not trip.
    d2 = diff_documents(docs["fixed"], docs["case"], gates=["gap_share>+50pt", "throughput<-50%"])
    assert not any(g["tripped"] for g in d2["gates"])


def test_different_gpu_counts_warn_and_strict_refuses(docs: dict) -> None:  # type: ignore[type-arg]
    d = diff_documents(docs["case"], docs["tp"])
    assert d["comparable"]["same_gpu_count"] is False
    assert "different GPU counts (4 before, 8 after)" in d["comparable"]["warnings"][0]
    assert [g["gpu"] for g in d["gpus"]] == list(range(8))
    contract.validate(d)
    with pytest.raises(SettingsError, match="--strict"):
        diff_documents(docs["case"], docs["tp"], strict=True)


def test_plainly_different_program_is_named() -> None:
    before = {"gpus": [{}], "workload": {"kernels": [{"name": "a", "count": 1, "total_ns": 100}]}}
    after = {"gpus": [{}], "workload": {"kernels": [{"name": "b", "count": 1, "total_ns": 100}]}}
    d = diff_documents(before, after)
    assert d["comparable"]["kernel_name_overlap"] == 0.0
    assert "different programs" in d["comparable"]["warnings"][0]
    assert [k["name"] for k in d["kernels"]["added"]] == ["b"]
    assert [k["name"] for k in d["kernels"]["removed"]] == ["a"]


def test_kernel_slower_and_faster_per_call() -> None:
    def doc(rows: list[tuple[str, int, int]]) -> dict:  # type: ignore[type-arg]
        return {
            "gpus": [{}],
            "workload": {"kernels": [{"name": n, "count": c, "total_ns": t} for n, c, t in rows]},
        }

    before = doc([("gemm", 100, 1_000_000), ("attn", 100, 500_000), ("same", 10, 10_000)])
    # gemm 10 µs → 12 µs per call; attn 5 µs → 4 µs; "same": twice the calls, same per call.
    after = doc([("gemm", 200, 2_400_000), ("attn", 100, 400_000), ("same", 20, 20_000)])
    k = diff_documents(before, after)["kernels"]
    assert [r["name"] for r in k["slower"]] == ["gemm"]
    assert k["slower"][0]["relative"] == pytest.approx(0.2)
    assert [r["name"] for r in k["faster"]] == ["attn"]
    assert k["added"] == [] and k["removed"] == []


@pytest.mark.parametrize(
    "expr, message",
    [
        ("gap_share>>5", "not a gate"),
        ("gapshare>+5pt", "unknown measure"),
        ("throughput<-3pt", "shares only"),
        ("new_finding>=5", "takes a severity"),
        ("gap_share>warning", "takes a number"),
    ],
)
def test_bad_gates_are_one_line_errors(expr: str, message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        parse_gate(expr, frozenset({"gap_share", "throughput"}), SHARE_MEASURES)


def test_cli_diff_both_ways_exit_codes_json_and_html(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gates = ["--fail-if", "gap_share>+5pt", "--fail-if", "new_finding>=warning"]
    code, out, _ = run_cli(["-q", "diff", str(CASE), "--vs", str(FIXED), *gates], capsys)
    assert code == 0
    assert "resolved findings: false-balance" in out
    html = tmp_path / "d.html"
    code, out, err = run_cli(
        ["-q", "diff", str(FIXED), "--vs", str(CASE), *gates, "--json", "-o", str(html)], capsys
    )
    assert code == 4
    assert "gate tripped: gap_share>+5pt, new_finding>=warning" in err
    contract.validate(json.loads(out))
    page = html.read_text()
    assert (
        "Before / after" in page
        and "false-balance" in page
        and "http" not in page.split("<style>")[0]
    )
    code, _, _ = run_cli(
        [
            "-q",
            "diff",
            str(FIXED),
            "--vs",
            str(CASE),
            "-o",
            str(tmp_path / "z.html"),
            "--lang",
            "zh",
        ],
        capsys,
    )
    zh = (tmp_path / "z.html").read_text()
    assert "新出现" in zh and "前后对比" in zh and "吞吐量" in zh


def test_compare_alias_and_analysis_json_sides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = tmp_path / "before.json"
    assert run_cli(["-q", "analyze", str(CASE), "-o", str(before)], capsys)[0] == 0
    code, out, _ = run_cli(["-q", "compare", str(before), str(FIXED)], capsys)
    assert code == 0 and "resolved findings: false-balance" in out
    bad = tmp_path / "bad.json"
    bad.write_text('{"kind": "analysis", "schema_version": 1}')
    code, _, err = run_cli(["-q", "diff", str(bad), "--vs", str(FIXED)], capsys)
    assert code == 1 and "json-contract" in err and "Traceback" not in err
    code, _, err = run_cli(["-q", "diff", str(CASE), str(FIXED), str(CASE)], capsys)
    assert code == 2 and "--vs" in err


def test_analyze_fail_on(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["-q", "analyze", str(CASE), "--fail-on", "critical"], capsys)
    assert code == 4 and "false-balance" in err
    code, _, _ = run_cli(
        ["-q", "analyze", str(FIX / "balanced.sqlite"), "--fail-on", "warning"], capsys
    )
    assert code == 0


def test_hostile_kernel_names_are_escaped_on_the_diff_page(tmp_path: Path) -> None:
    from nsysan.diff.html import render_diff_html
    from nsysan.simulate import generate

    hostile = tmp_path / "hostile.sqlite"
    generate("case-study", hostile, seed=0, scale=0.1, hostile_names=True)
    d = diff_documents(load_run([CASE]), load_run([hostile]))
    assert any("<script>" in k["name"] for k in d["kernels"]["added"])
    page = render_diff_html(d, "en")
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)" in page


def test_a_gate_without_data_is_reported_and_trips_only_when_strict() -> None:
    bare = {"gpus": [{}], "findings": []}
    d = diff_documents(bare, bare, gates=["throughput<-3%"])
    assert d["throughput_unit"] is None
    assert d["gates"] == [
        {
            "expression": "throughput<-3%",
            "measure": "throughput",
            "value": None,
            "tripped": False,
            "reason": "not measured in both runs",
        }
    ]
    strict = diff_documents(bare, bare, gates=["throughput<-3%"], strict=True)
    assert strict["gates"][0]["tripped"] is True


def test_diff_page_says_why_a_gate_was_not_evaluated_in_both_languages() -> None:
    from nsysan.diff.html import render_diff_html

    bare = {"gpus": [{}], "findings": []}
    d = diff_documents(bare, bare, gates=["throughput<-3%"])
    assert "(not measured in both runs)" in render_diff_html(d, "en")
    assert "两次运行未都测得该指标" in render_diff_html(d, "zh")
