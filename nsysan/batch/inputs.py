"""Batch inputs: folders, archives and files turned into traces to analyse.

A *source* is one export: a file on disk, or a member of a ``.zip``/``.tar``/
``.tar.gz``/``.tgz`` archive (read from the archive, never extracted next to it;
member names that would leave the extraction folder are refused). A *trace* is what
one analysis reads: one source, or the rank files of one multi-rank run grouped by
:mod:`nsysan.batch.grouping`.

``expand_run`` serves ``report``/``analyze``/``diff``: a folder or archive given
there holds the rank files of one run.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from nsysan.errors import InputNotFoundError, SettingsError

EXPORT_SUFFIXES = (".sqlite", ".sqlite3")
REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz")
NOT_EXPORTED = (
    "an Nsight Systems report and no nsys to export it (none on PATH; give --nsys FILE), "
    "or run `nsys export --type sqlite --output FILE.sqlite FILE` first"
)


@dataclass(frozen=True, order=True)
class Source:
    """One export: ``path`` itself, or ``member`` of the archive at ``path``.

    ``rel``: how the user knows it, relative to what they gave (the given folder's
    name and the path below it; the archive's name and the member); names outputs.
    """

    path: str
    member: str | None = None
    rel: str = ""

    @property
    def label(self) -> str:
        return f"{self.path}!{self.member}" if self.member else self.path

    @property
    def name(self) -> str:
        return PurePosixPath(self.member).name if self.member else Path(self.path).name

    @property
    def folder(self) -> str:
        """Where the file lies (archive members: the archive plus the member's folder)."""
        if self.member:
            return f"{self.path}!{PurePosixPath(self.member).parent}"
        return str(Path(self.path).parent)


@dataclass(frozen=True)
class Skipped:
    label: str
    reason: str


def _suffix(name: str) -> str:
    lower = name.lower()
    for s in (*ARCHIVE_SUFFIXES, *EXPORT_SUFFIXES, *REPORT_SUFFIXES):
        if lower.endswith(s):
            return s
    return ""


def is_archive(path: Path) -> bool:
    return path.is_file() and _suffix(path.name) in ARCHIVE_SUFFIXES


def safe_member_name(name: str) -> str | None:
    """``name`` as a relative path inside the archive, or None when it would escape."""
    if not name or name.startswith(("/", "\\")) or "\\" in name or "\x00" in name:
        return None
    parts = PurePosixPath(name).parts
    if any(p in ("..", "") for p in parts) or (parts and ":" in parts[0]):
        return None
    return str(PurePosixPath(*parts)) if parts else None


def _archive_members(path: Path, reports: bool = False) -> tuple[list[str], list[Skipped]]:
    """Export members of an archive (regular files with safe names), and skipped ones."""
    found: list[str] = []
    skipped: list[Skipped] = []
    try:
        if path.name.lower().endswith(".zip"):
            with zipfile.ZipFile(path) as zf:
                entries = [(i.filename, not i.is_dir()) for i in zf.infolist()]
        else:
            with tarfile.open(path) as tf:
                entries = [(m.name, m.isfile()) for m in tf.getmembers() if not m.isdir()]
    except (OSError, zipfile.BadZipFile, tarfile.TarError, EOFError) as exc:
        raise SettingsError(f"{path}: cannot read the archive ({exc})") from None
    for name, regular in entries:
        kind = _suffix(name)
        if kind not in EXPORT_SUFFIXES + REPORT_SUFFIXES:
            continue
        label = f"{path}!{name}"
        if safe_member_name(name) is None:
            skipped.append(Skipped(label, "unsafe member name (absolute or '..'): refused"))
        elif not regular:
            skipped.append(Skipped(label, "not a regular file (link or device): refused"))
        elif kind in REPORT_SUFFIXES and not reports:
            skipped.append(Skipped(label, NOT_EXPORTED))
        else:
            found.append(name)
    return sorted(found), skipped


def discover(inputs: Sequence[Path], reports: bool = False) -> tuple[list[Source], list[Skipped]]:
    """Every export under ``inputs`` (folders recursively, archives by member), sorted.

    ``reports``: ``.nsys-rep``/``.qdrep`` are sources too (an nsys can export them);
    otherwise they are listed as skipped.
    """
    sources: list[Source] = []
    skipped: list[Skipped] = []
    for given in inputs:
        if not given.exists():
            raise InputNotFoundError(f"{given}: no such file or folder")
        if given.is_dir():
            for root, dirs, files in os.walk(given):
                dirs.sort()
                for f in sorted(files):
                    p = Path(root) / f
                    kind = _suffix(f)
                    rel = str(Path(given.name) / p.relative_to(given))
                    if kind in EXPORT_SUFFIXES or (reports and kind in REPORT_SUFFIXES):
                        sources.append(Source(str(p), None, rel))
                    elif kind in REPORT_SUFFIXES:
                        skipped.append(Skipped(str(p), NOT_EXPORTED))
                    elif kind in ARCHIVE_SUFFIXES:
                        found, skip = _archive_members(p, reports)
                        sources += [Source(str(p), m, f"{rel}/{m}") for m in found]
                        skipped += skip
        elif is_archive(given):
            found, skip = _archive_members(given, reports)
            sources += [Source(str(given), m, f"{given.name}/{m}") for m in found]
            skipped += skip
        elif _suffix(given.name) in REPORT_SUFFIXES and not reports:
            skipped.append(Skipped(str(given), NOT_EXPORTED))
        else:
            sources.append(Source(str(given), None, given.name))
    # The same file reached through two inputs is analysed once.
    unique = {(s.path, s.member): s for s in sorted(sources, key=lambda s: s.rel)}
    return sorted(unique.values()), skipped


def _ncu_name(export_name: str) -> str:
    return export_name.rsplit(".", 1)[0] + ".ncu.csv"


def ncu_sibling(source: Source) -> Source | None:
    """``<stem>.ncu.csv`` next to the export (same folder or archive folder), if any."""
    if source.member is None:
        p = Path(source.path)
        csv = p.with_name(p.name.rsplit(".", 1)[0] + ".ncu.csv")
        return Source(str(csv), None, _ncu_name(source.rel or csv.name)) if csv.is_file() else None
    member = _ncu_name(source.member)
    try:
        if source.path.lower().endswith(".zip"):
            with zipfile.ZipFile(source.path) as zf:
                names = set(zf.namelist())
        else:
            with tarfile.open(source.path) as tf:
                names = {m.name for m in tf.getmembers() if m.isfile()}
    except (OSError, zipfile.BadZipFile, tarfile.TarError, EOFError):
        return None
    if member in names and safe_member_name(member):
        return Source(source.path, member, _ncu_name(source.rel or member))
    return None


def _open_member(archive: Path, member: str):  # type: ignore[no-untyped-def]
    if archive.name.lower().endswith(".zip"):
        zf = zipfile.ZipFile(archive)
        return zf, zf.open(member)
    tf = tarfile.open(archive)
    fh = tf.extractfile(member)
    if fh is None:
        tf.close()
        raise SettingsError(f"{archive}!{member}: not a regular file")
    return tf, fh


def content_hash(source: Source) -> str:
    """SHA-256 of the export's bytes (an archive member's uncompressed bytes)."""
    digest = hashlib.sha256()
    if source.member is None:
        with open(source.path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                digest.update(chunk)
        return digest.hexdigest()
    container, fh = _open_member(Path(source.path), source.member)
    with container, fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


@contextmanager
def materialized(sources: Sequence[Source]) -> Iterator[list[Path]]:
    """Paths to read ``sources`` from: files as they are, archive members copied into
    a private temporary folder (removed afterwards)."""
    if all(s.member is None for s in sources):
        yield [Path(s.path) for s in sources]
        return
    tmp = Path(tempfile.mkdtemp(prefix="nsysan-members-"))
    try:
        paths = []
        for i, s in enumerate(sources):
            if s.member is None:
                paths.append(Path(s.path))
                continue
            safe = safe_member_name(s.member)
            if safe is None:
                raise SettingsError(f"{s.label}: unsafe member name; refused")
            # One folder per member keeps names unique and the file name the user knows.
            target = tmp / str(i) / PurePosixPath(safe).name
            target.parent.mkdir(parents=True)
            container, fh = _open_member(Path(s.path), s.member)
            with container, fh, open(target, "wb") as out:
                shutil.copyfileobj(fh, out, 1 << 20)
            paths.append(target)
        yield paths
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def with_source_labels(trace: Any, labels: Sequence[str]) -> Any:
    """``trace`` with each input's path replaced by its label (an archive member's
    ``archive!member`` instead of the temporary copy it was read from)."""
    import dataclasses

    import polars as pl

    relabelled = trace.sources.with_columns(
        pl.col("source")
        .replace_strict(
            list(range(len(labels))), list(labels), default=pl.col("path"), return_dtype=pl.String
        )
        .alias("path")
    )
    return dataclasses.replace(trace, sources=relabelled)


@contextmanager
def expand_run(paths: Sequence[Path]) -> Iterator[tuple[list[Path], list[str]]]:
    """The export files of one run given as files, a folder or an archive of rank files,
    and the labels to show for them (``archive!member`` for archive members)."""
    if all(p.is_file() and not is_archive(p) for p in paths):
        yield list(paths), [str(p) for p in paths]
        return
    sources, skipped = discover(paths)
    if not sources:
        why = f" ({skipped[0].label}: {skipped[0].reason})" if skipped else ""
        raise InputNotFoundError(
            f"{', '.join(map(str, paths))}: no Nsight Systems SQLite export (.sqlite) found{why}"
        )
    with materialized(sources) as files:
        yield files, [s.label for s in sources]
