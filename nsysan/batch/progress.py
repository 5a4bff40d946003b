"""Batch progress: a bar with ETA and a line per finished trace on a terminal,
plain log lines otherwise (``[3/20] ok T001-pipit__trace (2.1 s)``)."""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any

from nsysan import progress


class BatchProgress:
    def __init__(self, total: int, echo: Callable[[str], None]) -> None:
        self.total, self.done, self.echo = total, 0, echo
        self._bar: Any = None
        if progress.enabled() and total:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self._task = self._bar.add_task("analysing traces", total=total)

    def __enter__(self) -> BatchProgress:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._bar is not None:
            self._bar.stop()

    def finished(self, trace_id: str, status: str, seconds: float, error: str | None) -> None:
        self.done += 1
        line = f"[{self.done}/{self.total}] {status} {trace_id} ({seconds:.1f} s)"
        if error:
            line += f": {error}"
        if self._bar is not None:
            self._bar.console.print(line, markup=False, highlight=False)
            self._bar.advance(self._task)
        else:
            self.echo(line)
