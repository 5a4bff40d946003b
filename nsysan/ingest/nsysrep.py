"""Nsight Systems reports (``.nsys-rep``, older ``.qdrep``) as input: exported, then read.

nsysan reads SQLite exports. Given a report, it runs ``nsys export --type sqlite`` (the
``nsys`` on PATH, or the one ``--nsys PATH`` names) into nsysan's cache folder, never
next to the user's file, which is only read. The export is reused while the report is
unchanged (same resolved path, size and modification time) and was made by the same
nsys version; the trace's notes say which nsys exported it and where the export is.
Without nsys: one line saying how to get it (docs/errors.md#nsys-not-found).

The cache folder is ``$NSYSAN_CACHE_DIR``, else ``$XDG_CACHE_HOME/nsysan``, else
``~/.cache/nsysan``; exports live in its ``exports/`` folder, one sub-folder per report
version, with an ``export.json`` that records what made them. Nothing removes old
exports: delete the folder to reclaim the space (the next run exports again).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from nsysan.errors import EmptyTraceError, InputNotFoundError, NsysExportError, NsysNotFoundError

__all__ = [
    "REPORT_SUFFIXES",
    "NsysExport",
    "NsysExportError",
    "NsysNotFoundError",
    "cache_dir",
    "export_report",
    "find_nsys",
    "is_report",
    "resolve_inputs",
]

REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
CACHE_ENV = "NSYSAN_CACHE_DIR"
METADATA = "export.json"
SQLITE_MAGIC = b"SQLite format 3\x00"
# `nsys --version` prints e.g. "NVIDIA Nsight Systems version 2022.4.2.1-df9881f".
_VERSION = re.compile(r"(\d{4}\.\d+(?:\.\d+)*)")
VERSION_TIMEOUT_S = 60


@dataclass(frozen=True)
class NsysExport:
    """One report and the SQLite export nsysan reads in its place."""

    report: Path
    sqlite: Path
    nsys: Path
    nsys_version: str
    reused: bool

    @property
    def note(self) -> str:
        verb = "reused the SQLite export made" if self.reused else "exported to SQLite"
        return f"{self.report}: {verb} by {self.nsys} ({self.nsys_version}) in {self.sqlite}"


def is_report(path: Path) -> bool:
    """Whether ``path`` names an Nsight Systems report rather than an export."""
    return path.name.lower().endswith(REPORT_SUFFIXES)


def cache_dir() -> Path:
    """nsysan's cache folder (see the module docstring)."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "nsysan"


def _how_to_get_nsys(report: Path) -> str:
    return (
        f"{report}: an Nsight Systems report; reading it needs nsys, which is not on PATH: "
        "install Nsight Systems (NVIDIA's installer, the CUDA toolkit, or Debian's "
        "nsight-systems package) and put nsys on PATH or give --nsys PATH, or export it "
        f"yourself: nsys export --type sqlite --output {report.with_suffix('.sqlite').name} "
        f"{report.name}"
    )


def find_nsys(explicit: str | Path | None, report: Path) -> Path:
    """The nsys to run: ``explicit`` if given (it must be an executable file), else PATH's."""
    if explicit is not None:
        path = Path(explicit)
        if not path.is_file() or not os.access(path, os.X_OK):
            raise NsysNotFoundError(f"--nsys {path}: not an executable file")
        return path
    found = shutil.which("nsys")
    if found is None:
        raise NsysNotFoundError(_how_to_get_nsys(report))
    return Path(found)


def nsys_version(nsys: Path) -> str:
    """The version ``nsys --version`` prints (``2022.4.2.1``), or its first line."""
    try:
        done = subprocess.run(
            [str(nsys), "--version"],
            capture_output=True,
            text=True,
            timeout=VERSION_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NsysExportError(f"{nsys}: cannot run it ({exc})") from None
    text = (done.stdout or done.stderr).strip()
    match = _VERSION.search(text)
    if done.returncode != 0 or match is None:
        first = text.splitlines()[0] if text else f"exit status {done.returncode}"
        raise NsysExportError(f"{nsys} --version did not name a version: {first}")
    return match.group(1)


def _check_report(report: Path) -> os.stat_result:
    if not report.exists():
        raise InputNotFoundError(f"{report}: no such file")
    if not report.is_file():
        raise InputNotFoundError(f"{report}: not a file")
    stat = report.stat()
    if stat.st_size == 0:
        raise EmptyTraceError(f"{report}: the file is empty")
    return stat


def _identity(report: Path, stat: os.stat_result, version: str) -> dict[str, object]:
    return {
        "report": str(report.resolve()),
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "nsys_version": version,
    }


def _is_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


def export_report(report: Path, nsys: str | Path | None = None) -> NsysExport:
    """The SQLite export of ``report``, made now or reused from the cache."""
    stat = _check_report(report)
    exe = find_nsys(nsys, report)
    version = nsys_version(exe)
    identity = _identity(report, stat, version)
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:24]
    folder = cache_dir() / "exports" / key
    target = folder / (report.name.rsplit(".", 1)[0] + ".sqlite")
    meta = folder / METADATA
    if target.is_file() and meta.is_file() and _is_sqlite(target):
        try:
            recorded = json.loads(meta.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            recorded = {}
        if all(recorded.get(k) == v for k, v in identity.items()):
            return NsysExport(report, target, exe, version, reused=True)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise NsysExportError(f"cannot create the cache folder {folder}: {exc}") from None
    tmp = folder / f".{os.getpid()}.export.sqlite"
    try:
        _run_export(exe, report, tmp)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    record = {**identity, "nsys": str(exe), "sqlite": str(target)}
    tmp_meta = folder / f".{os.getpid()}.{METADATA}"
    tmp_meta.write_text(json.dumps(record, indent=2), encoding="utf-8")
    os.replace(tmp_meta, meta)
    return NsysExport(report, target, exe, version, reused=False)


def _run_export(nsys: Path, report: Path, out: Path) -> None:
    command = [
        str(nsys),
        "export",
        "--type",
        "sqlite",
        "--force-overwrite",
        "true",
        "--output",
        str(out),
        str(report),
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise NsysExportError(f"{nsys}: cannot run it ({exc})") from None
    if done.returncode != 0 or not _is_sqlite(out):
        lines = [ln.strip() for ln in (done.stderr + "\n" + done.stdout).splitlines() if ln.strip()]
        why = lines[-1] if lines else f"exit status {done.returncode}"
        raise NsysExportError(f"{report}: nsys export failed: {why}")


def resolve_inputs(
    paths: list[Path], nsys: str | Path | None = None
) -> tuple[list[Path], list[str]]:
    """``paths`` with every report replaced by its export, and one note per report."""
    out, notes = [], []
    for path in paths:
        if is_report(path):
            made = export_report(path, nsys)
            out.append(made.sqlite)
            notes.append(made.note)
        else:
            out.append(path)
    return out, notes
