"""Time reading the bulk kernel columns of a big Nsight export into polars.

Every measurement runs in a fresh Python subprocess (``--worker METHOD``) so that peak
RSS (``ru_maxrss`` from ``os.wait4``) belongs to that reader alone. The read time is
taken inside the child around connect + query + DataFrame (imports excluded); the
process time is the whole child, interpreter start and imports included. The page
cache is warmed first, methods run round-robin ``--repeat`` times, best and median
are reported, and ratios are to the ``sqlite3 -readonly`` CLI GROUP BY scan measured
in the same run. Every reader opens the trace read-only; the trace's size and mtime
and its folder's listing are checked to be unchanged at the end.

    python benchmarks/read_bench.py --kernels 1000000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale_trace import DEFAULT_CACHE, DEFAULT_SOURCE, default_output, scale_trace  # noqa: E402

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
COLUMNS = [
    "start",
    "end",
    "deviceId",
    "streamId",
    "correlationId",
    "globalPid",
    "contextId",
    "shortName",
    "demangledName",
    "gridX",
    "gridY",
    "gridZ",
    "blockX",
    "blockY",
    "blockZ",
]
BULK_SQL = "SELECT " + ", ".join(f'k."{c}"' for c in COLUMNS) + f" FROM {KERNEL} k"
NAMES_SQL = (
    "SELECT "
    + ", ".join(
        {"shortName": "s.value AS shortName", "demangledName": "d.value AS demangledName"}.get(
            c, f'k."{c}"'
        )
        for c in COLUMNS
    )
    + f" FROM {KERNEL} k LEFT JOIN StringIds s ON s.id = k.shortName"
    " LEFT JOIN StringIds d ON d.id = k.demangledName"
)
GROUP_SQL = (
    f'SELECT deviceId, count(*), min(start), max("end"), sum("end" - start)'
    f" FROM {KERNEL} GROUP BY deviceId ORDER BY deviceId"
)
SQLITE_CLI = "/usr/bin/sqlite3"
# Methods that cannot open the file read-only: run on a throw-away copy.
SCRATCH_METHODS = {"connectorx_p2_scratch"}

# method -> what it measures
METHODS: dict[str, str] = {
    "sqlite3_cli_groupby": "sqlite3 -readonly CLI: GROUP BY deviceId over start/end (baseline)",
    "adbc_sql_groupby": "ADBC: the same GROUP BY run by SQLite in-process",
    "adbc_polars_groupby": "ADBC: read start/end/deviceId, GROUP BY in polars",
    "sqlalchemy": "pl.read_database over a SQLAlchemy connection (15 bulk cols)",
    "adbc": "ADBC fetch_arrow_table -> pl.from_arrow (15 bulk cols)",
    "adbc_batch64k": "same, statement option adbc.sqlite.query.batch_rows=65536",
    "connectorx": "connectorx read_sql(return_type='polars'), read-only URI (15 bulk cols)",
    "connectorx_p2_scratch": "connectorx, 2 partitions on start: NOT read-only, on a scratch copy",
    "sqlite3_fetchall": "stdlib sqlite3 fetchall -> pl.DataFrame (15 bulk cols)",
    "names_sql_join": "ADBC, names resolved by LEFT JOIN StringIds in SQL",
    "names_polars_join": "ADBC ids + ADBC StringIds, names joined in polars",
}


def ro_uri(path: Path) -> str:
    """SQLite read-only URI (stdlib sqlite3 with uri=True, ADBC)."""
    return f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro"


def cx_uri(path: Path) -> str:
    """connectorx URL that makes SQLite open the file read-only.

    connectorx hands the percent-decoded part after ``sqlite://`` to SQLite with URI
    parsing on, so the read-only SQLite URI must be percent-encoded as a whole
    (what ``cx.ConnectionUrl(backend="sqlite", db_path=...)`` does). A raw
    ``?mode=ro`` suffix is instead taken as part of the file name, and the file is
    opened O_RDWR|O_CREAT (an empty ``trace.sqlite?mode=ro`` appears).
    """
    return "sqlite://" + urllib.parse.quote(ro_uri(path), safe="/")


# --------------------------------------------------------------------------- workers


def _frame_summary(df: Any) -> dict[str, Any]:
    """Small checksum of a kernel frame, to compare methods."""
    import polars as pl

    return {
        "rows": df.height,
        "cols": df.width,
        "busy_ns": int(df.select((pl.col("end") - pl.col("start")).sum()).item()),
        "short_names": int(df["shortName"].n_unique()),
        "dtypes": sorted({str(t) for t in df.dtypes}),
    }


def _groups_summary(rows: list[tuple[Any, ...]]) -> dict[str, Any]:
    """Checksum of GROUP BY output rows."""
    return {"groups": [[int(v) for v in r] for r in rows]}


def _adbc_table(path: Path, sql: str, batch_rows: int | None = None) -> Any:
    """Run ``sql`` through ADBC and return a pyarrow Table."""
    import adbc_driver_sqlite.dbapi as adbc

    with adbc.connect(ro_uri(path)) as con, con.cursor() as cur:
        if batch_rows:  # default is 1024 rows per Arrow batch
            cur.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": str(batch_rows)})
        cur.execute(sql)
        return cur.fetch_arrow_table()


def w_adbc(path: Path) -> dict[str, Any]:
    import polars as pl

    return _frame_summary(pl.from_arrow(_adbc_table(path, BULK_SQL)))


def w_adbc_batch64k(path: Path) -> dict[str, Any]:
    import polars as pl

    return _frame_summary(pl.from_arrow(_adbc_table(path, BULK_SQL, batch_rows=65536)))


def w_adbc_sql_groupby(path: Path) -> dict[str, Any]:
    tbl = _adbc_table(path, GROUP_SQL)
    return _groups_summary([tuple(r.values()) for r in tbl.to_pylist()])


def w_adbc_polars_groupby(path: Path) -> dict[str, Any]:
    import polars as pl

    df = pl.from_arrow(_adbc_table(path, f'SELECT deviceId, start, "end" FROM {KERNEL}'))
    out = (
        df.group_by("deviceId")
        .agg(
            pl.len().alias("n"),
            pl.col("start").min(),
            pl.col("end").max(),
            (pl.col("end") - pl.col("start")).sum().alias("busy"),
        )
        .sort("deviceId")
    )
    return _groups_summary(out.rows())


def w_sqlalchemy(path: Path) -> dict[str, Any]:
    import polars as pl
    from sqlalchemy import create_engine

    url = f"sqlite:///{ro_uri(path)}&uri=true"
    engine = create_engine(url)
    try:
        with engine.connect() as con:
            df = pl.read_database(BULK_SQL, con)
    finally:
        engine.dispose()
    return _frame_summary(df)


def _cx(path: Path, **kw: Any) -> dict[str, Any]:
    import connectorx as cx

    return _frame_summary(cx.read_sql(cx_uri(path), BULK_SQL, return_type="polars", **kw))


def w_connectorx(path: Path) -> dict[str, Any]:
    return _cx(path)


def w_connectorx_p2_scratch(path: Path) -> dict[str, Any]:
    # The partitioned code path passes the string after sqlite:// to SQLite without
    # percent-decoding it, so the read-only URI is not understood: only a plain path
    # works, opened O_RDWR|O_CREAT. The parent points this at a scratch copy.
    import connectorx as cx

    url = "sqlite://" + urllib.parse.quote(str(path), safe="/")
    return _frame_summary(
        cx.read_sql(url, BULK_SQL, return_type="polars", partition_on="start", partition_num=2)
    )


def w_sqlite3_fetchall(path: Path) -> dict[str, Any]:
    import sqlite3

    import polars as pl

    con = sqlite3.connect(ro_uri(path), uri=True)
    try:
        cur = con.execute(BULK_SQL)
        names = [d[0] for d in cur.description]
        rows = cur.fetchall()
    finally:
        con.close()
    df = pl.DataFrame(rows, schema=names, orient="row")
    del rows
    return _frame_summary(df)


def w_names_sql_join(path: Path) -> dict[str, Any]:
    import polars as pl

    return _frame_summary(pl.from_arrow(_adbc_table(path, NAMES_SQL)))


def w_names_polars_join(path: Path) -> dict[str, Any]:
    import polars as pl

    df = pl.from_arrow(_adbc_table(path, BULK_SQL))
    strings = pl.from_arrow(_adbc_table(path, "SELECT id, value FROM StringIds"))
    for col in ("shortName", "demangledName"):
        df = df.join(strings.rename({"id": col, "value": f"_{col}"}), on=col, how="left")
        df = df.drop(col).rename({f"_{col}": col})
    return _frame_summary(df.select(COLUMNS))


WORKERS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "adbc": w_adbc,
    "adbc_batch64k": w_adbc_batch64k,
    "adbc_sql_groupby": w_adbc_sql_groupby,
    "adbc_polars_groupby": w_adbc_polars_groupby,
    "sqlalchemy": w_sqlalchemy,
    "connectorx": w_connectorx,
    "connectorx_p2_scratch": w_connectorx_p2_scratch,
    "sqlite3_fetchall": w_sqlite3_fetchall,
    "names_sql_join": w_names_sql_join,
    "names_polars_join": w_names_polars_join,
}

_IMPORTS = {
    "adbc": ["polars", "pyarrow", "adbc_driver_sqlite.dbapi"],
    "sqlalchemy": ["polars", "sqlalchemy"],
    "connectorx": ["polars", "pyarrow", "connectorx"],
    "sqlite3": ["polars", "sqlite3"],
}


def run_worker(method: str, path: Path) -> None:
    """Child side: import, read once, print one JSON line."""
    import importlib
    import resource

    family = next((k for k in _IMPORTS if method.startswith(k)), "adbc")
    for mod in _IMPORTS[family]:
        importlib.import_module(mod)
    rss_imports_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    summary = WORKERS[method](path)
    seconds = time.perf_counter() - t0
    print(json.dumps({"seconds": seconds, "rss_imports_kb": rss_imports_kb, **summary}))


# --------------------------------------------------------------------------- parent


def _spawn(cmd: list[str], timeout: float) -> tuple[float, int, str, int]:
    """Run ``cmd``; return (wall s, peak RSS KiB of that child, stdout, exit code)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    out_chunks: list[str] = []
    err_chunks: list[str] = []
    readers = [
        threading.Thread(target=lambda: out_chunks.append(proc.stdout.read())),  # type: ignore[union-attr]
        threading.Thread(target=lambda: err_chunks.append(proc.stderr.read())),  # type: ignore[union-attr]
    ]
    for t in readers:
        t.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    timer.cancel()
    for t in readers:
        t.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.stderr.write("".join(err_chunks)[-2000:])
    return wall, usage.ru_maxrss, "".join(out_chunks), proc.returncode


def measure(method: str, path: Path, timeout: float) -> dict[str, Any]:
    """One measurement of ``method`` in a fresh process."""
    if method == "sqlite3_cli_groupby":
        wall, rss, out, rc = _spawn(
            [SQLITE_CLI, "-readonly", "-csv", str(path), GROUP_SQL], timeout
        )
        rows = [tuple(int(v) for v in line.split(",")) for line in out.split()]
        return {
            "ok": rc == 0,
            "seconds": wall,
            "proc_seconds": wall,
            "rss_kb": rss,
            "rss_imports_kb": None,
            **_groups_summary(rows),
        }
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", method, "--trace", str(path)]
    wall, rss, out, rc = _spawn(cmd, timeout)
    if rc != 0 or not out.strip():
        return {
            "ok": False,
            "seconds": float("nan"),
            "proc_seconds": wall,
            "rss_kb": rss,
            "rss_imports_kb": None,
        }
    res = json.loads(out.strip().splitlines()[-1])
    return {"ok": True, "proc_seconds": wall, "rss_kb": rss, **res}


def _fingerprint(path: Path) -> tuple[Any, ...]:
    """Size and mtime of the trace plus the listing of its folder."""
    st = path.stat()
    return st.st_size, st.st_mtime_ns, tuple(sorted(os.listdir(path.parent)))


def _warm(path: Path) -> None:
    """Pull the file into the page cache so every method sees the same warm cache."""
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def _fmt_table(results: dict[str, list[dict[str, Any]]], base: float) -> str:
    """The figures table."""
    head = (
        f"{'method':<22} {'read s':>8} {'median':>8} {'proc s':>8} {'peak RSS MB':>11}"
        f" {'import MB':>9} {'x CLI':>7}  rows"
    )
    lines = [head, "-" * len(head)]
    for method, runs in results.items():
        good = [r for r in runs if r["ok"]]
        if not good:
            lines.append(f"{method:<22} {'FAILED':>8}")
            continue
        secs = [r["seconds"] for r in good]
        best = min(secs)
        rss = max(r["rss_kb"] for r in good) / 1024
        imp = [r["rss_imports_kb"] for r in good if r["rss_imports_kb"]]
        imp_s = f"{max(imp) / 1024:9.0f}" if imp else f"{'-':>9}"
        rows = good[0].get("rows", len(good[0].get("groups", [])))
        lines.append(
            f"{method:<22} {best:8.3f} {statistics.median(secs):8.3f}"
            f" {min(r['proc_seconds'] for r in good):8.3f} {rss:11.0f} {imp_s}"
            f" {best / base:7.1f}  {rows:,}"
        )
    return "\n".join(lines)


def _consistency(results: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Differences between methods that should return the same data."""
    problems = []
    frames = {m: r[0] for m, r in results.items() if r and r[0]["ok"] and "rows" in r[0]}
    groups = {
        m: r[0]["groups"] for m, r in results.items() if r and r[0]["ok"] and "groups" in r[0]
    }
    keys = {m: (v["rows"], v["busy_ns"], v["short_names"]) for m, v in frames.items()}
    if len(set(keys.values())) > 1:
        problems.append(f"frame checksums differ: {keys}")
    if len({json.dumps(g) for g in groups.values()}) > 1:
        problems.append(f"GROUP BY results differ: {groups}")
    return problems


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--kernels",
        type=int,
        default=1_000_000,
        help="kernel rows; the scaled trace is built under --cache-dir if missing",
    )
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="real export to scale")
    ap.add_argument(
        "--trace", type=Path, default=None, help="use this export as is instead of a scaled one"
    )
    ap.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE)
    ap.add_argument("--repeat", type=int, default=3, help="runs per method (best and median)")
    ap.add_argument(
        "--methods",
        default=",".join(METHODS),
        help=f"comma-separated subset of: {', '.join(METHODS)}",
    )
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per child run")
    ap.add_argument("--json", type=Path, default=None, help="also write raw results here")
    ap.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.worker:
        run_worker(args.worker, args.trace)
        return 0

    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = set(methods) - set(METHODS)
    if unknown:
        ap.error(f"unknown methods: {sorted(unknown)}")
    if "sqlite3_cli_groupby" not in methods:
        methods.insert(0, "sqlite3_cli_groupby")  # ratios need it
    if not shutil.which(SQLITE_CLI):
        ap.error(f"{SQLITE_CLI} not found")

    path = args.trace or default_output(args.source, args.kernels, args.cache_dir)
    if not path.exists():
        print(f"building {path} ...", file=sys.stderr)
        res = scale_trace(args.source, path, args.kernels)
        print(f"built in {res.seconds:.1f} s", file=sys.stderr)
    path = path.resolve()

    before = _fingerprint(path)
    scratch = None
    if any(m in SCRATCH_METHODS for m in methods):
        # Methods that cannot open read-only never see the real file.
        scratch = args.cache_dir / f"scratch-{os.getpid()}-{path.name}"
        shutil.copyfile(path, scratch)
        _warm(scratch)
    _warm(path)
    measure("sqlite3_cli_groupby", path, args.timeout)  # warm-up, not recorded
    results: dict[str, list[dict[str, Any]]] = {m: [] for m in methods}
    try:
        for i in range(args.repeat):
            for m in methods:
                target = scratch if m in SCRATCH_METHODS and scratch else path
                r = measure(m, target, args.timeout)
                results[m].append(r)
                print(
                    f"  round {i + 1}/{args.repeat} {m:<22} {r['seconds']:8.3f} s"
                    f" {r['rss_kb'] / 1024:7.0f} MB",
                    file=sys.stderr,
                )
    finally:
        if scratch:
            scratch.unlink(missing_ok=True)
    after = _fingerprint(path)

    cli = [r["seconds"] for r in results["sqlite3_cli_groupby"] if r["ok"]]
    base = min(cli) if cli else float("nan")
    size_mb = path.stat().st_size / 2**20
    print(f"\ntrace: {path} ({size_mb:,.0f} MiB), best of {args.repeat}, warm page cache")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs\n")
    print(_fmt_table(results, base))
    print(
        "\nread s: connect+query+DataFrame inside the child (imports excluded); proc s: whole"
        " child process.\npeak RSS: ru_maxrss of that child; import MB: RSS after imports,"
        " before reading.\nx CLI: read s / best sqlite3 CLI GROUP BY wall time."
    )
    for p in _consistency(results):
        print("WARNING:", p)
    if before != after:
        print(f"WARNING: the trace or its folder changed during the run: {before} -> {after}")
    else:
        print("trace unchanged (size, mtime, folder listing).")
    if args.json:
        args.json.write_text(json.dumps({"trace": str(path), "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
