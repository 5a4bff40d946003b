"""Row counts and time spans of the host-side event tables, aggregated in SQLite.

``nsysan info --exact`` needs, of the CUDA API, NVTX, OS-runtime, scheduling and
overhead tables, only how many rows survive validation, where they start and end, and
how many API calls launch kernels. One aggregate query per table answers that
without moving a single row into Python: on a 5M-kernel export the API table alone
is 16M rows, which a full read would hold as ~650 MB. It still scans every row:
plain ``nsysan info`` takes the rows stored instead (:func:`stored_rows`), from the
table's row ids, at no cost.

The query wraps the same checked ``SELECT`` the readers use
(:meth:`nsysan.ingest.sqlite.ExportDB.select_sql`), so a row counts exactly when a
full read would keep it: required columns valid, and not ending before it starts
(``nsysan.ingest._drop_inverted``). Dropped rows get the same notes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

import polars as pl

from nsysan.ingest import validate
from nsysan.ingest.sqlite import ExportDB

#: how ``nsysan info`` counts a host-side table: as a full read would keep its rows
#: (a scan), or the rows it stores (:func:`stored_rows`, no scan)
CensusMode = Literal["exact", "stored"]


@dataclass(frozen=True)
class TableCensus:
    """What a full read of one event table would hold, without the rows.

    ``rows``: rows kept after validation; ``inverted``: rows dropped for ending
    before they start; ``start_ns``/``end_ns``: earliest start and latest end of the
    kept rows (``end_ns`` falls back to the latest start when no row has an end), in
    the file's own clock; ``launch_calls``: kept rows whose name is a kernel launch
    (CUDA API only). ``stored``: ``rows`` are the rows stored, not checked
    (:func:`stored_rows`); the span is then unknown (None) and launches not counted
    (``launch_calls`` None). ``groups``: the kept rows counted per group, where a
    reader counts them so (:func:`nsysan.ingest.nsys.read_kernel_groups`).
    """

    rows: int
    inverted: int
    start_ns: int | None
    end_ns: int | None
    launch_calls: int | None = 0
    stored: bool = False
    groups: pl.DataFrame | None = field(default=None, compare=False)

    def __add__(self, other: TableCensus) -> TableCensus:
        """Two files' censuses of one table (times already on one timeline)."""
        launches = (
            None
            if self.launch_calls is None or other.launch_calls is None
            else self.launch_calls + other.launch_calls
        )
        return TableCensus(
            rows=self.rows + other.rows,
            inverted=self.inverted + other.inverted,
            start_ns=_either(self.start_ns, other.start_ns, min),
            end_ns=_either(self.end_ns, other.end_ns, max),
            launch_calls=launches,
            stored=self.stored or other.stored,
            groups=_joined(self.groups, other.groups),
        )


def _joined(a: pl.DataFrame | None, b: pl.DataFrame | None) -> pl.DataFrame | None:
    return b if a is None else a if b is None else pl.concat([a, b], how="vertical_relaxed")


def _either(a: int | None, b: int | None, pick: Callable[[int, int], int]) -> int | None:
    if a is None or b is None:
        return b if a is None else a
    return pick(a, b)


EMPTY = TableCensus(rows=0, inverted=0, start_ns=None, end_ns=None)


def census_sql(
    checked_select: str,
    required: Mapping[str, str],
    columns: set[str],
    launch_name_ids: list[int] | None,
    keep: str = "1",
) -> str:
    """One aggregate over ``checked_select`` (model column names): the exact census.

    Its row: kept rows, inverted rows, earliest start, latest end, latest start,
    launch calls, rows dropped for a NULL required column, rows with text cut at
    :data:`~nsysan.ingest.validate.TEXT_MAX_BYTES`, then NULLs per required
    column in ``required`` order (those present in ``columns``). ``keep``: an SQL
    condition a valid row must also meet to be kept (the reader's own filter).
    """
    present = [c for c in required if c in columns]
    valid = " AND ".join(f'"{c}" IS NOT NULL' for c in present) or "1"
    has_end = "end_ns" in columns
    inverted = '"end_ns" IS NOT NULL AND "end_ns" < "start_ns"' if has_end else "0"
    kept = f"({valid}) AND ({keep}) AND NOT ({inverted})"
    start = '"start_ns"' if "start_ns" in columns else '"time_ns"'
    end = '"end_ns"' if has_end else "NULL"
    launches = "0"
    if launch_name_ids:
        ids = ", ".join(str(i) for i in launch_name_ids)
        launches = f'SUM(CASE WHEN {kept} AND "name_id" IN ({ids}) THEN 1 ELSE 0 END)'
    texts = [c for c in columns if c in validate.TEXT_COLUMNS]
    long_text = " OR ".join(f'length("{c}") >= {validate.TEXT_MAX_BYTES}' for c in texts)
    truncated = f"SUM(CASE WHEN ({valid}) AND ({long_text}) THEN 1 ELSE 0 END)" if texts else "0"
    nulls = "".join(f', SUM("{c}" IS NULL)' for c in present)
    # LIMIT -1 keeps the checked SELECT a subquery run once per row: flattened into
    # the aggregate, each reference to a column would re-run its checks.
    return (
        f"SELECT SUM(CASE WHEN {kept} THEN 1 ELSE 0 END), "
        f"SUM(CASE WHEN ({valid}) AND ({keep}) AND ({inverted}) THEN 1 ELSE 0 END), "
        f"MIN(CASE WHEN {kept} THEN {start} END), MAX(CASE WHEN {kept} THEN {end} END), "
        f"MAX(CASE WHEN {kept} THEN {start} END), {launches}, "
        f"SUM(CASE WHEN {valid} THEN 0 ELSE 1 END), {truncated}{nulls} "
        f"FROM ({checked_select} LIMIT -1)"
    )


def healthy_census_sql(
    db: ExportDB,
    table: str,
    found: Mapping[str, str],
    required: Mapping[str, str],
    launch_name_ids: list[int] | None,
    keep: tuple[str, str] | None,
) -> str:
    """The census of the rows that pass every check, straight from the source columns.

    Its row: valid rows (those :func:`census_sql` neither drops nor calls inverted),
    kept rows, earliest start, latest end, latest start, launch calls, rows with long
    text. When valid rows are all the table's rows, this is the exact census at a
    fraction of :func:`census_sql`'s cost (each check runs once per row).
    """
    bounds = db.bounds

    def value(dst: str) -> str:
        return validate.value_sql(found[dst], dst, bounds, required=dst in required)

    checks = [f"({value(c)}) IS NOT NULL" for c in required if c in found]
    # Validated columns are read as they are; others through their checks.
    col = {
        dst: validate.quote_ident(src) if dst in required else f"({value(dst)})"
        for dst, src in found.items()
    }
    start = col.get("start_ns", col.get("time_ns"))
    end = col.get("end_ns", "NULL")
    if "end_ns" in col:
        checks.append(f"({end} IS NULL OR {end} >= {start})")

    def when_kept(expr: str) -> str:
        return f"CASE WHEN {kept} THEN {expr} END" if keep else expr

    kept = keep[1].replace(f'"{keep[0]}"', col[keep[0]]) if keep else "1"
    launches = "0"
    if launch_name_ids and "name_id" in found:
        # The raw id: a value that fails the id check (text, REAL) is in no list of ints.
        ids = ", ".join(str(i) for i in launch_name_ids)
        name_id = validate.quote_ident(found["name_id"])
        launches = f"SUM({when_kept(f'{name_id} IN ({ids})')})"
    texts = [validate.quote_ident(found[c]) for c in found if c in validate.TEXT_COLUMNS]
    long_text = " OR ".join(
        f"length(CAST({t} AS BLOB)) >= {validate.TEXT_MAX_BYTES}" for t in texts
    )
    truncated = f"SUM({long_text})" if texts else "0"
    # Each aggregate costs a few tenths of a second per 10M rows, so only what is needed:
    # the latest start only where rows may lack an end (the span then ends there).
    latest_start = "NULL" if "end_ns" in required else f"MAX({when_kept(start)})"
    return (
        f"SELECT COUNT(*), {f'SUM({kept})' if keep else 'COUNT(*)'}, "
        f"MIN({when_kept(start)}), MAX({when_kept(end)}), {latest_start}, "
        f"{launches}, {truncated} "
        f"FROM {validate.quote_ident(table)} WHERE {' AND '.join(checks) or '1'}"
    )


def census_table(
    db: ExportDB,
    table: str,
    wanted: dict[str, str],
    launch_name_ids: list[int] | None = None,
    keep: tuple[str, str] | None = None,
) -> TableCensus:
    """The :class:`TableCensus` of ``table`` read with ``wanted`` (model → source names).

    ``keep``: (model column, SQL condition on it as ``"column"``) that the reader also
    filters on, applied when the table has that column.
    """
    if not db.has(table):
        return EMPTY
    found = validate.resolve_columns(db.columns(table), wanted)
    select = db.select_sql(table, wanted)  # refuses a table that lacks a required column
    if not found:
        return EMPTY
    required = validate.required_model_columns(table, wanted)
    keep = keep if keep and keep[0] in found else None
    name_ids = launch_name_ids if "name_id" in found else None
    total = int(db.scalar(f"SELECT COUNT(*) FROM {validate.quote_ident(table)}") or 0)
    (fast,) = db.rows(healthy_census_sql(db, table, found, required, name_ids, keep))
    valid, kept, lo, end_hi, start_hi, launches, truncated = fast
    if valid != total:  # a damaged table: the exact, slower census says what was wrong
        (row,) = db.rows(
            census_sql(select, required, set(found), name_ids, keep[1] if keep else "1")
        )
        kept, inverted, lo, end_hi, start_hi, launches, dropped, truncated, *null_counts = row
        present = [c for c in required if c in found]
        if dropped:
            nulls = {c: int(n or 0) for c, n in zip(present, null_counts, strict=True)}
            db.explain_dropped(table, required, nulls, int(dropped))  # type: ignore[call-overload]
    else:
        inverted = 0
    db.note_truncated(table, int(truncated or 0))  # type: ignore[call-overload]
    return TableCensus(
        rows=int(kept or 0),  # type: ignore[call-overload]
        inverted=int(inverted or 0),  # type: ignore[call-overload]
        start_ns=_int(lo),
        end_ns=_int(end_hi) if end_hi is not None else _int(start_hi),
        launch_calls=int(launches or 0),  # type: ignore[call-overload]
    )


def _int(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]


def stored_rows(db: ExportDB, table: str) -> TableCensus:
    """How many rows ``table`` stores, from its first and last row id: no scan.

    Nsight Systems appends rows and never deletes one, so the row ids run without a
    gap and their range is the row count. Rows are not checked: damaged rows are
    counted, and rows a reader filters out too (NVTX domain bookkeeping). A table
    without row ids, or ids that cannot be a count (below 1, or more rows than the
    file has room for), is counted row by row.
    """
    if not db.has(table):
        return EMPTY
    quoted = validate.quote_ident(table)
    ids = db.rowid_range(table)
    if ids == (None, None):
        rows = 0
    elif ids is not None and _is_count(*ids, room=_row_room(db)):
        rows = int(ids[1]) - int(ids[0]) + 1  # type: ignore[call-overload]
    else:
        rows = int(db.scalar(f"SELECT COUNT(*) FROM {quoted}") or 0)  # type: ignore[call-overload]
    # Launches are not counted (None), but in an empty table there are none.
    launches = None if rows else 0
    return TableCensus(
        rows=rows, inverted=0, start_ns=None, end_ns=None, launch_calls=launches, stored=True
    )


def _is_count(lo: object, hi: object, room: int) -> bool:
    """Whether row ids ``lo..hi`` can number the rows: integers from 1, within ``room``."""
    return isinstance(lo, int) and isinstance(hi, int) and 1 <= lo <= hi <= room


def _row_room(db: ExportDB) -> int:
    """More rows than any table of this file can hold (a cell takes at least 4 bytes)."""
    pages = db.scalar("PRAGMA page_count")
    size = db.scalar("PRAGMA page_size")
    if not isinstance(pages, int) or not isinstance(size, int):
        return 0
    return pages * size // 4
