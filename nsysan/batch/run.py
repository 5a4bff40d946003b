"""``nsysan batch``: every trace under the inputs, analysed into one output folder.

Layout of OUTDIR (docs/batch.md):

* ``traces/<trace_id>.html`` and ``traces/<trace_id>.json``: each trace's report and
  analysis document;
* ``index.html``, ``results.csv``, ``results.parquet``, ``results.json``: one row per
  trace (analysed, failed or skipped);
* ``.nsysan-batch/<trace_id>.json``: what a re-run needs to skip a trace (its resume
  key: the content hash of its files and the settings), written after its outputs.

Every file is written atomically, so an interrupted run leaves whole files only and
the next run resumes with the traces not done.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nsysan import __version__
from nsysan.batch.grouping import group_sources
from nsysan.batch.inputs import Skipped, Source, content_hash, discover, ncu_sibling
from nsysan.batch.progress import BatchProgress
from nsysan.batch.rows import csv_text, empty_row, rows_frame
from nsysan.batch.worker import TraceOutcome, TraceTask
from nsysan.output import write_atomic
from nsysan.report.jsonout import SCHEMA_VERSION, dumps, to_jsonable

STATE_DIR = ".nsysan-batch"
TRACES_DIR = "traces"
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")


@dataclass
class BatchSummary:
    rows: list[dict[str, Any]]
    notes: list[str]
    analysed: int = 0
    reused: int = 0
    failed: int = 0
    skipped: int = 0
    # Worker process id → peak resident memory (KiB), for the scale figures.
    peak_rss_kib: dict[int, int] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return (
            f"{len(self.rows)} traces: {self.analysed} analysed, {self.reused} up to date, "
            f"{self.failed} failed, {self.skipped} skipped"
        )


def trace_id(sources: Sequence[Source]) -> str:
    """A file name for a trace: its path relative to the input, made safe."""
    first = sources[0].rel or Path(sources[0].path).name
    base = first.rsplit(".", 1)[0] if "." in Path(first).name else first
    base = _UNSAFE.sub("_", base.replace("/", "__").replace("!", "__")).strip("._") or "trace"
    return f"{base}+{len(sources) - 1}" if len(sources) > 1 else base


def _unique_ids(traces: Sequence[tuple[Source, ...]]) -> list[str]:
    ids = [trace_id(t) for t in traces]
    seen: dict[str, int] = {}
    for i in ids:
        seen[i] = seen.get(i, 0) + 1
    out = []
    for t, i in zip(traces, ids, strict=True):
        if seen[i] > 1:  # two inputs with the same relative name: tell them apart
            i += "-" + hashlib.sha256("|".join(s.label for s in t).encode()).hexdigest()[:8]
        out.append(i)
    return out


def resume_key(hashes: Sequence[str], ncu_hash: str | None, settings: Any) -> str:
    """Changes when a file's content, the settings, nsysan or the schema change."""
    data = {
        "files": list(hashes),
        "ncu": ncu_hash,
        "settings": to_jsonable(settings),
        "nsysan": __version__,
        "schema_version": SCHEMA_VERSION,
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def _remove_stale_temp_files(*folders: Path) -> None:
    """Temporary files of a run that was killed (write_atomic names them ``.NAME.*.tmp``)."""
    for folder in folders:
        if folder.is_dir():
            for p in folder.glob(".*.tmp"):
                p.unlink(missing_ok=True)


def _done_state(state: Path, key: str, out_dir: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(state.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    row = data.get("row") or {}
    if data.get("key") != key or row.get("status") != "ok":
        return None
    if not all((out_dir / row[k]).is_file() for k in ("report", "json")):
        return None
    return row


def run_batch(
    inputs: Sequence[Path],
    out_dir: Path,
    *,
    settings: Any,
    jobs: int = 1,
    dask_address: str | None = None,
    dask_scheduler_file: Path | None = None,
    group: bool = True,
    force: bool = False,
    nsys_path: Path | None = None,
    echo: Callable[[str], None] = print,
) -> BatchSummary:
    """Analyse every trace under ``inputs`` into ``out_dir``; see the module docstring.

    ``.nsys-rep``/``.qdrep`` reports are exported with ``nsys_path`` (else the nsys on
    PATH) as ``nsysan report`` does; without an nsys they are listed as skipped.
    """
    import shutil

    from nsysan.output import refuse_overwrite

    can_export = nsys_path is not None or shutil.which("nsys") is not None
    sources, skipped = discover(inputs, reports=can_export)
    refuse_overwrite([out_dir], [Path(s.path) for s in sources])
    if group:
        traces, notes = group_sources(sources)
    else:
        traces, notes = [(s,) for s in sources], ["grouping off (--no-group)"]
    for note in notes:
        echo(f"nsysan: {note}")
    ids = _unique_ids(traces)
    state_dir, traces_dir = out_dir / STATE_DIR, out_dir / TRACES_DIR
    for d in (out_dir, state_dir, traces_dir):
        d.mkdir(parents=True, exist_ok=True)
    _remove_stale_temp_files(out_dir, state_dir, traces_dir)

    summary = BatchSummary(rows=[], notes=notes)
    tasks: list[TraceTask] = []
    keys: dict[str, str] = {}
    for tid, members in zip(ids, traces, strict=True):
        files = ";".join(s.rel or s.label for s in members)
        ncu = ncu_sibling(members[0]) if len(members) == 1 else None
        try:
            hashes = [content_hash(s) for s in members]
            ncu_hash = content_hash(ncu) if ncu else None
        except Exception as exc:  # an unreadable file or archive member fails alone
            summary.rows.append(empty_row(tid, files, "failed", f"cannot read: {exc}"))
            summary.failed += 1
            continue
        combined = hashlib.sha256("".join(hashes).encode()).hexdigest()
        key = resume_key(hashes, ncu_hash, settings)
        keys[tid] = key
        done = None if force else _done_state(state_dir / f"{tid}.json", key, out_dir)
        if done is not None:
            summary.rows.append(done)
            summary.reused += 1
            continue
        tasks.append(
            TraceTask(
                trace_id=tid,
                sources=tuple(members),
                ncu=ncu,
                settings=settings,
                files=files,
                content_hash=combined,
                report_name=f"{TRACES_DIR}/{tid}.html",
                json_name=f"{TRACES_DIR}/{tid}.json",
                nsys_path=str(nsys_path) if nsys_path else None,
            )
        )
    if summary.reused:
        echo(
            f"nsysan: {summary.reused} trace(s) up to date (same content and settings); --force redoes them"
        )

    def on_done(outcome: TraceOutcome) -> None:
        row = outcome.row
        if outcome.html is not None and outcome.json is not None:
            write_atomic(out_dir / row["report"], outcome.html)
            write_atomic(out_dir / row["json"], outcome.json)
            state = {"key": keys[outcome.trace_id], "row": row}
            write_atomic(state_dir / f"{outcome.trace_id}.json", json.dumps(state, sort_keys=True))
            summary.analysed += 1
        else:
            # A trace that fails now has no report: remove one left from an earlier run.
            for suffix in (".html", ".json"):
                (traces_dir / f"{outcome.trace_id}{suffix}").unlink(missing_ok=True)
            (state_dir / f"{outcome.trace_id}.json").unlink(missing_ok=True)
            summary.failed += 1
        summary.rows.append(row)
        summary.peak_rss_kib[outcome.worker_pid] = max(
            outcome.peak_rss_kib, summary.peak_rss_kib.get(outcome.worker_pid, 0)
        )
        bar.finished(outcome.trace_id, row["status"], outcome.seconds, row["error"])

    with BatchProgress(len(tasks), echo) as bar:
        if dask_address or dask_scheduler_file:
            from nsysan.batch.executors import run_dask

            run_dask(tasks, dask_address, dask_scheduler_file, on_done)
        else:
            from nsysan.batch.executors import run_local

            run_local(tasks, jobs, on_done)

    for s in skipped:
        summary.rows.append(_skipped_row(s))
        summary.skipped += 1
    write_tables(out_dir, summary, settings, group)
    return summary


def _skipped_row(s: Skipped) -> dict[str, Any]:
    tid = _UNSAFE.sub("_", s.label.replace("/", "__").replace("!", "__")).strip("._")
    return empty_row(tid, s.label, "skipped", s.reason)


def write_tables(out_dir: Path, summary: BatchSummary, settings: Any, group: bool) -> None:
    """results.csv, results.parquet, results.json and index.html, each atomically."""
    import io

    from nsysan.batch.index import render_index

    frame = rows_frame(summary.rows)
    rows = frame.to_dicts()
    write_atomic(out_dir / "results.csv", csv_text(frame))
    buffer = io.BytesIO()
    frame.write_parquet(buffer)
    write_atomic(out_dir / "results.parquet", buffer.getvalue())
    document = {
        "schema_version": SCHEMA_VERSION,
        "kind": "batch",
        "tool": {"name": "nsysan", "version": __version__},
        "settings": to_jsonable(settings),
        "grouping": group,
        "notes": summary.notes,
        "traces": rows,
    }
    write_atomic(out_dir / "results.json", dumps(document) + "\n")
    write_atomic(out_dir / "index.html", render_index(rows, summary.notes, settings.lang))
