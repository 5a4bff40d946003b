"""Opening exports: any file name is taken literally, nothing is created beside the trace,
WAL-mode exports read through one lock-free path, unfinished writes are refused."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from conftest import SHARED_TRACES, run_cli, single_file_traces
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nsysan.ingest.sqlite import ExportDB, open_export, sqlite_uri

SMALL = SHARED_TRACES / "T033-dlprof" / "trace.sqlite"

ODD_NAMES = [
    "run#3.sqlite",
    "x.sqlite?mode=rwc&cache=shared",
    "x.sqlite?mode=ro&y=.sqlite",
    "a%20b%3F.sqlite",
    "with space .sqlite",
    "unicode-日本語-é.sqlite",
    "-leading-dash.sqlite",
    "semi;colon'quote\"&amp.sqlite",
    "trailing-dot.",
    "file:looks-like-a-uri.sqlite",
]


@pytest.fixture
def small() -> Path:
    if not SMALL.exists():
        pytest.skip("needs the real traces")
    return SMALL


def _listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def _info(path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    code, out, err = run_cli(["info", "--json", "--", str(path)], capsys)
    assert code == 0, err
    summary = json.loads(out)
    for src in summary["sources"]:
        src.pop("path", None)
    return summary


@pytest.mark.parametrize("name", ODD_NAMES)
def test_any_file_name_is_read_literally(
    name: str, small: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = _info(small, capsys)
    trace = tmp_path / name
    shutil.copyfile(small, trace)
    # A decoy where a URI-parsing bug would look: the name cut at '#' or '?'.
    decoy = tmp_path / "x.sqlite"
    if not decoy.exists():
        sqlite3.connect(decoy).execute("CREATE TABLE StringIds (id, value)").connection.close()
    before = _listing(tmp_path)
    assert _info(trace, capsys) == plain
    assert _listing(tmp_path) == before  # no 'run', no -shm/-wal/-journal


def test_the_uri_percent_encodes_every_special_character(tmp_path: Path) -> None:
    uri = sqlite_uri(tmp_path / "a#b?c&d=e%f g.sqlite")
    assert uri.endswith("/a%23b%3Fc%26d%3De%25f%20g.sqlite?mode=ro&immutable=1")
    assert uri.count("?") == 1 and "#" not in uri


_NAME_CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="/\x00")


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(name=st.text(_NAME_CHARS, min_size=1, max_size=24).filter(lambda n: n not in (".", "..")))
def test_property_the_uri_opens_exactly_the_named_file(tmp_path: Path, name: str) -> None:
    folder = tmp_path / hashlib.sha1(name.encode("utf-8", "surrogatepass")).hexdigest()
    folder.mkdir(exist_ok=True)
    path = folder / name
    try:
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS marker (v)")
    except (OSError, sqlite3.OperationalError):
        return  # the file system refused the name (too long in bytes)
    before = _listing(folder)
    conn = sqlite3.connect(sqlite_uri(path), uri=True)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master")]
    finally:
        conn.close()
    assert tables == ["marker"]
    assert _listing(folder) == before


def _wal_copy(src: Path, dst: Path) -> None:
    shutil.copyfile(src, dst)
    conn = sqlite3.connect(dst)
    assert conn.execute("PRAGMA journal_mode=WAL").fetchone() == ("wal",)
    conn.close()  # the last close checkpoints and removes -wal and -shm
    assert _listing(dst.parent) == [dst.name]


def test_a_wal_mode_export_reads_without_shm_or_locks(
    small: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wal = tmp_path / "wal.sqlite"
    _wal_copy(small, wal)
    digest = hashlib.sha256(wal.read_bytes()).hexdigest()
    assert _info(wal, capsys) == _info(small, capsys)
    db = open_export(wal)
    try:
        assert db.read("SELECT COUNT(*) AS n FROM StringIds")["n"][0] > 0
        assert db.scalar("SELECT COUNT(*) FROM StringIds")
    finally:
        db.close()
    assert _listing(tmp_path) == ["wal.sqlite"]
    assert hashlib.sha256(wal.read_bytes()).hexdigest() == digest


@pytest.mark.slow
def test_reports_on_a_wal_mode_export_in_parallel_processes(small: Path, tmp_path: Path) -> None:
    # Two SQLite libraries in one process used to crash here (bus error, exit 135).
    wal = tmp_path / "in" / "wal.sqlite"
    wal.parent.mkdir()
    _wal_copy(small, wal)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "nsysan", "analyze", str(wal), "--json"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd=tmp_path,
        )
        for _ in range(3)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    assert _listing(wal.parent) == ["wal.sqlite"]


@pytest.mark.parametrize("suffix", ["-wal", "-journal"])
def test_an_unfinished_write_is_refused_with_one_line(
    small: Path, tmp_path: Path, suffix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.sqlite"
    if suffix == "-wal":
        _wal_copy(small, trace)
        writer = sqlite3.connect(trace)
        writer.execute("CREATE TABLE pending (v)")
        writer.commit()  # stays in the -wal file while the writer is open
    else:
        shutil.copyfile(small, trace)
        (tmp_path / "t.sqlite-journal").write_bytes(b"\xd9\xd5\x05\xf9\x20\xa1\x63\xd7" * 64)
    try:
        for command in (["info"], ["analyze", "--json"], ["report", "-o", str(tmp_path / "r")]):
            code, out, err = run_cli([*command, str(trace)], capsys)
            assert code == 1
            assert err.count("\n") == 1
            assert f"t.sqlite{suffix} (" in err and "(see docs/errors.md#unfinished-write)" in err
        assert not (tmp_path / "r").exists()
    finally:
        if suffix == "-wal":
            writer.close()


def test_an_empty_wal_file_is_not_an_unfinished_write(
    small: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.sqlite"
    _wal_copy(small, trace)
    (tmp_path / "t.sqlite-wal").touch()
    assert _info(trace, capsys)
    assert os.path.getsize(tmp_path / "t.sqlite-wal") == 0


_FAST_READ_TABLES = {
    "CUPTI_ACTIVITY_KIND_KERNEL": {
        "start_ns": "start",
        "end_ns": "end",
        "device_id": "deviceId",
        "stream_id": "streamId",
        "correlation_id": "correlationId",
        "global_pid": "globalPid",
        "short_name_id": "shortName",
        "green_context_id": "greenContextId",
        "grid_x": "gridX",
    },
    "CUPTI_ACTIVITY_KIND_RUNTIME": {
        "start_ns": "start",
        "end_ns": "end",
        "name_id": "nameId",
        "global_tid": "globalTid",
    },
    "NVTX_EVENTS": {
        "start_ns": "start",
        "end_ns": "end",
        "inline_text": "text",
        "text_id": "textId",
        "global_tid": "globalTid",
    },
}


def _fast_and_checked(
    db: ExportDB, table: str, wanted: dict[str, str]
) -> tuple[pl.DataFrame | None, pl.DataFrame | None]:
    """The fast read and the checked query's, each validated the same way."""
    checked_sql = db.select_sql(table, wanted)
    fast = db._read_unchecked(table, wanted)
    return fast, db._read_slices(checked_sql, table, wanted, None, unchecked=False)


@pytest.mark.parametrize("trace", single_file_traces(), ids=lambda p: p.parent.name)
def test_fast_read_equals_checked_query_on_real_exports(trace: Path) -> None:
    """The unchecked read with its checks in polars gives the checked query's frame."""
    db = open_export(trace)
    try:
        for table, wanted in _FAST_READ_TABLES.items():
            if not db.has(table):
                continue
            fast, checked = _fast_and_checked(db, table, wanted)
            assert fast is not None, table
            assert fast.equals(checked), table
    finally:
        db.close()


def test_fast_read_gives_way_to_checked_query_on_a_stray_storage_class(tmp_path: Path) -> None:
    """A REAL among integer times makes the fast read decline; the checked read nulls it."""
    path = tmp_path / "stray.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE StringIds (id INTEGER, value TEXT)")
    conn.execute(
        "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME "
        "(start INTEGER, end INTEGER, nameId INTEGER, globalTid INTEGER)"
    )
    rows = [(i * 10, i * 10 + 5, 1, 7) for i in range(100_000)] + [(1.5, 2, 1, 7)]
    conn.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, ?, ?)", rows)
    conn.commit()
    conn.close()
    wanted = _FAST_READ_TABLES["CUPTI_ACTIVITY_KIND_RUNTIME"]
    db = open_export(path)
    try:
        assert db._read_unchecked("CUPTI_ACTIVITY_KIND_RUNTIME", wanted) is None
        df = db.read_checked("CUPTI_ACTIVITY_KIND_RUNTIME", wanted)
        assert df is not None
        assert df.height == 100_000  # the REAL start is dropped, with a note
        assert any("CUPTI_ACTIVITY_KIND_RUNTIME" in n for n in db.notes)
    finally:
        db.close()


def _write_kernel_table(path: Path, rows: list[tuple[int | None, ...]]) -> None:
    """A kernel table of ``rows`` (start, end, deviceId, streamId, correlationId,
    globalPid, shortName, greenContextId, gridX) and an empty StringIds."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE StringIds (id INTEGER, value TEXT)")
    conn.execute(
        "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, deviceId INTEGER, "
        "streamId INTEGER, correlationId INTEGER, globalPid INTEGER, shortName INTEGER, "
        "greenContextId INTEGER, gridX INTEGER)"
    )
    conn.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows
    )
    conn.commit()
    conn.close()


def test_fast_read_nulls_out_of_range_values_like_the_checked_query(tmp_path: Path) -> None:
    """Range checks (times, device ids, 32-bit columns) match the SQL ones."""
    path = tmp_path / "range.sqlite"
    _write_kernel_table(
        path,
        [
            (100, 200, 0, 7, 1, 1 << 24, 1, None, 4),
            (2**62, 2**63 - 1, 0, 7, 2, 1 << 24, 1, None, 4),
            (300, 400, 70_000, 7, 3, 1 << 24, 1, 2**40, 2**33),
            (500, 600, 1, 7, 4, 1 << 24, 1, 3, 8),
            (700, 800, 1, 7, 5, 1 << 24, 1, 2**40, 2**33),
        ],
    )
    wanted = _FAST_READ_TABLES["CUPTI_ACTIVITY_KIND_KERNEL"]
    db = open_export(path)
    try:
        fast, checked = _fast_and_checked(db, "CUPTI_ACTIVITY_KIND_KERNEL", wanted)
        assert fast is not None
        assert fast.equals(checked)
        # Rows with an out-of-range time or device id are dropped (both are required) ...
        assert fast["correlation_id"].to_list() == [1, 4, 5]
        # ... and out-of-range values of the other columns are nulled.
        assert fast["grid_x"].to_list() == [4, 8, None]
        assert fast["green_context_id"].to_list() == [None, 3, None]
    finally:
        db.close()


def _kernel_rows_with_damage(path: Path, n: int) -> None:
    """``n`` kernels, one with an out-of-range start in each half of the row ids."""
    rows: list[tuple[int | None, ...]] = [
        (i * 10, i * 10 + 5, i % 3, 7, i, 1 << 24, 1, None, 4) for i in range(n)
    ]
    for bad in (n // 4, 3 * n // 4):
        rows[bad] = (2**62, 2**62 + 1, 0, 7, bad, 1 << 24, 1, None, 4)
    _write_kernel_table(path, rows)


@pytest.mark.parametrize("parts", [2, 3])
def test_a_read_in_row_id_ranges_equals_the_whole_read_with_notes_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parts: int
) -> None:
    import nsysan.ingest.sqlite as sqlite_module

    monkeypatch.setattr(sqlite_module, "SLICE_ROWS", 1_000)  # split from a few thousand rows
    path = tmp_path / "kernels.sqlite"
    _kernel_rows_with_damage(path, 10_001)
    wanted = _FAST_READ_TABLES["CUPTI_ACTIVITY_KIND_KERNEL"]

    def read(parts: int) -> tuple[pl.DataFrame | None, list[str]]:
        db = open_export(path)
        try:
            assert len(db._rowid_ranges("CUPTI_ACTIVITY_KIND_KERNEL", parts)) == (
                parts if parts > 1 else 0
            )
            return db.read_checked("CUPTI_ACTIVITY_KIND_KERNEL", wanted, parts=parts), db.notes
        finally:
            db.close()

    whole, whole_notes = read(1)
    split, split_notes = read(parts)
    assert whole is not None and split is not None
    assert whole.height == 9_999  # both damaged rows dropped
    assert split.equals(whole)  # row order kept
    assert split_notes == whole_notes
    # One note per failing column, with both halves' rows counted.
    assert len(split_notes) == 2, split_notes
    assert all(n.startswith("2 CUPTI_ACTIVITY_KIND_KERNEL rows with") for n in split_notes)


def test_a_table_too_small_to_split_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "kernels.sqlite"
    _kernel_rows_with_damage(path, 100)
    db = open_export(path)
    try:
        assert db._rowid_ranges("CUPTI_ACTIVITY_KIND_KERNEL", 2) == []
        assert db.rowid_range("CUPTI_ACTIVITY_KIND_KERNEL") == (1, 100)
    finally:
        db.close()
