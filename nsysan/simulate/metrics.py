"""GPU-metrics samples (GPU_METRICS) derived from the kernels and copies that ran.

Each sample covers the ``SAMPLE_PERIOD_NS`` before its timestamp. Activity metrics are
the time-weighted profile of the kernels inside the period (a kernel's ``sm_active``,
``tensor_pct``, ``dram_pct``), so they agree with the timeline; clocks come from the
scenario. A scenario may replace "GR Active" with what a dashboard showed (the case
study does, see docs/scenarios.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from nsysan.simulate import schema
from nsysan.simulate.trace import TraceBuilder

SAMPLE_PERIOD_NS = 10_000_000  # --gpu-metrics-frequency=100
SYS_CLOCK_RATIO = 0.978  # SYS clock / GPC clock under load on A100
DRAM_READ_SHARE = 0.8
DRAM_WRITE_SHARE = 0.3
WARPS_PER_ACTIVE_SM_PCT = 55.0
PCIE_PCT_PER_COPY = 35.0

ClockFn = Callable[[int, int], int]  # (gpu, t ns) -> GPC clock, Hz
DashboardFn = Callable[[int, int, float], float]  # (gpu, t ns, busy share) -> GR Active %

_METRIC_ID = {name: i for i, name in enumerate(schema.GPU_METRIC_NAMES)}


def type_id(gpu: int) -> int:
    """GPU_METRICS.typeId of one GPU's samples."""
    return schema.GPU_METRICS_TYPE_BASE + gpu


def _spread(bins: list[float], origin: int, start: int, end: int, weight: float) -> None:
    """Add ``weight`` x the overlap of [start, end) with each period to ``bins``."""
    first = max(0, (start - origin) // SAMPLE_PERIOD_NS)
    last = min(len(bins) - 1, (end - 1 - origin) // SAMPLE_PERIOD_NS)
    for j in range(first, last + 1):
        lo = origin + j * SAMPLE_PERIOD_NS
        overlap = min(end, lo + SAMPLE_PERIOD_NS) - max(start, lo)
        if overlap > 0:
            bins[j] += weight * overlap


def _pct(value: float) -> int:
    return max(0, min(100, round(value)))


def add_gpu_metrics(
    b: TraceBuilder,
    gpus: Sequence[int],
    start: int,
    end: int,
    clock: ClockFn,
    *,
    nccl_pcie_pct: float = 2.0,
    dashboard: DashboardFn | None = None,
) -> None:
    """Sample every GA100 metric of ``gpus`` from ``start`` to ``end``.

    ``nccl_pcie_pct`` is the PCIe throughput (% of peak) while an NCCL kernel runs:
    high when collectives cross PCIe, small over NVLink.
    """
    n = max(1, -(-(end - start) // SAMPLE_PERIOD_NS))
    period = float(SAMPLE_PERIOD_NS)
    series: dict[int, dict[str, list[float]]] = {}
    for gpu in gpus:
        b.rows["TARGET_INFO_GPU_METRICS"].extend(
            (type_id(gpu), type_id(gpu), "", i, name)
            for i, name in enumerate(schema.GPU_METRIC_NAMES)
        )
        acc = {key: [0.0] * n for key in ("busy", "sm", "issue", "tensor", "dram", "pcie")}
        runs = sorted((r for r in b.kernel_runs if r.gpu == gpu), key=lambda r: r.start)
        merged_end = -1
        for run in runs:
            kern = run.kernel
            s = max(run.start, merged_end)
            if run.end > s:
                _spread(acc["busy"], start, s, run.end, 1.0)
            merged_end = max(merged_end, run.end)
            _spread(acc["sm"], start, run.start, run.end, kern.sm_active)
            _spread(acc["issue"], start, run.start, run.end, kern.sm_pct / 100 * kern.sm_active)
            _spread(acc["tensor"], start, run.start, run.end, kern.tensor_pct / 100)
            _spread(acc["dram"], start, run.start, run.end, kern.dram_pct / 100)
            if kern.nccl:
                _spread(acc["pcie"], start, run.start, run.end, nccl_pcie_pct / 100)
        for copy in b.copy_runs:
            if copy.gpu == gpu:
                _spread(acc["pcie"], start, copy.start, copy.end, PCIE_PCT_PER_COPY / 100)
        series[gpu] = acc

    rows = b.rows["GPU_METRICS"]
    for j in range(n):
        t = start + (j + 1) * SAMPLE_PERIOD_NS
        for gpu in gpus:
            acc = series[gpu]
            busy = acc["busy"][j] / period
            gr = dashboard(gpu, t, busy) if dashboard else busy * 100
            sm = acc["sm"][j] / period * 100
            gpc = clock(gpu, t)
            dram = acc["dram"][j] / period * 100
            pcie = acc["pcie"][j] / period * 100
            values = {
                "PCIe TX Throughput": _pct(pcie * 0.9),
                "GPC Clock Frequency": gpc,
                "Unallocated Warps in Active SMs": _pct(sm * 0.3),
                "SYS Clock Frequency": round(gpc * SYS_CLOCK_RATIO),
                "DRAM Read Throughput": _pct(dram * DRAM_READ_SHARE),
                "GR Active": _pct(gr),
                "DRAM Write Throughput": _pct(dram * DRAM_WRITE_SHARE),
                "SM Active": _pct(sm),
                "PCIe RX Throughput": _pct(pcie),
                "SM Issue": _pct(acc["issue"][j] / period * 100),
                "Tensor Active": _pct(acc["tensor"][j] / period * 100),
                "Vertex/Tess/Geometry Warps in Flight": 0,
                "Pixel Warps in Flight": 0,
                "Compute Warps in Flight": _pct(sm * WARPS_PER_ACTIVE_SM_PCT / 100),
            }
            tid = type_id(gpu)
            rows.extend((t, tid, _METRIC_ID[name], value) for name, value in values.items())
    b.last_metric_ns = max(b.last_metric_ns, start + n * SAMPLE_PERIOD_NS)
