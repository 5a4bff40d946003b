"""Whole commands on the 8-GPU workload of ../shared/bench/scale8.py: wall time and peak RSS.

Every event table of the source's steady state is replicated with its kernels (CUDA
runtime, NVTX, CUPTI sync, copies, MPI, synthesized OS runtime), over 4 processes and 8
GPUs, so this measures what a user's export costs, not a kernels-only file.

    python benchmarks/command_bench.py --kernels 1000000 --rounds 3
    python benchmarks/command_bench.py --kernels 5000000 --rounds 3
    python benchmarks/command_bench.py --kernels 20000000 --rounds 1 --rss-cap-gb 18
    python benchmarks/command_bench.py --kernels 5000000 --rounds 5 --only info,nsys

Rounds are interleaved (floor, nsys stats, info, analyze --json, report, then again), so
a slow spell of a shared machine hits every command alike; compare ratios from one run.
Each command runs in its own process; its peak RSS comes from ``os.wait4``. The floor
is the ``sqlite3`` CLI's GROUP BY deviceId over the kernel table (Python's sqlite3 when
the CLI is absent). ``nsys stats -r cuda_gpu_kern_sum`` (``gpukernsum`` before 2023) runs on a scratch copy (it
writes into the file) when ``nsys`` is on PATH. Traces are built once in ``--scratch``.

With ``--baseline DIR`` (a checkout of an earlier commit, e.g. ``git worktree add DIR
REV``), that version's ``report`` and ``analyze --json`` (no cache) run in the same
rounds: before and after figures from one interleaved run (its ``report`` also as a
first run and reading the cache, in a cache folder of its own).

``analyze`` and ``report`` run three ways: with ``--no-cache`` (every run reads SQLite),
as a first run that fills nsysan's table cache (emptied before it), and reading that
cache (docs/architecture.md, "Table cache"); the cache lives in the scratch folder.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
SOURCE = SHARED / "traces" / "T039-gpu-poisson-solver" / "trace.sqlite"
FLOOR_SQL = "SELECT deviceId, COUNT(*), SUM(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY 1"


def build(kernels: int, scratch: Path) -> Path:
    out = scratch / f"t8-k{kernels // 1_000_000}M.sqlite" if kernels >= 1_000_000 else None
    out = out or scratch / f"t8-k{kernels}.sqlite"
    if not out.exists():
        scratch.mkdir(parents=True, exist_ok=True)
        script = SHARED / "bench" / "scale8.py"
        subprocess.run(
            [sys.executable, str(script), str(SOURCE), str(out), "--kernels", str(kernels)],
            check=True,
        )
    return out


def _rss_gb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1e6
    except OSError:
        pass
    return 0.0


def run(
    argv: list[str], rss_cap_gb: float | None = None, cwd: Path | None = None
) -> tuple[float, float, int]:
    """Wall seconds, peak RSS (GB) and exit status of one command.

    With ``rss_cap_gb``, a command whose resident memory passes the cap is killed
    (exit status -9) rather than left to push the machine into swap or the OOM killer.
    """
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd)
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG if rss_cap_gb else 0)
        if pid:
            break
        if rss_cap_gb and _rss_gb(proc.pid) > rss_cap_gb:
            proc.kill()
        time.sleep(0.1)
    wall = time.perf_counter() - start
    if proc.stderr is not None:
        proc.stderr.close()
    return wall, usage.ru_maxrss / 1e6, os.waitstatus_to_exitcode(status)


def _kernel_summary_report(nsys: str) -> str | None:
    """The kernel summary's name in this nsys: ``cuda_gpu_kern_sum`` (2023+) or ``gpukernsum``."""
    listing = subprocess.run(
        [nsys, "stats", "--help-reports"], capture_output=True, text=True, check=False
    ).stdout
    for name in ("cuda_gpu_kern_sum", "gpukernsum"):
        if f"{name}[" in listing or f"{name} " in listing:
            return name
    return None


def commands(trace: Path, out: Path, baseline: Path | None) -> dict[str, list[str] | None]:
    nsysan = [sys.executable, "-m", "nsysan"]
    # The earlier version's package first on the path: its code, this environment.
    before = ["env", f"PYTHONPATH={baseline}", *nsysan] if baseline else None
    before_cached = (
        ["env", f"PYTHONPATH={baseline}", f"NSYSAN_CACHE_DIR={out / BASE_CACHE}", *nsysan]
        if baseline
        else None
    )
    sqlite = shutil.which("sqlite3")
    floor = (
        [sqlite, "-readonly", str(trace), FLOOR_SQL]
        if sqlite
        else [
            sys.executable,
            "-c",
            f"import sqlite3;sqlite3.connect({str(trace)!r}).execute({FLOOR_SQL!r}).fetchall()",
        ]
    )
    nsys = shutil.which("nsys")
    kern_sum = _kernel_summary_report(nsys) if nsys else None
    return {
        "floor (sqlite3 GROUP BY)": floor,
        "nsys stats kernel summary": (
            [
                nsys,
                "stats",
                "-q",
                "--force-overwrite",
                "true",
                "-r",
                kern_sum,
                "-f",
                "csv",
                "-o",
                str(out / "k"),
                str(out / "copy.sqlite"),
            ]
            if nsys and kern_sum
            else None
        ),
        "nsysan info": [*nsysan, "info", str(trace)],
        "nsysan info --exact": [*nsysan, "info", "--exact", str(trace)],
        "nsysan analyze --json, no cache": [
            *nsysan,
            "--no-cache",
            "analyze",
            str(trace),
            "-o",
            str(out / "a.json"),
        ],
        "nsysan report, no cache": [
            *nsysan,
            "--no-cache",
            "report",
            str(trace),
            "-o",
            str(out / "r.html"),
        ],
        "baseline analyze --json, no cache": (
            [*before, "--no-cache", "analyze", str(trace), "-o", str(out / "b.json")]
            if before
            else None
        ),
        "baseline report, no cache": (
            [*before, "--no-cache", "report", str(trace), "-o", str(out / "b.html")]
            if before
            else None
        ),
        # The cache is emptied before this one: a first run, reading SQLite and
        # writing the table cache; the two after it read the cache.
        FIRST_RUN: [*nsysan, "report", str(trace), "-o", str(out / "r.html")],
        "nsysan report, cached tables": [*nsysan, "report", str(trace), "-o", str(out / "r.html")],
        "nsysan analyze --json, cached tables": [
            *nsysan,
            "analyze",
            str(trace),
            "-o",
            str(out / "a.json"),
        ],
        # The baseline's own cache folder, emptied before its first run likewise.
        BASE_FIRST_RUN: (
            [*before_cached, "report", str(trace), "-o", str(out / "b.html")]
            if before_cached
            else None
        ),
        "baseline report, cached tables": (
            [*before_cached, "report", str(trace), "-o", str(out / "b.html")]
            if before_cached
            else None
        ),
    }


FIRST_RUN = "nsysan report, first run (fills cache)"
BASE_FIRST_RUN = "baseline report, first run (fills cache)"
BASE_CACHE = "cache-baseline"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scratch", type=Path, default=Path("/tmp/nsysan-bench"))
    ap.add_argument(
        "--rss-cap-gb",
        type=float,
        default=None,
        help="kill a command whose resident memory passes this (exit -9 in the table)",
    )
    ap.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="a checkout of an earlier version: its report and analyze run in the same rounds",
    )
    ap.add_argument(
        "--only",
        default=None,
        help="comma-separated words: run only the commands whose name holds one as a "
        "whole word ('nsys' is not 'nsysan'; the floor always runs), e.g. --only info,nsys",
    )
    args = ap.parse_args()
    trace = build(args.kernels, args.scratch)
    results: dict[str, list[tuple[float, float, int]]] = {}
    with tempfile.TemporaryDirectory(dir=args.scratch) as tmp:
        out = Path(tmp)
        # nsysan's table cache goes in the scratch folder, never the user's.
        os.environ["NSYSAN_CACHE_DIR"] = str(out / "cache")
        os.environ.pop("NSYSAN_CACHE", None)
        cmds = commands(trace, out, args.baseline.resolve() if args.baseline else None)
        if args.only:
            words = [w.strip() for w in args.only.split(",") if w.strip()]
            cmds = {
                name: argv
                for name, argv in cmds.items()
                if name.startswith("floor")
                or any(re.search(rf"\b{re.escape(w)}\b", name) for w in words)
            }
        for round_ in range(args.rounds):
            for name, argv in cmds.items():
                if argv is None:
                    continue
                if name.startswith("nsys stats"):
                    shutil.copyfile(trace, out / "copy.sqlite")
                if name == FIRST_RUN:
                    shutil.rmtree(out / "cache", ignore_errors=True)
                if name == BASE_FIRST_RUN:
                    shutil.rmtree(out / BASE_CACHE, ignore_errors=True)
                # Out of the repository: ``python -m`` puts the working directory
                # first on the path, which would shadow the baseline's package.
                results.setdefault(name, []).append(run(argv, args.rss_cap_gb, cwd=out))
            print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr)
    floor = statistics.median(w for w, _, _ in results["floor (sqlite3 GROUP BY)"])
    print(f"{trace.name}: {trace.stat().st_size / 2**20:.0f} MiB, {args.rounds} interleaved rounds")
    print(
        f"{'command':40} {'wall median':>12} {'min..max':>16} {'x floor':>8} {'peak RSS':>9} exit"
    )
    for name, runs in results.items():
        walls = [w for w, _, _ in runs]
        median = statistics.median(walls)
        rss = max(r for _, r, _ in runs)
        codes = ",".join(sorted({str(c) for _, _, c in runs}))
        print(
            f"{name:40} {median:11.2f}s {min(walls):7.2f}..{max(walls):6.2f}s "
            f"{median / floor:7.2f}x {rss:7.2f}GB {codes}"
        )
    if not shutil.which("nsys"):
        print("nsys not on PATH: nsys stats not measured")


if __name__ == "__main__":
    main()
