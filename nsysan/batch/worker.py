"""One trace, start to finish, in a worker (a local process or a Dask worker).

:func:`process_trace` reads the trace's files (archive members copied to a private
temporary folder), analyses them, and returns the report HTML, the analysis JSON and
the table row as bytes and a dict: the client writes them, so a local pool and a
Dask cluster produce the same files. A worker holds one trace at a time. This module
imports no heavy library at import time, so a fresh worker process starts quickly.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nsysan.batch.inputs import Source


@dataclass(frozen=True)
class TraceTask:
    trace_id: str
    sources: tuple[Source, ...]
    ncu: Source | None
    settings: Any  # nsysan.settings.Settings
    files: str  # the sources' labels, ";"-separated (the row's ``files``)
    content_hash: str
    report_name: str  # relative to OUTDIR
    json_name: str
    nsys_path: str | None = None  # exports .nsys-rep/.qdrep sources (nsysan.ingest.nsysrep)


@dataclass
class TraceOutcome:
    trace_id: str
    row: dict[str, Any]
    html: bytes | None = None
    json: bytes | None = None
    seconds: float = 0.0
    peak_rss_kib: int = 0
    worker_pid: int = field(default_factory=os.getpid)


def init_worker(threads: int) -> None:
    """Process-pool initializer: share the cores among workers; stop with the client.

    Ctrl-C is the client's to handle (it leaves no half-written output); a worker
    ignores it, and ends (cleaning up its temporary files) when the client process
    ends, instead of finishing a trace nobody will collect.
    """
    import signal
    import sys

    os.environ.setdefault("POLARS_MAX_THREADS", str(threads))
    os.environ.setdefault("NUMBA_NUM_THREADS", str(threads))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _on_terminate)
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        try:
            ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        except (OSError, AttributeError):
            pass


class _Terminated(BaseException):
    """SIGTERM in a pool worker running a trace (:func:`init_worker`): not an
    ``Exception``, so no failure row catches it."""


# Whether this process is inside process_trace (what SIGTERM does depends on it).
_running = [False]


def _on_terminate(signum: int, frame: object) -> None:
    """A pool worker's SIGTERM (its client ended, or was told to).

    Inside a trace, the trace's work unwinds (its temporary files go); elsewhere it
    is idle, or sending a result to a client that no longer reads it, and ends at once.
    Not ``sys.exit``: the pool's worker loop catches it and tries to send it back, and
    a worker blocked on a full pipe with no reader would never end.
    """
    if _running[0]:
        raise _Terminated
    os._exit(143)


def _one_line(exc: BaseException) -> str:
    from nsysan.errors import NsysanError

    if isinstance(exc, NsysanError):
        return f"{exc.message} (docs/errors.md#{exc.slug})"
    text = " ".join(str(exc).split())
    return f"internal error: {type(exc).__name__}: {text}"[:500]


def process_trace(task: TraceTask) -> TraceOutcome:
    """Analyse one trace; a failure becomes a row with its one-line error."""
    _running[0] = True
    try:
        return _process_trace(task)
    except _Terminated:
        # Unwound: the trace's temporary files are gone. Its result would go to a
        # client that no longer reads it.
        os._exit(143)
    finally:
        _running[0] = False


def _process_trace(task: TraceTask) -> TraceOutcome:
    from nsysan.batch.inputs import materialized, with_source_labels
    from nsysan.batch.rows import empty_row, row_from_document

    started = time.perf_counter()
    try:
        from nsysan.analysis import analyze
        from nsysan.diagnose import diagnose
        from nsysan.ingest import load_trace
        from nsysan.ingest.ncu import read_ncu_csv
        from nsysan.report.document import analysis_document
        from nsysan.report.html import render_html
        from nsysan.report.jsonout import dumps
        from nsysan.report.view import build_view

        extra = (task.ncu,) if task.ncu else ()
        with materialized((*task.sources, *extra)) as paths:
            trace_paths = paths[: len(task.sources)]
            ncu = read_ncu_csv(paths[-1]) if task.ncu else None
            trace = load_trace(
                trace_paths,
                launch_config=ncu is not None,
                nsys_path=task.nsys_path,
                store_host_tables=True,
            )
        # The report names the files the user gave, not the temporary copies.
        trace = with_source_labels(trace, [s.rel or s.label for s in task.sources])
        ncu_label = Path(task.ncu.rel or task.ncu.label) if task.ncu else None
        analysis = analyze(trace, task.settings, ncu=ncu, ncu_path=ncu_label, detail_tables=False)
        lang = task.settings.lang
        diagnosis = diagnose(analysis)
        html = render_html(build_view(analysis, diagnosis, lang)).encode("utf-8")
        document = analysis_document(analysis, diagnosis=diagnosis)
        text = dumps(document) + "\n"
        row = row_from_document(
            _plain(document),
            trace_id=task.trace_id,
            files=task.files,
            content_hash=task.content_hash,
            report=task.report_name,
            json_path=task.json_name,
            lang=lang,
        )
        outcome = TraceOutcome(task.trace_id, row, html, text.encode("utf-8"))
    except Exception as exc:  # one bad trace never stops the batch
        row = empty_row(task.trace_id, task.files, "failed", _one_line(exc))
        row["content_hash"] = task.content_hash
        outcome = TraceOutcome(task.trace_id, row)
    outcome.seconds = time.perf_counter() - started
    # ru_maxrss is KiB on Linux: the worker's peak since it started.
    outcome.peak_rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return outcome


def _plain(document: dict[str, Any]) -> dict[str, Any]:
    from nsysan.report.jsonout import to_jsonable

    return to_jsonable(document)  # type: ignore[no-any-return]
