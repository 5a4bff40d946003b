"""Durations on the command line need a unit; absurd values are usage errors, not crashes."""

from __future__ import annotations

import pytest
from conftest import run_cli

from nsysan.cli_options import DurationType


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("2.5s", 2_500_000_000),
        ("300ms", 300_000_000),
        ("150us", 150_000),
        ("150µs", 150_000),
        ("1500ns", 1500),
        ("3 US", 3000),
        ("0", 0),
        ("0.0", 0),
    ],
)
def test_durations_with_a_unit(text: str, ns: int) -> None:
    assert DurationType().convert(text, None, None) == ns


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("1500000", "has no unit"),
        ("10", "has no unit"),
        ("inf", "has no unit"),
        ("banana", "is not a duration"),
        ("1.5 parsecs", "is not a duration"),
        ("-1s", "is out of range"),
        ("1e300s", "is out of range"),
        ("nan s", "is out of range"),
        ("infms", "is out of range"),
    ],
)
@pytest.mark.parametrize("option", ["--start", "--end", "--skip-warmup"])
def test_bad_durations_are_usage_errors_that_show_the_forms(
    text: str, reason: str, option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(["analyze", option, text, "/no/such/trace.sqlite"], capsys)
    assert code == 2
    assert f"{text!r} {reason}" in err
    if reason != "is out of range":
        assert "accepted forms: 2.5s, 300ms, 150us, 150µs, 1500ns" in err
    assert "Traceback" not in err
