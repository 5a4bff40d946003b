"""Pipeline bubbles for :mod:`nsysan.analyze.balance`: idle time at the ends of iterations.

Per iteration and GPU the idle share, the fill bubble (idle from the iteration start
to the GPU's first busy instant) and the drain bubble (idle from its last busy
instant to the iteration end); their sums per GPU (docs/metrics/balance.md#bubbles).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from nsysan.analyze.balance_tables import END, GPU, START, _busy_before, _lookup

_BUBBLES = {
    "iteration": pl.Int64,
    GPU: pl.Int32,
    START: pl.Int64,
    END: pl.Int64,
    "iteration_ns": pl.Int64,
    "busy_ns": pl.Int64,
    "idle_ns": pl.Int64,
    "fill_ns": pl.Int64,
    "drain_ns": pl.Int64,
}
_BUBBLE_SUMS = {
    GPU: pl.Int32,
    "iterations": pl.Int64,
    "iteration_ns": pl.Int64,
    "busy_ns": pl.Int64,
    "idle_ns": pl.Int64,
    "fill_ns": pl.Int64,
    "drain_ns": pl.Int64,
}


def _iteration_busy(iterations: pl.DataFrame, union: pl.DataFrame) -> pl.DataFrame:
    """Per iteration (``start_ns``, ``end_ns``, in time order): ``busy_ns``, ``fill_ns`` and
    ``drain_ns`` against one GPU's busy ``union``."""
    length = pl.col(END) - pl.col(START)
    if union.is_empty():
        return iterations.select(
            pl.lit(0, pl.Int64).alias("busy_ns"),
            length.alias("fill_ns"),
            pl.lit(0, pl.Int64).alias("drain_ns"),
        )
    # Found: the busy interval holding (or last before) the iteration start, with the
    # start of the one after it, and the last one starting before the iteration end.
    # A busy interval starting exactly at the end adds nothing before it, so the one
    # found for ``end - 1`` gives the busy time before the end as well.
    found = _lookup(
        _lookup(
            iterations,
            START,
            union.with_columns(pl.col(START).shift(-1).alias("_next")),
            "backward",
            "0",
        ).with_columns((pl.col(END) - 1).alias("_probe")),
        "_probe",
        union,
        "backward",
        "2",
    )
    busy_ns = _busy_before(END, "2") - _busy_before(START, "0")
    # Union intervals start in strictly increasing order, so the first one starting at
    # or after the iteration start is the one found for it, or the next.
    after = (
        pl.when(pl.col("_s0").is_null())
        .then(pl.lit(union.item(0, START)))
        .when(pl.col("_s0") == pl.col(START))
        .then(pl.col(START))
        .otherwise(pl.col("_next"))
    )
    first_busy = pl.when(pl.col("_e0") > pl.col(START)).then(pl.col(START)).otherwise(after)
    has_busy = first_busy.is_not_null() & (first_busy < pl.col(END))
    last_busy = pl.min_horizontal(pl.col("_e2"), pl.col(END))
    return found.select(
        busy_ns.alias("busy_ns"),
        pl.when(has_busy).then(first_busy - pl.col(START)).otherwise(length).alias("fill_ns"),
        pl.when(has_busy).then(pl.col(END) - last_busy).otherwise(0).alias("drain_ns"),
    )


def bubble_table(
    iterations: pl.DataFrame, busy: dict[int, pl.DataFrame], rows: bool = True
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Per (iteration, GPU of ``busy``) the busy, idle, fill and drain time; their sums per GPU.

    Without ``rows``, only the sums: the per-iteration table comes back empty (a GPU's
    rows are summed and dropped before the next GPU's are made).
    """
    # The iterations are contiguous, so their starts and ends are each in time order,
    # as the as-of joins need.
    bounds = iterations.select(START, END)
    length = pl.col(END) - pl.col(START)
    times = ("iteration_ns", "busy_ns", "idle_ns", "fill_ns", "drain_ns")
    frames, sums = [], []
    for gpu, table in busy.items():
        frame = pl.concat(
            [iterations.select("iteration", START, END), _iteration_busy(bounds, table)],
            how="horizontal",
        ).select(
            "iteration",
            pl.lit(gpu, pl.Int32).alias(GPU),
            START,
            END,
            length.alias("iteration_ns"),
            "busy_ns",
            (length - pl.col("busy_ns")).alias("idle_ns"),
            "fill_ns",
            "drain_ns",
        )
        sums.append(
            frame.select(
                pl.lit(gpu, pl.Int32).alias(GPU),
                pl.len().cast(pl.Int64).alias("iterations"),
                *[pl.col(c).sum() for c in times],
            )
        )
        if rows:
            frames.append(frame)
    # The schemas first, for a trace without GPUs. Iteration by iteration, the GPUs in
    # ascending order (``busy``): row k of GPU g goes to k * GPUs + g.
    bubbles = pl.concat([pl.DataFrame(schema=_BUBBLES), *frames])
    numbers = iterations.get_column("iteration")
    if frames and (numbers.diff().drop_nulls() > 0).all():
        bubbles = bubbles[np.arange(bubbles.height).reshape(len(frames), -1).T.ravel()]
    else:
        bubbles = bubbles.sort("iteration", maintain_order=True)
    per_gpu = pl.concat([pl.DataFrame(schema=_BUBBLE_SUMS), *sums])
    return _with_bubble_shares(bubbles), _with_bubble_shares(per_gpu).sort(GPU)


def _with_bubble_shares(df: pl.DataFrame) -> pl.DataFrame:
    def share(col: str) -> pl.Expr:
        return pl.when(pl.col("iteration_ns") > 0).then(pl.col(col) / pl.col("iteration_ns"))

    return df.with_columns(
        share("idle_ns").alias("idle_share"),
        share("fill_ns").alias("fill_share"),
        share("drain_ns").alias("drain_share"),
        pl.when(pl.col("iteration_ns") > 0)
        .then((pl.col("fill_ns") + pl.col("drain_ns")) / pl.col("iteration_ns"))
        .alias("bubble_share"),
    )
