"""Outputs never replace an input: `-o`/`--json` onto a trace or the --ncu CSV is refused."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest
from conftest import SHARED_TRACES, run_cli

from nsysan.errors import OutputError
from nsysan.output import refuse_overwrite, remove_temp_files, write_atomic

SMALL = SHARED_TRACES / "T019-cardiac-simulation" / "trace.sqlite"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    if not SMALL.exists():
        pytest.skip("needs the real traces")
    copy = tmp_path / "t.sqlite"
    shutil.copyfile(SMALL, copy)
    return copy


@pytest.fixture
def ncu_csv(tmp_path: Path) -> Path:
    csv = tmp_path / "k.csv"
    csv.write_text('"ID","Kernel Name"\n"0","k"\n')
    return csv


def _alias(trace: Path, how: str) -> Path:
    if how == "same":
        return trace
    if how == "relative-dots":
        return trace.parent / "." / ".." / trace.parent.name / trace.name
    alias = trace.parent / f"alias-{how}.sqlite"
    if how == "symlink":
        alias.symlink_to(trace)
    else:
        os.link(trace, alias)
    return alias


@pytest.mark.parametrize("how", ["same", "relative-dots", "symlink", "hardlink"])
@pytest.mark.parametrize(
    "command",
    [
        ["report", "{t}", "-o", "{o}"],
        ["report", "{t}", "-o", "{tmp}/r.html", "--json", "{o}"],
        ["analyze", "{t}", "-o", "{o}"],
        ["info", "{t}"],  # control: nothing written, nothing refused
    ],
    ids=["report-o", "report-json", "analyze-o", "info"],
)
def test_an_output_that_is_the_trace_is_refused(
    trace: Path, how: str, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    alias = _alias(trace, how)
    before = _digest(trace)
    names_before = sorted(p.name for p in trace.parent.iterdir())
    args = [a.format(t=trace, o=alias, tmp=trace.parent / "out") for a in command]
    code, _, err = run_cli(args, capsys)
    assert _digest(trace) == before
    if command[0] == "info":
        assert code == 0
        return
    assert code == 1
    assert err.count("\n") == 1
    assert "refusing to overwrite it" in err and "(see docs/errors.md#output)" in err
    # Refused before any work: nothing was written anywhere.
    assert sorted(p.name for p in trace.parent.iterdir()) == names_before


def test_an_output_onto_the_ncu_csv_is_refused(
    trace: Path, ncu_csv: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = ncu_csv.read_bytes()
    for args in (
        ["report", str(trace), "--ncu", str(ncu_csv), "-o", str(ncu_csv)],
        ["analyze", str(trace), "--ncu", str(ncu_csv), "-o", str(ncu_csv)],
        ["report", str(trace), "--ncu", str(ncu_csv), "--json", str(ncu_csv)],
    ):
        code, _, err = run_cli(args, capsys)
        assert code == 1
        assert f"{ncu_csv}: is an input; refusing to overwrite it" in err
    assert ncu_csv.read_bytes() == before


def test_the_html_and_json_outputs_must_differ(
    trace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = trace.parent / "r.html"
    code, _, err = run_cli(["report", str(trace), "-o", str(out), "--json", str(out)], capsys)
    assert code == 1
    assert "is an output; refusing to overwrite it" in err
    assert not out.exists()


def test_the_default_report_path_is_checked_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    if not SMALL.exists():
        pytest.skip("needs the real traces")
    # `a.sqlite` is a link to `a-report.html`, which is its default output path.
    monkeypatch.chdir(tmp_path)
    victim = tmp_path / "a-report.html"
    shutil.copyfile(SMALL, victim)
    (tmp_path / "a.sqlite").symlink_to(victim)
    before = _digest(victim)
    code, _, err = run_cli(["report", "a.sqlite"], capsys)
    assert code == 1 and "refusing to overwrite it" in err
    assert _digest(victim) == before


def test_refuse_overwrite_accepts_distinct_files(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("x")
    refuse_overwrite([b, tmp_path / "c", None], [a, None])
    with pytest.raises(OutputError, match="is the input"):
        refuse_overwrite([tmp_path / "sub" / ".." / "a"], [a])


def test_write_atomic_leaves_no_temp_file_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "dir-as-target"
    target.mkdir()
    with pytest.raises(OutputError, match="cannot write"):
        write_atomic(target, "x")
    assert [p.name for p in tmp_path.iterdir()] == ["dir-as-target"]


def test_temp_files_in_flight_are_removed_on_request(tmp_path: Path) -> None:
    import nsysan.output as output

    # A write interrupted between creating its temp file and renaming it.
    tmp = tmp_path / ".r.html.abc.tmp"
    tmp.write_text("partial")
    output._IN_FLIGHT.add(str(tmp))
    remove_temp_files()
    assert not tmp.exists()
    assert not output._IN_FLIGHT
