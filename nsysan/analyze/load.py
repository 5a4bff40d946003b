"""Load per GPU over time: bursts, and starvation while other GPUs work.

Definitions (docs/metrics/load.md):

* **Load** of a GPU in a time window = the requests that *arrive* there (starts of
  request ranges, docs/metrics/steps.md#requests) when the trace has request ranges,
  else the kernels that start there (``kind`` says which). The span from the earliest
  window start to the latest window end of the GPUs is cut into
  :data:`LOAD_WINDOWS` equal windows: ``windows`` holds the load per (window, GPU).
* **Burst**: a window whose load over all GPUs is at least :data:`BURST_FACTOR` times
  the median window's load (and at least :data:`BURST_MIN_EVENTS`); with kernels as
  the load, only when the median window has some (a start-up is not a burst). Per burst:
  ``top_gpu`` (the GPU that received most of it), ``top_share`` (its share) and the
  ``top_gpu``'s busy share in the window before (was it the emptiest?).
* **Starvation**: a gap of at least :data:`STARVATION_MIN_NS` during which other GPUs
  are busy at least :data:`STARVATION_OTHERS_BUSY` of the time (some other GPU runs a
  kernel) and the feeding thread waits in a blocking OS call (a queue, a condition, a
  lock; host attribution's ``blocking_os``) at least :data:`STARVATION_WAIT_SHARE` of
  it. ``starved`` lists them (longest first); ``per_gpu`` sums them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from nsysan.interval_arrays import merge_arrays, rows_meeting

__all__ = [
    "BURST_FACTOR",
    "BURST_MIN_EVENTS",
    "LOAD_WINDOWS",
    "STARVATION_MIN_NS",
    "STARVATION_OTHERS_BUSY",
    "STARVATION_WAIT_SHARE",
    "HOST_GAP_COLUMNS",
    "LoadResult",
    "measure_load",
]

LOAD_WINDOWS = 50
BURST_FACTOR = 3.0
BURST_MIN_EVENTS = 5
STARVATION_MIN_NS = 5_000_000
STARVATION_OTHERS_BUSY = 0.5
STARVATION_WAIT_SHARE = 0.5

#: The columns of host attribution's per-gap table that :func:`measure_load` reads.
HOST_GAP_COLUMNS = ("gpu", "start_ns", "end_ns", "duration_ns", "blocking_os_ns")


@dataclass(frozen=True)
class LoadResult:
    """``kind`` ("requests" or "kernels"), ``windows`` (``window, start_ns, end_ns, gpu,
    load``), ``bursts`` (``window, start_ns, end_ns, load, median_load, over_median,
    top_gpu, top_share, top_busy_before``), ``starved`` (``gpu, start_ns, end_ns,
    duration_ns, others_busy_share, wait_share``) and ``per_gpu`` (``gpu, starved_count,
    starved_ns, starved_share`` of the window)."""

    kind: str
    windows: pl.DataFrame
    bursts: pl.DataFrame
    starved: pl.DataFrame
    per_gpu: pl.DataFrame


def _covered(a_s: np.ndarray, a_e: np.ndarray, b_s: np.ndarray, b_e: np.ndarray) -> np.ndarray:
    """Per interval of ``b``: its length covered by the disjoint sorted ``a``."""
    if a_s.size == 0:
        return np.zeros(b_s.size, dtype=np.int64)
    cum = np.concatenate(([0], np.cumsum(a_e - a_s)))

    def upto(t: np.ndarray) -> np.ndarray:
        i = np.searchsorted(a_s, t, side="right") - 1
        j = np.clip(i, 0, None)
        inside = np.clip(np.minimum(t, a_e[j]) - a_s[j], 0, None)
        return np.where(i >= 0, cum[j] + inside, 0)

    return upto(b_e) - upto(b_s)


def measure_load(
    busy: pl.DataFrame,
    windows: pl.DataFrame,
    kernels: pl.DataFrame,
    requests: pl.DataFrame | None,
    host_gaps: pl.DataFrame | None,
) -> LoadResult:
    """Load per window and GPU, bursts, starvation. ``busy``: the per-GPU busy union."""
    w = windows.select(pl.col("gpu").cast(pl.Int32), "window_start_ns", "window_end_ns")
    lo, hi = int(w["window_start_ns"].min()), int(w["window_end_ns"].max())  # type: ignore[arg-type]
    has_requests = requests is not None and requests.height > 0
    kind = "requests" if has_requests else "kernels"
    events = (
        requests.select(pl.col("gpu").cast(pl.Int32), pl.col("start_ns").alias("t"))  # type: ignore[union-attr]
        if has_requests
        else kernels.filter(pl.col("gpu").is_not_null()).select(
            pl.col("gpu").cast(pl.Int32), pl.col("start_ns").alias("t")
        )
    )
    width = max(1, -(-(hi - lo) // LOAD_WINDOWS))
    edges = pl.DataFrame(
        {"window": list(range(LOAD_WINDOWS))}, schema={"window": pl.Int64}
    ).with_columns(
        (lo + pl.col("window") * width).alias("start_ns"),
        pl.min_horizontal(lo + (pl.col("window") + 1) * width, pl.lit(hi)).alias("end_ns"),
    )
    counted = (
        events.filter((pl.col("t") >= lo) & (pl.col("t") < hi))
        .with_columns(((pl.col("t") - lo) // width).alias("window"))
        .group_by("window", "gpu")
        .agg(pl.len().cast(pl.Int64).alias("load"))
    )
    load = (
        edges.join(w.select("gpu"), how="cross")
        .join(counted, on=["window", "gpu"], how="left")
        .with_columns(pl.col("load").fill_null(0))
        .sort("window", "gpu")
    )
    bursts = _bursts(load, busy, width, kind)
    starved = _starved(busy, host_gaps)
    per_gpu = (
        w.join(
            starved.group_by("gpu").agg(
                pl.len().cast(pl.Int64).alias("starved_count"),
                pl.col("duration_ns").sum().alias("starved_ns"),
            ),
            on="gpu",
            how="left",
        )
        .with_columns(pl.col("starved_count", "starved_ns").fill_null(0))
        .with_columns(
            (pl.col("starved_ns") / (pl.col("window_end_ns") - pl.col("window_start_ns"))).alias(
                "starved_share"
            )
        )
        .select("gpu", "starved_count", "starved_ns", "starved_share")
        .sort("gpu")
    )
    return LoadResult(kind=kind, windows=load, bursts=bursts, starved=starved, per_gpu=per_gpu)


def _busy_in(busy: pl.DataFrame, gpu: int, start: int, end: int) -> float | None:
    if end <= start:
        return None
    mine = busy.filter(pl.col("gpu") == gpu)
    s = np.clip(mine["start_ns"].to_numpy(), start, end)
    e = np.clip(mine["end_ns"].to_numpy(), start, end)
    return float(np.sum(e - s)) / (end - start)


def _bursts(load: pl.DataFrame, busy: pl.DataFrame, width: int, kind: str) -> pl.DataFrame:
    totals = load.group_by("window", "start_ns", "end_ns").agg(pl.col("load").sum()).sort("window")
    median = float(totals["load"].median() or 0.0)
    threshold = max(BURST_FACTOR * median, float(BURST_MIN_EVENTS))
    if kind == "kernels" and median <= 0:
        # Mostly idle windows (a start-up): kernel load has no baseline to burst from.
        threshold = float("inf")
    hot = totals.filter(pl.col("load") >= threshold)
    rows = []
    for win, start, end, total in hot.iter_rows():
        per = load.filter(pl.col("window") == win).sort(["load", "gpu"], descending=[True, False])
        top_gpu, top_load = int(per["gpu"][0]), int(per["load"][0])
        rows.append(
            (
                win, start, end, int(total), median, total / median if median > 0 else None,
                top_gpu, top_load / total if total else None,
                _busy_in(busy, top_gpu, start - width, start),
            )
        )  # fmt: skip
    return pl.DataFrame(
        rows,
        schema={
            "window": pl.Int64,
            "start_ns": pl.Int64,
            "end_ns": pl.Int64,
            "load": pl.Int64,
            "median_load": pl.Float64,
            "over_median": pl.Float64,
            "top_gpu": pl.Int32,
            "top_share": pl.Float64,
            "top_busy_before": pl.Float64,
        },
        orient="row",
    )


_STARVED = {
    "gpu": pl.Int32,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "duration_ns": pl.Int64,
    "others_busy_share": pl.Float64,
    "wait_share": pl.Float64,
}


def _starved(busy: pl.DataFrame, host_gaps: pl.DataFrame | None) -> pl.DataFrame:
    if host_gaps is None or host_gaps.is_empty() or "blocking_os_ns" not in host_gaps.columns:
        return pl.DataFrame(schema=_STARVED)
    long = host_gaps.filter(pl.col("duration_ns") >= STARVATION_MIN_NS).select(
        pl.col("gpu").cast(pl.Int32), "start_ns", "end_ns", "duration_ns", "blocking_os_ns"
    )
    gpus = sorted(int(g) for g in busy["gpu"].unique().to_list())
    if long.is_empty() or len(gpus) < 2:
        return pl.DataFrame(schema=_STARVED)
    by_gpu = _intervals_by_gpu(busy)
    parts = []
    for g in gpus:
        mine = long.filter(pl.col("gpu") == g)
        if mine.is_empty():
            continue
        gap_s = mine["start_ns"].to_numpy().astype(np.int64)
        gap_e = mine["end_ns"].to_numpy().astype(np.int64)
        # Only the other GPUs' busy intervals that meet one of these gaps can cover it.
        starts, ends = [], []
        for h, (s, e) in by_gpu.items():
            if h != g:
                rows = rows_meeting(s, e, gap_s, gap_e)
                starts.append(s[rows])
                ends.append(e[rows])
        os_, oe = merge_arrays(np.concatenate(starts), np.concatenate(ends))
        cov = _covered(os_, oe, gap_s, gap_e)
        parts.append(mine.with_columns(pl.Series("_others", cov, dtype=pl.Int64)))
    if not parts:
        return pl.DataFrame(schema=_STARVED)
    out = (
        pl.concat(parts)
        .with_columns(
            (pl.col("_others") / pl.col("duration_ns")).alias("others_busy_share"),
            (pl.col("blocking_os_ns") / pl.col("duration_ns")).alias("wait_share"),
        )
        .filter(
            (pl.col("others_busy_share") >= STARVATION_OTHERS_BUSY)
            & (pl.col("wait_share") >= STARVATION_WAIT_SHARE)
        )
        .select(list(_STARVED))
        .sort(["duration_ns", "gpu", "start_ns"], descending=[True, False, False])
    )
    return out.cast(_STARVED)  # type: ignore[arg-type]


def _intervals_by_gpu(busy: pl.DataFrame) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per GPU, its busy intervals (disjoint: a union) as start and end arrays by start."""
    out = {}
    by_gpu = busy.filter(pl.col("gpu").is_not_null()).partition_by(
        "gpu", as_dict=True, maintain_order=True
    )
    for (g,), rows in by_gpu.items():
        s = rows["start_ns"].to_numpy().astype(np.int64)
        e = rows["end_ns"].to_numpy().astype(np.int64)
        if s.size > 1 and not (np.all(s[1:] >= s[:-1]) and np.all(e[1:] >= e[:-1])):
            s, e = merge_arrays(s, e)
        out[int(g)] = (s, e)  # type: ignore[arg-type]
    return out
