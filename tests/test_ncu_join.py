"""A Nsight Compute CSV that joins less than half of the kernel time is flagged."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SHARED_TRACES, run_cli

from nsysan.ingest.ncu import NCU_JOIN_MIN_SHARE, join_warning

pytestmark = pytest.mark.shared

TRACE = SHARED_TRACES / "T015-isc25-icon-c" / "trace.sqlite"


def test_join_warning_threshold() -> None:
    assert join_warning(NCU_JOIN_MIN_SHARE, "x.csv") is None
    en, zh = join_warning(0.0, "x.csv")  # type: ignore[misc]
    assert "x.csv matches only 0.0% of the trace's kernel time" in en and "0.0%" in zh


@pytest.mark.parametrize(
    ("csv", "warned"),
    [("C012-isc25-icon-c", False), ("C073-spyinfer", True)],
)
def test_report_and_stderr_warn_on_a_csv_of_another_program(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], csv: str, warned: bool
) -> None:
    ncu = SHARED_TRACES / "ncu" / csv / "raw.csv"
    if not TRACE.exists() or not ncu.exists():
        pytest.skip(f"real traces not found at {SHARED_TRACES}")
    out = tmp_path / "r.html"
    code, _, err = run_cli(["report", str(TRACE), "--ncu", str(ncu), "-o", str(out)], capsys)
    assert code == 0
    html = out.read_text(encoding="utf-8")
    assert ("matches only" in err) is warned
    assert ("matches only" in html) is warned
    if warned:
        assert "matches only 0.0% of the trace's kernel time" in err
