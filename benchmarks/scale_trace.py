"""Build a large, realistic Nsight Systems export by scaling a real one.

The source export is opened read-only and copied (SQLite backup API) to a temporary
file next to the output; only that copy is modified, then renamed into place.
The kernel table (``CUPTI_ACTIVITY_KIND_KERNEL``) is replicated period after period,
each copy shifted in time by the span of the source's kernels and launches plus a gap,
until it holds exactly ``--kernels`` rows. The CUDA runtime rows that launched those
kernels (``CUPTI_ACTIVITY_KIND_RUNTIME`` rows sharing a correlationId with a kernel of
the same process) are replicated with them, and each copy gets fresh correlationIds
(``id + period * stride``, ``stride`` above every correlationId in the file), so the
kernel <-> launch join still finds exactly one launch per replicated kernel.
``gridId`` is offset the same way. ``ANALYSIS_DETAILS`` is stretched to the new end
so the captured window still covers every event. Every other table is copied as is.

All replication is done with ``INSERT ... SELECT`` over a small table of period
numbers; no Python loop over rows.

    python benchmarks/scale_trace.py SRC.sqlite OUT.sqlite --kernels 5000000
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import time
from dataclasses import dataclass
from pathlib import Path

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = (REPO_ROOT.parent / "shared").resolve()
DEFAULT_SOURCE = SHARED / "traces" / "T039-gpu-poisson-solver" / "trace.sqlite"
DEFAULT_CACHE = Path("/tmp/nsysan-bench")


@dataclass
class ScaleResult:
    """What :func:`scale_trace` produced."""

    path: Path
    kernels: int
    launches: int
    periods: int
    period_ns: int
    seconds: float


def default_output(source: Path, kernels: int, cache_dir: Path = DEFAULT_CACHE) -> Path:
    """Cached output path for ``source`` scaled to ``kernels`` rows."""
    stem = source.parent.name if source.name == "trace.sqlite" else source.stem
    return cache_dir / f"{stem}-k{kernels}.sqlite"


def _ro_uri(path: Path) -> str:
    """Read-only SQLite URI for ``path``."""
    return f"file:{path.resolve()}?mode=ro"


def _check_output(source: Path, out: Path) -> None:
    """Refuse to write into the repository, the shared folder, or over the source."""
    out_r = out.resolve()
    if out_r == source.resolve():
        raise SystemExit("refusing to overwrite the source export")
    for forbidden in (REPO_ROOT, SHARED):
        if out_r == forbidden or forbidden in out_r.parents:
            raise SystemExit(f"refusing to write {out_r}: inside {forbidden} (use /tmp)")


def _columns(con: sqlite3.Connection, table: str) -> list[str]:
    """Column names of ``table`` in declaration order."""
    return [row[1] for row in con.execute(f'PRAGMA main.table_info("{table}")')]


def _tables_with(con: sqlite3.Connection, column: str) -> list[str]:
    """Tables of the main schema that have a column named ``column``."""
    names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    return [t for t in names if column in _columns(con, t)]


def _copy(source: Path, dest: Path) -> None:
    """Copy ``source`` (opened read-only) to ``dest`` with the backup API."""
    src = sqlite3.connect(_ro_uri(source), uri=True)
    dst = sqlite3.connect(dest)
    try:
        src.backup(dst, pages=0)
    finally:
        dst.close()
        src.close()


def scale_trace(
    source: Path, out: Path, kernels: int, gap_ns: int = 1_000_000, verbose: bool = True
) -> ScaleResult:
    """Write ``out``: ``source`` with its kernel table replicated to ``kernels`` rows."""
    t0 = time.perf_counter()
    _check_output(source, out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".part")
    tmp.unlink(missing_ok=True)
    _copy(source, tmp)

    con = sqlite3.connect(tmp, isolation_level=None)
    try:
        con.execute("PRAGMA journal_mode=OFF")
        con.execute("PRAGMA synchronous=OFF")
        con.execute("PRAGMA cache_size=-262144")
        con.execute("PRAGMA temp_store=MEMORY")
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if KERNEL not in tables or RUNTIME not in tables:
            raise SystemExit(f"{source}: needs both {KERNEL} and {RUNTIME}")
        base = con.execute(f"SELECT count(*) FROM {KERNEL}").fetchone()[0]
        if base == 0:
            raise SystemExit(f"{source}: {KERNEL} is empty")
        if kernels < base:
            raise SystemExit(f"--kernels {kernels} is below the source's {base} kernels")

        con.execute("BEGIN")
        # Source kernels numbered in time order, and the runtime rows that launched them
        # (same process, same correlationId), each tagged with its first kernel's number so
        # a partial last period takes exactly the launches of the kernels it takes.
        con.execute(
            f"CREATE TEMP TABLE base_k AS SELECT row_number() OVER (ORDER BY start, rowid) - 1"
            f" AS _rn, * FROM main.{KERNEL} ORDER BY _rn"
        )
        con.execute("CREATE INDEX temp.base_k_corr ON base_k(correlationId)")
        con.execute(
            f"CREATE TEMP TABLE base_r AS SELECT * FROM ("
            f" SELECT (SELECT min(k._rn) FROM temp.base_k k"
            f"         WHERE k.correlationId = r.correlationId"
            f"           AND (k.globalPid IS NULL OR r.globalTid IS NULL"
            f"                OR k.globalPid = (r.globalTid >> 24) << 24)) AS _rn, r.*"
            f" FROM main.{RUNTIME} r WHERE r.correlationId IS NOT NULL)"
            f" WHERE _rn IS NOT NULL ORDER BY start, _rn"
        )
        launches_base = con.execute("SELECT count(*) FROM temp.base_r").fetchone()[0]

        # Period: whole span of the replicated rows plus a gap, so copies never overlap.
        lo, hi = con.execute(
            "SELECT min(s), max(e) FROM (SELECT min(start) s, max(end) e FROM temp.base_k"
            " UNION ALL SELECT min(start), max(end) FROM temp.base_r)"
        ).fetchone()
        period = int(hi - lo + gap_ns)
        stride = 1 + max(
            con.execute(f'SELECT coalesce(max(correlationId), 0) FROM main."{t}"').fetchone()[0]
            for t in _tables_with(con, "correlationId")
        )
        grid_stride = (
            1 + con.execute(f"SELECT coalesce(max(gridId), 0) FROM {KERNEL}").fetchone()[0]
        )

        copies = -(-(kernels - base) // base)  # ceil
        con.execute("CREATE TEMP TABLE periods(n INTEGER PRIMARY KEY)")
        con.execute(
            "WITH RECURSIVE p(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM p WHERE n < ?)"
            " INSERT INTO temp.periods SELECT n FROM p",
            (copies,),
        )

        shifted = {
            "start": "x.start + p.n * :period",
            "end": "x.end + p.n * :period",
            "correlationId": "x.correlationId + p.n * :stride",
            "gridId": "x.gridId + p.n * :grid_stride",
        }
        params = {
            "period": period,
            "stride": stride,
            "grid_stride": grid_stride,
            "base": base,
            "limit": kernels,
        }
        added: dict[str, int] = {}
        for table, src in ((KERNEL, "temp.base_k"), (RUNTIME, "temp.base_r")):
            cols = _columns(con, table)
            select = ", ".join(shifted.get(c, f'x."{c}"') for c in cols)
            quoted = ", ".join(f'"{c}"' for c in cols)
            # CROSS JOIN keeps periods as the outer loop: rows go in period by period, in
            # time order within a period, like a real export.
            added[table] = con.execute(
                f'INSERT INTO main."{table}" ({quoted}) SELECT {select}'
                f" FROM temp.periods p CROSS JOIN {src} x"
                f" WHERE p.n * :base + x._rn < :limit",
                params,
            ).rowcount
            if verbose:
                print(f"  {table}: +{added[table]:,} rows", file=sys.stderr)

        new_end = con.execute(
            f'SELECT max((SELECT max("end") FROM {KERNEL}), (SELECT max("end") FROM {RUNTIME}))'
        ).fetchone()[0]
        if "ANALYSIS_DETAILS" in tables:
            con.execute(
                "UPDATE ANALYSIS_DETAILS SET stopTime = max(stopTime, ?),"
                " duration = max(stopTime, ?) - startTime",
                (new_end, new_end),
            )
        for t in ("base_k", "base_r", "periods"):
            con.execute(f"DROP TABLE temp.{t}")
        con.execute("COMMIT")
    except BaseException:
        con.close()
        tmp.unlink(missing_ok=True)
        raise
    con.close()
    os.replace(tmp, out)
    return ScaleResult(
        out,
        base + added[KERNEL],
        launches_base + added[RUNTIME],
        copies,
        period,
        time.perf_counter() - t0,
    )


def verify(path: Path) -> dict[str, int]:
    """Counts that show the kernel <-> launch join still works."""
    con = sqlite3.connect(_ro_uri(path), uri=True)
    try:
        q = lambda s: con.execute(s).fetchone()[0]  # noqa: E731
        return {
            "kernels": q(f"SELECT count(*) FROM {KERNEL}"),
            "distinct_pid_corr": q(
                f"SELECT count(*) FROM (SELECT DISTINCT globalPid, correlationId FROM {KERNEL})"
            ),
            # A plain join lets SQLite build an automatic index; EXISTS would not.
            "kernel_launch_pairs": q(
                f"SELECT count(*) FROM {KERNEL} k JOIN {RUNTIME} r"
                f" ON r.correlationId = k.correlationId"
                f" AND (r.globalTid >> 24) << 24 = k.globalPid"
            ),
        }
    finally:
        con.close()


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "source",
        nargs="?",
        type=Path,
        default=DEFAULT_SOURCE,
        help=f"real export to scale (read-only; default {DEFAULT_SOURCE})",
    )
    ap.add_argument(
        "out",
        nargs="?",
        type=Path,
        default=None,
        help=f"output file (default {DEFAULT_CACHE}/<name>-k<N>.sqlite)",
    )
    ap.add_argument("--kernels", type=int, default=1_000_000, help="kernel rows wanted")
    ap.add_argument(
        "--gap-ns", type=int, default=1_000_000, help="idle gap between two replicated periods (ns)"
    )
    ap.add_argument(
        "--verify",
        action="store_true",
        help="check afterwards that every kernel still finds its launch",
    )
    args = ap.parse_args(argv)

    out = args.out or default_output(args.source, args.kernels)
    res = scale_trace(args.source, out, args.kernels, args.gap_ns)
    size_mb = res.path.stat().st_size / 2**20
    print(
        f"{res.path}: {res.kernels:,} kernels, {res.launches:,} launch rows, "
        f"{res.periods} extra periods of {res.period_ns / 1e9:.3f} s, "
        f"{size_mb:,.0f} MiB, built in {res.seconds:.1f} s"
    )
    if args.verify:
        print(verify(res.path))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
