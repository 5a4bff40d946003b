"""Host event tables kept on disk, read by the rows and columns an analysis asks for.

The CUDA API, NVTX, OS-runtime and scheduling tables of a big trace are most of its
memory (at 5M kernels of the scale8 workload: 16M CUDA calls and 10M NVTX events,
~0.9 GB), yet each analysis reads a few of their columns, or the rows of a few
threads. When the table cache holds them as Parquet (:mod:`nsysan.ingest.cache`),
:func:`nsysan.ingest.load_trace` with ``store_host_tables=True`` leaves them there: the
trace holds a :class:`StoredTable`, a query over the files, and each analysis reads
what it needs (host attribution: one group of feeding threads at a time).

A :class:`StoredTable` answers ``height``, ``schema``, ``lazy()`` and ``collect()``; :data:`HostTable` is either it or a ``DataFrame``: both answer
``.lazy()``, and :func:`collected` gives either in memory.

A stored table is also its :class:`TablePart` files, each with the time its rows cover:
a read of the rows that overlap a span of time opens only the files that can hold them
(``lazy(span)``), and a pass over the whole table reads it a file at a time
(``parts``). Every query over the files opens each file's footer: at 20M kernels the
CUDA calls are 62 files, and a read of one time slice of a thread spent ~30 ms on them,
three times its own read.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

__all__ = [
    "STORED_TABLES",
    "STORE_MIN_ROWS",
    "THREAD_KEYS",
    "HostTable",
    "RunFolder",
    "Span",
    "StoredTable",
    "TablePart",
    "collected",
    "frame_part",
    "stored_scan",
]

#: The tables a trace may hold on disk.
STORED_TABLES = ("cuda_api", "nvtx", "osrt", "sched")

#: A thread's key columns: the table cache writes those tables in this order
#: (nsysan.ingest.cache), and host attribution reads them by these keys.
THREAD_KEYS = ("source", "pid", "tid")

#: A file's table is left on disk from this many rows; a smaller one is read into
#: memory, where it costs less than the reads of it that each analysis would make.
STORE_MIN_ROWS = 1_000_000

# A span of time [lo, hi) in ns.
Span = tuple[int, int]

# A run folder older than this belongs to a run that ended without removing it.
_STALE_RUN_S = 24 * 3600


class RunFolder:
    """Links to one cache entry's files, removed once no table reads them.

    Hard links: the cache may remove the entry itself (least recently used, or another
    run's damaged-entry clean-up) while this run still reads it; the links keep the
    files' data until the folder goes.
    """

    def __init__(self, runs: Path, entry: Path, names: Iterable[str]) -> None:
        runs.mkdir(parents=True, exist_ok=True)
        _remove_stale(runs)
        self.path = Path(tempfile.mkdtemp(prefix="run.", dir=runs))
        self._finalizer = weakref.finalize(self, shutil.rmtree, self.path, True)
        try:
            self.link(entry, names)
        except OSError:
            self._finalizer()
            raise

    def link(self, entry: Path, names: Iterable[str]) -> None:
        """Links the files ``names`` of ``entry`` into the folder."""
        for name in names:
            os.link(entry / name, self.path / name)


def _remove_stale(runs: Path) -> None:
    now = time.time()
    for folder in runs.iterdir():
        with contextlib.suppress(OSError):
            if now - folder.stat().st_mtime > _STALE_RUN_S:
                shutil.rmtree(folder, ignore_errors=True)


@dataclass(frozen=True, eq=False)
class TablePart:
    """One file of a stored table (or a part of the table in memory).

    ``query`` yields its rows with the table's columns; ``rows`` counts them (an upper
    bound where ``query`` drops some); ``span`` is (lowest ``start_ns``, highest
    ``end_ns``) of its rows, None where not known; ``inverted`` counts its rows that
    end before they start, None where not counted.
    """

    query: pl.LazyFrame
    rows: int
    span: Span | None = None
    inverted: int | None = None

    def overlaps(self, span: Span) -> bool:
        """Whether a row of the part may overlap ``span`` (``start_ns < hi``, ``end_ns > lo``)."""
        return self.span is None or (self.span[0] < span[1] and self.span[1] > span[0])


@dataclass(frozen=True, eq=False)
class StoredTable:
    """A model table as a query over Parquet files (and any in-memory parts of a run).

    ``query`` yields the table's rows in order with the model's columns; ``height`` is
    its row count; ``keep`` holds the :class:`RunFolder` objects whose files it reads;
    ``parts``, where known, are its files in order, and the tables in memory of a run's
    other files (``query`` yields their rows one after another).
    """

    query: pl.LazyFrame
    height: int
    schema: pl.Schema
    keep: tuple[object, ...] = ()
    parts: tuple[TablePart, ...] = ()

    def lazy(self, span: Span | None = None) -> pl.LazyFrame:
        """The table's rows; with ``span``, at least those that overlap it, in order
        (the files that cannot hold one are not opened: filter by the span after)."""
        if span is None or not self.parts:
            return self.query
        kept = [part.query for part in self.parts if part.overlaps(span)]
        if not kept:
            return pl.LazyFrame(schema=self.schema)
        return kept[0] if len(kept) == 1 else pl.concat(kept, how="vertical")

    def collect(self) -> pl.DataFrame:
        """The whole table in memory (one chunk per column)."""
        return self.query.collect().rechunk()


HostTable = pl.DataFrame | StoredTable


def collected(table: HostTable) -> pl.DataFrame:
    """``table`` in memory (a stored table is read whole)."""
    return table if isinstance(table, pl.DataFrame) else table.collect()


def frame_part(frame: pl.DataFrame) -> TablePart:
    """``frame`` as a :class:`TablePart`: its rows, their span of time and their rows
    that end before they start (no span without ``start_ns, end_ns``; no row
    inverted without ``end_ns``)."""
    if "end_ns" not in frame.columns:
        return TablePart(frame.lazy(), frame.height, inverted=0)  # no row can be inverted
    if "start_ns" not in frame.columns:
        return TablePart(frame.lazy(), frame.height)
    start, end = pl.col("start_ns"), pl.col("end_ns")
    low, high, inverted = frame.select(
        start.min(), end.max(), (end.is_not_null() & (end < start)).sum().alias("inverted")
    ).row(0)
    span = None if low is None or high is None else (int(low), int(high))
    return TablePart(frame.lazy(), frame.height, span, int(inverted))


def stored_scan(
    run: RunFolder,
    names: list[str],
    rows: list[int],
    spans: list[Span | None],
    inverted: list[int | None],
) -> StoredTable:
    """The table in the Parquet files ``names`` of ``run``'s folder, one after another:
    per file, its ``rows``, the ``spans`` of their time and their ``inverted`` count."""
    paths = [run.path / name for name in names]
    query = pl.scan_parquet(paths)
    parts = tuple(
        TablePart(pl.scan_parquet(path), n, span, bad)
        for path, n, span, bad in zip(paths, rows, spans, inverted, strict=True)
    )
    return StoredTable(
        query=query, height=sum(rows), schema=query.collect_schema(), keep=(run,), parts=parts
    )
