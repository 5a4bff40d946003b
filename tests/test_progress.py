"""The progress display: on a terminal only, never with --quiet, never in pipes."""

from __future__ import annotations

import io

import pytest
from conftest import REPO, run_cli

from nsysan import progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_phase_is_shown_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    progress.enable(quiet=False)
    try:
        with progress.phase("reading trace.sqlite"):
            pass
    finally:
        progress.enable(quiet=True)
    assert "reading trace.sqlite" in terminal.getvalue()


@pytest.mark.parametrize("quiet", [True, False])
def test_nothing_is_shown_when_quiet_or_not_a_terminal(
    monkeypatch: pytest.MonkeyPatch, quiet: bool
) -> None:
    stream = _Terminal() if quiet else io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    progress.enable(quiet=quiet)
    with progress.phase("reading trace.sqlite"):
        pass
    assert stream.getvalue() == ""


def test_quiet_is_accepted_and_stderr_stays_clean(
    capsys: pytest.CaptureFixture[str], tmp_path: object
) -> None:
    code, out, err = run_cli(["-q", "analyze", str(REPO / "fixtures" / "balanced.sqlite")], capsys)
    assert code == 0 and out and err == ""
