"""Opening an export: file checks, a read-only connection, schema introspection, bulk reads.

The user's trace is never modified: it is opened through a SQLite URI with
``mode=ro`` (SQLAlchemy for introspection and small reads, the ADBC SQLite driver for
bulk rows, which hands Arrow batches to polars without a Python row loop).

Both connections open the one URI that :func:`sqlite_uri` builds: the file name
percent-encoded byte by byte (so ``#``, ``?``, ``&`` and ``%`` in a name stay part of
the name) with ``mode=ro&immutable=1``. Immutable means SQLite takes no locks and
creates no ``-shm``/``-wal`` file: the process holds two SQLite libraries (the Python
one behind SQLAlchemy and the ADBC driver's own), and POSIX locks are per process, so
one library closing the file dropped the other's locks (WAL-mode exports crashed).
An export with an unfinished write-ahead log or rollback journal beside it is refused:
reading it as immutable would ignore the log.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import polars as pl
import sqlalchemy as sa

from nsysan import model
from nsysan.errors import (
    DuplicateInputError,
    EmptyTraceError,
    InputNotFoundError,
    MissingColumnError,
    NotNsysExportError,
    NotSqliteError,
    TruncatedTraceError,
    UnfinishedWriteError,
)
from nsysan.ingest import validate

SQLITE_MAGIC = b"SQLite format 3\x00"
ADBC_BATCH_OPTION = "adbc.sqlite.query.batch_rows"
ADBC_BATCH_ROWS = 65_536
# Rows per slice of a bulk read (ExportDB.read_checked): each slice is checked and
# converted on its own, so a table's transient copies follow one slice.
SLICE_ROWS = 1 << 20

#: a conversion of each slice of a read (ExportDB.read_checked)
Convert = Callable[[pl.DataFrame], pl.DataFrame]
_HEADER_BYTES = 100

# Tables of which at least one is present in every Nsight Systems export we know.
NSYS_MARKER_TABLES = frozenset(
    {
        "StringIds",
        "TARGET_INFO_GPU",
        "CUPTI_ACTIVITY_KIND_KERNEL",
        "CUPTI_ACTIVITY_KIND_RUNTIME",
        "META_DATA_EXPORT",
        "EXPORT_META_DATA",
        "ThreadNames",
    }
)


def sqlite_uri(path: Path) -> str:
    """The read-only, lock-free SQLite URI that names ``path`` literally.

    Every byte of the absolute path but ``/`` and the unreserved characters is
    percent-encoded (from the file system's bytes, so any legal name works).
    """
    return f"file:{quote(os.fsencode(path.resolve()), safe='/')}?mode=ro&immutable=1"


def _connect_stdlib(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(sqlite_uri(path), uri=True, check_same_thread=False)


def _check_no_unfinished_write(path: Path, header: bytes) -> None:
    # Bytes 18-19 are 2 in WAL mode (SQLite file format, section 1.3.3).
    sidecars = ["-journal"] + (["-wal"] if 2 in (header[18], header[19]) else [])
    for suffix in sidecars:
        side = path.with_name(path.name + suffix)
        try:
            size = side.stat().st_size
        except OSError:
            continue
        if size > 0:
            raise UnfinishedWriteError(
                f"{path}: {side.name} ({size} bytes) lies beside it: the export is still "
                "being written or was not closed; wait for it to finish, or fold the log "
                f"in with: sqlite3 '{path.name}' 'PRAGMA wal_checkpoint(TRUNCATE)'"
            )


def check_distinct_files(paths: list[Path]) -> None:
    """Refuse the same export given twice (same real path, or same device and inode):
    its events would be counted twice on one timeline."""
    seen: dict[tuple[int, int], Path] = {}
    for path in paths:
        try:
            st = path.stat()
        except (OSError, ValueError):
            continue  # open_export names the problem
        key = (st.st_dev, st.st_ino)
        if key in seen:
            raise DuplicateInputError(f"{path}: the same file as {seen[key]} (given twice)")
        seen[key] = path


def check_sqlite_file(path: Path) -> None:
    """Fail with a one-line error unless ``path`` is a complete SQLite database file."""
    if not path.exists():
        raise InputNotFoundError(f"{path}: no such file")
    if not path.is_file():
        raise InputNotFoundError(f"{path}: not a file")
    size = path.stat().st_size
    if size == 0:
        raise EmptyTraceError(f"{path}: the file is empty")
    with path.open("rb") as fh:
        header = fh.read(_HEADER_BYTES)
    if not header.startswith(SQLITE_MAGIC):
        raise NotSqliteError(
            f"{path}: not a SQLite database (export .nsys-rep files with "
            "'nsys export --type sqlite' first)"
        )
    if len(header) < _HEADER_BYTES:
        raise TruncatedTraceError(f"{path}: truncated SQLite file ({size} bytes)")
    page_size = int.from_bytes(header[16:18], "big")
    if page_size == 1:
        page_size = 65536
    page_count = int.from_bytes(header[28:32], "big")
    change_counter = int.from_bytes(header[24:28], "big")
    valid_for = int.from_bytes(header[92:96], "big")
    # The in-header page count is only trustworthy when "version-valid-for" matches
    # the change counter (SQLite file format, section 1.3.7).
    if page_count and valid_for == change_counter and size < page_count * page_size:
        raise TruncatedTraceError(
            f"{path}: truncated SQLite file ({size} bytes, header says {page_count * page_size})"
        )
    _check_no_unfinished_write(path, header)


def _wrap_db_error(path: Path, exc: Exception) -> Exception:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    low = text.lower()
    if "not a database" in low or "file is encrypted" in low:
        return NotSqliteError(f"{path}: not a SQLite database ({text})")
    if "malformed" in low or "disk image" in low or "truncated" in low or "i/o" in low:
        return TruncatedTraceError(f"{path}: damaged or truncated SQLite file ({text})")
    return TruncatedTraceError(f"{path}: cannot read the SQLite file ({text})")


@dataclass
class ExportDB:
    """A read-only handle on one export with cached schema introspection."""

    path: Path
    engine: sa.Engine
    tables: frozenset[str]
    #: plausible event times in this file's clock (validate.time_bounds)
    bounds: validate.TimeBounds = field(default_factory=lambda: validate.time_bounds(None))
    #: what validation dropped or changed, for the report's notes
    notes: list[str] = field(default_factory=list)
    _columns: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def has(self, table: str) -> bool:
        return table in self.tables

    def columns(self, table: str) -> tuple[str, ...]:
        if table not in self.tables:
            return ()
        if table not in self._columns:
            try:
                cols = sa.inspect(self.engine).get_columns(table)
            except sa.exc.DBAPIError as exc:
                raise _wrap_db_error(self.path, exc) from None
            self._columns[table] = tuple(c["name"] for c in cols)
        return self._columns[table]

    def has_rows(self, table: str) -> bool:
        if table not in self.tables:
            return False
        return bool(self.scalar(f'SELECT EXISTS (SELECT 1 FROM "{table}")'))

    def select_sql(self, table: str, wanted: dict[str, str]) -> str:
        """``SELECT`` the ``wanted`` columns (model name → source name) that exist, checked."""
        needs_rows = bool(validate.REQUIRED.get(table))
        try:
            return validate.select_sql(
                table,
                self.columns(table),
                wanted,
                self.bounds,
                has_rows=needs_rows and self.has_rows(table),
            )
        except MissingColumnError as exc:
            raise MissingColumnError(f"{self.path}: {exc.message}") from None

    def read_checked(
        self,
        table: str,
        wanted: dict[str, str],
        convert: Convert | None = None,
        parts: int = 1,
    ) -> pl.DataFrame | None:
        """Read ``table``'s ``wanted`` columns; drop rows that fail validation, with notes.

        Rows are read, checked and passed through ``convert`` one slice of about
        :data:`SLICE_ROWS` at a time, then joined: the copies a conversion makes
        follow one slice, not the whole table. ``convert`` must give every slice the
        same schema. ``parts`` > 1 reads that many row-id ranges side by side (for a
        big table read alone, as ``nsysan info`` reads kernels), in row order. None
        when the table is absent or has none of the columns.
        """
        if table not in self.tables:
            return None
        # Built first either way: it refuses a table that lacks a required column.
        checked_sql = self.select_sql(table, wanted)
        fast = self._read_unchecked(table, wanted, convert, parts)
        if fast is not None:
            return fast
        return self._read_slices(checked_sql, table, wanted, convert, unchecked=False)

    def _read_unchecked(
        self,
        table: str,
        wanted: dict[str, str],
        convert: Convert | None = None,
        parts: int = 1,
    ) -> pl.DataFrame | None:
        """:meth:`read_checked` through the fast query (validate.raw_select_sql) alone.

        None where it cannot stand for the checked query (see :meth:`_read_slices`).
        """
        sql = validate.raw_select_sql(table, self.columns(table), wanted)
        if sql is None:
            return None
        ranges = self._rowid_ranges(table, parts)
        try:
            if len(ranges) < 2:
                return self._read_slices(sql, table, wanted, convert, unchecked=True)
            with ThreadPoolExecutor(max_workers=len(ranges)) as pool:
                reads = [
                    pool.submit(
                        self._tallied_slices,
                        f"{sql} WHERE rowid BETWEEN {lo} AND {hi}",
                        table,
                        wanted,
                        convert,
                    )
                    for lo, hi in ranges
                ]
                results = [r.result() for r in reads]
        except _NeedsCheckedRead:
            return None
        # Every part's slices joined once, in row order: no copy of each half first.
        # Each part's list is emptied as its slices move over (the futures hold those
        # lists too): the join then frees every slice's columns as it copies them,
        # instead of holding the whole table twice.
        slices: list[pl.DataFrame] = []
        total = _Tally()
        for part, tally in results:
            total.add(tally)
            if part is not None:
                slices.extend(part)
                part.clear()
        if not slices:
            return None
        self._note(table, wanted, total)
        return joined_slices(slices)

    def rowid_range(self, table: str) -> tuple[object, object] | None:
        """``table``'s first and last row id (None, None when empty), each a b-tree descent;
        None where it has no row ids (a WITHOUT ROWID table) or they cannot be read.

        Two queries: SQLite looks up ``MIN(rowid)`` or ``MAX(rowid)`` alone without a
        scan, but scans the whole table for both in one ``SELECT``.
        """
        quoted = validate.quote_ident(table)
        try:
            return (
                self.scalar(f"SELECT MIN(rowid) FROM {quoted}"),
                self.scalar(f"SELECT MAX(rowid) FROM {quoted}"),
            )
        except TruncatedTraceError:  # "no such column: rowid"; a damaged file fails later
            return None

    def _rowid_ranges(self, table: str, parts: int) -> list[tuple[int, int]]:
        """``parts`` row-id ranges of about equal width covering ``table``; one or none
        where it has no row ids (a WITHOUT ROWID table) or too few rows to split."""
        ids = self.rowid_range(table) if parts >= 2 else None
        if ids is None:
            return []
        lo, hi = ids
        if not isinstance(lo, int) or not isinstance(hi, int) or hi - lo < parts * SLICE_ROWS:
            return []
        step = (hi - lo) // parts + 1
        return [(lo + i * step, min(hi, lo + (i + 1) * step - 1)) for i in range(parts)]

    def _read_slices(
        self,
        sql: str,
        table: str,
        wanted: dict[str, str],
        convert: Convert | None,
        unchecked: bool,
    ) -> pl.DataFrame | None:
        """:meth:`read_checked` over ``sql``: the checked query, or (``unchecked``) the fast one.

        ADBC reads it; the stdlib reader (one slice) where the driver is missing or
        typed a column from its first rows and met a cell of another type later.
        The fast read (validate.raw_select_sql) has its checks done in polars; it
        raises :class:`_NeedsCheckedRead` where it cannot stand for the checked query:
        a cell of another storage class, or a column typed other than integer (the
        checked SQL turns such cells into NULLs and notes them).
        """
        slices, tally = self._tallied_slices(sql, table, wanted, convert, unchecked)
        if slices is None:
            return None
        self._note(table, wanted, tally)
        return joined_slices(slices)

    def _tallied_slices(
        self,
        sql: str,
        table: str,
        wanted: dict[str, str],
        convert: Convert | None,
        unchecked: bool = True,
    ) -> tuple[list[pl.DataFrame] | None, _Tally]:
        """:meth:`_read_slices` without its notes and before the join: the checked
        slices and what checking dropped."""
        try:
            # Closed at once when the read stops part way, not when collected.
            with closing(_adbc_slices(self.path, sql)) as slices:
                return self._checked(slices, table, wanted, convert, unchecked)
        except (_AdbcUnavailable, _AdbcTypeMismatch):
            if unchecked:
                raise _NeedsCheckedRead from None
        slices = iter([_read_stdlib(self.path, sql)])
        return self._checked(slices, table, wanted, convert, unchecked)

    def _checked(
        self,
        slices: Iterator[pl.DataFrame],
        table: str,
        wanted: dict[str, str],
        convert: Convert | None,
        unchecked: bool,
    ) -> tuple[list[pl.DataFrame] | None, _Tally]:
        """``slices`` checked and converted (not joined), with what checking dropped."""
        required = validate.required_model_columns(table, wanted)
        tally = _Tally()
        parts: list[pl.DataFrame] = []
        for raw in slices:
            if "_empty" in raw.columns:
                return None, tally
            df: pl.DataFrame | None = raw
            if unchecked:
                df = validate.checked_in_polars(raw, self.bounds)
                if df is None:
                    raise _NeedsCheckedRead
            df = validate.decode_binary_columns(df)
            for name, count in validate.null_rows(df, required).items():
                tally.nulls[name] = tally.nulls.get(name, 0) + count
            df, dropped_here = validate.drop_null_required(df, required)
            tally.dropped += dropped_here
            # The StringIds pool also holds environment blocks and captured logs, cut silently.
            if table != "StringIds":
                tally.truncated += validate.truncated_count(df)
            parts.append(convert(df) if convert else df)
        return parts, tally

    def _note(self, table: str, wanted: dict[str, str], tally: _Tally) -> None:
        """The notes of what checking ``table`` dropped or cut, once per read."""
        if tally.dropped:
            required = validate.required_model_columns(table, wanted)
            self.explain_dropped(table, required, tally.nulls, tally.dropped)
        if table != "StringIds":
            self.note_truncated(table, tally.truncated)

    def note_truncated(self, table: str, count: int) -> None:
        if count:
            self.notes.append(
                f"{count} {table} string(s) longer than {validate.TEXT_MAX_BYTES} bytes "
                "were truncated for display"
            )

    def explain_dropped(
        self, table: str, required: dict[str, str], nulls: dict[str, int], dropped: int
    ) -> None:
        # Damaged files only: one more query per failing column says why.
        notes: list[str] = []
        for dst, src in required.items():
            if not nulls.get(dst):
                continue
            sql = validate.explain_sql(table, self._real_column(table, src), dst, self.bounds)
            notes += validate.explain_note(table, src, dst, self.bounds, self.rows(sql))
        self.notes.extend(notes or [f"{dropped} {table} row(s) failing validation: ignored"])

    def _real_column(self, table: str, src: str) -> str:
        return validate.resolve_columns(self.columns(table), {src: src}).get(src, src)

    def scalar(self, sql: str) -> object:
        try:
            with self.engine.connect() as conn:
                return conn.execute(sa.text(sql)).scalar()
        except sa.exc.DBAPIError as exc:
            raise _wrap_db_error(self.path, exc) from None

    def rows(self, sql: str) -> list[tuple[object, ...]]:
        try:
            with self.engine.connect() as conn:
                return [tuple(r) for r in conn.execute(sa.text(sql))]
        except sa.exc.DBAPIError as exc:
            raise _wrap_db_error(self.path, exc) from None

    def read(self, sql: str, schema: model.Schema | None = None) -> pl.DataFrame:
        """Bulk-read a query into polars (ADBC; stdlib sqlite3 as a fallback)."""
        try:
            df = joined_slices(list(_adbc_slices(self.path, sql)))
        except (_AdbcUnavailable, _AdbcTypeMismatch):
            df = _read_stdlib(self.path, sql)
        df = validate.decode_binary_columns(df)
        if schema:
            df = df.cast({k: v for k, v in schema.items() if k in df.columns}, strict=False)
        return df

    def close(self) -> None:
        self.engine.dispose()


@dataclass
class _Tally:
    """What checking one read dropped (rows, and nulls per required column) or cut."""

    nulls: dict[str, int] = field(default_factory=dict)
    dropped: int = 0
    truncated: int = 0

    def add(self, other: _Tally) -> None:
        for name, count in other.nulls.items():
            self.nulls[name] = self.nulls.get(name, 0) + count
        self.dropped += other.dropped
        self.truncated += other.truncated


class _AdbcUnavailable(Exception):
    pass


class _AdbcTypeMismatch(Exception):
    """The driver typed a column from its first rows and met a cell of another type."""


class _NeedsCheckedRead(Exception):
    """The fast read cannot stand for the checked query (ExportDB._read_slices)."""


def _is_type_inference_error(exc: Exception) -> bool:
    # The ADBC driver infers a column's type from the first rows; a later row of
    # another type (NULL-then-text, int-then-real) aborts the read.
    text = str(exc).lower()
    return "type" in text and ("column" in text or "inferred" in text or "expected" in text)


def _adbc_slices(path: Path, sql: str) -> Generator[pl.DataFrame, None, None]:
    """``sql``'s rows through ADBC, as frames of about :data:`SLICE_ROWS` (at least one)."""
    try:
        import adbc_driver_sqlite.dbapi as adbc
        import pyarrow as pa
    except ImportError as exc:  # pragma: no cover - dependency is declared
        raise _AdbcUnavailable from exc
    try:
        with adbc.connect(sqlite_uri(path)) as conn, conn.cursor() as cur:
            # The driver's default of 1,024 rows per Arrow batch costs 12-15% time and
            # memory on millions of rows (benchmarks/README.md).
            cur.adbc_statement.set_options(**{ADBC_BATCH_OPTION: str(ADBC_BATCH_ROWS)})
            cur.execute(sql)
            reader = cur.fetch_record_batch()
            batches: list[pa.RecordBatch] = []
            rows, sent = 0, False
            for batch in reader:
                batches.append(batch)
                rows += batch.num_rows
                if rows >= SLICE_ROWS:
                    yield pl.DataFrame(pl.from_arrow(pa.Table.from_batches(batches)))
                    batches, rows, sent = [], 0, True
            if batches or not sent:
                table = pa.Table.from_batches(batches, schema=reader.schema)
                yield pl.DataFrame(pl.from_arrow(table))
    except Exception as exc:  # the driver's own errors vary by version
        if _is_type_inference_error(exc):
            raise _AdbcTypeMismatch from None
        raise _wrap_db_error(path, exc) from None


def joined_slices(parts: list[pl.DataFrame]) -> pl.DataFrame:
    """The slices of one read, end to end in one chunk per column; ``parts`` is emptied.

    Columns are made contiguous one at a time, each slice's copy of it freed as it
    goes: the peak is the table plus one column, not twice the table. A column with
    no value (one the export lacks) becomes a constant null column, which takes no
    memory.
    """
    if len(parts) == 1:
        return parts.pop()
    whole = pl.concat(parts, how="vertical", rechunk=False)
    parts.clear()
    names, dtypes = whole.columns, whole.dtypes
    no_value = [c.null_count() == len(c) for c in whole.get_columns()]
    if all(no_value):
        return whole.rechunk()
    columns: list[pl.Series | None] = list(whole.get_columns())
    del whole
    kept = []
    for i in range(len(columns)):
        column, columns[i] = columns[i], None
        if column is not None and not no_value[i]:
            kept.append(column.rechunk())
        del column
    nulls = [
        pl.lit(None, dtype=dtype).alias(name)
        for name, dtype, empty in zip(names, dtypes, no_value, strict=True)
        if empty
    ]
    return pl.DataFrame(kept).with_columns(nulls).select(names)


def _read_stdlib(path: Path, sql: str) -> pl.DataFrame:
    try:
        conn = _connect_stdlib(path)
        try:
            cur = conn.execute(sql)
            names = [d[0] for d in cur.description]
            rows = cur.fetchall()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise _wrap_db_error(path, exc) from None
    return pl.DataFrame(rows, schema=names, orient="row", infer_schema_length=None)


def open_export(path: Path) -> ExportDB:
    """Check and open one export read-only; raise a one-line error if it is unusable."""
    check_sqlite_file(path)
    # SQLAlchemy's URL would percent-decode the path before SQLite sees it, so the
    # connection comes from the one URI builder instead.
    engine = sa.create_engine(
        "sqlite://", creator=lambda: _connect_stdlib(path), poolclass=sa.pool.QueuePool
    )
    try:
        names = frozenset(sa.inspect(engine).get_table_names())
    except sa.exc.DBAPIError as exc:
        engine.dispose()
        raise _wrap_db_error(path, exc) from None
    if not names:
        engine.dispose()
        raise EmptyTraceError(f"{path}: the SQLite database has no tables")
    if not names & NSYS_MARKER_TABLES:
        engine.dispose()
        raise NotNsysExportError(
            f"{path}: not an Nsight Systems export (none of StringIds, TARGET_INFO_GPU, "
            "CUPTI_* or export metadata tables)"
        )
    db = ExportDB(path=path, engine=engine, tables=names)
    db.bounds = validate.time_bounds(_capture_end(db))
    return db


def _capture_end(db: ExportDB) -> int | None:
    if not db.has("ANALYSIS_DETAILS") or "stopTime" not in db.columns("ANALYSIS_DETAILS"):
        return None
    value = db.scalar(
        "SELECT MAX(stopTime) FROM \"ANALYSIS_DETAILS\" WHERE typeof(stopTime) = 'integer'"
    )
    return validate.integer_value(value)
