"""The dominant gap of each GPU, the start-up before steady state, and steady state.

Definitions (docs/metrics/gaps.md#dominant-gap):

* The **longest gap** of a GPU is its longest gap inside its window; its
  ``longest_share`` is its length over the window. It is **dominant** when that share
  is at least :data:`DOMINANT_GAP_SHARE`: one idle stretch then decides the GPU's gap
  share, and the gap share says little about the rest of the run.
* A dominant gap is the **start-up** (warm-up) when the GPU did little before it: the
  busy time before the gap is at most :data:`WARMUP_BUSY_SHARE` of the GPU's busy time.
  Steady state then starts where the gap ends (``steady_start_ns``).
* **Steady state** of a GPU is its window from ``steady_start_ns`` (the window start
  when there is no start-up): ``steady_window_ns``, ``steady_gap_ns``,
  ``steady_gap_share`` over it. With ``detect=False`` (the user chose the window with
  ``--start`` or ``--skip-warmup``) no start-up is detected and steady state is the
  window.
* ``all_idle_*``: over the common steady window (latest steady start to earliest
  window end), the time with every GPU idle at once, so that an "all GPUs idle
  together" reading is not an artefact of a start-up gap that all GPUs share.

All times are nanoseconds on the trace timeline.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from nsysan.interval_arrays import clip_disjoint, rows_by_unit, time_units_open
from nsysan.intervals import sort_if_needed

__all__ = ["DOMINANT_GAP_SHARE", "WARMUP_BUSY_SHARE", "DominantResult", "measure_dominant"]

DOMINANT_GAP_SHARE = 0.25
WARMUP_BUSY_SHARE = 0.10


@dataclass(frozen=True)
class DominantResult:
    """Per GPU: the longest gap, the start-up if any, and steady-state gap numbers.

    ``per_gpu``: ``gpu``, ``window_start_ns``, ``window_end_ns``, ``window_ns``,
    ``busy_ns``, ``gap_ns``, ``gap_count``, ``longest_start_ns``, ``longest_end_ns``,
    ``longest_ns``, ``longest_share``, ``dominant`` (bool), ``warmup`` (bool: the dominant
    gap is the start-up), ``steady_start_ns``, ``steady_window_ns``, ``steady_gap_ns``,
    ``steady_gap_count``, ``steady_gap_share``, ``median_gap_ns`` (steady state).
    """

    per_gpu: pl.DataFrame
    detected: bool  # detection ran (the user did not choose the window start)
    any_dominant: bool
    any_warmup: bool
    common_steady_start_ns: int | None
    common_steady_end_ns: int | None
    all_idle_ns: int | None
    all_idle_share: float | None  # of the common steady window


def _all_idle(gaps: pl.DataFrame, gpus: list[int], start: int, end: int) -> int:
    """Time in ``[start, end)`` during which every GPU of ``gpus`` is inside a gap."""
    where = rows_by_unit(gaps["gpu"].to_numpy(), gpus)
    all_starts, all_ends = gaps["start_ns"].to_numpy(), gaps["end_ns"].to_numpy()
    # Each GPU's gaps are disjoint and in time order.
    idle = [clip_disjoint(all_starts[where[g]], all_ends[where[g]], start, end) for g in gpus]
    return time_units_open(idle, low=len(gpus), high=len(gpus))


def measure_dominant(
    gaps: pl.DataFrame, summary: pl.DataFrame, windows: pl.DataFrame, detect: bool = True
) -> DominantResult:
    """Longest gap, start-up and steady state per GPU from the gaps table and its summary.

    ``gaps``: ``gpu, start_ns, end_ns, duration_ns`` (per-GPU gaps inside the windows);
    ``summary``: per GPU ``window_ns, busy_ns, gap_ns, gap_count``; ``windows``: per GPU
    ``window_start_ns, window_end_ns``.
    """
    rows = []
    table = summary.join(
        windows.select("gpu", "window_start_ns", "window_end_ns"), on="gpu", how="inner"
    )
    table = table.sort("gpu")
    # The gaps come grouped by GPU in time order: each GPU's rows are a slice.
    where = rows_by_unit(gaps["gpu"].to_numpy(), table["gpu"].to_list())
    for w in table.iter_rows(named=True):
        g = w["gpu"]
        at = where[g]
        mine = sort_if_needed(
            gaps[at] if isinstance(at, slice) else gaps.filter(pl.Series(at)), "start_ns"
        )
        ws, we, window = int(w["window_start_ns"]), int(w["window_end_ns"]), int(w["window_ns"])
        busy = int(w["busy_ns"] or 0)
        row = {
            "gpu": g,
            "window_start_ns": ws,
            "window_end_ns": we,
            "window_ns": window,
            "busy_ns": busy,
            "gap_ns": int(w["gap_ns"] or 0),
            "gap_count": int(w["gap_count"] or 0),
            "longest_start_ns": None,
            "longest_end_ns": None,
            "longest_ns": 0,
            "longest_share": 0.0,
            "dominant": False,
            "warmup": False,
            "steady_start_ns": ws,
        }
        if mine.height and window > 0:
            i = int(mine["duration_ns"].arg_max())  # type: ignore[arg-type]
            ls, le = int(mine["start_ns"][i]), int(mine["end_ns"][i])
            length = le - ls
            share = length / window
            dominant = share >= DOMINANT_GAP_SHARE
            # Busy before the gap = time before it less the gaps before it.
            busy_before = (ls - ws) - int(mine["duration_ns"][:i].sum())
            warmup = bool(detect and dominant and busy_before <= WARMUP_BUSY_SHARE * busy)
            row.update(
                longest_start_ns=ls,
                longest_end_ns=le,
                longest_ns=length,
                longest_share=share,
                dominant=dominant,
                warmup=warmup,
                steady_start_ns=le if warmup else ws,
            )
        steady = mine.filter(pl.col("start_ns") >= row["steady_start_ns"])
        steady_window = we - int(row["steady_start_ns"])  # type: ignore[arg-type]
        steady_gap = int(steady["duration_ns"].sum() or 0)
        row.update(
            steady_window_ns=steady_window,
            steady_gap_ns=steady_gap,
            steady_gap_count=steady.height,
            steady_gap_share=steady_gap / steady_window if steady_window > 0 else None,
            median_gap_ns=int(steady["duration_ns"].median() or 0) if steady.height else None,  # type: ignore[arg-type]
        )
        rows.append(row)
    per_gpu = pl.DataFrame(
        rows,
        schema={
            "gpu": pl.Int32,
            "window_start_ns": pl.Int64,
            "window_end_ns": pl.Int64,
            "window_ns": pl.Int64,
            "busy_ns": pl.Int64,
            "gap_ns": pl.Int64,
            "gap_count": pl.Int64,
            "longest_start_ns": pl.Int64,
            "longest_end_ns": pl.Int64,
            "longest_ns": pl.Int64,
            "longest_share": pl.Float64,
            "dominant": pl.Boolean,
            "warmup": pl.Boolean,
            "steady_start_ns": pl.Int64,
            "steady_window_ns": pl.Int64,
            "steady_gap_ns": pl.Int64,
            "steady_gap_count": pl.Int64,
            "steady_gap_share": pl.Float64,
            "median_gap_ns": pl.Int64,
        },
    )
    start = end = all_idle = share = None
    if per_gpu.height >= 2:
        start = int(per_gpu["steady_start_ns"].max())  # type: ignore[arg-type]
        end = int(per_gpu["window_end_ns"].min())  # type: ignore[arg-type]
        if end > start:
            all_idle = _all_idle(gaps, per_gpu["gpu"].to_list(), start, end)
            share = all_idle / (end - start)
        else:
            start = end = None
    return DominantResult(
        per_gpu=per_gpu,
        detected=detect,
        any_dominant=bool(per_gpu["dominant"].any()) if per_gpu.height else False,
        any_warmup=bool(per_gpu["warmup"].any()) if per_gpu.height else False,
        common_steady_start_ns=start,
        common_steady_end_ns=end,
        all_idle_ns=all_idle,
        all_idle_share=share,
    )
