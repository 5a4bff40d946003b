"""Time every analysis of nsysan on a big export against a plain SQLite scan.

The target (issue: timeline analytics) is that all analyses together take at most
2x the time SQLite alone needs to scan the kernel table (the sqlite3 CLI's GROUP BY over
start/end/deviceId). Ingest is timed separately. All figures come from one run, so the
ratios compare like with like on a shared machine.

    python benchmarks/analysis_bench.py [--kernels 5000000] [--trace PATH] [--repeat 3]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH_DIR = Path("/tmp/nsysan-bench")
SCAN_SQL = (
    "SELECT deviceId, count(*), min(start), max(end), sum(end - start) "
    "FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY deviceId;"
)


def best_of(repeat: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
        FIRST.setdefault(fn, time.perf_counter() - t0)
    return best, result


# The first run of each timed function: it also pays for warming the allocator
# (and, on a fresh install, compiling the host loops once; see docs/architecture.md).
FIRST: dict[Callable[[], Any], float] = {}


def sqlite_scan(path: Path) -> None:
    subprocess.run(["sqlite3", "-readonly", str(path), SCAN_SQL], check=True, capture_output=True)


def timed_analyses(trace: Any) -> dict[str, float]:
    """Each analysis step of nsysan.analysis.analyze, timed on its own."""
    import dataclasses

    from nsysan.analyze.balance import measure_imbalance
    from nsysan.analyze.busy import measure_busy
    from nsysan.analyze.contention import measure_contention
    from nsysan.analyze.dashboard import measure_dashboard
    from nsysan.analyze.gaps import measure_gaps
    from nsysan.analyze.host import attribute_gaps
    from nsysan.analyze.nccl import measure_nccl
    from nsysan.analyze.stagger import measure_stagger
    from nsysan.settings import Settings

    settings = Settings()
    out: dict[str, float] = {}

    def step(name: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        value = fn()
        out[name] = time.perf_counter() - t0
        return value

    busy = step(
        "busy", lambda: measure_busy(trace, dataclasses.replace(settings, busy_mode="kernels"))
    )
    gaps = step("gaps", lambda: measure_gaps(busy.intervals, busy.summary, busy.keys))
    step("stagger", lambda: measure_stagger(gaps.gaps, busy.windows))
    step("imbalance", lambda: measure_imbalance(trace, busy.intervals, busy.windows, settings))
    step("nccl", lambda: measure_nccl(trace.kernels, busy.intervals, busy.windows))
    step("host", lambda: attribute_gaps(trace, gaps.gaps, settings, keys=gaps.keys))
    cont = step(
        "contention",
        lambda: measure_contention(
            trace.gpu_metrics,
            busy.windows,
            settings,
            busy=busy.intervals,
            gpus=trace.gpus,
            capabilities=trace.capabilities,
        ),
    )
    step(
        "dashboard",
        lambda: measure_dashboard(
            trace.kernels, busy.windows, settings, activity=cont.summary if cont.available else None
        ),
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=5_000_000)
    parser.add_argument(
        "--trace", type=Path, help="export to use (default: the scaled T039 in /tmp/nsysan-bench)"
    )
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    path = args.trace or BENCH_DIR / f"T039-gpu-poisson-solver-k{args.kernels}.sqlite"
    if not path.exists():
        subprocess.run(
            [
                sys.executable,
                str(Path(__file__).with_name("scale_trace.py")),
                "--kernels",
                str(args.kernels),
            ],
            check=True,
        )

    from nsysan.analysis import analyze
    from nsysan.ingest import load_trace

    scan_s, _ = best_of(args.repeat, lambda: sqlite_scan(path))
    load_s, trace = best_of(args.repeat, lambda: load_trace([path]))
    run_all = lambda: analyze(trace)  # noqa: E731
    analyze_s, _ = best_of(args.repeat, run_all)
    steps = timed_analyses(trace)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    print(
        f"trace: {path} ({trace.kernels.height:,} kernels, {trace.gpus.height} GPUs, {trace.cuda_api.height:,} CUDA API rows)"
    )
    print(f"{'step':<34}{'best s':>10}{'x sqlite scan':>16}")
    print(f"{'sqlite3 CLI GROUP BY (baseline)':<34}{scan_s:>10.3f}{1.0:>16.2f}")
    print(f"{'nsysan ingest (load_trace)':<34}{load_s:>10.3f}{load_s / scan_s:>16.2f}")
    print(f"{'nsysan all analyses (analyze)':<34}{analyze_s:>10.3f}{analyze_s / scan_s:>16.2f}")
    first_s = FIRST[run_all]
    print(f"{'  (its first run in this process)':<34}{first_s:>10.3f}{first_s / scan_s:>16.2f}")
    for name, seconds in steps.items():
        print(f"{'  ' + name:<34}{seconds:>10.3f}{seconds / scan_s:>16.2f}")
    print(f"peak RSS of this process: {rss_mb:,.0f} MB")


if __name__ == "__main__":
    main()
