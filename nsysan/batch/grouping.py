"""Which files are the ranks of one run, analysed together as one trace.

Files are grouped when all of these hold (``--no-group`` turns grouping off):

* same folder (or the same folder of one archive), and names equal once digit runs
  are ignored: ``report1.sqlite`` … ``report8.sqlite``, ``rank0-node3.sqlite``;
* their capture windows on the UTC clock overlap (all of them at one instant);
* the GPUs they ran kernels on are distinct physical GPUs (host plus UUID, else host
  plus device id): two files on the same GPUs are two runs, not two ranks.

Every decision is kept as a note (printed and shown on the index page).
"""

from __future__ import annotations

import re
import sqlite3
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from nsysan.batch.inputs import Source, materialized
from nsysan.ingest.sqlite import sqlite_uri

_DIGITS = re.compile(r"\d+")


@dataclass(frozen=True)
class Probe:
    """What grouping needs from one export: UTC window and the GPUs used."""

    utc_start_ns: int | None
    utc_end_ns: int | None
    gpus: frozenset[tuple[str, ...]]


def _scalar(conn: sqlite3.Connection, sql: str) -> object:
    try:
        row = conn.execute(sql).fetchone()
    except sqlite3.Error:
        return None
    return row[0] if row else None


def probe_file(path: Path) -> Probe | None:
    """Read the few rows grouping needs; None when the file cannot tell."""
    try:
        conn = sqlite3.connect(sqlite_uri(path), uri=True)
    except sqlite3.Error:
        return None
    try:
        utc = _scalar(conn, 'SELECT utcEpochNs FROM "TARGET_INFO_SESSION_START_TIME" LIMIT 1')
        start = _scalar(conn, 'SELECT MIN(startTime) FROM "ANALYSIS_DETAILS"')
        stop = _scalar(conn, 'SELECT MAX(stopTime) FROM "ANALYSIS_DETAILS"')
        host = _scalar(
            conn, "SELECT value FROM \"TARGET_INFO_SYSTEM_ENV\" WHERE name = 'Hostname' LIMIT 1"
        )
        try:
            devices = [
                r[0]
                for r in conn.execute(
                    'SELECT DISTINCT deviceId FROM "CUPTI_ACTIVITY_KIND_KERNEL"'
                ).fetchall()
            ]
        except sqlite3.Error:
            devices = []
        names: dict[object, list[tuple[str, str]]] = {}
        for id_col in ("id", "deviceId"):
            try:
                rows = conn.execute(
                    f'SELECT "{id_col}", uuid, busLocation FROM "TARGET_INFO_GPU"'
                ).fetchall()
            except sqlite3.Error:
                continue
            for device, uuid, bus in rows:
                names[device] = [(k, str(v)) for k, v in (("uuid", uuid), ("bus", bus)) if v]
            break
    finally:
        conn.close()
    if not isinstance(utc, int) or not isinstance(start, int) or not isinstance(stop, int):
        return Probe(None, None, frozenset())
    # A GPU is known by its UUID and by its PCI bus on its host: two files sharing
    # either ran on the same physical GPU.
    gpus = frozenset(
        (str(host), kind, value)
        for d in devices
        for kind, value in names.get(d) or [("device", str(d))]
    )
    return Probe(utc + start, utc + stop, gpus)


def _pattern(source: Source) -> tuple[str, str] | None:
    stem = PurePosixPath(source.name).stem
    if not _DIGITS.search(stem):
        return None
    return source.folder, _DIGITS.sub("#", stem)


def _why_not(probes: Sequence[Probe | None]) -> str | None:
    """Why these files are not one run, or None when they are."""
    if any(p is None or p.utc_start_ns is None for p in probes):
        return "a file has no UTC session start or capture window"
    assert all(p is not None for p in probes)
    starts = [p.utc_start_ns for p in probes]  # type: ignore[union-attr]
    ends = [p.utc_end_ns for p in probes]  # type: ignore[union-attr]
    if max(starts) >= min(ends):  # type: ignore[type-var]
        return "their capture windows do not overlap in time"
    seen: set[tuple[str, ...]] = set()
    for p in probes:
        if not p.gpus:  # type: ignore[union-attr]
            return "a file ran no kernels"
        if seen & p.gpus:  # type: ignore[union-attr,operator]
            return "two files ran on the same GPU"
        seen |= p.gpus  # type: ignore[union-attr]
    return None


def group_sources(
    sources: Sequence[Source],
    probe: Callable[[Path], Probe | None] = probe_file,
) -> tuple[list[tuple[Source, ...]], list[str]]:
    """Sources as traces (tuples of one or more sources), and notes on the grouping."""
    candidates: dict[tuple[str, str], list[Source]] = defaultdict(list)
    singles: list[tuple[Source, ...]] = []
    for s in sources:
        key = _pattern(s)
        if key is None:
            singles.append((s,))
        else:
            candidates[key].append(s)
    traces = singles
    notes: list[str] = []
    for (folder, pattern), members in sorted(candidates.items()):
        if len(members) < 2:
            traces.append((members[0],))
            continue
        probes = []
        for s in members:
            with materialized([s]) as paths:
                probes.append(probe(paths[0]))
        why = _why_not(probes)
        label = f"{folder}/{pattern.replace('#', '*')}"
        if why is None:
            traces.append(tuple(members))
            notes.append(f"grouped {len(members)} files as one run: {label}")
        else:
            traces.extend((s,) for s in members)
            notes.append(f"not grouped ({why}): {label}, {len(members)} files analysed alone")
    return sorted(traces), notes
