"""`nsysan batch`: inputs (folders, archives, path traversal), error isolation (exit 3),
outputs and their contract, resume and --force, an interrupted run, multi-rank
grouping; `report`/`analyze` on a folder or archive of one run."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import polars as pl
import psutil
import pytest
from conftest import REPO, cori_rank_files, run_cli

from nsysan import contract
from nsysan.batch.grouping import Probe, group_sources
from nsysan.batch.inputs import Source, discover, safe_member_name
from nsysan.batch.rows import ROW_SCHEMA

FIX = REPO / "fixtures"


def _folder(tmp: Path, names: list[str]) -> Path:
    src = tmp / "runs"
    src.mkdir()
    for n in names:
        shutil.copy(FIX / f"{n}.sqlite", src / f"{n}.sqlite")
    return src


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, int]:
    """A folder, a zip (with a member escaping upwards), a tar.gz, a bad file, a .nsys-rep:
    batch over them once (exit code kept)."""
    tmp = tmp_path_factory.mktemp("batch")
    src = _folder(tmp, ["balanced", "memory-bound"])
    shutil.copy(FIX / "memory-bound.ncu.csv", src / "memory-bound.ncu.csv")
    (src / "broken.sqlite").write_bytes(b"not a database at all")
    (src / "raw.nsys-rep").write_bytes(b"\0")
    with zipfile.ZipFile(tmp / "runs.zip", "w") as zf:
        zf.write(FIX / "case-study.sqlite", "nested/case-study.sqlite")
        zf.writestr("../escape.sqlite", b"x")
    with tarfile.open(tmp / "more.tar.gz", "w:gz") as tf:
        tf.add(FIX / "case-study-fixed.sqlite", "case-study-fixed.sqlite")
        info = tarfile.TarInfo("/abs/evil.sqlite")
        info.size = 1
        tf.addfile(info, io.BytesIO(b"x"))
    out = tmp / "out"
    args = ["-q", "batch", str(src), str(tmp / "runs.zip"), str(tmp / "more.tar.gz")]
    # No nsys on PATH: the .nsys-rep is listed as skipped (with nsys: see below).
    proc = subprocess.run(
        [sys.executable, "-m", "nsysan", *args, "-o", str(out), "--jobs", "2"],
        capture_output=True,
        text=True,
        cwd=tmp,
        timeout=600,
        env={**os.environ, "PATH": str(Path(sys.executable).parent)},
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return tmp, out, proc.returncode


def _rows(out: Path) -> dict[str, dict]:  # type: ignore[type-arg]
    return {r["trace_id"]: r for r in json.loads((out / "results.json").read_text())["traces"]}


def test_one_bad_file_fails_alone_with_exit_3(mixed: tuple[Path, Path, int]) -> None:
    tmp, out, code = mixed
    assert code == 3
    rows = _rows(out)
    status = {k: r["status"] for k, r in rows.items()}
    assert status["runs__broken"] == "failed"
    assert (
        "not-sqlite" in rows["runs__broken"]["error"] and "\n" not in rows["runs__broken"]["error"]
    )
    for ok in (
        "runs__balanced",
        "runs__memory-bound",
        "runs.zip__nested__case-study",
        "more.tar.gz__case-study-fixed",
    ):
        assert status[ok] == "ok", (ok, rows[ok]["error"])
    skipped = {r["files"]: r["error"] for r in rows.values() if r["status"] == "skipped"}
    assert any("no nsys to export it" in why for why in skipped.values())
    assert sum("unsafe member name" in why for why in skipped.values()) == 2
    # Nothing was extracted next to the archives or above them.
    assert not (tmp / "escape.sqlite").exists() and not (tmp.parent / "escape.sqlite").exists()
    assert sorted(p.name for p in tmp.iterdir()) == ["more.tar.gz", "out", "runs", "runs.zip"]


def test_rows_hold_the_verdicts_and_the_ncu_view(mixed: tuple[Path, Path, int]) -> None:
    rows = _rows(mixed[1])
    case = rows["runs.zip__nested__case-study"]
    assert case["rule_id"] == "false-balance" and case["severity"] == "critical"
    assert case["gpus"] == 4 and 0.3 < case["gap_share_mean"] <= case["gap_share_worst"] < 0.4
    assert rows["more.tar.gz__case-study-fixed"]["rule_id"] is None
    # memory-bound.ncu.csv next to the export is read: the bound ratio is there.
    mb = rows["runs__memory-bound"]
    assert mb["rule_id"] == "memory-bound" and mb["bound_ratio"] > 0.8
    assert rows["runs__balanced"]["bound_ratio"] is None


def test_outputs_follow_the_contract_and_agree(mixed: tuple[Path, Path, int]) -> None:
    out = mixed[1]
    contract.validate(json.loads((out / "results.json").read_text()))
    rows = _rows(out)
    for r in rows.values():
        if r["status"] == "ok":
            doc = json.loads((out / r["json"]).read_text())
            contract.validate(doc)
            assert doc["headline"]["rule_id"] == r["rule_id"]
            assert (out / r["report"]).read_text().startswith("<!DOCTYPE html>")
    # An archive member is named as the user knows it, not by its temporary copy.
    member = json.loads((out / rows["runs.zip__nested__case-study"]["json"]).read_text())
    assert [i["path"] for i in member["inputs"]] == ["runs.zip/nested/case-study.sqlite"]
    mb = json.loads((out / rows["runs__memory-bound"]["json"]).read_text())
    assert mb["ncu_csv"] == "runs/memory-bound.ncu.csv"
    csv = pl.read_csv(out / "results.csv", schema=ROW_SCHEMA)
    parquet = pl.read_parquet(out / "results.parquet")
    assert csv.columns == list(ROW_SCHEMA) == parquet.columns
    assert csv["trace_id"].to_list() == sorted(rows) == parquet["trace_id"].to_list()
    assert parquet.filter(pl.col("trace_id") == "runs__memory-bound")["kernels"].item() > 0
    assert not list(out.rglob(".*.tmp"))


def test_index_page_lists_every_trace_offline(mixed: tuple[Path, Path, int]) -> None:
    out = mixed[1]
    page = (out / "index.html").read_text()
    for tid, r in _rows(out).items():
        assert tid in page
        if r["report"]:
            assert f'href="{r["report"]}"' in page
    assert "<script src" not in page and "http://" not in page and "https://" not in page
    assert 'id="filter"' in page and "data-sort" in page and "false-balance" in page


def test_rerun_resumes_and_force_redoes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = _folder(tmp_path, ["balanced", "case-study"])
    out = tmp_path / "out"
    base = ["-q", "batch", str(src), "-o", str(out), "--jobs", "1"]
    code, stdout, _ = run_cli(base, capsys)
    assert code == 0 and "2 analysed, 0 up to date" in stdout
    first = (out / "results.csv").read_bytes()
    code, stdout, _ = run_cli(base, capsys)
    assert code == 0 and "0 analysed, 2 up to date" in stdout
    assert (out / "results.csv").read_bytes() == first
    # New content in one file: only that one is redone.
    shutil.copy(FIX / "pp-bubble.sqlite", src / "case-study.sqlite")
    code, stdout, _ = run_cli(base, capsys)
    assert "1 analysed, 1 up to date" in stdout
    assert _rows(out)["runs__case-study"]["rule_id"] == "pipeline-bubble"
    # Other settings (the language) redo everything; --force too.
    code, stdout, _ = run_cli([*base, "--lang", "zh"], capsys)
    assert "2 analysed, 0 up to date" in stdout
    assert "批量分析" in (out / "index.html").read_text()
    code, stdout, _ = run_cli([*base, "--lang", "zh", "--force"], capsys)
    assert "2 analysed, 0 up to date" in stdout


def test_interrupted_run_leaves_whole_files_and_resumes(tmp_path: Path) -> None:
    names = ["balanced", "case-study", "case-study-fixed", "pp-bubble", "tp-heads", "comm-bound"]
    src = _folder(tmp_path, names)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "nsysan", "batch", str(src), "-o", str(out), "--jobs", "1"]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    workers: list[psutil.Process] = []
    for line in proc.stderr:  # plain log lines: stderr is not a terminal
        if line.startswith(f"[{len(names) // 2}/"):
            workers = psutil.Process(proc.pid).children(recursive=True)
            proc.send_signal(signal.SIGTERM)
            break
    assert proc.wait(timeout=120) == 143
    assert workers
    # The worker ends with its client, whatever it was doing (a worker that had
    # finished a trace once waited forever to send its result).
    _, alive = psutil.wait_procs(workers, timeout=30)
    assert not alive
    assert not list(out.rglob(".*.tmp"))
    done = list((out / ".nsysan-batch").glob("*.json"))
    assert len(names) // 2 <= len(done) < len(names)
    for state in done:
        row = json.loads(state.read_text())["row"]
        json.loads((out / row["json"]).read_text())  # whole, parseable
    finished = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0
    assert f"{len(names) - len(done)} analysed, {len(done)} up to date" in finished.stdout


def test_safe_member_names() -> None:
    assert safe_member_name("a/b/trace.sqlite") == "a/b/trace.sqlite"
    assert safe_member_name("./a//b.sqlite") == "a/b.sqlite"
    for bad in (
        "../x.sqlite",
        "a/../../x.sqlite",
        "/etc/x.sqlite",
        "C:/x.sqlite",
        "a\\..\\x.sqlite",
        "",
    ):
        assert safe_member_name(bad) is None, bad


def test_files_on_the_same_gpus_are_not_grouped(tmp_path: Path) -> None:
    src = tmp_path / "ranks"
    src.mkdir()
    for i, n in enumerate(["balanced", "case-study"]):
        shutil.copy(FIX / f"{n}.sqlite", src / f"rank{i}.sqlite")
    sources, _ = discover([src])
    traces, notes = group_sources(sources)
    assert len(traces) == 2 and "same GPU" in notes[0]


def test_grouping_needs_overlapping_windows() -> None:
    a, b = (
        Source("/x/rank0.sqlite", None, "x/rank0.sqlite"),
        Source("/x/rank1.sqlite", None, "x/rank1.sqlite"),
    )
    probes = {
        "/x/rank0.sqlite": Probe(0, 100, frozenset({("h", "gpu0")})),
        "/x/rank1.sqlite": Probe(50, 150, frozenset({("h", "gpu1")})),
    }
    traces, notes = group_sources([a, b], probe=lambda p: probes[str(p)])
    assert traces == [(a, b)] and notes[0].startswith("grouped 2 files")
    probes["/x/rank1.sqlite"] = Probe(200, 300, frozenset({("h", "gpu1")}))
    traces, notes = group_sources([a, b], probe=lambda p: probes[str(p)])
    assert traces == [(a,), (b,)] and "do not overlap" in notes[0]


@pytest.mark.shared
def test_cori_ranks_are_one_trace_and_no_group_splits_them(
    tmp_path: Path, shared_traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = shared_traces / "cori-8rank-a"
    sources, _ = discover([folder])
    traces, notes = group_sources(sources)
    assert [len(t) for t in traces] == [8]
    assert notes == [f"grouped 8 files as one run: {folder}/report*"]
    sources, _ = discover([folder])
    code, stdout, _ = run_cli(
        ["-q", "batch", str(folder), "-o", str(tmp_path / "o"), "--no-group", "--jobs", "2"], capsys
    )
    assert code == 0 and "8 analysed" in stdout


@pytest.mark.shared
def test_analyze_accepts_a_folder_or_archive_of_rank_files(
    tmp_path: Path, shared_traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ranks = cori_rank_files()
    code, by_files, _ = run_cli(["-q", "analyze", "--json", *map(str, ranks)], capsys)
    assert code == 0
    code, by_folder, _ = run_cli(["-q", "analyze", "--json", str(ranks[0].parent)], capsys)
    assert code == 0
    archive = tmp_path / "cori.tar"
    with tarfile.open(archive, "w") as tf:
        for r in ranks:
            tf.add(r, f"cori/{r.name}")
    code, by_archive, _ = run_cli(["-q", "analyze", "--json", str(archive)], capsys)
    assert code == 0
    docs = [json.loads(x) for x in (by_files, by_folder, by_archive)]
    assert len({len(d["gpus"]) for d in docs}) == 1 and len(docs[0]["gpus"]) == 8
    assert docs[0]["results"]["gaps"] == docs[1]["results"]["gaps"] == docs[2]["results"]["gaps"]
    assert docs[0]["findings"] == docs[2]["findings"]


def test_report_accepts_a_zip_of_one_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    archive = tmp_path / "run.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(FIX / "case-study.sqlite", "case-study.sqlite")
    code, stdout, _ = run_cli(
        ["-q", "report", str(archive), "-o", str(tmp_path / "r.html")], capsys
    )
    assert code == 0 and stdout.startswith("False balance")
    code, _, err = run_cli(["-q", "analyze", str(tmp_path)], capsys)
    assert code == 0  # the folder holds the zip, whose member is the run
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run_cli(["-q", "analyze", str(empty)], capsys)
    assert code == 1 and "no Nsight Systems SQLite export" in err


@pytest.mark.skipif(shutil.which("nsys") is None, reason="no nsys on PATH")
def test_reports_go_through_nsys_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "in"
    src.mkdir()
    (src / "raw.nsys-rep").write_bytes(b"\0")
    shutil.copy(FIX / "balanced.sqlite", src / "balanced.sqlite")
    code, out, _ = run_cli(
        ["-q", "batch", str(src), "-o", str(tmp_path / "o"), "--jobs", "1"], capsys
    )
    assert code == 3 and "1 analysed" in out and "1 failed" in out
    row = _rows(tmp_path / "o")["in__raw"]
    assert row["status"] == "failed" and "nsys export failed" in row["error"]
