"""An Nsight Compute ``--csv --page raw`` export of some launches, as ncu 2024.2 writes it.

Row 1 is the header, row 2 the units (blank for the identification columns), then one
row per profiled launch; every field is quoted. Metric columns come in alphabetical
order, as ncu prints them. Kernel names are the nsys demangled names of the same
kernels, so the two files join on the name.
"""

from __future__ import annotations

import csv
import io
import random
from collections.abc import Callable, Sequence
from pathlib import Path

from nsysan.simulate.hardware import Gpu
from nsysan.simulate.kernels import Kernel
from nsysan.simulate.trace import CONTEXT_ID, DEFAULT_STREAM, KernelRun
from nsysan.simulate.writer import write_text_atomic

ID_COLUMNS = (
    "ID",
    "Process ID",
    "Process Name",
    "Host Name",
    "Kernel Name",
    "Context",
    "Stream",
    "Block Size",
    "Grid Size",
    "Device",
    "CC",
)
HOST_NAME = "127.0.0.1"
PROCESS_NAME = "python3"
# ncu serializes and replays each launch; its duration differs a little from the trace's.
REPLAY_JITTER = 0.02
PCT_NOISE = 1.5
MEGABYTE = 1_000_000

Metric = Callable[[Kernel, int, Gpu, random.Random], str]


def _pct(value: float, rng: random.Random) -> str:
    return f"{max(0.0, min(100.0, value + rng.uniform(-PCT_NOISE, PCT_NOISE))):.6f}"


def _dram_mb(kernel: Kernel, duration_ns: int, gpu: Gpu, share: float) -> str:
    nbytes = kernel.dram_pct / 100 * gpu.model.memory_bandwidth * duration_ns / 1e9 * share
    return f"{nbytes / MEGABYTE:.6f}"


# (name, unit, value) in the order ncu prints them.
METRICS: tuple[tuple[str, str, Metric], ...] = (
    ("device__attribute_display_name", "", lambda _k, _d, g, _r: g.model.name),
    ("dram__bytes.sum", "Mbyte", lambda kern, d, g, _r: _dram_mb(kern, d, g, 1.0)),
    ("dram__bytes_read.sum", "Mbyte", lambda kern, d, g, _r: _dram_mb(kern, d, g, 0.75)),
    (
        "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
        "%",
        lambda kern, _d, _g, r: _pct(kern.mem_pct, r),
    ),
    (
        "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
        "%",
        lambda kern, _d, _g, r: _pct(kern.dram_pct, r),
    ),
    ("gpu__time_duration.sum", "us", lambda _k, d, _g, _r: f"{d / 1_000:.6f}"),
    ("launch__block_size", "", lambda kern, _d, _g, _r: str(_volume(kern.block))),
    ("launch__grid_size", "", lambda kern, _d, _g, _r: str(_volume(kern.grid))),
    (
        "launch__registers_per_thread",
        "register/thread",
        lambda kern, _d, _g, _r: str(kern.registers),
    ),
    (
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "%",
        lambda kern, _d, _g, r: _pct(kern.sm_pct, r),
    ),
    (
        "sm__warps_active.avg.pct_of_peak_sustained_active",
        "%",
        lambda kern, _d, _g, r: _pct(kern.sm_active * 70, r),
    ),
)


def _volume(dims: tuple[int, int, int]) -> int:
    return dims[0] * dims[1] * dims[2]


def _dims(dims: tuple[int, int, int]) -> str:
    return f"({dims[0]}, {dims[1]}, {dims[2]})"


def render(runs: Sequence[KernelRun], gpus: Sequence[Gpu], pid: int, rng: random.Random) -> str:
    """The CSV text for ``runs`` (profiled in a separate run of process ``pid``)."""
    by_index = {g.index: g for g in gpus}
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    writer.writerow([*ID_COLUMNS, *(name for name, _, _ in METRICS)])
    writer.writerow([""] * len(ID_COLUMNS) + [unit for _, unit, _ in METRICS])
    for i, run in enumerate(runs):
        gpu = by_index[run.gpu]
        kern = run.kernel
        duration = round((run.end - run.start) * rng.lognormvariate(0.0, REPLAY_JITTER))
        ident = [
            str(i), str(pid), PROCESS_NAME, HOST_NAME, kern.demangled, str(CONTEXT_ID),
            str(DEFAULT_STREAM), _dims(kern.block), _dims(kern.grid), str(run.gpu), "8.0",
        ]  # fmt: skip
        writer.writerow(ident + [metric(kern, duration, gpu, rng) for _, _, metric in METRICS])
    return out.getvalue()


def write_ncu_csv(
    path: Path, runs: Sequence[KernelRun], gpus: Sequence[Gpu], pid: int, rng: random.Random
) -> None:
    """Write :func:`render`'s CSV to ``path`` atomically."""
    write_text_atomic(path, render(runs, gpus, pid, rng))
