"""Progress on a terminal: which phase of which file, with the time spent so far.

Long runs (millions of kernels take tens of seconds) show a one-line spinner on
stderr; nothing is printed when stderr is not a terminal or with ``--quiet``, so
logs and pipes stay clean. rich draws it: a well-kept library that handles terminal
widths, redraws and cleanup, instead of hand-written escape codes.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["enable", "enabled", "phase"]

_state = {"enabled": False}


def enable(quiet: bool) -> None:
    """Show progress from now on, unless ``quiet`` or stderr is not a terminal."""
    _state["enabled"] = not quiet and sys.stderr.isatty()


@contextmanager
def phase(text: str) -> Iterator[None]:
    """Show ``text`` with a spinner and elapsed time while the block runs."""
    if not _state["enabled"]:
        yield
        return
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        bar.add_task(text, total=None)
        yield


def enabled() -> bool:
    """Whether progress is shown (a terminal, and no ``--quiet``)."""
    return bool(_state["enabled"])
