from __future__ import annotations

import pytest

from nsysan.report import fmt


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (0, "0 ns"),
        (999, "999 ns"),
        (1_000, "1.00 µs"),
        (1_234_567, "1.23 ms"),
        (35_000_000_000, "35.0 s"),
        (-2_500_000, "-2.50 ms"),
        (None, "n/a"),
    ],
)
def test_duration(ns: int | None, text: str) -> None:
    assert fmt.duration(ns) == text


@pytest.mark.parametrize(
    ("share", "text"),
    [
        (0.0, "0.0%"),
        (1.0, "100.0%"),
        (0.3512, "35.1%"),
        (0.00001, "<0.1%"),
        (0.99999, ">99.9%"),
        (None, "n/a"),
    ],
)
def test_percent_never_rounds_to_the_extremes(share: float | None, text: str) -> None:
    assert fmt.percent(share) == text


def test_ratio_count_bytes() -> None:
    assert fmt.ratio(1.1234) == "1.12×"
    assert fmt.count(1234567) == "1,234,567"
    assert fmt.nbytes(3 * 1024 * 1024) == "3.0 MiB"
