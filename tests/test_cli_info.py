"""`nsysan info` on every real export, and one-line errors on bad input."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cori_rank_files, run_cli, single_file_traces


@pytest.mark.shared
@pytest.mark.parametrize("path", single_file_traces(), ids=lambda p: p.parent.name)
def test_info_succeeds_on_every_export(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["info", "--json", str(path)], capsys)
    assert code == 0, err
    summary = json.loads(out)
    assert summary["sources"][0]["path"] == str(path)
    assert summary["counts"]["kernels"] == sum(g["kernels"] for g in summary["gpus"])


@pytest.mark.shared
def test_info_text_on_the_eight_rank_set(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["info", *map(str, cori_rank_files())], capsys)
    assert code == 0
    assert "GPUs that ran work: 8" in out
    assert out.count("file ") >= 8


@pytest.mark.shared
def test_info_names_launches_without_kernels(
    shared_traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(["info", str(shared_traces / "T078-qcu/trace.sqlite")], capsys)
    assert code == 0
    assert "kernel launch calls) but no GPU activity records" in out
    assert "GPUs that ran work: 0" in out


def _bad_inputs(tmp: Path, shared: Path) -> dict[str, tuple[Path, str]]:
    empty = tmp / "empty.sqlite"
    empty.write_bytes(b"")
    text = tmp / "notes.sqlite"
    text.write_text("hello, not a database\n")
    other = tmp / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE foo (a INTEGER)")
    no_tables = tmp / "no_tables.sqlite"
    sqlite3.connect(no_tables).close()
    no_tables.write_bytes(other.read_bytes()[:100] + b"\x00" * 0)  # header only
    cases = {
        "missing": (tmp / "nope.sqlite", "no such file"),
        "directory": (tmp, "not a file"),
        "empty": (empty, "the file is empty"),
        "text": (text, "not a SQLite database"),
        "other-db": (other, "not an Nsight Systems export"),
        "header-only": (no_tables, "truncated"),
    }
    real = shared / "T039-gpu-poisson-solver/trace.sqlite"
    if real.exists():
        truncated = tmp / "truncated.sqlite"
        truncated.write_bytes(real.read_bytes()[:200_000])
        cases["truncated"] = (truncated, "truncated SQLite file")
    return cases


@pytest.mark.parametrize(
    "case", ["missing", "directory", "empty", "text", "other-db", "header-only", "truncated"]
)
def test_bad_input_gives_one_line_and_exit_1(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from conftest import SHARED_TRACES

    cases = _bad_inputs(tmp_path, SHARED_TRACES)
    if case not in cases:
        pytest.skip("needs the real traces")
    path, expected = cases[case]
    code, out, err = run_cli(["info", str(path)], capsys)
    assert code == 1
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("nsysan: error: ")
    assert expected in lines[0]
    assert "Traceback" not in err


def test_console_script_runs_as_a_module(tmp_path: Path) -> None:
    bad = tmp_path / "x.sqlite"
    bad.write_text("nope")
    proc = subprocess.run(
        [sys.executable, "-m", "nsysan", "info", str(bad)], capture_output=True, text=True
    )
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1
    assert "Traceback" not in proc.stderr


def test_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["info"], capsys)
    assert code == 2
    assert "Missing argument" in err
