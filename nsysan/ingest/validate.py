"""Ingest validation: each column is read with the storage class and range nsys writes.

SQLite lets any cell hold any storage class; nsys writes integers for times and ids
and text for names. The checks are folded into the read query itself, so a healthy
export costs no extra scan:

* integer columns read as ``CASE WHEN typeof(c)='integer' [AND c BETWEEN lo AND hi]
  THEN c END``: text, BLOB, REAL and out-of-range cells become NULL;
* text columns read as the first :data:`TEXT_MAX_BYTES` bytes of ``CAST(c AS BLOB)``
  and are decoded in polars, invalid UTF-8 with replacement characters
  (:func:`decode_text`);
* times must lie within :func:`time_bounds` of the session: an event 30 years late or
  ending at 2^63−1 is dropped, never used to size an array.

Rows whose required columns (:data:`REQUIRED`) came back NULL are then dropped by a
cheap polars pass (:func:`drop_invalid_rows`); only when some were dropped does one
more query ask SQLite why, so the note can name the table, the column and the cause
("1 CUPTI_ACTIVITY_KIND_KERNEL row with end 9223372036854775807 ... ignored"). A table
with rows that lacks a required column altogether is refused with one line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import polars as pl

from nsysan import model
from nsysan.errors import MissingColumnError

DAY_NS = 86_400 * 1_000_000_000
#: Events may start this long before the session's zero and end this long after the
#: capture end (or after zero when the capture end is unknown or absurd).
TIME_SLACK_NS = DAY_NS
#: A capture end beyond this is itself absurd and is not used as a bound.
MAX_CAPTURE_NS = 366 * DAY_NS
#: The latest plausible time when the capture end is unknown (no ANALYSIS_DETAILS).
UNKNOWN_CAPTURE_END_NS = 7 * DAY_NS
#: Strings longer than this (in UTF-8 bytes) are truncated for display.
TEXT_MAX_BYTES = 16_384
#: CUDA device ordinals, as the model's Int32 ``device_id`` and nsys write them.
DEVICE_ID_MAX = 65_535

#: Per SQLite table, the source columns every row needs; rows without them are dropped.
REQUIRED: Mapping[str, tuple[str, ...]] = {
    "CUPTI_ACTIVITY_KIND_KERNEL": ("start", "end", "deviceId"),
    "CUPTI_ACTIVITY_KIND_MEMCPY": ("start", "end", "deviceId"),
    "CUPTI_ACTIVITY_KIND_MEMSET": ("start", "end", "deviceId"),
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": ("start", "end", "deviceId"),
    "CUPTI_ACTIVITY_KIND_RUNTIME": ("start", "end", "globalTid"),
    "OSRT_API": ("start", "end", "globalTid"),
    "PROFILER_OVERHEAD": ("start", "end"),
    "NVTX_EVENTS": ("start",),
    "SCHED_EVENTS": ("start", "globalTid"),
}

#: Per SQLite table, columns that some export versions lack, but when present a row
#: needs them (a kernel without its process cannot be put on a physical GPU).
REQUIRED_IF_PRESENT: Mapping[str, tuple[str, ...]] = {
    t: ("globalPid",)
    for t in (
        "CUPTI_ACTIVITY_KIND_KERNEL",
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        "CUPTI_ACTIVITY_KIND_MEMSET",
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
        "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
    )
}

#: Model column names that hold text; every other column read is an integer.
TEXT_COLUMNS = frozenset({"name", "inline_text", "pci_bus", "uuid", "value", "metric"})
#: StringIds references: a non-integer reads as NULL (a CAST would name another string).
STRING_ID_COLUMNS = frozenset({"short_name_id", "name_id", "text_id"})
#: Model columns of 32-bit integers: a larger value reads as NULL, never fails a cast.
INT32_COLUMNS = frozenset(
    name
    for schema in (*model.TABLE_SCHEMAS.values(), model.GPUS)
    for name, dtype in schema.items()
    if dtype == pl.Int32
)
#: Model columns that hold times in ns (bounded by :func:`time_bounds`).
TIME_COLUMNS = frozenset({"start_ns", "end_ns", "time_ns"})


class NotedExport(Protocol):
    """What the checks need of an open export (``nsysan.ingest.sqlite.ExportDB``)."""

    notes: list[str]

    def rows(self, sql: str) -> list[tuple[object, ...]]: ...


@dataclass(frozen=True)
class TimeBounds:
    """The closed range of plausible event times of one file, in its own clock (ns)."""

    lo: int
    hi: int


def time_bounds(capture_end: object) -> TimeBounds:
    """Plausible times: a day before zero to a day after the capture end (a week when
    the capture end is unknown or absurd)."""
    end = integer_value(capture_end, 0, MAX_CAPTURE_NS)
    if end is None:
        end = UNKNOWN_CAPTURE_END_NS - TIME_SLACK_NS
    return TimeBounds(lo=-TIME_SLACK_NS, hi=end + TIME_SLACK_NS)


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def column_sql(src: str, dst: str, bounds: TimeBounds, *, required: bool = True) -> str:
    """The SQL expression that reads column ``src`` as model column ``dst``, checked.

    Times, device ids and ``required`` columns become NULL unless they are integers
    in range (the row is then dropped). Other integer columns are only made integers
    (``CAST``: a stray text or REAL reads as a number, never aborts the Arrow read):
    a ``typeof`` test per cell costs a few percent of a read per column.
    """
    return f"{value_sql(src, dst, bounds, required=required)} AS {quote_ident(dst)}"


def value_range(dst: str, bounds: TimeBounds) -> tuple[int, int] | None:
    """The closed range of valid values of integer model column ``dst`` (None: any)."""
    if dst in TIME_COLUMNS:
        return bounds.lo, bounds.hi
    if dst == "device_id":
        return 0, DEVICE_ID_MAX
    if dst in INT32_COLUMNS:
        return -(2**31), 2**31 - 1
    return None


def value_sql(src: str, dst: str, bounds: TimeBounds, *, required: bool = True) -> str:
    """:func:`column_sql`'s expression without its alias."""
    q = quote_ident(src)
    if dst in TEXT_COLUMNS:
        return text_sql(q)
    if dst in INT32_COLUMNS and dst != "device_id":
        cast = f"CAST({q} AS INTEGER)"
        lo, hi = value_range(dst, bounds)  # type: ignore[misc]
        return f"CASE WHEN {cast} BETWEEN {lo} AND {hi} THEN {cast} END"
    if not required and dst not in TIME_COLUMNS | STRING_ID_COLUMNS and dst != "device_id":
        return f"CAST({q} AS INTEGER)"
    return f"CASE WHEN {integer_check(src, dst, bounds)} THEN {q} END"


def integer_check(src: str, dst: str, bounds: TimeBounds) -> str:
    """The condition under which integer column ``src`` is a valid ``dst``."""
    q = quote_ident(src)
    check = f"typeof({q}) = 'integer'"
    valid = value_range(dst, bounds)
    if valid is not None:
        check += f" AND {q} BETWEEN {valid[0]} AND {valid[1]}"
    return check


def raw_select_sql(table: str, have: tuple[str, ...], wanted: Mapping[str, str]) -> str | None:
    """``SELECT`` the ``wanted`` columns with no per-cell test: the fast read.

    Integer columns come as stored; text columns as :func:`text_sql`. The Arrow
    reader types each column from its first rows and fails on a cell of another
    storage class, so a read that succeeds with integer columns has only integer
    cells in them: :func:`checked_in_polars` then applies :func:`value_sql`'s range
    tests, identical in result and several times cheaper than a ``CASE`` per cell.
    None when ``table`` has none of the columns.
    """
    found = resolve_columns(have, wanted)
    if not found:
        return None
    parts = [
        f"{text_sql(quote_ident(src)) if dst in TEXT_COLUMNS else quote_ident(src)} "
        f"AS {quote_ident(dst)}"
        for dst, src in found.items()
    ]
    return f"SELECT {', '.join(parts)} FROM {quote_ident(table)}"


def checked_in_polars(df: pl.DataFrame, bounds: TimeBounds) -> pl.DataFrame | None:
    """A :func:`raw_select_sql` read with :func:`value_sql`'s range tests applied.

    None when a non-text column did not come back as integers (the reader typed it
    from its first rows as something else): the caller reads the checked query then.
    """
    checks: list[pl.Expr] = []
    for name, dtype in df.schema.items():
        if name in TEXT_COLUMNS:
            continue
        if dtype == pl.Null:
            checks.append(pl.col(name).cast(pl.Int64))
            continue
        if not dtype.is_integer():
            return None
        valid = value_range(name, bounds)
        if valid is not None:
            col = pl.col(name)
            checks.append(pl.when(col.is_between(*valid)).then(col).alias(name))
    return df.with_columns(checks) if checks else df


def text_sql(expr: str) -> str:
    """The first :data:`TEXT_MAX_BYTES` bytes of ``expr`` as a BLOB (NULL stays NULL)."""
    # substr() of an empty BLOB is NULL, hence the COALESCE.
    return (
        f"CASE WHEN {expr} IS NOT NULL THEN "
        f"COALESCE(substr(CAST({expr} AS BLOB), 1, {TEXT_MAX_BYTES}), X'') END"
    )


def resolve_columns(have: tuple[str, ...], wanted: Mapping[str, str]) -> dict[str, str]:
    """``wanted`` (model name → source name) restricted to the columns the table has.

    SQLite column names are case-insensitive, so ``Start`` is read as ``start``.
    """
    by_lower = {c.lower(): c for c in have}
    return {dst: by_lower[src.lower()] for dst, src in wanted.items() if src.lower() in by_lower}


def select_sql(
    table: str,
    have: tuple[str, ...],
    wanted: Mapping[str, str],
    bounds: TimeBounds,
    *,
    has_rows: bool,
) -> str:
    """``SELECT <checked columns> FROM table``; refuse a table with rows but no required column."""
    found = resolve_columns(have, wanted)
    if has_rows:
        sources = {s.lower() for s in found.values()}
        wanted_sources = {s.lower() for s in wanted.values()}
        for need in REQUIRED.get(table, ()):
            if need.lower() in wanted_sources and need.lower() not in sources:
                raise MissingColumnError(
                    f"table {table} has no column {need!r} "
                    f"(it has: {', '.join(have[:12])}{', ...' if len(have) > 12 else ''})"
                )
    required = required_model_columns(table, wanted)
    parts = [column_sql(src, dst, bounds, required=dst in required) for dst, src in found.items()]
    if not parts:
        parts = ["NULL AS _empty"]
    return f"SELECT {', '.join(parts)} FROM {quote_ident(table)}"


def required_model_columns(table: str, wanted: Mapping[str, str]) -> dict[str, str]:
    """Model name → source name of ``table``'s required columns among ``wanted``."""
    need = {c.lower() for c in (*REQUIRED.get(table, ()), *REQUIRED_IF_PRESENT.get(table, ()))}
    return {dst: src for dst, src in wanted.items() if src.lower() in need}


def null_rows(df: pl.DataFrame, columns: Mapping[str, str]) -> dict[str, int]:
    """Per required model column present in ``df``, how many rows are NULL (O(1) each)."""
    return {dst: df[dst].null_count() for dst in columns if dst in df.columns}


def drop_null_required(df: pl.DataFrame, columns: Mapping[str, str]) -> tuple[pl.DataFrame, int]:
    """Drop rows with a NULL in any required column; return the frame and the count."""
    present = [c for c in columns if c in df.columns]
    if not present or not any(df[c].null_count() for c in present):
        return df, 0
    kept = df.drop_nulls(present)
    return kept, df.height - kept.height


def explain_sql(table: str, src: str, dst: str, bounds: TimeBounds) -> str:
    """SQL that counts the rows of ``table`` whose ``src`` fails its check, by cause."""
    q = quote_ident(src)
    lo, hi = value_range(dst, bounds) or (-(2**63), 2**63 - 1)
    return (
        f"SELECT CASE WHEN {q} IS NULL THEN 'missing' "
        f"WHEN typeof({q}) != 'integer' THEN 'a ' || typeof({q}) "
        f"WHEN {q} < {lo} THEN 'too early' ELSE 'too late' END AS cause, "
        f"COUNT(*), MIN({q}), MAX({q}) FROM {quote_ident(table)} "
        f"WHERE NOT (typeof({q}) = 'integer' AND {q} BETWEEN {lo} AND {hi}) GROUP BY cause"
    )


def explain_note(
    table: str, src: str, dst: str, bounds: TimeBounds, rows: list[tuple[object, ...]]
) -> list[str]:
    """Notes for the causes :func:`explain_sql` found, e.g. ``... with end 2^63−1 ...``."""
    notes = []
    for cause, count, low, high in rows:
        n = int(count) if isinstance(count, int) else 0
        if not n:
            continue
        rows_word = "row" if n == 1 else "rows"
        if cause == "missing":
            what = f"no {src}"
        elif cause in ("too early", "too late"):
            value = high if cause == "too late" else low
            where = _where(cause, dst, bounds)
            what = f"{src} {value}{' (2^63-1)' if value == 2**63 - 1 else ''}, {where}"
        else:
            what = f"{cause} value in {src} (nsys writes integers)"
        notes.append(f"{n} {table} {rows_word} with {what}: ignored")
    return notes


def _where(cause: str, dst: str, bounds: TimeBounds) -> str:
    if dst not in TIME_COLUMNS:
        return f"outside 0..{DEVICE_ID_MAX}"
    if cause == "too early":
        return "more than a day before the session start"
    if bounds.hi == UNKNOWN_CAPTURE_END_NS:
        return "more than a week after the session start"
    return f"more than a day after the capture end ({bounds.hi - TIME_SLACK_NS} ns)"


def decode_text(s: pl.Series) -> pl.Series:
    """Binary → String; invalid UTF-8 decoded with replacement characters (U+FFFD)."""
    if s.dtype == pl.String:
        return s
    try:
        return s.cast(pl.String)
    except pl.exceptions.PolarsError:
        # Only damaged files get here: decode row by row, replacing invalid bytes.
        return pl.Series(
            s.name,
            [b.decode("utf-8", "replace") if b is not None else None for b in s.to_list()],
            dtype=pl.String,
        )


def decode_binary_columns(df: pl.DataFrame) -> pl.DataFrame:
    """Decode every Binary column of ``df`` (text read through ``CAST(... AS BLOB)``)."""
    binary = [c for c, t in df.schema.items() if t == pl.Binary]
    if not binary:
        return df
    return df.with_columns([decode_text(df[c]) for c in binary])


def truncated_count(df: pl.DataFrame) -> int:
    """How many strings reached :data:`TEXT_MAX_BYTES` (so were likely cut)."""
    total = 0
    for c, t in df.schema.items():
        if t == pl.String:
            total += int(df.select((pl.col(c).str.len_bytes() >= TEXT_MAX_BYTES).sum()).item() or 0)
    return total


def integer_value(value: object, lo: int = -(2**63), hi: int = 2**63 - 1) -> int | None:
    """A scalar read from SQLite as an integer in ``lo..hi``, else None."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if lo <= value <= hi else None


#: Session starts further apart than this are not one run.
MAX_SESSION_SPREAD_NS = 7 * DAY_NS


def check_session_starts(starts: list[int | None]) -> tuple[list[int | None], list[str]]:
    """Drop the session starts that would put files absurdly far apart on one timeline."""
    known = sorted(s for s in starts if s is not None)
    if len(known) < 2 or known[-1] - known[0] <= MAX_SESSION_SPREAD_NS:
        return starts, []
    median = known[len(known) // 2]
    kept = [
        s if s is not None and abs(s - median) <= MAX_SESSION_SPREAD_NS else None for s in starts
    ]
    dropped = sum(1 for a, b in zip(starts, kept, strict=True) if a is not None and b is None)
    return kept, [
        f"{dropped} file(s) have a UTC session start more than 7 days from the others: "
        "not aligned on one timeline"
    ]


def unique_string_ids(db: NotedExport, strings: pl.DataFrame) -> pl.DataFrame:
    """StringIds without NULL or repeated ids (nsys's ``id`` is the primary key; a
    repeated id would multiply every row that refers to it)."""
    notes = db.notes
    dropped = strings["id"].null_count()
    strings = strings.drop_nulls("id") if dropped else strings
    if not _is_primary_key(db, "StringIds", "id"):
        unique = strings.unique("id", keep="first", maintain_order=True)
        if unique.height < strings.height:
            notes.append(f"{strings.height - unique.height} repeated StringIds id(s): first kept")
            strings = unique
    return strings


def _is_primary_key(db: NotedExport, table: str, column: str) -> bool:
    rows = db.rows(
        f"SELECT pk FROM pragma_table_info('{table}') WHERE lower(name) = lower('{column}')"
    )
    return bool(rows and rows[0][0] == 1)


def checked_time(expr: str, bounds: TimeBounds) -> str:
    """An SQL time expression that is NULL unless an integer within ``bounds``."""
    return (
        f"CASE WHEN typeof({expr}) = 'integer' AND {expr} BETWEEN {bounds.lo} AND {bounds.hi} "
        f"THEN {expr} END"
    )


def gpu_metrics_sql(bounds: TimeBounds) -> str:
    """GPU_METRICS joined to its metric names, each column checked."""
    return (
        f"SELECT {checked_time('m.timestamp', bounds)} AS time_ns, "
        "CASE WHEN typeof(m.typeId) = 'integer' THEN m.typeId END AS type_id, "
        f"{text_sql('i.metricName')} AS metric, "
        "CASE WHEN typeof(m.value) IN ('integer', 'real') THEN CAST(m.value AS REAL) END "
        'AS value FROM "GPU_METRICS" m JOIN "TARGET_INFO_GPU_METRICS" i '
        "ON m.typeId = i.typeId AND m.metricId = i.metricId"
    )


def drop_bad_samples(db: NotedExport, df: pl.DataFrame) -> pl.DataFrame:
    """Drop GPU-metric samples without a valid time or source id, with a note."""
    kept = df.drop_nulls([c for c in ("time_ns", "type_id") if c in df.columns])
    if kept.height < df.height:
        db.notes.append(
            f"{df.height - kept.height} GPU metrics sample(s) with a non-integer or "
            "implausible timestamp or source id: ignored"
        )
    return kept


#: GENERIC_EVENTS.data when it is a JSON object of reasonable size, else NULL.
JSON_OBJECT_SQL = (
    "CASE WHEN typeof(data) = 'text' AND length(CAST(data AS BLOB)) <= 65536 "
    "AND json_valid(data) AND json_type(data) = 'object' THEN CAST(data AS BLOB) END"
)


def drop_bad_json(db: NotedExport, raw: pl.DataFrame) -> pl.DataFrame:
    """Drop GENERIC_EVENTS rows that are not JSON objects or lack a valid time, with a note."""
    kept = raw.drop_nulls(["time_ns", "data"])
    if kept.height < raw.height:
        db.notes.append(
            f"{raw.height - kept.height} GENERIC_EVENTS GPU metrics sample(s) that are not a "
            "JSON object or have no valid timestamp: ignored"
        )
    return kept


def unresolved_string(string_id: pl.Expr, text: pl.Expr) -> pl.Expr:
    """``text``, or ``<string id N missing>`` when id N is set but StringIds lacks it."""
    placeholder = pl.format("<string id {} missing>", string_id)
    return pl.when(text.is_null() & string_id.is_not_null()).then(placeholder).otherwise(text)


#: The name of a kernel whose name reference is missing or not an integer.
UNNAMED_KERNEL = "<unnamed kernel>"
