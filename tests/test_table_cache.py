"""The table cache (nsysan.ingest.cache): a warm run reads what a cold run read,
an edited export or a damaged entry is read afresh, and no failure of the cache is
ever the user's error."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from pathlib import Path

import polars as pl
import pytest
from conftest import SHARED_TRACES, run_cli

from nsysan.ingest import cache, load_trace
from nsysan.model import TABLE_SCHEMAS

SMALL = SHARED_TRACES / "T033-dlprof" / "trace.sqlite"
OTHER = SHARED_TRACES / "T028-nsight-systems-deep-dive" / "trace.sqlite"


@pytest.fixture
def export(tmp_path: Path) -> Path:
    """A writable copy of a small real export, with one kernel of absurd end time
    (validation drops it with a note, which the cache must keep)."""
    if not SMALL.exists():
        pytest.skip("real traces not available")
    path = tmp_path / "trace.sqlite"
    shutil.copyfile(SMALL, path)
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = 9223372036854775807 "
            "WHERE rowid = (SELECT MIN(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL)"
        )
    path.chmod(0o444)
    return path


def _entries(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []


def _assert_same_trace(a, b) -> None:  # type: ignore[no-untyped-def]
    for name in TABLE_SCHEMAS:
        assert a.table(name).equals(b.table(name)), name
    assert a.gpus.equals(b.gpus)
    assert a.notes == b.notes


def test_warm_load_is_the_cold_load(cache_on: Path, export: Path) -> None:
    cold = load_trace(export)
    assert len(_entries(cache_on)) == 1
    warm = load_trace(export)
    _assert_same_trace(cold, warm)
    assert any("CUPTI_ACTIVITY_KIND_KERNEL" in n for n in warm.notes)
    cache.set_enabled(False)
    _assert_same_trace(load_trace(export), warm)


def test_a_warm_load_holds_no_more_than_the_cold_load(cache_on: Path, export: Path) -> None:
    cold = load_trace(export)
    warm = load_trace(export)
    # The launch dimensions and the source index are constants in the cold load.
    assert warm.kernels.estimated_size() <= cold.kernels.estimated_size()
    for name in TABLE_SCHEMAS:
        table = warm.table(name)
        if isinstance(table, pl.DataFrame) and table.width:
            assert set(table.n_chunks("all")) == {1}, name


def test_a_stored_frame_reads_back_with_its_constants_taking_no_memory(tmp_path: Path) -> None:
    rows = 100_000
    frame = pl.DataFrame(
        {
            "nulls": pl.Series([None] * rows, dtype=pl.Int32),
            "one_int": pl.Series([7] * rows, dtype=pl.Int64),
            "one_bool": pl.Series([True] * rows),
            "one_float": pl.Series([1.5] * rows),
            "one_text": pl.Series(["a"] * rows, dtype=pl.Categorical()),
            "one_and_null": pl.Series([3] * (rows - 1) + [None], dtype=pl.Int32),
            "varies": pl.Series(range(rows), dtype=pl.Int64),
        }
    )
    halves = [tmp_path / "a.parquet", tmp_path / "b.parquet"]
    frame.head(rows // 2).write_parquet(halves[0], row_group_size=4096)
    frame.tail(rows - rows // 2).write_parquet(halves[1], row_group_size=4096)
    read = cache._read_whole(halves)
    # First: reading a constant's values makes it a whole column. A constant holds
    # its one value (bytes), a whole column 12 bytes a row here.
    constants = ("nulls", "one_int", "one_bool")
    assert read.estimated_size() < frame.drop(constants).estimated_size() + 100
    assert read.equals(frame)
    assert read.schema == frame.schema
    assert set(read.n_chunks("all")) == {1}


def test_the_export_is_never_changed(cache_on: Path, export: Path) -> None:
    before = hashlib.sha256(export.read_bytes()).hexdigest()
    load_trace(export)
    load_trace(export)
    assert hashlib.sha256(export.read_bytes()).hexdigest() == before
    assert not any(p.name != export.name for p in export.parent.iterdir() if p.is_file())


def test_an_edited_export_is_read_afresh(cache_on: Path, export: Path) -> None:
    first = load_trace(export)
    export.chmod(0o644)
    with sqlite3.connect(export) as conn:
        conn.execute(
            "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid IN "
            "(SELECT rowid FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 5)"
        )
    second = load_trace(export)
    assert second.kernels.height == first.kernels.height - 4  # one of the five was dropped
    assert len(_entries(cache_on)) == 2


def test_a_damaged_entry_is_a_miss_and_is_replaced(cache_on: Path, export: Path) -> None:
    cold = load_trace(export)
    (entry,) = _entries(cache_on)
    parquet = entry / "table.kernels.parquet"
    parquet.write_bytes(parquet.read_bytes()[:100])
    again = load_trace(export)
    _assert_same_trace(cold, again)
    (entry,) = _entries(cache_on)
    assert pl.read_parquet(entry / "table.kernels.parquet").height == cold.kernels.height


def test_an_unwritable_cache_folder_is_no_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, export: Path
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    monkeypatch.setenv("NSYSAN_CACHE", "on")
    monkeypatch.setenv("NSYSAN_CACHE_DIR", str(blocker))
    cache.set_enabled(True)
    assert load_trace(export).kernels.height > 0


@pytest.mark.parametrize("how", ["env", "flag"])
def test_the_cache_can_be_turned_off(
    how: str,
    cache_on: Path,
    export: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["-q", "report", str(export), "-o", str(tmp_path / "r.html")]
    if how == "env":
        monkeypatch.setenv("NSYSAN_CACHE", "off")
    else:
        args.insert(0, "--no-cache")
    code, _, err = run_cli(args, capsys)
    assert code == 0, err
    assert _entries(cache_on) == []


def test_least_recently_used_entries_go_past_the_size_cap(
    cache_on: Path, export: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not OTHER.exists():
        pytest.skip("real traces not available")
    monkeypatch.setenv("NSYSAN_CACHE_MAX_GB", "0.000001")
    load_trace(export)
    (first,) = _entries(cache_on)
    load_trace(OTHER)
    (kept,) = _entries(cache_on)
    assert kept != first  # the newest entry stays even past the cap; the older one went


def test_a_warm_report_is_the_cold_report(
    cache_on: Path, export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outputs = []
    for run in ("cold", "warm"):
        json_path = tmp_path / f"{run}.json"
        code, _, err = run_cli(
            ["-q", "analyze", str(export), "--json", "-o", str(json_path)], capsys
        )
        assert code == 0, err
        outputs.append(json_path.read_bytes())
    assert len(_entries(cache_on)) == 1
    assert outputs[0] == outputs[1]


def _thread_table(rows: int) -> pl.DataFrame:
    """A host table of ``rows`` calls on three threads, in time order."""
    return pl.DataFrame(
        {
            "source": pl.Series([0] * rows, dtype=pl.Int32),
            "pid": pl.Series([7] * rows, dtype=pl.Int32),
            "tid": pl.Series([(i * 5) % 3 for i in range(rows)], dtype=pl.Int32),
            "start_ns": pl.Series(range(0, 10 * rows, 10), dtype=pl.Int64),
        }
    )


def test_a_table_is_written_when_handed_over_and_read_in_place(
    cache_on: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nsysan import stored

    monkeypatch.setattr(stored, "STORE_MIN_ROWS", 100)
    monkeypatch.setattr(cache, "SLICE_ROWS", 64)
    big, small = _thread_table(300), _thread_table(50)
    with cache.EntryWriter("k" * 32, Path("trace.sqlite")) as entry:
        on_disk = entry.write("table.cuda_api", big, by_thread=True, in_place=True)
        kept = entry.write("table.osrt", small, by_thread=True, in_place=True)
        # Written before the entry is finished: the big table is then read from its
        # files (by thread, in slices), so the frame in memory can go.
        (tmp,) = [p for p in cache_on.iterdir() if p.name.endswith(".tmp")]
        assert len(list(tmp.glob("table.cuda_api.*.parquet"))) == 5
        assert isinstance(on_disk, stored.StoredTable)
        assert kept is small  # under STORE_MIN_ROWS: stays in memory
        entry.finish(
            {"table.cuda_api": on_disk, "table.osrt": kept, "devices": small.head(3)}, ["a note"]
        )
    assert stored.collected(on_disk).equals(
        pl.concat(
            big.slice(i, 64).sort(stored.THREAD_KEYS, maintain_order=True)
            for i in range(0, 300, 64)
        )
    )
    hit = cache.lookup("k" * 32, ["table.cuda_api"])
    assert hit is not None
    assert list(hit.frames) == ["table.cuda_api", "table.osrt", "devices"]
    assert stored.collected(hit.frames["table.cuda_api"]).equals(stored.collected(on_disk))
    assert hit.frames["table.osrt"].equals(small)
    assert hit.notes == ("a note",)
    assert sorted(p.name for p in cache_on.iterdir()) == ["k" * 32, "runs"]


def test_an_entry_not_finished_leaves_nothing_but_its_tables_read_in_place(
    cache_on: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nsysan import stored

    monkeypatch.setattr(stored, "STORE_MIN_ROWS", 10)
    table = _thread_table(40)
    with pytest.raises(RuntimeError), cache.EntryWriter("k" * 32, Path("t.sqlite")) as entry:
        on_disk = entry.write("table.nvtx", table, by_thread=True, in_place=True)
        raise RuntimeError("the read failed part way")
    assert [p.name for p in cache_on.iterdir()] == ["runs"]
    # Its links keep the files of a table already read in place.
    assert stored.collected(on_disk).equals(table.sort(stored.THREAD_KEYS, maintain_order=True))


def test_a_write_that_fails_gives_the_entry_up_not_the_run(
    cache_on: Path, export: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reference = load_trace(export)
    shutil.rmtree(cache_on)

    def full_disk(*_: object, **__: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pl.DataFrame, "write_parquet", full_disk)
    _assert_same_trace(load_trace(export, store_host_tables=True), reference)
    assert [p for p in cache_on.iterdir() if p.name != "runs"] == []
