"""`nsysan batch` at scale: many generated traces of mixed sizes plus ../shared/traces.

    python benchmarks/batch_bench.py --count 200 --scratch /tmp/nsysan-batch-bench

1. Generates ``--count`` traces (every scenario in turn, scales 0.05/0.1/0.2/0.3, one
   seed each) into ``SCRATCH/gen`` once.
2. Local run, ``--jobs`` workers: wall time, peak RSS of each worker (``ru_maxrss`` of
   the worker process, reported with each outcome) and of the client.
3. Interrupted run: the CLI on a fresh OUTDIR, SIGTERM once half the traces are done,
   then a re-run: how many were reused, the re-run's wall time, no temporary files left.
4. The same batch on a ``distributed.LocalCluster`` of ``--jobs`` worker processes: wall
   time, per-worker peak RSS, and whether results.csv equals the local run's byte for byte.
5. For scale: peak RSS of ``nsysan analyze`` on the largest trace alone (``os.wait4``).
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared" / "traces"
SCALES = (0.05, 0.1, 0.2, 0.3)


def generate_all(count: int, folder: Path) -> list[Path]:
    from nsysan.simulate import SCENARIOS, generate

    folder.mkdir(parents=True, exist_ok=True)
    names = sorted(SCENARIOS)
    out = []
    for i in range(count):
        name, scale = names[i % len(names)], SCALES[(i // len(names)) % len(SCALES)]
        path = folder / f"g{i:03d}-{name}-s{scale}.sqlite"
        if not path.exists():
            generate(name, path, seed=i, scale=scale)
        out.append(path)
    return out


def mib(kib: int) -> str:
    return f"{kib / 1024:.0f} MiB"


# Runs in a fresh process, so the client's peak RSS is its own (not this script's, which
# generated the traces). Prints wall, the summary, worker peaks and its own peak.
CLIENT = """
import json, resource, sys, time
from pathlib import Path
from nsysan.batch.run import run_batch
from nsysan.settings import Settings
out, jobs, inputs = Path(sys.argv[1]), int(sys.argv[2]), [Path(p) for p in sys.argv[3:]]
start = time.perf_counter()
s = run_batch(inputs, out, settings=Settings(), jobs=jobs, echo=lambda line: None)
print(json.dumps({"wall": time.perf_counter() - start, "text": s.text,
                  "workers": sorted(s.peak_rss_kib.values()),
                  "client": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""
# A small go-between process starts the measured command, so the child's ru_maxrss is
# not inflated by the pages a fork of this (large) script would share before exec.
MEASURE = "import os,subprocess,sys; p=subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL); print(os.wait4(p.pid, 0)[2].ru_maxrss)"


def local_run(inputs: list[Path], out: Path, jobs: int) -> dict[str, object]:
    shutil.rmtree(out, ignore_errors=True)
    proc = subprocess.run(
        [sys.executable, "-c", CLIENT, str(out), str(jobs), *map(str, inputs)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def dask_run(inputs: list[Path], out: Path, jobs: int) -> tuple[float, float, object]:
    from distributed import LocalCluster

    from nsysan.batch.run import run_batch
    from nsysan.settings import Settings

    logging.getLogger("distributed").setLevel(logging.CRITICAL)
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    with LocalCluster(
        n_workers=jobs, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        up = time.perf_counter() - start
        summary = run_batch(
            inputs,
            out,
            settings=Settings(),
            dask_address=cluster.scheduler_address,
            echo=lambda s: None,
        )
        wall = time.perf_counter() - start
    return wall, up, summary


def interrupted_run(inputs: list[Path], out: Path, jobs: int, total: int) -> dict[str, object]:
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "nsysan", "batch", *map(str, inputs), "-o", str(out)]
    cmd += ["--jobs", str(jobs)]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.startswith(f"[{total // 2}/"):
            proc.send_signal(signal.SIGTERM)
            break
    code = proc.wait()
    killed_after = time.perf_counter() - start
    time.sleep(1)
    temps = list(out.rglob(".*.tmp"))
    done = len(list((out / ".nsysan-batch").glob("*.json")))
    start = time.perf_counter()
    again = subprocess.run(cmd, capture_output=True, text=True)
    return {
        "exit_on_sigterm": code,
        "killed_after_s": killed_after,
        "done_at_kill": done,
        "temp_files_left": len(temps),
        "rerun_s": time.perf_counter() - start,
        "rerun_exit": again.returncode,
        "rerun_summary": again.stdout.strip(),
    }


def single_trace_rss(paths: list[Path], scratch: Path) -> int:
    cmd = [sys.executable, "-m", "nsysan", "-q", "report", *map(str, paths)]
    cmd += ["-o", str(scratch / "single.html")]
    out = subprocess.run([sys.executable, "-c", MEASURE, *cmd], capture_output=True, text=True)
    return int(out.stdout.strip())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--scratch", type=Path, default=Path("/tmp/nsysan-batch-bench"))
    ap.add_argument("--no-shared", action="store_true")
    args = ap.parse_args()

    t0 = time.perf_counter()
    gen = generate_all(args.count, args.scratch / "gen")
    gen_s = time.perf_counter() - t0
    size = sum(p.stat().st_size for p in gen)
    inputs = [args.scratch / "gen"] + ([] if args.no_shared or not SHARED.is_dir() else [SHARED])
    print(f"generated {len(gen)} traces ({size / 2**20:.0f} MiB) in {gen_s:.0f} s")

    local = local_run(inputs, args.scratch / "out-local", args.jobs)
    wall = float(local["wall"])  # type: ignore[arg-type]
    total = int(str(local["text"]).split()[0])
    print(
        f"local --jobs {args.jobs}: {local['text']} in {wall:.0f} s "
        f"({wall / max(total, 1):.2f} s/trace); worker peak RSS "
        f"{', '.join(mib(r) for r in local['workers'])}; client {mib(local['client'])}"  # type: ignore[union-attr]
    )
    cori = sorted((SHARED / "cori-8rank-a").glob("report*.sqlite"))
    for label, paths in (
        ("cori-8rank-a, 8 ranks", cori),
        ("largest generated trace", [max(gen, key=lambda p: p.stat().st_size)]),
    ):
        if paths:
            print(
                f"nsysan report alone on the {label}: {mib(single_trace_rss(paths, args.scratch))}"
            )

    result = interrupted_run(inputs, args.scratch / "out-kill", args.jobs, total)
    print(f"SIGTERM at 50%: {result}")

    wall_d, up, dsum = dask_run(inputs, args.scratch / "out-dask", args.jobs)
    same = (args.scratch / "out-dask" / "results.csv").read_bytes() == (
        args.scratch / "out-local" / "results.csv"
    ).read_bytes()
    drss = sorted(dsum.peak_rss_kib.values())  # type: ignore[attr-defined]
    print(
        f"LocalCluster {args.jobs} workers: {dsum.text} in {wall_d:.0f} s (cluster start {up:.1f} s); "  # type: ignore[attr-defined]
        f"worker peak RSS {', '.join(mib(r) for r in drss)}; results.csv equal to local: {same}"
    )


if __name__ == "__main__":
    main()
