"""Gap time under a memcpy or memset: the ``gpu_transfer`` cause of host attribution.

A transfer running on a gap's GPU is gap time of its own cause, whatever the host did
meanwhile (:mod:`nsysan.analyze.host`). :func:`transfer_time` finds each gap's
transfer time in the whole gap, in its host portion and in its launch call, and the
pieces of the host portions under the transfers, whose host causes' time the split
takes out of those causes.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from nsysan.analyze.host_tables import THREAD_NUMBER
from nsysan.interval_arrays import rows_by_unit

__all__ = ["transfer_time"]


def _transfer_pieces(table: pl.DataFrame, transfers: pl.DataFrame) -> tuple[np.ndarray, ...]:
    """The parts of the gaps under a transfer: ``gap, start, end`` arrays.

    Gaps of one GPU are disjoint and in start order, and so is each GPU's transfer
    union: each transfer interval meets a run of consecutive gaps, found by binary
    search, so the cost follows the transfers (few), not the gaps (millions).
    """
    gpu = table["gpu"].to_numpy()
    g_start = table["start_ns"].to_numpy()
    g_end = table["end_ns"].to_numpy()
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    by_gpu = transfers.partition_by("gpu", as_dict=True, maintain_order=True)
    rows = rows_by_unit(gpu, [int(key[0]) for key in by_gpu])
    for key, iv in by_gpu.items():
        where = np.arange(len(gpu))[rows[int(key[0])]]
        if where.size == 0:
            continue
        order = np.argsort(g_start[where], kind="stable")
        where = where[order]
        starts, ends = g_start[where], g_end[where]
        t_start, t_end = iv["start_ns"].to_numpy(), iv["end_ns"].to_numpy()
        first = np.searchsorted(ends, t_start, side="right")
        stop = np.searchsorted(starts, t_end, side="left")
        counts = np.clip(stop - first, 0, None)
        total = int(counts.sum())
        if total == 0:
            continue
        which = np.repeat(np.arange(len(t_start)), counts)
        offset = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
        gap = where[np.repeat(first, counts) + offset]
        lo = np.maximum(t_start[which], g_start[gap])
        hi = np.minimum(t_end[which], g_end[gap])
        keep = hi > lo
        parts.append((gap[keep], lo[keep], hi[keep]))
    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    return tuple(np.concatenate(arrays) for arrays in zip(*parts, strict=True))


def transfer_time(
    table: pl.DataFrame,
    portions: pl.DataFrame,
    transfers: pl.DataFrame,
) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """Each gap's time with a transfer running on its GPU, by where it falls.

    Returns, for the gaps (rows of ``table``) that meet a transfer, ``_gap`` (the
    row), ``_t_gap`` (transfer time in the whole gap), ``_t_host`` (in its host
    portion ``[S, l)``) and ``_t_call`` (in its launch call ``[l, le)``): a few rows
    where transfers are few, not a column per gap held while the groups are
    attributed. Returns also the pieces of the host portions under a transfer
    (``_gap, _th, start_ns, end_ns``, None when there are none): the host causes'
    time in them (:func:`~nsysan.analyze.host_timeline.cause_time_per_gap`) comes
    out of those causes.
    """
    n = table.height
    iv = transfers.select(pl.col("gpu").cast(table.schema["gpu"]), "start_ns", "end_ns")
    gap, lo, hi = _transfer_pieces(table, iv)
    start = table["start_ns"].to_numpy()
    launch = table.select(pl.coalesce("_l", "start_ns")).to_series().to_numpy()
    returned = table.select(pl.coalesce("_le", "start_ns")).to_series().to_numpy()
    l_at, le_at = launch[gap], returned[gap]
    met, slot = np.unique(gap, return_inverse=True)

    def per_gap(lengths: np.ndarray) -> np.ndarray:
        weights = np.clip(lengths, 0, None)
        return np.bincount(slot, weights=weights, minlength=len(met)).astype(np.int64)

    host_end = np.minimum(hi, l_at)
    call = np.minimum(hi, le_at) - np.maximum(lo, l_at)
    carved = pl.DataFrame(
        [
            pl.Series("_gap", met.astype(np.uint32)).cast(table.schema["_gap"]),
            pl.Series("_t_gap", per_gap(hi - lo), dtype=pl.Int64),
            pl.Series("_t_host", per_gap(host_end - lo), dtype=pl.Int64),
            pl.Series("_t_call", per_gap(call), dtype=pl.Int64),
        ]
    )
    # The host portions' pieces under a transfer, with their gap's feeding thread.
    thread = np.full(n, -1, dtype=np.int64)
    thread[portions["_gap"].to_numpy()] = portions[THREAD_NUMBER].to_numpy()
    host = (host_end > lo) & (thread[gap] >= 0) & (lo >= start[gap])
    if not host.any():
        return carved, None
    pieces = pl.DataFrame(
        {
            "_gap": gap[host].astype(np.uint32),
            THREAD_NUMBER: thread[gap[host]],
            "start_ns": lo[host],
            "end_ns": host_end[host],
        }
    ).with_columns(
        pl.col("_gap").cast(portions.schema["_gap"]),
        pl.col(THREAD_NUMBER).cast(portions.schema[THREAD_NUMBER]),
    )
    return carved, pieces
