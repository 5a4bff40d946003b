"""NCCL kernels matched across GPUs into instances.

The part of :mod:`nsysan.analyze.nccl` that gives each NCCL kernel its stream rank and
ordinal, matches them across GPUs and measures each instance's skew and the estimated
wait of its kernels; the module docstring there defines instances, skew and wait.
Instances are grouped and ordered by one packed integer key where it fits.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from nsysan import packing
from nsysan.intervals import sort_if_needed
from nsysan.packing import bit_widths

__all__ = [
    "GROUP_KEY",
    "INSTANCE_KEY",
    "INSTANCE_READ",
    "MATCH_BY_STREAM",
    "MATCH_POOLED",
    "STREAM_KEY",
    "kernels_by_instance",
    "match_instances",
    "packed_key",
    "stream_ranks",
    "summarize_instances",
    "with_instance_key",
]

# A stream is (file, process, context, stream id).
STREAM_KEY = ("source", "pid", "context_id", "stream_id")
# Stands in for a null stream key so that joins on the key keep the row.
_NO_ID = -1
# match_mode values: streams paired by rank, or all streams of a collective pooled.
MATCH_BY_STREAM = "stream"
MATCH_POOLED = "collective"
GROUP_KEY = ("collective", "stream_rank")
INSTANCE_KEY = ("collective", "stream_rank", "ordinal")
# The columns of the matched kernels that kernels_by_instance reads.
INSTANCE_READ = (*INSTANCE_KEY, "gpu", "stream_id", "start_ns", "end_ns", "in_window")


def stream_ranks(nccl: pl.DataFrame) -> pl.DataFrame:
    """Per (gpu, collective, stream): ``stream_rank`` and the collective's ``match_mode``."""
    per_stream = ["gpu", "collective", *STREAM_KEY]
    streams = (
        nccl.group_by(per_stream)
        .agg(pl.col("start_ns").min().alias("_first_ns"))
        .sort(["gpu", "collective", "_first_ns", *STREAM_KEY])
        .with_columns(
            pl.int_range(pl.len()).over("gpu", "collective").alias("_rank"),
            pl.len().over("gpu", "collective").alias("_streams"),
        )
    )
    # Streams pair up across GPUs only if each GPU has as many of them.
    mode = streams.group_by("collective").agg(
        pl.when(pl.col("_streams").n_unique() == 1)
        .then(pl.lit(MATCH_BY_STREAM))
        .otherwise(pl.lit(MATCH_POOLED))
        .alias("match_mode")
    )
    return (
        streams.join(mode, on="collective")
        .with_columns(
            pl.when(pl.col("match_mode") == MATCH_BY_STREAM)
            .then(pl.col("_rank"))
            .otherwise(0)
            .cast(pl.Int64)
            .alias("stream_rank")
        )
        .select(*per_stream, "stream_rank", "match_mode")
    )


def match_instances(kernels: pl.DataFrame) -> pl.DataFrame:
    """The NCCL ``kernels`` (whole trace) with ``stream_rank``, ``ordinal``, ``match_mode``,
    ``matched`` and the group figures ``gpus``, ``min_count``, ``max_count``."""
    nccl = kernels.with_columns(pl.col(list(STREAM_KEY)).fill_null(_NO_ID))
    per_stream = ["gpu", "collective", *STREAM_KEY]
    one_stream = nccl.group_by("gpu").agg(
        pl.all_horizontal(pl.col(c).min() == pl.col(c).max() for c in STREAM_KEY).alias("_one")
    )
    if one_stream.get_column("_one").all():
        # Each GPU runs its NCCL kernels on one stream: every collective pairs by stream.
        ranked = nccl.with_columns(
            pl.lit(0, pl.Int64).alias("stream_rank"), pl.lit(MATCH_BY_STREAM).alias("match_mode")
        )
    else:
        ranked = nccl.join(stream_ranks(nccl), on=per_stream)
    nccl = sort_if_needed(
        ranked, *("gpu", *GROUP_KEY, "start_ns", "end_ns", *STREAM_KEY, "correlation_id")
    ).with_columns(
        pl.int_range(pl.len()).over("gpu", *GROUP_KEY).cast(pl.Int64).alias("ordinal"),
        pl.len().over("gpu", *GROUP_KEY).cast(pl.Int64).alias("_count"),
    )
    group = list(GROUP_KEY)
    return (
        nccl.with_columns(
            pl.col("gpu").n_unique().over(group).cast(pl.Int64).alias("gpus"),
            pl.col("_count").min().over(group).alias("min_count"),
            pl.col("_count").max().over(group).alias("max_count"),
        )
        .with_columns(
            ((pl.col("gpus") >= 2) & (pl.col("ordinal") < pl.col("min_count"))).alias("matched")
        )
        .drop("_count")
    )


def packed_key(df: pl.DataFrame, cols: Sequence[str]) -> pl.Expr | None:
    """``cols`` (integers, no nulls) of a non-empty ``df`` as one Int64 that sorts like
    the tuple (:mod:`nsysan.packing`); None when they do not pack."""
    widths = None if df.is_empty() else bit_widths([df], cols)
    if widths is None:
        return None
    return packing.packed_key(cols, widths)


def with_instance_key(df: pl.DataFrame) -> tuple[pl.DataFrame, list[str], list[str]]:
    """``df`` with its instance as one integer ``_inst`` where it fits (the collective's
    rank among the sorted names, the stream rank, the ordinal: grouping and sorting by it
    cost an integer's, in the same order), and the columns to group and to sort by."""
    names = df.get_column("collective").unique().sort().to_list()
    coded = df.with_columns(
        pl.col("collective").cast(pl.Enum(names)).to_physical().alias("_collective")
    )
    inst = packed_key(coded, ["_collective", "stream_rank", "ordinal"])
    if inst is None:
        return coded.drop("_collective"), list(INSTANCE_KEY), [*INSTANCE_KEY, "gpu"]
    keyed = coded.with_columns(inst.alias("_inst")).drop("_collective")
    order = packed_key(keyed, ["_inst", "gpu"])
    if order is None:
        return keyed, ["_inst"], ["_inst", "gpu"]
    return keyed.with_columns(order.alias("_order")), ["_inst"], ["_order"]


def kernels_by_instance(matched: pl.DataFrame, ordered: bool = True) -> pl.DataFrame:
    """One row per matched kernel of an instance reported (``NcclResult.instance_kernels``).

    ``matched``: the kernels of :func:`match_instances` that are ``matched``, with at
    least the columns :data:`INSTANCE_READ`. In instance and GPU order, or, without
    ``ordered``, in no particular order (for what only groups or sums them: the sort
    copies every row).
    """
    duration = pl.col("end_ns") - pl.col("start_ns")
    # Only the columns read below go through the filters and the sort: each copies
    # what it keeps (the matched table has twice as many).
    keyed, inst, order = with_instance_key(matched.select(INSTANCE_READ))
    measured = (
        keyed.filter(pl.col("in_window").any().over(inst))
        .with_columns(duration.alias("duration_ns"))
        .with_columns(
            (pl.col("start_ns") - pl.col("start_ns").min().over(inst)).alias("lag_ns"),
            (pl.col("duration_ns") - pl.col("duration_ns").min().over(inst)).alias("wait_ns"),
        )
    )
    return (measured.sort(order) if ordered else measured).select(
        *INSTANCE_KEY,
        "gpu",
        "stream_id",
        "start_ns",
        "end_ns",
        "duration_ns",
        "lag_ns",
        "wait_ns",
        "in_window",
    )


def summarize_instances(instance_kernels: pl.DataFrame) -> pl.DataFrame:
    """One row per matched instance (``NcclResult.instances``)."""
    keyed, inst, _ = with_instance_key(instance_kernels)
    return (
        keyed.group_by(inst)
        .agg(
            *(pl.col(c).first() for c in INSTANCE_KEY if c not in inst),
            pl.len().cast(pl.Int64).alias("gpus"),
            pl.col("start_ns").min().alias("first_start_ns"),
            pl.col("start_ns").max().alias("last_start_ns"),
            pl.col("duration_ns").min().alias("fastest_ns"),
            pl.col("duration_ns").max().alias("slowest_ns"),
            pl.col("wait_ns").sum().alias("wait_ns"),
            pl.col("gpu")
            .sort_by("start_ns", "gpu", descending=[False, True])
            .last()
            .alias("last_gpu"),
        )
        .with_columns((pl.col("last_start_ns") - pl.col("first_start_ns")).alias("skew_ns"))
        .with_columns(pl.when(pl.col("skew_ns") > 0).then(pl.col("last_gpu")).alias("last_gpu"))
        .sort(inst)
        .select(*INSTANCE_KEY, pl.exclude(*INSTANCE_KEY, "_inst"))
    )
