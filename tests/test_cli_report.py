"""`nsysan report / demo / simulate / compare / analyze` end to end."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, cori_rank_files, run_cli, single_file_traces

HOSTILE = "<script>alert(1)</script>"


@pytest.mark.shared
@pytest.mark.slow
@pytest.mark.parametrize("path", single_file_traces(), ids=lambda p: p.parent.name)
def test_report_on_every_real_trace(
    path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    out = tmp_path / "r.html"
    code, stdout, err = run_cli(
        ["report", str(path), "-o", str(out), "--json", str(tmp_path / "r.json")], capsys
    )
    assert code == 0, err
    html = out.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>")
    assert "</html>" in html
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["schema_version"] == 2
    assert doc["headline"]["text"].split(" (")[0] in stdout
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert [
        p.name for p in tmp_path.iterdir() if p.name.startswith(".")
    ] == []  # no temp files left


@pytest.mark.shared
def test_report_on_the_eight_rank_set(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cori.html"
    code, stdout, _ = run_cli(
        ["report", *map(str, cori_rank_files()), "-o", str(out), "--lang", "zh"], capsys
    )
    assert code == 0
    html = out.read_text(encoding="utf-8")
    assert '<html lang="zh"' in html
    assert "GPU 7" in html


def test_no_gpu_work_gives_a_short_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from conftest import SHARED_TRACES

    trace = SHARED_TRACES / "T082-jacc-jl/trace.sqlite"
    if not trace.exists():
        pytest.skip("needs the real traces")
    out = tmp_path / "r.html"
    code, stdout, _ = run_cli(["report", str(trace), "-o", str(out)], capsys)
    assert code == 0
    assert "No GPU kernels in this trace" in stdout
    assert out.stat().st_size < 200_000  # no plotly bundle without charts


def test_report_on_bad_input_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "x.sqlite"
    bad.write_text("not a database")
    out = tmp_path / "r.html"
    code, stdout, err = run_cli(["report", str(bad), "-o", str(out)], capsys)
    assert code == 1
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_simulate_hostile_names_are_escaped_in_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "hostile.sqlite"
    code, _, err = run_cli(
        ["simulate", "case-study", "-o", str(trace), "--scale", "0.1", "--hostile-names"], capsys
    )
    assert code == 0, err
    out = tmp_path / "r.html"
    code, _, err = run_cli(["report", str(trace), "-o", str(out)], capsys)
    assert code == 0, err
    html = out.read_text(encoding="utf-8")
    assert HOSTILE not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html or "\\u003cscript\\u003e" in html


def test_demo_writes_the_case_study_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, stdout, err = run_cli(["demo", "-o", str(tmp_path / "demo")], capsys)
    assert code == 0, err
    assert stdout.startswith("False balance: all 4 GPUs look")
    report = tmp_path / "demo" / "case-study-report.html"
    assert report.stat().st_size < 10_000_000
    doc = json.loads((tmp_path / "demo" / "case-study.json").read_text())
    assert doc["findings"][0]["rule_id"] == "false-balance"


def test_analyze_json_and_compare(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before, after = REPO / "fixtures/case-study.sqlite", REPO / "fixtures/case-study-fixed.sqlite"
    out = tmp_path / "before.json"
    code, _, _ = run_cli(["analyze", str(before), "-o", str(out)], capsys)
    assert code == 0
    doc = json.loads(out.read_text())
    assert "gaps" in doc["results"]["gaps"]["omitted_event_tables"]
    code, stdout, _ = run_cli(["compare", str(out), str(after)], capsys)
    assert code == 0
    assert "resolved findings: false-balance" in stdout
    code, stdout, _ = run_cli(["analyze", "--json", "--detail", "full", str(before)], capsys)
    assert code == 0
    full = json.loads(stdout)["results"]
    assert full["gaps"]["gaps"]
    # Left out of the summary analysis, the stagger's per-gap table is there in full.
    assert len(full["stagger"]["gaps"]) == len(full["gaps"]["gaps"])


def test_window_options_are_applied(capsys: pytest.CaptureFixture[str]) -> None:
    trace = REPO / "fixtures/case-study.sqlite"
    code, stdout, _ = run_cli(
        ["analyze", "--json", "--start", "0.2s", "--end", "0.6s", str(trace)], capsys
    )
    assert code == 0
    doc = json.loads(stdout)
    assert doc["settings"]["window"] == {
        "kind": "explicit",
        "start_ns": 200_000_000,
        "end_ns": 600_000_000,
        "nvtx_range": None,
        "skip_warmup_ns": 0,
    }
    windows = [row["window_ns"] for row in doc["results"]["gaps"]["summary"]]
    assert all(w <= 400_000_000 for w in windows)
    code, _, err = run_cli(["analyze", "--start", "banana", str(trace)], capsys)
    assert code == 2 and "not a duration" in err
    code, _, err = run_cli(["analyze", "--nvtx-range", "no such range", str(trace)], capsys)
    assert code == 1 and len(err.strip().splitlines()) == 1


def test_the_page_modules_are_imported_while_the_trace_is_analysed() -> None:
    # In a fresh interpreter: the thread imports plotly and the page's modules, and the
    # interpreter waits for it (not a daemon) rather than ending under it.
    code = (
        "import sys, threading\n"
        "from nsysan.report import import_page_modules_meanwhile\n"
        "started, start = [], threading.Thread.start\n"
        "threading.Thread.start = lambda t: (started.append(t), start(t))[1]\n"
        "assert 'plotly' not in sys.modules\n"
        "import_page_modules_meanwhile()\n"
        "(t,) = [t for t in started if t.name == 'nsysan-page-imports']\n"
        "assert not t.daemon\n"
        "t.join()\n"
        "print('plotly' in sys.modules, 'nsysan.report.html' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["True", "True"]
