"""The options the analysing commands share, and the ``Settings`` they build.

Every command that reads traces takes the same trace arguments, ``--nsys`` and analysis
options (busy mode, window, ``--start``/``--end`` as durations with a unit, warm-up,
drift windows, ``--ncu``); they are declared once here and turned into one
:class:`nsysan.settings.Settings` by :func:`build_settings`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

trace_paths = click.argument("traces", nargs=-1, required=True, type=click.Path(path_type=Path))
nsys_option = click.option(
    "--nsys",
    "nsys_path",
    type=click.Path(path_type=Path),
    help="The nsys that exports .nsys-rep/.qdrep reports to SQLite (default: nsys on PATH).",
)


_DURATION_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
DURATION_FORMS = "accepted forms: 2.5s, 300ms, 150us, 150µs, 1500ns"
_INT64_MAX = 2**63 - 1


class DurationType(click.ParamType):
    """A time on the trace timeline with its unit: ``2.5s``, ``300ms``, ``150us``, ``1500ns``.

    A bare number is refused (ns or s? the two readings differ a billion times); only
    ``0`` needs no unit.
    """

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        text = str(value).strip().lower()
        unit = next(
            (u for u in sorted(_DURATION_UNITS, key=len, reverse=True) if text.endswith(u)), None
        )
        number = text[: -len(unit)].strip() if unit else text
        try:
            amount = float(number)
        except ValueError:
            self.fail(f"{value!r} is not a duration; {DURATION_FORMS}", param, ctx)
        if unit is None and amount != 0:
            self.fail(f"{value!r} has no unit; {DURATION_FORMS}", param, ctx)
        ns = amount * _DURATION_UNITS[unit or "ns"]
        if not 0 <= ns <= _INT64_MAX:  # also NaN and infinities
            self.fail(f"{value!r} is out of range (0 to about 292 years)", param, ctx)
        return int(round(ns))


DURATION = DurationType()


def analysis_options(func: Any, ncu: bool = True) -> Any:
    """The options every analysing command shares; they build a Settings.

    ``ncu=False`` leaves out ``--ncu`` (batch and diff find or take no single CSV).
    """
    options = [
        click.option(
            "--busy-mode",
            type=click.Choice(["kernels", "nvidia"]),
            default="kernels",
            show_default=True,
            help="Busy = kernels only, or also add NVIDIA's gpu_gaps definition "
            "(kernels + memcpy + memset + profiler overhead, per process and device).",
        ),
        click.option(
            "--window",
            "window_kind",
            type=click.Choice(["per-gpu", "common"]),
            default="per-gpu",
            show_default=True,
            help="Measure each GPU from its first to last kernel, or all GPUs over one "
            "common window. --start/--end or --nvtx-range override it.",
        ),
        click.option(
            "--start",
            type=DURATION,
            help="Window start on the trace timeline, with a unit (2.5s, 300ms, 150us, 1500ns).",
        ),
        click.option("--end", type=DURATION, help="Window end on the trace timeline, with a unit."),
        click.option("--nvtx-range", help="Window = span of the NVTX ranges with this exact text."),
        click.option(
            "--skip-warmup",
            type=DURATION,
            default=0,
            help="Leave out this much time (with a unit) at the start of each window.",
        ),
        click.option(
            "--drift-windows",
            type=click.IntRange(min=20, max=10_000),
            default=20,
            show_default=True,
            help="Number of equal windows for the load-drift series.",
        ),
        click.option(
            "--ncu",
            "ncu_csv",
            type=click.Path(path_type=Path),
            help="Nsight Compute CSV (--page raw or details) of the same program.",
        ),
    ]
    for option in reversed(options if ncu else options[:-1]):
        func = option(func)
    return func


def trace_analysis_options(func: Any) -> Any:
    """:func:`analysis_options` without ``--ncu``."""
    return analysis_options(func, ncu=False)


def build_settings(
    busy_mode: str,
    window_kind: str,
    start: int | None,
    end: int | None,
    nvtx_range: str | None,
    skip_warmup: int,
    drift_windows: int,
    lang: str = "en",
) -> Any:
    from nsysan.settings import Settings, WindowSpec

    if nvtx_range:
        spec = WindowSpec(kind="nvtx", nvtx_range=nvtx_range, skip_warmup_ns=skip_warmup)
    elif start is not None or end is not None:
        spec = WindowSpec(kind="explicit", start_ns=start, end_ns=end, skip_warmup_ns=skip_warmup)
    else:
        spec = WindowSpec(
            kind="common" if window_kind == "common" else "per_gpu", skip_warmup_ns=skip_warmup
        )
    return Settings(busy_mode=busy_mode, window=spec, drift_windows=drift_windows, lang=lang)  # type: ignore[arg-type]
