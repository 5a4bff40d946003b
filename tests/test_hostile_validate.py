"""Property tests of ingest validation (nsysan.ingest.validate) against SQLite itself."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import hostile_corpus
import polars as pl
import pytest
from conftest import SHARED_TRACES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nsysan.ingest import validate
from nsysan.ingest.validate import TimeBounds

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
CELLS = st.one_of(
    st.none(),
    INT64,
    st.floats(allow_nan=False),
    st.text(max_size=20),
    st.binary(max_size=20),
)
BOUNDS = st.builds(
    lambda lo, width: TimeBounds(lo, lo + width),
    st.integers(-(2**62), 2**62),
    st.integers(0, 2**62),
)


def _read(values: list[object], sql_of_column: str) -> list[object]:
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE TABLE t (c)")  # no type affinity: every storage class stays
        conn.executemany("INSERT INTO t VALUES (?)", [(v,) for v in values])
        return [r[0] for r in conn.execute(f"SELECT {sql_of_column} FROM t ORDER BY rowid")]
    finally:
        conn.close()


@settings(max_examples=150, deadline=None)
@given(values=st.lists(CELLS, max_size=30), bounds=BOUNDS)
def test_time_columns_keep_exactly_the_integers_within_bounds(
    values: list[object], bounds: TimeBounds
) -> None:
    got = _read(values, validate.column_sql("c", "start_ns", bounds))
    expected = [v if isinstance(v, int) and bounds.lo <= v <= bounds.hi else None for v in values]
    assert got == expected


@settings(max_examples=100, deadline=None)
@given(values=st.lists(CELLS, max_size=30))
def test_device_ids_keep_small_non_negative_integers(values: list[object]) -> None:
    got = _read(values, validate.column_sql("c", "device_id", validate.time_bounds(None)))
    assert got == [
        v if isinstance(v, int) and 0 <= v <= validate.DEVICE_ID_MAX else None for v in values
    ]


@settings(max_examples=100, deadline=None)
@given(values=st.lists(CELLS, max_size=30))
def test_other_integer_columns_read_as_integers_or_null(values: list[object]) -> None:
    sql = validate.column_sql("c", "stream_id", validate.time_bounds(None), required=False)
    got = _read(values, sql)
    assert all(g is None or isinstance(g, int) for g in got)
    assert [g for g, v in zip(got, values, strict=True) if isinstance(v, int)] == [
        v for v in values if isinstance(v, int)
    ]
    assert [g is None for g in got] == [v is None for v in values]


@settings(max_examples=100, deadline=None)
@given(values=st.lists(st.one_of(st.none(), st.text(), st.binary()), max_size=20))
def test_text_columns_are_bytes_cut_to_the_limit_and_decode_to_valid_text(
    values: list[object],
) -> None:
    got = _read(values, validate.column_sql("c", "name", validate.time_bounds(None)))
    raw = [v.encode() if isinstance(v, str) else v for v in values]
    assert got == [None if b is None else b[: validate.TEXT_MAX_BYTES] for b in raw]
    decoded = validate.decode_text(pl.Series("name", got, dtype=pl.Binary)).to_list()
    assert decoded == [None if b is None else b.decode("utf-8", "replace") for b in got]


@given(data=st.lists(st.binary(max_size=40), max_size=30))
def test_decode_text_replaces_invalid_utf8(data: list[bytes]) -> None:
    out = validate.decode_text(pl.Series("x", data, dtype=pl.Binary))
    assert out.dtype == pl.String
    assert out.to_list() == [b.decode("utf-8", "replace") for b in data]


@given(
    starts=st.lists(st.integers(0, 2**62), min_size=0, max_size=10),
    missing=st.lists(st.booleans(), max_size=10),
)
def test_session_starts_kept_lie_within_the_spread(starts: list[int], missing: list[bool]) -> None:
    given_starts: list[int | None] = [
        None if i < len(missing) and missing[i] else s for i, s in enumerate(starts)
    ]
    kept, notes = validate.check_session_starts(given_starts)
    known = [s for s in kept if s is not None]
    assert len(kept) == len(given_starts)
    assert all(k is None or k == g for k, g in zip(kept, given_starts, strict=True))
    if known:
        assert max(known) - min(known) <= 2 * validate.MAX_SESSION_SPREAD_NS
    assert bool(notes) == (kept != given_starts)


@given(
    rows=st.lists(
        st.tuples(st.none() | st.integers(0, 9), st.none() | st.integers(0, 9), INT64),
        max_size=40,
    )
)
def test_drop_null_required_drops_exactly_the_incomplete_rows(
    rows: list[tuple[int | None, int | None, int]],
) -> None:
    df = pl.DataFrame(
        rows, schema={"start_ns": pl.Int64, "end_ns": pl.Int64, "x": pl.Int64}, orient="row"
    )
    kept, dropped = validate.drop_null_required(df, {"start_ns": "start", "end_ns": "end"})
    complete = [r for r in rows if r[0] is not None and r[1] is not None]
    assert kept.rows() == complete
    assert dropped == len(rows) - len(complete)


@settings(max_examples=100, deadline=None)
@given(values=st.lists(CELLS, max_size=30), bounds=BOUNDS)
def test_explanations_account_for_every_rejected_row(
    values: list[object], bounds: TimeBounds
) -> None:
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE TABLE t (c)")
        conn.executemany("INSERT INTO t VALUES (?)", [(v,) for v in values])
        rows = conn.execute(validate.explain_sql("t", "c", "end_ns", bounds)).fetchall()
    finally:
        conn.close()
    rejected = sum(1 for v in values if not (isinstance(v, int) and bounds.lo <= v <= bounds.hi))
    assert sum(r[1] for r in rows) == rejected
    notes = validate.explain_note("t", "c", "end_ns", bounds, rows)
    assert sum(int(n.split(" ", 1)[0]) for n in notes) == rejected
    assert all(n.endswith(": ignored") for n in notes)


def test_column_names_match_regardless_of_case() -> None:
    found = validate.resolve_columns(
        ("Start", "END", "deviceid"),
        {"start_ns": "start", "end_ns": "end", "device_id": "deviceId", "x": "nope"},
    )
    assert found == {"start_ns": "Start", "end_ns": "END", "device_id": "deviceid"}


def test_time_bounds_fall_back_to_a_week_for_an_absurd_capture_end() -> None:
    assert validate.time_bounds(2**63 - 1).hi == validate.UNKNOWN_CAPTURE_END_NS
    assert validate.time_bounds("x").hi == validate.UNKNOWN_CAPTURE_END_NS
    assert validate.time_bounds(5_000_000_000).hi == 5_000_000_000 + validate.DAY_NS


_TABLES_AND_COLUMNS = {
    "CUPTI_ACTIVITY_KIND_KERNEL": ("start", "end", "deviceId", "globalPid", "shortName"),
    "CUPTI_ACTIVITY_KIND_RUNTIME": ("start", "end", "globalTid", "nameId", "correlationId"),
    "NVTX_EVENTS": ("start", "end", "text", "textId", "eventType", "globalTid"),
    "StringIds": ("id", "value"),
    "TARGET_INFO_GPU": ("id", "busLocation", "uuid", "smCount"),
    "ANALYSIS_DETAILS": ("startTime", "stopTime"),
}
_SMALL = SHARED_TRACES / "T033-dlprof" / "trace.sqlite"


@pytest.mark.shared
@settings(
    max_examples=int(os.environ.get("NSYSAN_FUZZ_EXAMPLES", "25")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    edits=st.lists(
        st.tuples(
            st.sampled_from(sorted(_TABLES_AND_COLUMNS)),
            st.integers(0, 5),
            st.integers(1, 7),
            st.one_of(CELLS, st.sampled_from([2**63 - 1, -(2**63), 10**18, 1e300])),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_property_damaged_cells_never_escape_as_internal_errors(
    tmp_path: Path, edits: list[tuple[str, int, int, object]]
) -> None:
    from nsysan.errors import NsysanError
    from nsysan.ingest import load_trace

    if not _SMALL.exists():
        pytest.skip("needs the real traces")
    path = tmp_path / f"fuzz-{abs(hash(repr(edits)))}.sqlite"
    shutil.copyfile(_SMALL, path)
    conn = sqlite3.connect(path)
    try:
        for table, col_index, every, value in edits:
            columns = _TABLES_AND_COLUMNS[table]
            column = columns[col_index % len(columns)]
            # Rebuilt without constraints, so any storage class fits (see hostile_corpus).
            conn.executescript(hostile_corpus.loosen(table))
            conn.execute(f'UPDATE "{table}" SET "{column}" = ? WHERE rowid % ? = 0', (value, every))
        conn.commit()
    finally:
        conn.close()
    try:
        trace = load_trace([path])
    except NsysanError as exc:
        assert "\n" not in exc.message
        return
    for name in ("kernels", "cuda_api", "nvtx"):
        df = getattr(trace, name)
        assert df["start_ns"].null_count() == 0
        assert df.is_empty() or df["start_ns"].min() >= -validate.DAY_NS
        assert df.is_empty() or df["start_ns"].max() <= 8 * validate.DAY_NS
    assert trace.kernels["name"].null_count() == 0
    if os.environ.get("NSYSAN_FUZZ_REPORT"):  # the whole pipeline too (slower)
        from nsysan.analysis import analyze
        from nsysan.report import write_report

        write_report(analyze(trace), tmp_path / "r.html", lang="en")
