"""Device memory in use per GPU over time, and gaps that start while a GPU is near full.

Definitions (docs/metrics/memory.md):

* **In use** on a GPU at instant t = the bytes of device memory (kinds Device, Array,
  Device Static) allocated minus freed by the profiled processes up to t, from
  ``CUDA_GPU_MEMORY_USAGE_EVENTS`` (``nsys profile --cuda-memory-usage=true``). It
  counts from 0 at the first event: memory allocated before the capture began, and
  other processes' memory, is not seen, so it is a **lower bound** of what the GPU
  holds. A caching allocator (PyTorch, vLLM's KV cache) shows what it reserved from
  CUDA, not what its tensors use — for a KV cache that is the pool it admits requests
  into.
* ``capacity_bytes`` = ``TARGET_INFO_GPU.totalMemory``. Over the GPU's window:
  ``peak_bytes`` (and ``peak_ns``, when it was first reached), ``peak_share`` =
  peak / capacity, ``mean_share`` (time-weighted), ``near_full_share`` = time with in
  use ≥ :data:`NEAR_FULL_SHARE` of capacity / window.
* **Gaps near full**: gaps (``gaps.gaps``) that *start* while in use ≥
  :data:`NEAR_FULL_SHARE` of capacity: ``near_full_gaps``, ``near_full_gap_ns``,
  ``near_full_gap_share`` (of the GPU's gap time). A scheduler that cannot admit a
  request into a full KV cache leaves the GPU idle exactly there.
* ``series``: per GPU, in use sampled into at most :data:`SERIES_BINS` bins of its
  window (the maximum in each bin), for the chart.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from nsysan.interval_arrays import rows_by_unit

__all__ = ["NEAR_FULL_SHARE", "SERIES_BINS", "MemoryResult", "measure_memory"]

NEAR_FULL_SHARE = 0.9
SERIES_BINS = 200

_PER_GPU = {
    "gpu": pl.Int32,
    "events": pl.Int64,
    "capacity_bytes": pl.Int64,
    "start_bytes": pl.Int64,
    "end_bytes": pl.Int64,
    "peak_bytes": pl.Int64,
    "peak_ns": pl.Int64,
    "peak_share": pl.Float64,
    "mean_share": pl.Float64,
    "near_full_ns": pl.Int64,
    "near_full_share": pl.Float64,
    "gap_count": pl.Int64,
    "near_full_gaps": pl.Int64,
    "near_full_gap_ns": pl.Int64,
    "near_full_gap_share": pl.Float64,
}
_SERIES = {"gpu": pl.Int32, "bin_start_ns": pl.Int64, "in_use_bytes": pl.Int64}


@dataclass(frozen=True)
class MemoryResult:
    """``per_gpu`` (columns of ``_PER_GPU``, see the module doc) and ``series``
    (``gpu, bin_start_ns, in_use_bytes``)."""

    per_gpu: pl.DataFrame
    series: pl.DataFrame


def measure_memory(
    usage: pl.DataFrame,
    gpus: pl.DataFrame,
    windows: pl.DataFrame,
    gaps: pl.DataFrame,
) -> MemoryResult:
    """In use per GPU from allocation events (``usage`` must have rows)."""
    events = usage.filter(pl.col("gpu").is_not_null()).sort("gpu", "time_ns", maintain_order=True)
    capacity = {
        int(g): (int(c) if c is not None and c > 0 else None)
        for g, c in gpus.select("gpu", "total_memory_bytes").iter_rows()
    }
    ev_gpu = events["gpu"].to_numpy()
    ev_t = events["time_ns"].to_numpy().astype(np.int64)
    ev_d = events["bytes_delta"].to_numpy().astype(np.int64)
    gp = gaps.sort("gpu", "start_ns")
    gp_gpu = gp["gpu"].to_numpy()
    gp_s = gp["start_ns"].to_numpy().astype(np.int64)
    gp_d = gp["duration_ns"].to_numpy().astype(np.int64)
    w = windows.sort("gpu")
    wanted = [int(g) for g in w["gpu"].to_list()]
    ev_rows = rows_by_unit(ev_gpu, wanted)
    gap_rows = rows_by_unit(gp_gpu, wanted)
    rows, series = [], []
    for g, lo, hi in w.select("gpu", "window_start_ns", "window_end_ns").iter_rows():
        t, d = ev_t[ev_rows[g]], ev_d[ev_rows[g]]
        if t.size == 0:
            continue
        level = np.cumsum(d)
        cap = capacity.get(int(g))

        def at(x: np.ndarray | int, t: np.ndarray = t, level: np.ndarray = level) -> np.ndarray:
            i = np.searchsorted(t, x, side="right") - 1
            return np.where(i >= 0, level[np.clip(i, 0, None)], 0)

        start_level = int(at(lo))
        inside = (t > lo) & (t <= hi)
        # Piecewise-constant in use over [lo, hi): the level at lo, then each event's.
        seg_t = np.concatenate(([lo], t[inside]))
        seg_v = np.concatenate(([start_level], level[inside]))
        seg_end = np.concatenate((seg_t[1:], [hi]))
        seg_len = np.clip(seg_end - seg_t, 0, None)
        peak_i = int(np.argmax(seg_v))
        window = hi - lo
        near_ns = None
        if cap:
            near_ns = int(seg_len[seg_v >= NEAR_FULL_SHARE * cap].sum())
        gs, gd = gp_s[gap_rows[g]], gp_d[gap_rows[g]]
        near_gaps = near_gap_ns = None
        if cap:
            full = at(gs) >= NEAR_FULL_SHARE * cap
            near_gaps, near_gap_ns = int(full.sum()), int(gd[full].sum())
        gap_ns = int(gd.sum())
        rows.append(
            (
                int(g), int(t.size), cap, start_level, int(at(hi)), int(seg_v[peak_i]), int(seg_t[peak_i]),
                seg_v[peak_i] / cap if cap else None,
                float(np.sum(seg_v * seg_len)) / window / cap if cap and window > 0 else None,
                near_ns, near_ns / window if near_ns is not None and window > 0 else None,
                int(gs.size), near_gaps, near_gap_ns,
                near_gap_ns / gap_ns if near_gap_ns is not None and gap_ns > 0 else None,
            )
        )  # fmt: skip
        series.extend(_binned(int(g), lo, hi, seg_t, seg_v))
    return MemoryResult(
        per_gpu=pl.DataFrame(rows, schema=_PER_GPU, orient="row"),
        series=pl.DataFrame(series, schema=_SERIES, orient="row"),
    )


def _binned(gpu: int, lo: int, hi: int, seg_t: np.ndarray, seg_v: np.ndarray) -> list[tuple]:  # type: ignore[type-arg]
    """The largest in-use level in each of at most SERIES_BINS equal bins of [lo, hi)."""
    if hi <= lo:
        return []
    edges = np.linspace(lo, hi, SERIES_BINS + 1).astype(np.int64)
    # Level at each bin start, then the maximum of the levels set inside the bin.
    first = np.searchsorted(seg_t, edges[:-1], side="right") - 1
    best = seg_v[np.clip(first, 0, None)].copy()
    which = np.searchsorted(edges, seg_t, side="right") - 1
    ok = (which >= 0) & (which < SERIES_BINS)
    np.maximum.at(best, which[ok], seg_v[ok])
    return [(gpu, int(s), int(v)) for s, v in zip(edges[:-1], best, strict=True)]
