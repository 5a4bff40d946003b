"""Each gap's feeding operation and its launch call (defined in :mod:`nsysan.analyze.host`).

The operation that ends a gap starts exactly at the gap's end on its unit: an exact
as-of join on the kernels, which ingest keeps in (gpu, start) order, so neither side
is sorted again; only operations tied at one instant are ranked, and only the gaps no
kernel ends are searched among the copies and sets. Its launch call is the CUDA API
row with the same (source, pid, correlation id), among the calls that have the key of
an operation (:meth:`~nsysan.model.Trace.calls_of_operations`: on a cached run, a
third of a big trace's calls, kept apart by :mod:`nsysan.ingest.operation_calls`). It
is read from a table indexed by the id, one per process
(:mod:`nsysan.analyze.host_calls`), or, where the ids are sparse, found by a binary
search among those keys packed into one integer, only the keys sorted (an as-of join
when the ids are too wide to pack). :func:`feeding_launches` does both for a table of
gaps.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import polars as pl

from nsysan.analyze.host_calls import (
    NO_CALL,
    asked_ids,
    asked_rows,
    direct_call_rows,
    direct_call_table,
    find_rows,
    gather_sorted,
    prefer_calls,
)
from nsysan.analyze.host_tables import ENGINE, run_starts
from nsysan.intervals import sort_if_needed
from nsysan.model import Trace
from nsysan.packing import among, bit_widths, packed
from nsysan.stored import HostTable, StoredTable, TablePart

__all__ = ["KIND_ORDER", "feeding_launches"]

# Preference among operations starting at the same instant.
KIND_ORDER = ("kernel", "memcpy", "memset")


def _by_gpu_then(df: pl.DataFrame, col: str) -> pl.DataFrame:
    """``df`` in (gpu, ``col``) order: ordered by ``col`` within every unit.

    That is all an as-of join ``by`` the unit keys needs (a unit is one GPU or a
    process-device on one GPU). The ingested kernels and the gaps already are in that
    order, so they usually cost one check.
    """
    return sort_if_needed(df, "gpu", col)


def _preferred_per_instant(
    df: pl.DataFrame, keys: Sequence[str], at: str, prefer: Sequence[str]
) -> pl.DataFrame:
    """One row per (``keys``, ``at``): the smallest by ``prefer``, then the first in the table.

    ``df`` is ordered by ``at`` within ``keys`` groups; the order is kept. Only rows
    sharing their instant with a neighbour are ranked (in real traces a few), so
    no full-table sort is needed.
    """
    keys = list(keys)
    same = pl.col(at).eq_missing(pl.col(at).shift(1))
    tied_with_next = pl.col(at).eq_missing(pl.col(at).shift(-1))
    indexed = df.with_row_index("_row")
    tied = indexed.filter(same | tied_with_next)
    if tied.is_empty():
        return df
    losers = (
        tied.lazy()
        .sort([*keys, at, *prefer, "_row"])
        .filter(~run_starts([*keys, at]))
        .select("_row")
        .collect(engine=ENGINE)
    )
    return indexed.filter(~pl.col("_row").is_in(losers["_row"].implode())).drop("_row")


_OPERATION_COLUMNS = ["source", "pid", "device_id", "gpu", "correlation_id", "start_ns"]


def _starting_operations(
    trace: Trace, keys: list[str], tables: Sequence[str], ranks: Sequence[int]
) -> pl.DataFrame:
    """The preferred operation of ``tables`` per (unit, start): columns ready for the look-up."""
    parts = [
        trace.table(table).select(
            *_OPERATION_COLUMNS, pl.lit(rank, dtype=pl.Int8).alias("_kind_rank")
        )
        for table, rank in zip(tables, ranks, strict=True)
    ]
    ops = (parts[0] if len(parts) == 1 else pl.concat(parts)).drop_nulls(
        list(dict.fromkeys(["gpu", *keys, "start_ns"]))
    )
    ops = _by_gpu_then(ops, "start_ns")
    ops = _preferred_per_instant(
        ops, keys, "start_ns", ["_kind_rank", "source", "pid", "correlation_id"]
    )
    return ops.select(
        *keys,
        pl.col("start_ns").alias("_op_start"),
        pl.col("source").alias("_feed_source"),
        pl.col("pid").alias("_feed_pid"),
        pl.col("correlation_id").alias("next_correlation_id"),
        "_kind_rank",
    )


def _operation_at(gaps: pl.DataFrame, ops: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """``gaps`` (ordered by end within unit) plus the operation of ``ops`` starting at their end."""
    return gaps.join_asof(
        ops,
        left_on="end_ns",
        right_on="_op_start",
        by=keys,
        strategy="backward",
        tolerance=0,
        check_sortedness=False,
    ).drop("_op_start")


def _next_operations(trace: Trace, gaps: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """``gaps`` plus the operation starting exactly at each gap's end, if any.

    A kernel is preferred to a memcpy or memset at the same instant, so the kernels
    (millions of rows, already in start order) are searched first and only the
    gaps no kernel ends are searched among the copies and sets.
    """
    gaps = _by_gpu_then(gaps, "end_ns")
    found = _operation_at(gaps, _starting_operations(trace, keys, ["kernels"], [0]), keys)
    if trace.memcpy.is_empty() and trace.memset.is_empty():
        return found
    missing = found.filter(pl.col("_kind_rank").is_null())
    if missing.is_empty():
        return found
    copies = _starting_operations(trace, keys, ["memcpy", "memset"], [1, 2])
    return pl.concat(
        [
            found.filter(pl.col("_kind_rank").is_not_null()),
            _operation_at(missing.select(gaps.columns), copies, keys),
        ]
    )


# A process and a correlation id packed into one integer: (source, pid, id) in that
# order of significance. Then finding each gap's launch call is one binary search.
_CALL_KEYS = ["_feed_source", "_feed_pid", "next_correlation_id"]
# A call without these is no launch call of an operation.
_CALL_ROW = ["next_correlation_id", "launch_start_ns", "launch_end_ns"]


def _launch_calls(cuda_api: HostTable, found: pl.DataFrame) -> pl.DataFrame:
    """CUDA API rows that can be the launch calls of ``found``'s next operations, named
    for the gap table.

    From a table on disk only those with one of their (source, pid, correlation id)
    keys are kept: a big trace's CUDA calls are several times the launches its gaps
    look up (5M kernels: 16M calls, 0.65 GB read back). Each call's key is tested
    against a table of the asked ids (one byte per id:
    :func:`~nsysan.analyze.host_calls.asked_ids`; a hash look-up of the 16M packed keys
    among 5M took 1.8 s instead of 0.7 s), or, where the ids are too sparse for such a
    table, its packed key looked up (:func:`~nsysan.packing.among`). In memory the
    select holds the table's own columns, and the filter would only cost time.
    """
    calls = cuda_api.lazy().select(
        pl.col("correlation_id").alias("next_correlation_id"),
        pl.col("source").alias("_feed_source"),
        pl.col("pid").alias("_feed_pid"),
        "tid",
        pl.col("name").alias("launch_name"),
        pl.col("start_ns").alias("launch_start_ns"),
        pl.col("end_ns").alias("launch_end_ns"),
    )
    if isinstance(cuda_api, pl.DataFrame):
        return calls.drop_nulls(_CALL_ROW).collect(engine=ENGINE)
    keys = found.select(_CALL_KEYS).drop_nulls().filter(pl.all_horizontal(pl.all() >= 0))
    asked = asked_ids(*_columns(keys, _CALL_KEYS), max_slots=4 * cuda_api.height + (1 << 20))
    if asked is None:
        return among(calls, found, _CALL_KEYS).drop_nulls(_CALL_ROW).collect(engine=ENGINE)

    def is_asked(columns: Sequence[pl.Series]) -> pl.Series:
        return pl.Series(asked_rows(asked, *(c.fill_null(-1).to_numpy() for c in columns)))

    # The streaming engine tests the calls a batch at a time as it decodes them: the
    # 0.65 GB of the select over 16M calls are never held at once.
    return (
        calls.filter(pl.map_batches(_CALL_KEYS, is_asked, pl.Boolean, is_elementwise=True))
        .drop_nulls(_CALL_ROW)
        .collect(engine="streaming")
    )


_PREFERRED_CALL = ["launch_start_ns", "launch_end_ns"]


def _launch_of(found: pl.DataFrame, calls: pl.DataFrame) -> pl.DataFrame:
    """``found`` plus, per row, the call with its (source, pid, correlation id), row order kept.

    Of calls sharing an id, the earliest-starting (then earliest-ending, then first
    in the table).
    """
    widths = bit_widths([found, calls], _CALL_KEYS)
    if widths is None:
        return _launch_of_unpacked(found, calls)
    calls = calls.drop_nulls(_CALL_KEYS)
    rows = _direct_rows(found, calls)
    if rows is None:
        rows = _sorted_rows(found, calls, widths)
    extra = [c for c in calls.columns if c not in _CALL_KEYS]
    return pl.concat(
        [found, calls.select(pl.col(extra).gather(_positions(rows)))], how="horizontal"
    )


def _columns(df: pl.DataFrame, cols: Sequence[str]) -> list[np.ndarray]:
    """``cols`` of ``df`` as numpy arrays, nulls as -1 (keys are non-negative)."""
    return [df[col].fill_null(-1).to_numpy() for col in cols]


def _direct_rows(found: pl.DataFrame, calls: pl.DataFrame) -> np.ndarray | None:
    """Each ``found`` row's call row by a table indexed by id; None where ids are sparse."""
    # A slot is 4 bytes, the sorted search holds 24 per call (keys, order, sorted
    # keys): up to four slots per call (and at least 1M) is still less memory. A
    # process's ids are numbered one after another, yet also count calls that are
    # not traced (on the scale8 workload 0.4 calls per id).
    lookup = direct_call_table(
        *_columns(calls, [*_CALL_KEYS, *_PREFERRED_CALL]),
        max_slots=4 * calls.height + (1 << 20),
    )
    if lookup is None:
        return None
    return direct_call_rows(lookup, *_columns(found, _CALL_KEYS))


def _sorted_rows(found: pl.DataFrame, calls: pl.DataFrame, widths: list[int]) -> np.ndarray:
    """Each ``found`` row's call row by a binary search among the sorted packed keys."""
    keys = packed(calls, _CALL_KEYS, widths).to_numpy()
    # Only the keys are sorted, not the calls. Ids rise with time in each process,
    # so the rows come in a few long runs, which a stable sort (timsort) merges fast.
    order = np.argsort(keys, kind="stable")
    table, repeated = gather_sorted(keys, order)
    if repeated:
        order, table = _preferred_calls(calls, order, table)
    queries = packed(found, _CALL_KEYS, widths).fill_null(-1).to_numpy()
    return find_rows(table, order, queries)


def _positions(at: np.ndarray) -> pl.Series:
    """Row positions for a gather; -1 (nothing there) becomes null."""
    return pl.select(pl.when(pl.lit(at) >= 0).then(pl.lit(at)).cast(pl.UInt32)).to_series()


def _preferred_calls(
    calls: pl.DataFrame, order: np.ndarray, table: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``order`` and its sorted ``table`` of keys with one row per key: the preferred call."""
    ranked = pl.concat(
        [
            pl.DataFrame({"_key": table, "_call": order}),
            calls.select(_PREFERRED_CALL).gather(order),
        ],
        how="horizontal",
    )
    # Rows sharing a key are in table order (a stable sort): the last tie-break.
    kept = _preferred_per_instant(ranked, [], "_key", _PREFERRED_CALL)
    return kept["_call"].to_numpy(), kept["_key"].to_numpy()


def _launch_of_unpacked(found: pl.DataFrame, calls: pl.DataFrame) -> pl.DataFrame:
    """:func:`_launch_of` for keys too wide to pack: an as-of join, then back in order."""
    ordered = _preferred_per_instant(
        calls.sort("next_correlation_id", maintain_order=True),
        ["_feed_source", "_feed_pid"],
        "next_correlation_id",
        _PREFERRED_CALL,
    )
    return (
        found.with_row_index("_order")
        .sort("next_correlation_id", maintain_order=True)
        .join_asof(
            ordered,
            on="next_correlation_id",
            by=["_feed_source", "_feed_pid"],
            strategy="backward",
            tolerance=0,
            check_sortedness=False,
        )
        .sort("_order")
        .drop("_order")
    )


# Calls read from disk per batch by _streamed_launch_of: a multiple of the stored
# tables' row groups (nsysan.ingest.cache), half a file.
_CALL_BATCH_ROWS = 1 << 19
# A launch call's tid while held in an Int64 array, where the call has none.
_NO_TID = np.iinfo(np.int64).min


def _streamed_launch_of(found: pl.DataFrame, cuda_api: StoredTable) -> pl.DataFrame | None:
    """``found`` plus its launch calls' ``tid, launch_start_ns, launch_end_ns`` (the
    preferred call of :func:`_launch_of`), with no call held: the calls on disk are
    read a batch at a time, each batch updating every gap's preferred call so far
    (:func:`~nsysan.analyze.host_calls.prefer_calls`). None where the keys do not pack.

    It holds per gap its sorted key (8 bytes), the gap's row (4) and the preferred
    call's start, end and tid (24; 48 bytes in all until stop 36), where
    :func:`_launch_calls` and :func:`_launch_of` held the asked calls, their look-up
    table and the gathered columns: at 5M kernels of the scale8 workload, +0.32 GB at
    its peak against +0.44 GB, in about the same time (stop 33).
    """
    widths = bit_widths([found], _CALL_KEYS)
    if widths is None:
        return None
    keys = packed(found, _CALL_KEYS, widths).fill_null(-1).to_numpy()
    queries = np.argsort(keys, kind="stable")
    keys = keys[queries]
    # A gap's row fits 32 bits where polars numbers rows in 32 bits (_gap): 4 bytes a
    # gap less while the calls are read.
    queries = queries.astype(np.uint32 if found.height <= 1 << 32 else np.int64)
    best = np.full((3, found.height), NO_CALL, dtype=np.int64)
    hint = 0
    # Without a key to look up (no operation ends a gap), no call is read.
    asked = len(keys) and keys[-1] >= 0
    for calls, first in _call_batches(cuda_api) if asked else ():
        # The slice first: it is what the scan reads (the row groups it spans; the whole
        # file where the load drops inverted calls, whose filter comes before it).
        batch = (
            calls.slice(first, _CALL_BATCH_ROWS)
            .select(
                "source",
                "pid",
                "correlation_id",
                pl.col("tid").cast(pl.Int64).fill_null(_NO_TID),
                "start_ns",
                "end_ns",
            )
            # A call without these is no launch call of an operation.
            .drop_nulls(["correlation_id", "start_ns", "end_ns"])
            .collect(engine=ENGINE)
        )
        columns = [batch[c].fill_null(-1).to_numpy() for c in batch.columns]
        hint = prefer_calls(keys, queries, np.array(widths), *columns, best, hint)
    del keys, queries
    has = pl.Series(best[0] != NO_CALL)
    tid_type = cuda_api.schema["tid"]
    return found.with_columns(
        pl.when(has & (pl.lit(best[2]) != _NO_TID))
        .then(pl.lit(best[2]))
        .cast(tid_type)
        .alias("tid"),
        pl.when(has).then(pl.lit(best[0])).alias("launch_start_ns"),
        pl.when(has).then(pl.lit(best[1])).alias("launch_end_ns"),
    )


def _call_batches(cuda_api: StoredTable) -> Iterator[tuple[pl.LazyFrame, int]]:
    """The batches of :data:`_CALL_BATCH_ROWS` calls, in table order, as (a query, its
    first row): a file at a time, each read alone. A slice of the whole table's query
    opens every file's footer to find its rows (at 20M kernels, 124 batches of 62
    files: ~18 s of a thread's time, not the ~2 s of the reads)."""
    for part in cuda_api.parts or (TablePart(cuda_api.query, cuda_api.height),):
        for first in range(0, part.rows, _CALL_BATCH_ROWS):
            yield part.query, first


def feeding_launches(
    trace: Trace, gaps: pl.DataFrame, keys: list[str], call_names: bool = True
) -> pl.DataFrame:
    """``gaps`` (``_gap``, keys, ``end_ns``) plus next operation and launch call, in gap order.

    Without ``call_names``, the launch call's ``launch_name`` may be left out: then
    the calls of a table on disk are not held (:func:`_streamed_launch_of`).
    """
    found = _next_operations(trace, gaps, keys)
    if not found["_gap"].is_sorted():
        found = found.sort("_gap")
    calls = trace.calls_of_operations()
    if not call_names and isinstance(calls, StoredTable):
        streamed = _streamed_launch_of(found, calls)
        if streamed is not None:
            return streamed
    return _launch_of(found, _launch_calls(calls, found))
