""".nsys-rep / .qdrep input: exported with nsys into nsysan's cache, reused, never beside the report.

A stand-in ``nsys`` (a shell script that copies a fixture export) pins the cache rules;
the end-to-end test profiles a small CPU program with the real Nsight Systems when it is
installed (Debian's ``nsight-systems`` package is 2022.4), and says why it skips when not.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli

from nsysan.ingest import load_trace
from nsysan.ingest.nsysrep import export_report, is_report

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

FAKE_NSYS = """#!/bin/sh
# A stand-in for nsys: --version, and export --output OUT REPORT (copies $FIXTURE to OUT).
echo "$@" >> "$CALLS"
if [ "$1" = "--version" ]; then echo "NVIDIA Nsight Systems version 2099.1.2.3-abc"; exit 0; fi
if [ -n "$FAIL" ]; then echo "Importer error: the report is damaged" >&2; exit 3; fi
out=""
while [ $# -gt 0 ]; do
  if [ "$1" = "--output" ]; then out="$2"; shift; fi
  shift
done
cp "$FIXTURE" "$out"
"""


@pytest.fixture
def fake_nsys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "nsys"
    exe.write_text(FAKE_NSYS)
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("FIXTURE", str(FIXTURES / "balanced.sqlite"))
    monkeypatch.setenv("CALLS", str(tmp_path / "calls.txt"))
    monkeypatch.setenv("NSYSAN_CACHE_DIR", str(tmp_path / "cache"))
    return exe


def _report(folder: Path, name: str = "run.nsys-rep") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(b"not really a report, but nsys is a stand-in here")
    return path


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_report_is_exported_into_the_cache_and_reused(fake_nsys: Path, tmp_path: Path) -> None:
    report = _report(tmp_path / "user")
    before = _digest(report)
    first = export_report(report)
    assert not first.reused and first.nsys == fake_nsys and first.nsys_version == "2099.1.2.3"
    assert first.sqlite.is_relative_to(tmp_path / "cache" / "exports")
    assert first.sqlite.read_bytes() == (FIXTURES / "balanced.sqlite").read_bytes()
    second = export_report(report)
    assert second.reused and second.sqlite == first.sqlite
    calls = (tmp_path / "calls.txt").read_text().splitlines()
    assert sum(line.startswith("export") for line in calls) == 1  # the second run reused it
    # Never beside the user's file, which is never written.
    assert sorted(p.name for p in report.parent.iterdir()) == ["run.nsys-rep"]
    assert _digest(report) == before
    # A changed report is exported again, into another cache entry.
    report.write_bytes(b"a new capture with other bytes")
    third = export_report(report)
    assert not third.reused and third.sqlite != first.sqlite
    assert first.sqlite.exists()


def test_load_trace_and_cli_accept_reports_and_say_which_nsys(
    fake_nsys: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = _report(tmp_path / "user", "rank0.qdrep")
    assert is_report(report)
    trace = load_trace([report])
    assert trace.gpu_count == 4
    assert trace.notes[0].startswith(
        f"{report}: exported to SQLite by {fake_nsys} (2099.1.2.3) in "
    )
    code, out, err = run_cli(["info", str(report)], capsys)
    assert code == 0, err
    assert "reused the SQLite export made by" in out
    html = tmp_path / "out" / "r.html"
    html.parent.mkdir()
    code, out, err = run_cli(["-q", "report", str(report), "-o", str(html)], capsys)
    assert code == 0, err
    assert "reused the SQLite export" in html.read_text(encoding="utf-8")


def test_without_nsys_one_clear_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("NSYSAN_CACHE_DIR", str(tmp_path / "cache"))
    report = _report(tmp_path / "user")
    code, out, err = run_cli(["report", str(report)], capsys)
    assert code == 1 and out == ""
    assert err.count("\n") == 1
    assert err.startswith(
        f"nsysan: error: {report}: an Nsight Systems report; reading it needs nsys"
    )
    assert (
        "--nsys PATH" in err and "nsys export --type sqlite --output run.sqlite run.nsys-rep" in err
    )
    assert err.rstrip().endswith("(see docs/errors.md#nsys-not-found)")
    code, _, err = run_cli(["info", str(report), "--nsys", str(tmp_path / "no-nsys")], capsys)
    assert code == 1 and "not an executable file" in err and err.count("\n") == 1
    assert not (tmp_path / "cache").exists()
    assert sorted(p.name for p in report.parent.iterdir()) == ["run.nsys-rep"]


def test_a_failing_export_is_one_line_and_leaves_no_file(
    fake_nsys: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("FAIL", "1")
    report = _report(tmp_path / "user")
    code, _, err = run_cli(["info", str(report), "--nsys", str(fake_nsys)], capsys)
    assert code == 1 and err.count("\n") == 1
    assert "nsys export failed: Importer error: the report is damaged" in err
    assert "docs/errors.md#nsys-export" in err
    leftovers = [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    assert leftovers == []


# --- end to end, with the real Nsight Systems ------------------------------------------------

CPU_PROGRAM = "import time\nt = time.time()\nwhile time.time() - t < 0.3:\n    pass\n"


def _importer(nsys: Path) -> Path | None:
    """QdstrmImporter, for installs where nsys cannot find it (Debian's split packages)."""
    real = nsys.resolve()
    for folder in (
        real.parent.parent / "host-linux-x64",
        Path("/usr/lib/nsight-systems/host-linux-x64"),
    ):
        if (folder / "QdstrmImporter").is_file():
            return folder / "QdstrmImporter"
    return None


# On a loaded machine nsys's agent can fail to start ("Local Endpoint is not
# available"); one more try usually succeeds.
PROFILE_TRIES = 2


def _profile(nsys: Path, folder: Path) -> Path:
    program = folder / "spin.py"
    program.write_text(CPU_PROGRAM)
    out = folder / "spin"
    report = out.with_suffix(".nsys-rep")
    stream = out.with_suffix(".qdstrm")
    for _ in range(PROFILE_TRIES):
        done = subprocess.run(
            [str(nsys), "profile", "-t", "osrt", "--sample=none", "--cpuctxsw=none",
             "-o", str(out), "-f", "true", sys.executable, str(program)],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        if report.exists() or stream.exists():
            break
    if not report.exists() and stream.exists():
        importer = _importer(nsys)
        if importer is None:
            pytest.skip("nsys profile left a .qdstrm and no QdstrmImporter was found to import it")
        subprocess.run(
            [str(importer), "-i", str(stream)], capture_output=True, timeout=300, check=False
        )
    if not report.exists():
        pytest.skip(f"nsys profile made no report here: {done.stderr.strip()[-200:]}")
    stream.unlink(missing_ok=True)
    program.unlink()
    return report


@pytest.mark.skipif(shutil.which("nsys") is None, reason="Nsight Systems (nsys) is not installed")
def test_real_nsys_rep_end_to_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    nsys = Path(shutil.which("nsys") or "")
    monkeypatch.setenv("NSYSAN_CACHE_DIR", str(tmp_path / "cache"))
    user = tmp_path / "user"
    user.mkdir()
    report = _profile(nsys, user)
    before = _digest(report)
    code, out, err = run_cli(["info", str(report)], capsys)
    assert code == 0, err
    assert f"{report}: exported to SQLite by {nsys} (" in out
    assert "osrt" in out and "no GPU activity at all: a CPU-only trace" in out
    html = tmp_path / "spin-report.html"
    code, out, err = run_cli(["-q", "report", str(report), "-o", str(html)], capsys)
    assert code == 0, err
    assert "No GPU kernels in this trace" in out
    page = html.read_text(encoding="utf-8")
    assert "reused the SQLite export made by" in page
    assert sorted(p.name for p in user.iterdir()) == ["spin.nsys-rep"]
    assert _digest(report) == before
    exports = list((tmp_path / "cache" / "exports").rglob("*.sqlite"))
    assert len(exports) == 1 and exports[0].read_bytes().startswith(b"SQLite format 3\x00")
