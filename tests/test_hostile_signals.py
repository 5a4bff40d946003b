"""SIGINT/SIGTERM during a run: temporary files removed, one line, exit 130/143."""

from __future__ import annotations

import hashlib
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import SHARED_TRACES

SMALL = SHARED_TRACES / "T033-dlprof" / "trace.sqlite"

# Runs the CLI with the final rename made to stall, so the signal arrives while the
# temporary output file exists; prints a marker on stdout when it is reached.
# Only the output's rename stalls: other renames (numba writing its cache of a loop
# compiled for the first time) go through.
_STALLED_WRITE = """
import os, sys, time
replace = os.replace
def stall(src, dst):
    if os.path.basename(os.path.dirname(os.fspath(dst))) != "out":
        return replace(src, dst)
    print("WRITING", flush=True)
    time.sleep(120)
os.replace = stall
from nsysan.cli import main
main(sys.argv[1:])
"""


def _start(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _STALLED_WRITE, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
    )


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    if not SMALL.exists():
        pytest.skip("needs the real traces")
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copyfile(SMALL, folder / "t.sqlite")
    return folder / "t.sqlite"


@pytest.mark.parametrize(
    ("sig", "code", "word"),
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")],
)
@pytest.mark.parametrize("command", ["report", "analyze", "simulate"])
def test_a_signal_during_the_write_removes_the_temp_file(
    trace: Path, tmp_path: Path, sig: signal.Signals, code: int, word: str, command: str
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    args = {
        "report": ["report", str(trace), "-o", str(out / "r.html")],
        "analyze": ["analyze", str(trace), "-o", str(out / "r.json")],
        "simulate": ["simulate", "balanced", "--scale", "0.05", "-o", str(out / "s.sqlite")],
    }[command]
    digest = hashlib.sha256(trace.read_bytes()).hexdigest()
    proc = _start(args, tmp_path)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "WRITING"
        assert [p.name for p in out.iterdir()], "the temporary file should exist now"
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == code
    assert err == f"nsysan: {word}\n"
    assert list(out.iterdir()) == []
    assert sorted(p.name for p in trace.parent.iterdir()) == ["t.sqlite"]
    assert hashlib.sha256(trace.read_bytes()).hexdigest() == digest


def test_ctrl_c_while_reading_exits_130_with_one_line(trace: Path, tmp_path: Path) -> None:
    # Signalled once the imports are done (before that Python's default handler runs).
    script = (
        "import sys; from nsysan.cli import main; print('READY', flush=True); main(sys.argv[1:])"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script, "analyze", str(trace), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "READY"
    time.sleep(0.3)  # inside ingest or analysis: every phase must exit cleanly
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    if proc.returncode == 0:
        pytest.skip("the run finished before the signal")
    assert proc.returncode == 130
    assert err == "nsysan: interrupted\n"


def test_handlers_are_restored_after_an_in_process_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from conftest import run_cli

    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    code, _, _ = run_cli(["--version"], capsys)
    assert code == 0
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


# The console script's entry point, started the way the installed script starts it, after a
# marker: a signal that arrives while the interpreter itself starts (before any nsysan
# code runs) cannot be caught by any program, so the test waits until ours runs.
_LAUNCHER = """
import sys
print("READY", flush=True)
from nsysan._launcher import main
sys.argv = ["nsysan", *sys.argv[1:]]
main()
"""


@pytest.mark.parametrize("after_s", [0.05, 0.2, 0.5])
def test_ctrl_c_while_the_command_loads_exits_130_with_one_line(
    trace: Path, tmp_path: Path, after_s: float
) -> None:
    """The console script's own entry point: an interrupt during the imports (polars,
    numba, the analyses) is one line too, not a traceback."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _LAUNCHER, "analyze", str(trace), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "READY"
    time.sleep(after_s)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    if proc.returncode == 0:
        pytest.skip("the run finished before the signal")
    assert proc.returncode == 130
    assert err == "nsysan: interrupted\n"
