"""The hostile corpus: damaged and unlikely exports built from a real one, and a driver.

Every input is a copy of a small real export (``../shared/traces``) changed with plain
SQL, the way a hostile or unlucky user could: storage classes nsys never writes,
missing, renamed or NULL columns, absurd times, and some of our own. The driver
(``python tests/hostile_corpus.py BUILD_DIR CASE...``) runs ``info``,
``analyze --json`` and ``report`` in one process per batch and prints one JSON record
per command; tests/test_hostile_corpus.py asserts on them.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import resource
import shutil
import sqlite3
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

K = "CUPTI_ACTIVITY_KIND_KERNEL"
INT64_MAX = 2**63 - 1
DAY_NS = 86_400 * 10**9
YEAR_NS = 365 * DAY_NS

Mutation = Callable[[sqlite3.Connection], None]


@dataclass(frozen=True)
class Case:
    """One hostile input: its class, its name and how it is made from the base export."""

    kind: str  # types | missing | times | own
    name: str
    mutate: Mutation
    files: int = 1  # several copies of the mutated file given at once
    expect: str = "ok"  # ok (exit 0, maybe with notes) | refused (exit 1, one line)


def _sql(*statements: str) -> Mutation:
    def run(conn: sqlite3.Connection) -> None:
        for statement in statements:
            conn.execute(statement)

    return run


def loosen(table: str) -> str:
    """SQL that rebuilds ``table`` without its constraints (NOT NULL, INTEGER PRIMARY KEY)."""
    return (
        f'CREATE TABLE "_loose" AS SELECT * FROM "{table}"; DROP TABLE "{table}"; '
        f'ALTER TABLE "_loose" RENAME TO "{table}"'
    )


def _loose(table: str, *statements: str) -> Mutation:
    def run(conn: sqlite3.Connection) -> None:
        conn.executescript(loosen(table))
        for statement in statements:
            conn.execute(statement)

    return run


def _gpu_metrics(conn: sqlite3.Connection) -> None:
    conn.executescript(
        """
        CREATE TABLE TARGET_INFO_GPU_METRICS (typeId, sourceId, typeName, metricId, metricName);
        CREATE TABLE GPU_METRICS (timestamp, typeId, metricId, value);
        INSERT INTO TARGET_INFO_GPU_METRICS VALUES (0, 0, 'GPU', 1, 'SM Active'),
            (0, 0, 'GPU', 2, 'GPC Clock Frequency'), (999, 0, 'x', 1, X'ff');
        """
    )
    start = conn.execute(f"SELECT MIN(start) FROM {K}").fetchone()[0]
    rows = [(start + i * 10_000, 0, 1, 50) for i in range(200)]
    rows += [(start, 0, 2, "fast"), (start, 0, 1, X_FF), (start, 77777, 1, 5), ("t", 0, 1, 1)]
    rows += [(INT64_MAX, 0, 1, 10), (start, 2**40, 1, 1), (start, 0, 1, 1e308 * 10)]
    conn.executemany("INSERT INTO GPU_METRICS VALUES (?, ?, ?, ?)", rows)


X_FF = b"\xff\xfe"


def _generic_events(payloads: list[object]) -> Mutation:
    def run(conn: sqlite3.Connection) -> None:
        conn.executescript(
            """
            CREATE TABLE GENERIC_EVENT_SOURCES (sourceId, data);
            CREATE TABLE GENERIC_EVENT_TYPES (typeId, sourceId, data);
            CREATE TABLE GENERIC_EVENTS (rawTimestamp, timestamp, typeId, data);
            INSERT INTO GENERIC_EVENT_SOURCES VALUES (1, '{"Name": "GpuMetrics"}');
            INSERT INTO GENERIC_EVENT_TYPES VALUES (5, 1, '{}');
            """
        )
        start = conn.execute(f"SELECT MIN(start) FROM {K}").fetchone()[0]
        conn.executemany(
            "INSERT INTO GENERIC_EVENTS VALUES (?, ?, 5, ?)",
            [(start + i, start + i, p) for i, p in enumerate(payloads)],
        )

    return run


def _view_instead_of_table(conn: sqlite3.Connection) -> None:
    # An endless view where the kernel table should be: reading it would never stop.
    conn.executescript(
        f"""
        DROP TABLE {K};
        CREATE VIEW {K} AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n)
        SELECT i AS start, i + 1 AS end, 0 AS deviceId FROM n;
        """
    )


def _shift_one(column_sql: str) -> Mutation:
    return _sql(f"UPDATE {K} SET {column_sql} WHERE rowid = (SELECT MAX(rowid) FROM {K})")


CASES: tuple[Case, ...] = (
    # Storage classes SQLite allows but nsys never writes.
    Case("types", "kernel-start-text", _sql(f"UPDATE {K} SET start = 'abc' WHERE rowid % 5 = 0")),
    Case("types", "kernel-end-blob", _sql(f"UPDATE {K} SET end = X'00ff' WHERE rowid % 7 = 0")),
    Case("types", "kernel-start-real", _sql(f"UPDATE {K} SET start = start + 0.5")),
    Case("types", "kernel-device-text", _sql(f"UPDATE {K} SET deviceId = 'gpu' WHERE rowid = 1")),
    Case("types", "kernel-device-2^40", _sql(f"UPDATE {K} SET deviceId = 1099511627776")),
    Case("types", "kernel-device-negative", _sql(f"UPDATE {K} SET deviceId = -1 WHERE rowid = 2")),
    Case("types", "kernel-pid-text", _sql(f"UPDATE {K} SET globalPid = 'p' WHERE rowid % 2 = 0")),
    Case(
        "types",
        "kernel-name-id-text",
        _sql(f"UPDATE {K} SET shortName = 'x', demangledName = X'01'"),
    ),
    Case(
        "types",
        "string-id-text",
        _loose("StringIds", "UPDATE StringIds SET id = 'x' || id WHERE rowid % 4 = 0"),
    ),
    Case(
        "types",
        "string-value-blob",
        _sql("UPDATE StringIds SET value = X'fffe41' WHERE rowid % 3 = 0"),
    ),
    Case(
        "types",
        "string-invalid-utf8",
        _sql(
            f"UPDATE StringIds SET value = CAST(X'c328ff41' AS TEXT) WHERE id IN (SELECT shortName FROM {K})"
        ),
    ),
    Case(
        "types", "string-value-integer", _loose("StringIds", "UPDATE StringIds SET value = 12345")
    ),
    Case("types", "gpu-sm-count-2^31", _sql("UPDATE TARGET_INFO_GPU SET smCount = 2147483648")),
    Case(
        "types",
        "target-gpu-id-text",
        _sql("UPDATE TARGET_INFO_GPU SET id = 'gpu0', smCount = 'many'"),
    ),
    Case(
        "types", "processes-pid-text", _sql("UPDATE PROCESSES SET pid = 'p' || pid, name = X'ff'")
    ),
    Case(
        "types",
        "session-start-text",
        _sql("UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = 'yesterday'"),
    ),
    Case(
        "types",
        "analysis-details-text",
        _sql("UPDATE ANALYSIS_DETAILS SET startTime = 'x', stopTime = X'01'"),
    ),
    Case(
        "types",
        "runtime-name-id-text",
        _sql("UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET nameId = 'n', returnValue = 'r'"),
    ),
    Case(
        "types",
        "nvtx-text-invalid-utf8",
        _sql("UPDATE NVTX_EVENTS SET text = CAST(X'ff80' AS TEXT), eventType = 'e'"),
    ),
    Case(
        "types",
        "memcpy-kind-text",
        _sql("UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET copyKind = 'x', bytes = 'many'"),
    ),
    Case(
        "types",
        "threadnames-text",
        _sql("UPDATE ThreadNames SET nameId = 'n', globalTid = 'g' WHERE rowid % 2 = 0"),
    ),
    Case("types", "metadata-blob", _sql("UPDATE EXPORT_META_DATA SET value = X'ff00', name = 7")),
    Case("types", "gpu-metrics-unknown-ids-text-values", _gpu_metrics),
    Case(
        "types", "generic-events-invalid-json", _generic_events(["{not json", '{"SM Active": "1"}'])
    ),
    Case("types", "generic-events-wrong-shape", _generic_events(["[1, 2]", "42", '"s"', "null"])),
    Case("types", "generic-events-nested", _generic_events(['{"a": {"b": 1}}', X_FF, 7])),
    # Missing, renamed and NULL columns.
    Case(
        "missing", "kernel-no-start", _sql(f"ALTER TABLE {K} DROP COLUMN start"), expect="refused"
    ),
    Case("missing", "kernel-no-end", _sql(f"ALTER TABLE {K} DROP COLUMN end"), expect="refused"),
    Case(
        "missing",
        "kernel-no-device",
        _sql(f"ALTER TABLE {K} DROP COLUMN deviceId"),
        expect="refused",
    ),
    Case(
        "missing",
        "kernel-columns-capitalised",
        _sql(
            f"ALTER TABLE {K} RENAME COLUMN start TO Start",
            f"ALTER TABLE {K} RENAME COLUMN end TO End",
            f"ALTER TABLE {K} RENAME COLUMN deviceId TO DeviceId",
        ),
    ),
    Case(
        "missing",
        "kernel-all-null",
        _loose(
            K,
            f"UPDATE {K} SET start = NULL, end = NULL, deviceId = NULL, globalPid = NULL, "
            "shortName = NULL, demangledName = NULL, streamId = NULL, correlationId = NULL",
        ),
    ),
    Case(
        "missing",
        "kernel-10pct-null-start",
        _loose(K, f"UPDATE {K} SET start = NULL WHERE rowid % 10 = 0"),
    ),
    Case("missing", "kernel-null-pid", _sql(f"UPDATE {K} SET globalPid = NULL")),
    Case("missing", "strings-empty", _sql("DELETE FROM StringIds")),
    Case("missing", "strings-table-dropped", _sql("DROP TABLE StringIds")),
    Case("missing", "target-gpu-dropped", _sql("DROP TABLE TARGET_INFO_GPU")),
    Case("missing", "kernel-view-endless", _view_instead_of_table),
    Case("missing", "kernel-table-empty", _sql(f"DELETE FROM {K}")),
    # Absurd times.
    Case("times", "kernel-end-int64-max", _shift_one(f"end = {INT64_MAX}")),
    Case(
        "times",
        "kernel-116-days-late",
        _shift_one(f"start = start + {116 * DAY_NS}, end = end + {116 * DAY_NS}"),
    ),
    Case(
        "times",
        "kernel-30-years-late",
        _shift_one(f"start = start + {30 * YEAR_NS}, end = end + {30 * YEAR_NS}"),
    ),
    Case("times", "kernel-start-int64-min", _shift_one(f"start = {-INT64_MAX - 1}")),
    Case(
        "times",
        "kernels-all-negative",
        _sql(f"UPDATE {K} SET start = start - {10**18}, end = end - {10**18}"),
    ),
    Case("times", "kernel-end-1e300-real", _shift_one("end = 1e300")),
    Case(
        "times",
        "nvtx-end-int64-max",
        _sql(f"UPDATE NVTX_EVENTS SET end = {INT64_MAX} WHERE rowid % 9 = 0"),
    ),
    Case(
        "times",
        "runtime-end-int64-max",
        _sql(f"UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET end = {INT64_MAX} WHERE rowid = 3"),
    ),
    Case(
        "times",
        "memcpy-end-int64-max",
        _sql(f"UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET end = {INT64_MAX} WHERE rowid = 1"),
    ),
    Case(
        "times",
        "overhead-start-int64-min",
        _sql(f"UPDATE PROFILER_OVERHEAD SET start = {-INT64_MAX - 1}"),
    ),
    Case(
        "times",
        "capture-stop-int64-max",
        _sql(f"UPDATE ANALYSIS_DETAILS SET stopTime = {INT64_MAX}"),
    ),
    Case(
        "times",
        "session-start-int64-max",
        _sql(f"UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = {INT64_MAX}"),
    ),
    Case(
        "times",
        "two-files-53-years-apart",
        _sql("UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = 1"),
        files=2,
    ),
    # Our own: an attacker's and an unlucky user's inputs.
    Case("own", "kernels-duplicated", _sql(f"INSERT INTO {K} SELECT * FROM {K}")),
    Case(
        "own",
        "string-ids-duplicated",
        _loose("StringIds", "INSERT INTO StringIds SELECT id, 'dup' FROM StringIds"),
    ),
    Case(
        "own",
        "kernel-name-1MiB",
        _sql(
            f"UPDATE StringIds SET value = printf('%.*c', 1048576, 'k') WHERE id = (SELECT shortName FROM {K} LIMIT 1)"
        ),
    ),
    Case(
        "own", "nvtx-text-1MiB", _sql("UPDATE NVTX_EVENTS SET text = printf('%.*c', 1048576, 'n')")
    ),
    Case("own", "kernels-zero-length", _sql(f"UPDATE {K} SET end = start")),
    Case("own", "kernels-inverted", _sql(f"UPDATE {K} SET end = start - 1000")),
    Case(
        "own",
        "hostname-html-and-blob",
        _sql(
            "UPDATE TARGET_INFO_SYSTEM_ENV SET value = X'3c7363726970743eff' WHERE name = 'Hostname'"
        ),
    ),
    Case("own", "same-file-twice", _sql(), files=2, expect="refused"),
    Case(
        "own",
        "kernel-table-without-rowid-int",
        _sql(f"UPDATE {K} SET correlationId = 'c', streamId = 1e10"),
    ),
)


def build(case: Case, base: Path, folder: Path) -> list[Path]:
    """Make ``case`` from ``base`` in ``folder``; return the trace paths to give nsysan."""
    folder.mkdir(parents=True, exist_ok=True)
    first = folder / "t.sqlite"
    shutil.copyfile(base, first)
    conn = sqlite3.connect(first)
    try:
        case.mutate(conn)
        conn.commit()
    finally:
        conn.close()
    if case.name == "same-file-twice":
        return [first, first]
    paths = [first]
    if case.files == 2:  # the second is the unchanged base
        second = folder / "u.sqlite"
        shutil.copyfile(base, second)
        paths.append(second)
    return paths


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def _run(args: list[str]) -> tuple[int, str, str, float]:
    from nsysan.cli import main

    out, err = io.StringIO(), io.StringIO()
    began = time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(args)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException as exc:  # noqa: BLE001 - recorded, the test fails on it
            import traceback

            traceback.print_exc()
            code = f"raised {type(exc).__name__}"  # type: ignore[assignment]
    return code, out.getvalue(), err.getvalue(), time.monotonic() - began


def drive(build_dir: Path, names: list[str]) -> None:
    """Build each named case and run the three commands on it; one JSON line per command."""
    base = Path(sys.argv[1])
    by_name = {c.name: c for c in CASES}
    for name in names:
        case = by_name[name]
        folder = build_dir / name / "in"
        paths = build(case, base, folder)
        out_dir = build_dir / name / "out"
        out_dir.mkdir()
        before = _digest(folder)
        traces = [str(p) for p in paths]
        for command in (
            ["info", *traces],
            ["analyze", "--json", *traces],
            ["report", *traces, "-o", str(out_dir / "r.html")],
        ):
            code, out, err, seconds = _run(command)
            record = {
                "case": name,
                "kind": case.kind,
                "expect": case.expect,
                "command": command[0],
                "code": code,
                "stderr": err,
                "stdout_tail": out[-300:],
                "seconds": round(seconds, 2),
                "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
                "inputs_unchanged": _digest(folder) == before,
                "outputs": sorted(p.name for p in out_dir.iterdir()),
                "html_bytes": (out_dir / "r.html").stat().st_size
                if (out_dir / "r.html").exists()
                else 0,
            }
            print(json.dumps(record), flush=True)


if __name__ == "__main__":
    drive(Path(sys.argv[2]), sys.argv[3:])
