"""Table plumbing shared by the parts of host attribution (:mod:`nsysan.analyze.host`).

The polars engine their plans run on; a thread's key (``source, pid, tid``) and the
number (``_th``) each feeding thread gets (keys packed by :mod:`nsysan.packing`);
runs of equal keys; a table's rows on the feeding
threads; the feeding threads in groups, attributed one group at a time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Final

import numpy as np
import polars as pl

from nsysan.model import Trace
from nsysan.packing import among, looked_up
from nsysan.stored import STORED_TABLES, THREAD_KEYS, HostTable, Span, StoredTable

__all__ = [
    "ENGINE",
    "THREAD_KEYS",
    "THREAD_NUMBER",
    "feeding_rows",
    "in_group",
    "on_threads",
    "overlapping",
    "portion_time_type",
    "position_type",
    "Span",
    "rows_on_threads",
    "run_starts",
    "thread_groups",
    "thread_numbers",
    "with_rows_on_threads",
]

# Plans here are sorts and as-of joins over millions of rows; the in-memory engine
# runs them about twice as fast as the streaming one (polars' default).
ENGINE: Final = "in-memory"

# The column that numbers the feeding threads 0, 1, ... (THREAD_KEYS: nsysan.stored).
THREAD_NUMBER = "_th"


def run_starts(cols: Sequence[str]) -> pl.Expr:
    """True on the first row of each run of equal ``cols`` in a frame sorted by them."""
    changed = pl.any_horizontal(pl.col(c).ne_missing(pl.col(c).shift(1)) for c in cols)
    return changed | (pl.int_range(pl.len()) == 0)


def feeding_rows(df: pl.DataFrame, threads: pl.DataFrame) -> pl.LazyFrame:
    """The rows of ``df`` on the feeding threads, with their ``_th``, in ``df``'s order."""
    number = thread_numbers(df, threads).cast(threads.schema[THREAD_NUMBER])
    return df.lazy().with_columns(number).filter(pl.col(THREAD_NUMBER).is_not_null())


def on_threads(df: pl.DataFrame, threads: pl.DataFrame) -> pl.DataFrame:
    """The rows of ``df`` on ``threads``, in ``df``'s order: a semi join on the thread
    keys, by :func:`thread_numbers` (a semi join row-encoded the three keys of every
    row: +0.16 GB for the 2.8M OS runtime calls of 5M kernels, +0.06 GB this way)."""
    return feeding_rows(df, threads).drop(THREAD_NUMBER).collect(engine=ENGINE)


def rows_on_threads(
    table: HostTable,
    threads: pl.DataFrame,
    span: Span | None = None,
    columns: Sequence[str] | None = None,
) -> pl.DataFrame:
    """:func:`on_threads` of a table in memory or on disk: a stored table's rows on
    ``threads`` are read alone (:func:`~nsysan.packing.among`: a group's few threads
    key by key, which row-group statistics prune). With ``span``, only the rows whose
    time overlaps it (``start_ns < hi``, ``end_ns > lo``); with ``columns``, only
    those columns and the thread keys (a stored table reads no other)."""
    kept = None if columns is None else list(dict.fromkeys([*THREAD_KEYS, *columns]))
    if isinstance(table, pl.DataFrame):
        # The span first: a vectorized test that leaves fewer rows to find threads in.
        rows = on_threads(table if span is None else table.filter(overlapping(span)), threads)
        return rows if kept is None else rows.select(kept)
    query = among(table.lazy(span), threads, THREAD_KEYS)
    if span is not None:
        query = query.filter(overlapping(span))
    if kept is not None:
        # Pushed down to the scan: the other columns are never decoded.
        query = query.select(kept)
    return query.collect(engine=ENGINE).rechunk()


def overlapping(span: Span) -> pl.Expr:
    """Rows whose time overlaps ``span``: ``start_ns < hi`` and ``end_ns > lo``."""
    lo, hi = span
    return (pl.col("start_ns") < hi) & (pl.col("end_ns") > lo)


def with_rows_on_threads(
    trace: Trace,
    threads: pl.DataFrame,
    tables: Sequence[str] = STORED_TABLES,
    span: Span | None = None,
    columns: Mapping[str, Sequence[str]] | None = None,
) -> Trace:
    """``trace`` with its host ``tables`` read for ``threads`` only: what host
    attribution reads of one group of feeding threads. Without ``span``, tables in
    memory stay whole; with it, every table of ``tables`` is cut to the rows that
    overlap it (a slice of the group, :mod:`nsysan.analyze.host_slices`). ``columns``
    names, for some of the tables, the only columns read (and the thread keys)."""
    columns = columns or {}
    replaced: dict[str, object] = {
        name: rows_on_threads(trace.table(name), threads, span, columns.get(name))
        for name in tables
        if span is not None or isinstance(trace.table(name), StoredTable)
    }
    if "cuda_api" in replaced:
        # Calls kept apart from the whole table are no subset of the threads' rows.
        replaced["operation_calls"] = None
    return dataclasses.replace(trace, **replaced)  # type: ignore[arg-type]


def thread_numbers(df: pl.DataFrame, threads: pl.DataFrame) -> pl.Series:
    """Per row of ``df``, the ``_th`` of its thread (Int32); null off the feeding threads."""
    th = pl.col(THREAD_NUMBER).cast(pl.Int32)
    if threads.height == 1:
        # The usual case: one process feeds its GPU from one thread.
        (row,) = threads.iter_rows(named=True)
        on_thread = pl.all_horizontal(pl.col(c) == row[c] for c in THREAD_KEYS)
        return df.select(
            pl.when(on_thread).then(pl.lit(row[THREAD_NUMBER], dtype=pl.Int32)).alias(THREAD_NUMBER)
        ).to_series()
    # A thread is one packed integer: a hash look-up of one column instead of a join
    # of millions of rows on three.
    return looked_up(df, threads.select(*THREAD_KEYS, th), THREAD_KEYS, THREAD_NUMBER)


# Feeding threads are attributed in about this many groups: the timelines of one group
# at a time are in memory, not those of every feeding thread at once.
THREAD_GROUPS = 4


def thread_groups(
    threads: pl.DataFrame, portions: pl.DataFrame, groups: int = THREAD_GROUPS
) -> list[np.ndarray]:
    """The feeding threads' numbers (``_th``) in runs holding about equal host portions.

    A run closes before it would pass ``1/groups`` of the portions; a thread with
    more than that is a run of its own, so there are at most ``2 * groups`` runs.
    Without feeding threads, one empty run (the attribution still runs once).
    """
    counts = np.bincount(
        portions[THREAD_NUMBER].to_numpy().astype(np.int64), minlength=threads.height
    )
    cap = max(1, -(-int(counts.sum()) // groups))
    runs: list[np.ndarray] = []
    first, held = 0, 0
    for th, count in enumerate(counts):
        if th > first and held + count > cap:
            runs.append(np.arange(first, th))
            first, held = th, 0
        held += int(count)
    runs.append(np.arange(first, threads.height))
    return runs


def in_group(
    threads: pl.DataFrame, members: np.ndarray, frames: Sequence[pl.DataFrame | None]
) -> tuple[pl.DataFrame, list[pl.DataFrame | None]]:
    """``threads`` of ``members`` numbered ``0, 1, ...``, and ``frames``' rows on them.

    ``frames`` have a ``_th`` column, renumbered likewise; all of them as given when
    ``members`` are every thread.
    """
    if len(members) == threads.height:
        return threads, list(frames)
    dtype = threads.schema[THREAD_NUMBER]
    local = np.full(threads.height, -1, dtype=np.int64)
    local[members] = np.arange(len(members))
    group = threads[members].with_columns(
        pl.int_range(len(members), dtype=dtype).alias(THREAD_NUMBER)
    )
    kept: list[pl.DataFrame | None] = []
    for frame in frames:
        if frame is None:
            kept.append(None)
            continue
        number = local[frame[THREAD_NUMBER].to_numpy()]
        on_group = number >= 0
        kept.append(
            frame.filter(on_group).with_columns(
                pl.Series(THREAD_NUMBER, number[on_group]).cast(frame.schema[THREAD_NUMBER])
            )
        )
    return group, kept


def portion_time_type(portions: pl.DataFrame) -> type[np.signedinteger]:
    """The integer type for the time of a cause in each of ``portions``: Int32 where
    the longest portion fits it (a cause's time in a portion is part of it), else Int64."""
    longest = portions.select((pl.col("end_ns") - pl.col("start_ns")).max()).item()
    fits = longest is None or longest <= np.iinfo(np.int32).max
    return np.int32 if fits else np.int64


def position_type(rows: int) -> type[np.signedinteger]:
    """The integer type for positions among ``rows`` rows (or counts up to it): int32
    where they fit, half the bytes of numpy's int64 positions, else int64."""
    return np.int32 if rows <= np.iinfo(np.int32).max else np.int64
