"""What the parts of the imbalance (:mod:`nsysan.analyze.balance`) share.

The column names; the NCCL name pattern (a kernel is NCCL when its ``short_name``
contains ``nccl``, case-insensitive); one window per GPU, process-device windows
merged into their hull; per GPU the union of its busy intervals inside its window,
and the busy time of the GPU before an instant, from the interval of that union an
as-of join finds for it.
"""

from __future__ import annotations

from typing import Literal

import polars as pl

from nsysan.intervals import clip_to_windows, is_union_inside, union_one_unit

NCCL_NAME_PATTERN = "(?i)nccl"

GPU = "gpu"
START = "start_ns"
END = "end_ns"
WINDOW_START = "window_start_ns"
WINDOW_END = "window_end_ns"


def gpu_windows(windows: pl.DataFrame) -> pl.DataFrame:
    """One window per GPU; process-device windows (nvidia busy mode) merge into their hull."""
    return (
        windows.group_by(GPU)
        .agg(pl.col(WINDOW_START).min(), pl.col(WINDOW_END).max())
        .select(
            pl.col(GPU).cast(pl.Int32),
            pl.col(WINDOW_START).cast(pl.Int64),
            pl.col(WINDOW_END).cast(pl.Int64),
        )
        .sort(GPU)
    )


def busy_per_gpu(busy: pl.DataFrame, windows: pl.DataFrame) -> dict[int, pl.DataFrame]:
    """Per GPU of ``windows``, the union of its busy intervals inside its window (``_union``).

    The intervals of ``union_intervals(clip_to_windows(busy, windows, "gpu"), "gpu")``,
    one GPU at a time: no join and no grouping over millions of intervals. A busy union
    handed in (``BusyResult.intervals``) is taken as it is.
    """
    # The library's checks (bounds in order, valid windows) run on the only rows that
    # can fail them.
    clip_to_windows(busy.filter(pl.col(END) < pl.col(START)), windows, by=GPU)
    unions = {}
    for gpu, start, end in windows.iter_rows():
        own = busy.filter(pl.col(GPU) == gpu).select(START, END)
        if is_union_inside(own, start, end):
            length = pl.col(END) - pl.col(START)
            unions[gpu] = own.with_columns((length.cum_sum() - length).alias("_before"))
        else:
            unions[gpu] = union_one_unit(
                own.filter((pl.col(END) >= start) & (pl.col(START) <= end)).select(
                    pl.col(START).clip(lower_bound=start), pl.col(END).clip(upper_bound=end)
                )
            )
    return unions


def _lookup(
    cells: pl.DataFrame,
    at: str,
    busy: pl.DataFrame,
    strategy: Literal["backward", "forward"],
    suffix: str,
) -> pl.DataFrame:
    """``cells`` with the interval of one GPU's ``busy`` union an as-of join finds for ``at``.

    Its columns get ``suffix``; ``at`` must be in time order.
    """
    names = {START: f"_s{suffix}", END: f"_e{suffix}", "_before": f"_before{suffix}"}
    return cells.join_asof(
        busy.rename(names),
        left_on=at,
        right_on=names[START],
        strategy=strategy,
        check_sortedness=False,
    )


def _found(
    cells: pl.DataFrame,
    at: str,
    busy: dict[int, pl.DataFrame],
    strategy: Literal["backward", "forward"],
    suffix: str,
) -> pl.DataFrame:
    """``_lookup`` for cells of several GPUs; rows come out grouped by GPU.

    ``at`` must be in time order within each GPU, and ``busy`` must hold every GPU of
    ``cells``.
    """
    return pl.concat(
        _lookup(cells.filter(pl.col(GPU) == gpu), at, table, strategy, suffix)
        for gpu, table in busy.items()
    )


def _busy_before(at: str, suffix: str) -> pl.Expr:
    """Busy time of the GPU before instant ``at``, from the interval ``_found`` for it."""
    s, e, before = (pl.col(f"{c}{suffix}") for c in ("_s", "_e", "_before"))
    return (before + pl.min_horizontal(pl.col(at) - s, e - s)).fill_null(0)


def with_busy_before(cells: pl.DataFrame, busy: dict[int, pl.DataFrame]) -> pl.DataFrame:
    """``cells`` (disjoint, in time order within each GPU) with ``busy_ns`` inside each."""
    found = _found(_found(cells, START, busy, "backward", "0"), END, busy, "backward", "1")
    return found.select(
        *cells.columns, (_busy_before(END, "1") - _busy_before(START, "0")).alias("busy_ns")
    )
