"""Every number-to-text rule of the reports, in one place.

Durations are stored as integer nanoseconds and shares as 0..1 floats; only this
module turns them into text. Percentages never round to "0%" or "100%" unless the
value is exactly 0 or 1, so rounding cannot overstate or hide a finding.
"""

from __future__ import annotations

import math

_DURATION_UNITS = ((1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "µs"), (1, "ns"))


def duration(ns: int | float | None, digits: int = 3) -> str:
    """``1_234_567`` → ``"1.23 ms"`` (three significant digits by default)."""
    if ns is None or (isinstance(ns, float) and math.isnan(ns)):
        return "n/a"
    value = float(ns)
    sign = "-" if value < 0 else ""
    value = abs(value)
    for scale, unit in _DURATION_UNITS:
        if value >= scale or scale == 1:
            scaled = value / scale
            if scale == 1:
                return f"{sign}{scaled:.0f} {unit}"
            return f"{sign}{_significant(scaled, digits)} {unit}"
    raise AssertionError("unreachable")


def _significant(value: float, digits: int) -> str:
    if value == 0:
        return "0"
    decimals = max(0, digits - 1 - int(math.floor(math.log10(abs(value)))))
    return f"{value:.{decimals}f}"


def percent(share: float | None, decimals: int = 1) -> str:
    """``0.3512`` → ``"35.1%"``; never ``"0.0%"``/``"100.0%"`` unless exact."""
    if share is None or (isinstance(share, float) and math.isnan(share)):
        return "n/a"
    pct = share * 100
    text = f"{pct:.{decimals}f}"
    limit = 10.0 ** (-decimals)
    if share != 0 and float(text) == 0:
        return f"<{limit:.{decimals}f}%"
    if share != 1 and float(text) == 100:
        return f">{100 - limit:.{decimals}f}%"
    return f"{text}%"


def ratio(value: float | None, decimals: int = 2) -> str:
    """``1.1234`` → ``"1.12×"``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.{decimals}f}×"


def rate(per_s: float | None) -> str:
    """Events per second: ``283813.1`` → ``"284k"``, ``19.6`` → ``"19.6"``."""
    if per_s is None or (isinstance(per_s, float) and math.isnan(per_s)):
        return "n/a"
    return f"{per_s / 1_000:,.0f}k" if per_s >= 1_000 else f"{per_s:,.1f}"


def count(n: int | None) -> str:
    """``1234567`` → ``"1,234,567"``."""
    return "n/a" if n is None else f"{n:,}"


def nbytes(n: int | float | None) -> str:
    if n is None:
        return "n/a"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")
