"""A columnar cache of what ingest read from each export: a second run skips SQLite.

Reading an export is most of a run on a big trace: SQLite decodes every row of the
kernel, CUDA API, NVTX and OS-runtime tables (about 17 s for 5M kernels and their
30M host rows), while the same tables as lz4 Parquet read back in about a tenth of
that and take a fifth of the export's size. So each export's tables, as
:func:`nsysan.ingest._read_file` leaves them (validated, names resolved), are kept in
the user's cache folder, never beside the trace:

* the folder is ``tables/`` in nsysan's cache folder (:func:`nsysrep.cache_dir`,
  where exported reports are kept too); ``NSYSAN_CACHE=off`` (or
  ``nsysan --no-cache``) turns it off;
* an entry's key hashes the export's size, modification time and first and last
  64 KiB, the file's place in the run (its source number and host), and the source of
  the reading code itself, so an edited export or another nsysan reads afresh;
* an entry is written to a temporary folder, table by table as ingest reads them
  (:class:`EntryWriter`), and renamed into place, so readers see whole entries only,
  and two runs writing one entry at once both succeed;
* the least recently used entries are removed past ``$NSYSAN_CACHE_MAX_GB`` (20 GB);
* every failure (an unwritable folder, a full disk, a damaged entry) is a miss: the
  export is read from SQLite as without the cache, never an error.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import threading
import zlib
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import polars as pl

from nsysan import stored
from nsysan.ingest.nsysrep import cache_dir
from nsysan.stored import StoredTable

__all__ = ["CachedFile", "EntryWriter", "entry_key", "lookup", "root", "set_enabled"]

#: Bumped when an entry's layout changes (the reading code's own hash covers the rest).
CACHE_FORMAT = 5
ENV_SWITCH = "NSYSAN_CACHE"
ENV_MAX_GB = "NSYSAN_CACHE_MAX_GB"
DEFAULT_MAX_GB = 20.0
_SAMPLE_BYTES = 64 * 1024
_META = "meta.json"
# Where a run links the entry files it reads in place (nsysan.stored.RunFolder).
_RUNS = "runs"
# A frame stored by thread (see store) is written in files of this many rows, each in
# thread order (nsysan.stored.THREAD_KEYS), in row groups of ROW_GROUP_ROWS with their
# min/max statistics.
SLICE_ROWS = 1 << 20
ROW_GROUP_ROWS = 1 << 16
_OFF_VALUES = frozenset({"0", "off", "no", "false"})
# Threads that check the files of an entry read in place.
_SUM_THREADS = min(4, os.cpu_count() or 1)

_state = {"disabled": False}


@dataclass(frozen=True)
class CachedFile:
    """One export's frames (by name; those left on disk are stored tables) and the notes
    its read left."""

    frames: dict[str, pl.DataFrame | StoredTable]
    notes: tuple[str, ...]


def set_enabled(enabled: bool) -> None:
    """Use the cache (unless ``NSYSAN_CACHE=off``) or not; ``nsysan --no-cache`` sets False."""
    _state["disabled"] = not enabled


def root() -> Path | None:
    """The folder of the table entries, or None when the cache is off."""
    if _state["disabled"] or os.environ.get(ENV_SWITCH, "").strip().lower() in _OFF_VALUES:
        return None
    return cache_dir() / "tables"


@cache
def _code_digest() -> str:
    """A hash of the code that decides what an entry holds (ingest and the model)."""
    package = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256(str(CACHE_FORMAT).encode())
    # stored.py: what a file's facts in the entry are (frame_part).
    for source in sorted(
        [*package.glob("ingest/*.py"), package / "model.py", package / "stored.py"]
    ):
        digest.update(source.name.encode())
        digest.update(source.read_bytes())
    return digest.hexdigest()


def entry_key(path: Path, source: int, host: str | None) -> str | None:
    """The key of ``path``'s entry, read as file ``source`` of a run on ``host``."""
    try:
        st = path.stat()
        digest = hashlib.sha256()
        digest.update(f"{_code_digest()}|{st.st_size}|{st.st_mtime_ns}|{source}|{host}".encode())
        with path.open("rb") as fh:
            digest.update(fh.read(_SAMPLE_BYTES))
            fh.seek(max(0, st.st_size - _SAMPLE_BYTES))
            digest.update(fh.read(_SAMPLE_BYTES))
    except OSError:
        return None
    return digest.hexdigest()[:32]


def lookup(
    key: str, on_disk: Collection[str] = (), unread: Collection[str] = ()
) -> CachedFile | None:
    """The entry ``key``, or None (absent, or unreadable: then it is removed).

    The frames named in ``on_disk`` that have at least :data:`nsysan.stored.STORE_MIN_ROWS` rows are
    left on disk, read in place (:func:`_linked`); those in ``unread`` are left out;
    the others are read.
    """
    folder = root()
    if folder is None:
        return None
    entry = folder / key
    meta_path = entry / _META
    if not meta_path.is_file():
        return None
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if meta.get("format") != CACHE_FORMAT or meta.get("key") != key:
            raise ValueError("another layout")
        files: dict[str, list[str]] = meta["files"]
        in_place = _linked(entry, meta, [n for n in meta["frames"] if n in on_disk])
        frames = {
            name: in_place.get(name) or _read_whole([entry / f for f in files[name]])
            for name in meta["frames"]
            if name not in unread
        }
        notes = tuple(str(n) for n in meta["notes"])
        os.utime(meta_path)  # last used, for eviction
    except Exception:  # noqa: BLE001 - any damage is a miss, read from SQLite instead
        shutil.rmtree(entry, ignore_errors=True)
        return None
    return CachedFile(frames=frames, notes=notes)


def _read_whole(paths: list[Path]) -> pl.DataFrame:
    """The frame stored in ``paths``, as a read from SQLite leaves it.

    - One chunk per column: Parquet gives one per row group, and every hand-over of a
      chunked column to numpy copies it (at 5M kernels the analyses peaked ~0.25 GB
      higher on the cached tables). Made one chunk a column at a time: a rechunk of the
      whole frame held it twice (at 20M kernels of the scale8 workload, the load
      peaked at 4.2 GB).
    - A column of one value, or of nulls only, as a constant that takes no memory, as
      ingest's missing columns and source index are (:func:`_constant`): read back,
      each was a full array (at 20M kernels, the seven null launch dimensions and
      green context ids held 0.5 GB).
    """
    schema = pl.read_parquet_schema(paths[0])
    if not schema:
        return pl.read_parquet(paths)
    columns = []
    for name, dtype in schema.items():
        column = pl.read_parquet(paths, columns=[name]).to_series()
        constant, value = _constant(column)
        columns.append(
            pl.select(pl.repeat(value, column.len(), dtype=dtype).alias(name))
            if constant
            else column.rechunk().to_frame()
        )
    return pl.concat(columns, how="horizontal")


def _constant(column: pl.Series) -> tuple[bool, Any]:
    """Whether ``column`` (not empty) holds one value throughout, and the value: nulls
    only, or one integer or boolean value and no null (floats and text are left as
    they are: NaNs and signed zeros do not compare as values)."""
    if column.is_empty():
        return False, None
    if column.null_count() == column.len():
        return True, None
    dtype = column.dtype
    if column.null_count() or not (dtype.is_integer() or dtype == pl.Boolean):
        return False, None
    low, high = column.min(), column.max()
    return low == high, low


def _linked(entry: Path, meta: dict[str, Any], names: Collection[str]) -> dict[str, StoredTable]:
    """The frames ``names`` with at least :data:`nsysan.stored.STORE_MIN_ROWS` rows, as
    tables read in place: their files linked into a run folder (none where links fail).

    Each file is checked against the CRC-32 written with it: a file read in place is
    decoded only as each analysis reads it, too late for damage to be a miss, so a
    mismatch raises here, as a damaged entry does.
    """
    files: dict[str, list[str]] = meta["files"]
    big = [name for name in names if meta["rows"][name] >= stored.STORE_MIN_ROWS]
    checked = [file for name in big for file in files[name]]
    # Side by side: zlib and the reads release the GIL (20M kernels: 4.6 GB of files).
    with ThreadPoolExecutor(max_workers=_SUM_THREADS) as pool:
        sums = [pool.submit(_file_sum, entry / file) for file in checked]
        for file, crc in zip(checked, sums, strict=True):
            if crc.result() != meta["sums"].get(file):
                for pending in sums:
                    pending.cancel()  # a damaged entry is a miss: no need to read the rest
                raise ValueError(f"{file}: not the bytes written")
    if not big:
        return {}
    try:
        run = stored.RunFolder(entry.parent / _RUNS, entry, [f for n in big for f in files[n]])
    except OSError:
        return {}
    return {name: _scan(run, files[name], meta["parts"]) for name in big}


def _scan(run: stored.RunFolder, files: list[str], parts: dict[str, Any]) -> StoredTable:
    """The table in ``files`` of ``run``, each file's rows, span and inverted rows as
    :func:`_part_facts` wrote them in the entry's ``parts``."""
    facts = [parts[file] for file in files]
    return stored.stored_scan(
        run,
        files,
        rows=[int(f["rows"]) for f in facts],
        spans=[
            None if f["span"] is None else (int(f["span"][0]), int(f["span"][1])) for f in facts
        ],
        inverted=[None if f["inverted"] is None else int(f["inverted"]) for f in facts],
    )


class EntryWriter:
    """An entry written table by table, as ingest reads them.

    A table handed to :meth:`write` is written into the entry's temporary folder at
    once; :meth:`finish` writes the rest, then the entry's ``meta.json``, and renames
    the folder into place. With ``in_place``, a big table written by thread is then
    read from its files (:class:`~nsysan.stored.StoredTable`, linked into a run
    folder), so that it leaves memory while the next tables are read: a first run
    holds one big table at a time, not all of them until the entry is written.

    Tables may be written from several threads at once. Any failure gives the entry
    up (the run goes on with what it read; a table already read in place keeps its
    files through the run folder's links). Silently nothing when the cache is off.
    """

    def __init__(self, key: str | None, source_path: Path) -> None:
        """The entry ``key`` of the export at ``source_path`` (no key: nothing is written)."""
        self.key = key
        self._source_path = source_path
        self._lock = threading.Lock()
        self._rows: dict[str, int] = {}
        self._files: dict[str, list[str]] = {}
        self._sums: dict[str, int] = {}
        self._parts: dict[str, dict[str, Any]] = {}
        self._failed = False
        self._run: stored.RunFolder | None = None
        self._folder = root() if key is not None else None
        self._tmp: Path | None = None
        if self._folder is None:
            return
        try:
            self._folder.mkdir(parents=True, exist_ok=True)
            self._tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", suffix=".tmp", dir=self._folder))
        except Exception:  # noqa: BLE001 - a cache that cannot be written is only a miss
            self._tmp = None

    def __enter__(self) -> EntryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        # An entry not finished (the read failed) is removed.
        tmp, self._tmp = self._tmp, None
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)

    def write(
        self,
        name: str,
        frame: pl.DataFrame,
        by_thread: bool = False,
        in_place: bool = False,
        thread_order: bool = True,
    ) -> pl.DataFrame | StoredTable:
        """Writes ``frame`` as the entry's frame ``name``; returns it, or, with
        ``in_place``, the table read from its files when it was written by thread
        (``by_thread``, a table with ``source, pid, tid`` columns of at least
        :data:`nsysan.stored.STORE_MIN_ROWS` rows: see :func:`_write_by_thread`;
        without ``thread_order``, its files keep the table's order)."""
        tmp = self._tmp
        if tmp is None or self._failed:
            return frame
        threaded = by_thread and frame.height >= stored.STORE_MIN_ROWS
        try:
            # Only a table written by thread can be read in place: only its files' facts
            # are kept (a file read whole needs none).
            parts: dict[str, dict[str, Any]] = {}
            if threaded:
                parts = _write_by_thread(frame, tmp, name, thread_order)
                files = list(parts)
            else:
                frame.write_parquet(tmp / f"{name}.parquet", compression="lz4", statistics=False)
                files = [f"{name}.parquet"]
            sums = {file: _file_sum(tmp / file) for file in files}
        except Exception:  # noqa: BLE001 - then no entry; the run goes on
            self._failed = True
            return frame
        with self._lock:
            self._rows[name] = frame.height
            self._files[name] = files
            self._parts.update(parts)
            self._sums.update(sums)
        if not (in_place and threaded):
            return frame
        try:
            with self._lock:
                # One run folder for the entry's tables, as for a cache hit's (_linked).
                if self._run is None:
                    self._run = stored.RunFolder(tmp.parent / _RUNS, tmp, files)
                else:
                    self._run.link(tmp, files)
                run = self._run
        except OSError:
            return frame  # no links: the table stays in memory
        return _scan(run, files, parts)

    def finish(self, frames: dict[str, pl.DataFrame | StoredTable], notes: list[str]) -> None:
        """Writes the ``frames`` not yet written, then the entry (``frames`` gives its
        frames and their order) and its ``notes``; removes the least recently used
        entries past the size cap."""
        for name, frame in frames.items():
            if name not in self._files and isinstance(frame, pl.DataFrame):
                self.write(name, frame)
        tmp, folder, key = self._tmp, self._folder, self.key
        if tmp is None or folder is None or key is None:
            return
        self._tmp = None
        try:
            if self._failed or set(frames) - set(self._files):
                return
            meta = {
                "format": CACHE_FORMAT,
                "key": key,
                "export": str(self._source_path),
                "frames": list(frames),
                "rows": {name: self._rows[name] for name in frames},
                "files": {name: self._files[name] for name in frames},
                "notes": list(notes),
                "parts": self._parts,
                "sums": self._sums,
            }
            (tmp / _META).write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
            try:
                tmp.rename(folder / key)
            except OSError:
                return  # another run stored it first: theirs is as good
            tmp = None
            _evict(folder, _max_bytes(), keep=key)
        except Exception:  # noqa: BLE001, S110 - a cache that cannot be written is only a miss
            pass
        finally:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)


def _write_by_thread(
    frame: pl.DataFrame, folder: Path, name: str, thread_order: bool = True
) -> dict[str, dict[str, Any]]:
    """``frame`` as files of :data:`SLICE_ROWS` rows, each sorted by thread (stably, so
    each thread's rows keep their order; not without ``thread_order``), in row groups
    with min/max statistics.

    Host attribution reads one group of feeding threads at a time; in table order every
    row group holds rows of every thread, and each read decoded the thread columns of
    the whole table. Slices, rather than one sort of the table, keep the memory a
    sort takes to one slice (a sort copies what it sorts). The files' names, in order,
    each with its :func:`_part_facts`: a file holds a stretch of the table's time
    (rows come in about time order), so a time slice's read opens the few files whose
    span overlaps it (:meth:`nsysan.stored.StoredTable.lazy`).
    """
    parts = {}
    for part, first in enumerate(range(0, max(frame.height, 1), SLICE_ROWS)):
        file = f"{name}.{part:04d}.parquet"
        rows = frame.slice(first, SLICE_ROWS)
        if thread_order:
            rows = rows.sort(stored.THREAD_KEYS, maintain_order=True)
        rows.write_parquet(
            folder / file, compression="lz4", statistics=True, row_group_size=ROW_GROUP_ROWS
        )
        parts[file] = _part_facts(rows)
    return parts


def _part_facts(rows: pl.DataFrame) -> dict[str, Any]:
    """A file's :func:`~nsysan.stored.frame_part` facts as the entry's ``parts`` keep them."""
    part = stored.frame_part(rows)
    span = None if part.span is None else list(part.span)
    return {"rows": part.rows, "span": span, "inverted": part.inverted}


def _file_sum(path: Path) -> int:
    """CRC-32 of the file's bytes (~1 GB/s: 0.3 s for the host tables of 5M kernels)."""
    crc = 0
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            crc = zlib.crc32(chunk, crc)
    return crc


def _max_bytes() -> int:
    try:
        gb = float(os.environ.get(ENV_MAX_GB, DEFAULT_MAX_GB))
    except ValueError:
        gb = DEFAULT_MAX_GB
    return int(max(gb, 0.0) * 1e9)


def _entry_size(entry: Path) -> int:
    return sum(f.stat().st_size for f in entry.iterdir() if f.is_file())


def _evict(folder: Path, max_bytes: int, keep: str) -> None:
    """Remove the least recently used entries until the folder holds ``max_bytes``."""
    entries = []
    for entry in folder.iterdir():
        with contextlib.suppress(OSError):
            if entry.is_dir() and (entry / _META).is_file():
                entries.append(((entry / _META).stat().st_mtime, _entry_size(entry), entry))
    total = sum(size for _, size, _ in entries)
    for _, size, entry in sorted(entries, key=lambda e: e[0]):
        if total <= max_bytes:
            break
        if entry.name == keep:
            continue
        shutil.rmtree(entry, ignore_errors=True)
        total -= size
