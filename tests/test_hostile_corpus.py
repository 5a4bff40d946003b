"""The hostile corpus (tests/hostile_corpus.py) through `info`, `analyze --json` and `report`.

Each class runs in one child process (bounded address space, wall-time limit) that
builds its inputs from a real export and prints one JSON record per command. Every
input must give exit 0 or 1, one line on stderr at most, never an internal error or a
traceback, the same answer from all three commands, bounded time and memory, the
inputs unchanged, nothing created beside them and no stray output.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, SHARED_TRACES
from hostile_corpus import CASES

BASE = SHARED_TRACES / "T033-dlprof" / "trace.sqlite"
KINDS = sorted({c.kind for c in CASES})
ADDRESS_SPACE_BYTES = 12 * 2**30  # numba, polars and numpy reserve far more than they use
PEAK_RSS_MB = 1500
SECONDS_PER_COMMAND = 20
BATCH_TIMEOUT_S = 240


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES))


def _run_batch(kind: str, tmp: Path) -> list[dict[str, object]]:
    names = [c.name for c in CASES if c.kind == kind]
    proc = subprocess.run(
        [sys.executable, str(REPO / "tests" / "hostile_corpus.py"), str(BASE), str(tmp), *names],
        capture_output=True,
        text=True,
        timeout=BATCH_TIMEOUT_S,
        preexec_fn=_limit_memory,
        cwd=tmp,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = [json.loads(line) for line in proc.stdout.splitlines()]
    assert {r["case"] for r in records} == set(names)
    return records


@pytest.mark.shared
@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_hostile_inputs_get_a_clean_answer(kind: str, tmp_path: Path) -> None:
    if not BASE.exists():
        pytest.skip("needs the real traces")
    records = _run_batch(kind, tmp_path)
    problems = []
    for r in records:
        err = str(r["stderr"])
        where = f"{r['case']} / {r['command']}"
        if r["code"] != {"ok": 0, "refused": 1}[str(r["expect"])]:
            problems.append(f"{where}: expected {r['expect']}, got exit {r['code']}: {err[-300:]}")
        if r["code"] not in (0, 1):
            problems.append(f"{where}: exit {r['code']}: {err[-500:]}")
        if "internal error" in err or "Traceback" in err or err.count("\n") > 1:
            problems.append(f"{where}: not one clean line: {err[-500:]}")
        if r["code"] == 1 and not err.startswith("nsysan: error: "):
            problems.append(f"{where}: exit 1 without an error line")
        if float(r["seconds"]) > SECONDS_PER_COMMAND:  # type: ignore[arg-type]
            problems.append(f"{where}: {r['seconds']} s")
        if int(r["maxrss_mb"]) > PEAK_RSS_MB:  # type: ignore[call-overload]
            problems.append(f"{where}: peak RSS {r['maxrss_mb']} MB")
        if not r["inputs_unchanged"]:
            problems.append(f"{where}: the input folder changed")
        expected_out = ["r.html"] if r["command"] == "report" and r["code"] == 0 else []
        if r["command"] == "report" and r["outputs"] != expected_out:
            problems.append(f"{where}: outputs {r['outputs']}")
    # info, analyze and report accept or refuse the same input with the same line.
    by_case: dict[str, list[dict[str, object]]] = {}
    for r in records:
        by_case.setdefault(str(r["case"]), []).append(r)
    for case, runs in by_case.items():
        answers = {(r["code"], r["stderr"]) for r in runs}
        if len(answers) != 1:
            problems.append(f"{case}: the commands disagree: {sorted(map(str, answers))}")
    assert not problems, "\n".join(problems)
    # Nothing was created beside the inputs (no -shm, -wal, temp or report files).
    for case in by_case:
        listing = sorted(p.name for p in (tmp_path / case / "in").iterdir())
        assert listing in (["t.sqlite"], ["t.sqlite", "u.sqlite"]), (case, listing)


def _one(case: str, tmp_path: Path) -> list[dict[str, object]]:
    if not BASE.exists():
        pytest.skip("needs the real traces")
    proc = subprocess.run(
        [sys.executable, str(REPO / "tests" / "hostile_corpus.py"), str(BASE), str(tmp_path), case],
        capture_output=True,
        text=True,
        timeout=BATCH_TIMEOUT_S,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(line) for line in proc.stdout.splitlines()]


@pytest.mark.shared
@pytest.mark.slow
def test_an_absurd_kernel_end_is_named_in_the_report(tmp_path: Path) -> None:
    records = _one("kernel-end-int64-max", tmp_path)
    assert all(r["code"] == 0 for r in records)
    html = (tmp_path / "kernel-end-int64-max" / "out" / "r.html").read_text(encoding="utf-8")
    assert (
        "1 CUPTI_ACTIVITY_KIND_KERNEL row with end 9223372036854775807 (2^63-1), "
        "more than a day after the capture end"
    ) in html
    assert len(html) < 10_000_000


@pytest.mark.shared
def test_a_kernel_table_without_start_is_refused_naming_it(tmp_path: Path) -> None:
    records = _one("kernel-no-start", tmp_path)
    assert {r["code"] for r in records} == {1}
    assert "table CUPTI_ACTIVITY_KIND_KERNEL has no column 'start'" in str(records[0]["stderr"])
    assert "(see docs/errors.md#missing-column)" in str(records[0]["stderr"])


def _load(case: str, tmp_path: Path) -> object:
    if not BASE.exists():
        pytest.skip("needs the real traces")
    from hostile_corpus import build

    from nsysan.ingest import load_trace

    return load_trace(build({c.name: c for c in CASES}[case], BASE, tmp_path))


@pytest.mark.shared
@pytest.mark.parametrize("case", ["strings-empty", "strings-table-dropped", "kernel-name-id-text"])
def test_kernels_whose_name_string_is_missing_get_a_visible_name(case: str, tmp_path: Path) -> None:
    trace = _load(case, tmp_path)
    kernels = trace.kernels  # type: ignore[attr-defined]
    assert kernels.height == 46
    assert kernels["name"].null_count() == kernels["short_name"].null_count() == 0
    names = set(kernels["name"])
    assert names <= {"<unnamed kernel>"} | {n for n in names if n.startswith("<string id ")}


@pytest.mark.shared
@pytest.mark.parametrize(
    ("case", "height", "note"),
    [
        (
            "kernel-start-text",
            37,
            "t.sqlite: 9 CUPTI_ACTIVITY_KIND_KERNEL rows with a text value in start "
            "(nsys writes integers): ignored",
        ),
        (
            "kernel-30-years-late",
            45,
            "t.sqlite: 1 CUPTI_ACTIVITY_KIND_KERNEL row with start 946080002794685632, more than "
            "a day after the capture end (3154332868 ns): ignored",
        ),
        ("kernel-10pct-null-start", 42, "4 CUPTI_ACTIVITY_KIND_KERNEL rows with no start: ignored"),
        ("string-ids-duplicated", 46, "repeated StringIds id(s): first kept"),
        ("nvtx-text-1MiB", 46, "NVTX_EVENTS string(s) longer than 16384 bytes were truncated"),
    ],
)
def test_validation_notes_name_what_was_ignored(
    case: str, height: int, note: str, tmp_path: Path
) -> None:
    trace = _load(case, tmp_path)
    assert trace.kernels.height == height  # type: ignore[attr-defined]
    assert any(note in n for n in trace.notes), trace.notes  # type: ignore[attr-defined]
