"""NCCL kernels matched across GPUs into instances.

The part of :mod:`nsysan.analyze.nccl` that gives each NCCL kernel its stream rank and
ordinal, matches them across GPUs and measures each instance's skew and the estimated
wait of its kernels; the module docstring there defines instances, skew and wait.
Each kernel's instance is a number in instance order, its figures summed in one
compiled pass.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from nsysan.compiled import compiled
from nsysan.intervals import sort_if_needed

__all__ = [
    "GROUP_KEY",
    "INSTANCE_KEY",
    "INSTANCE_READ",
    "LAST_ARRIVAL",
    "MATCH_BY_STREAM",
    "MATCH_POOLED",
    "STREAM_KEY",
    "kernels_by_instance",
    "match_instances",
    "stream_ranks",
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


# The columns of an instance's row (NcclResult.instances), in order.
_INSTANCE_STATS = (
    "gpus",
    "first_start_ns",
    "last_start_ns",
    "fastest_ns",
    "slowest_ns",
    "wait_ns",
    "last_gpu",
    "skew_ns",
)
# The columns of a matched kernel's row (NcclResult.instance_kernels), in order.
_INSTANCE_KERNEL_COLUMNS = (
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
# Of an instance's kernels, the one that started last (after another): ``_last``.
LAST_ARRIVAL = "_last"


def kernels_by_instance(
    matched: pl.DataFrame, ordered: bool = True
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The matched kernels of the instances reported (``NcclResult.instance_kernels``,
    with :data:`LAST_ARRIVAL`) and one row per instance (``NcclResult.instances``).

    ``matched``: the kernels of :func:`match_instances` that are ``matched``, with at
    least the columns :data:`INSTANCE_READ`. An instance is reported if one of its
    kernels is in a window. The kernels come in instance and GPU order, or, without
    ``ordered``, in no particular order (for what only groups or sums them: the sort
    copies every row); the instances in instance order.

    Each kernel's instance is a number, ``(collective, stream rank)``'s first instance
    plus the ordinal: the instances' figures are summed by it in one compiled pass and
    the kernels' lags and waits read from them in a second, with no window function and
    no group-by over the kernels: at 20M kernels (6.7M NCCL kernels) 0.6-1.0 s, where the
    window functions, the group-by and the last arrivals' window took 2.9-3.1 s.
    """
    kernels = matched.select(INSTANCE_READ)
    names = kernels.get_column("collective").unique().sort().to_list()
    rank = kernels.get_column("stream_rank").to_numpy()
    # (collective, stream rank) as one integer that sorts like the pair.
    width = int(rank.max()) + 1 if len(rank) else 1
    found = _instance_pass(
        kernels.get_column("collective").cast(pl.Enum(names)).to_physical().to_numpy(),
        rank,
        len(names) * width,
        width,
        kernels.get_column("ordinal").to_numpy(),
        kernels.get_column("gpu").to_numpy(),
        kernels.get_column("start_ns").to_numpy(),
        kernels.get_column("end_ns").to_numpy(),
        kernels.get_column("in_window").to_numpy(),
        ordered,
    )
    groups, first_of_group, per_instance, lag, wait, last, kept, inst = found
    measured = kernels.with_columns(
        (pl.col("end_ns") - pl.col("start_ns")).alias("duration_ns"),
        pl.Series("lag_ns", lag),
        pl.Series("wait_ns", wait),
        pl.Series(LAST_ARRIVAL, last),
    )
    del lag, wait, last
    if ordered:
        measured = measured.with_columns(pl.Series("_inst", inst))
    if not kept.all():
        measured = measured.filter(pl.Series(kept))
    if ordered:
        measured = measured.sort("_inst", "gpu")
    instance_kernels = measured.select(*_INSTANCE_KERNEL_COLUMNS, LAST_ARRIVAL)

    gpu_type = kernels.schema["gpu"]
    count, first, last_start, fastest, slowest, wait_sum, windowed, last_gpu = per_instance
    rows = np.flatnonzero(windowed > 0)  # the instances with a kernel in a window
    of_group = np.searchsorted(first_of_group, rows, side="right") - 1
    count, first, last_start, fastest, slowest, wait_sum, last_gpu = (
        values[rows] for values in (count, first, last_start, fastest, slowest, wait_sum, last_gpu)
    )
    skew = last_start - first
    instances = pl.DataFrame(
        {
            "collective": pl.Series(groups[of_group] // width, dtype=pl.UInt32)
            .replace_strict(list(range(len(names))), names, return_dtype=pl.String)
            .cast(pl.String),  # an empty mapping keeps the codes' type
            "stream_rank": groups[of_group] % width,
            "ordinal": rows - first_of_group[of_group],
            "gpus": count,
            "first_start_ns": first,
            "last_start_ns": last_start,
            "fastest_ns": fastest,
            "slowest_ns": slowest,
            "wait_ns": wait_sum,
            # The GPU that started last; of several, the lowest; none without skew.
            "last_gpu": pl.Series(last_gpu).cast(gpu_type).set(pl.Series(skew <= 0), None),
            "skew_ns": skew,
        },
        schema_overrides={c: pl.Int64 for c in (*INSTANCE_KEY[1:], *_INSTANCE_STATS)}
        | {"last_gpu": gpu_type},
    )
    return instance_kernels, instances


@compiled
def _instance_pass(  # type: ignore[no-untyped-def]
    collective, rank, group_cells, width, ordinal, gpu, start, end, in_window, numbered
):
    """The instances of the matched kernels, numbered in instance order.

    Returns the groups present (``collective * width + rank``, in order) and each
    one's first instance; per instance its kernels, first and last start, fastest and
    slowest kernel, summed wait, kernels in a window and the lowest GPU of those that
    started last; per kernel its lag and wait, whether it arrived last, whether its
    instance has a kernel in a window and, if ``numbered``, its instance.
    """
    n = len(ordinal)
    # A group's instances are its ordinals: as many as its highest ordinal + 1.
    size = np.zeros(group_cells, dtype=np.int64)
    present = np.zeros(group_cells, dtype=np.bool_)
    for k in range(n):
        cell = collective[k] * width + rank[k]
        present[cell] = True
        size[cell] = max(size[cell], ordinal[k] + 1)
    groups = np.flatnonzero(present)
    first_of_cell = np.zeros(group_cells, dtype=np.int64)
    first_of_group = np.zeros(len(groups), dtype=np.int64)
    instances = 0
    for g in range(len(groups)):
        first_of_cell[groups[g]] = first_of_group[g] = instances
        instances += size[groups[g]]
    big, small = np.iinfo(np.int64).max, np.iinfo(np.int64).min
    count = np.zeros(instances, dtype=np.int64)
    first = np.full(instances, big, dtype=np.int64)
    last = np.full(instances, small, dtype=np.int64)
    fastest = np.full(instances, big, dtype=np.int64)
    slowest = np.full(instances, small, dtype=np.int64)
    wait_sum = np.zeros(instances, dtype=np.int64)
    windowed = np.zeros(instances, dtype=np.int64)
    last_gpu = np.zeros(instances, dtype=np.int64)
    for k in range(n):
        i = first_of_cell[collective[k] * width + rank[k]] + ordinal[k]
        d = end[k] - start[k]
        count[i] += 1
        first[i] = min(first[i], start[k])
        if start[k] > last[i] or (start[k] == last[i] and gpu[k] < last_gpu[i]):
            last[i], last_gpu[i] = start[k], gpu[k]
        fastest[i] = min(fastest[i], d)
        slowest[i] = max(slowest[i], d)
        windowed[i] += in_window[k]
    lag = np.empty(n, dtype=np.int64)
    wait = np.empty(n, dtype=np.int64)
    arrived_last = np.empty(n, dtype=np.bool_)
    kept = np.empty(n, dtype=np.bool_)
    inst = np.empty(n if numbered else 0, dtype=np.int64)
    for k in range(n):
        i = first_of_cell[collective[k] * width + rank[k]] + ordinal[k]
        if numbered:
            inst[k] = i
        lag[k] = start[k] - first[i]
        wait[k] = end[k] - start[k] - fastest[i]
        kept[k] = windowed[i] > 0
        if kept[k]:
            wait_sum[i] += wait[k]
        arrived_last[k] = lag[k] > 0 and lag[k] == last[i] - first[i]
    stats = (count, first, last, fastest, slowest, wait_sum, windowed, last_gpu)
    return groups, first_of_group, stats, lag, wait, arrived_last, kept, inst
