"""Launch overhead and launch configuration, per GPU.

Definitions (docs/metrics/launch.md):

* Over each GPU's analysis window (``busy.windows``), the kernels that *start* in it:
  ``kernels``, ``launch_rate`` (kernels per second of window), the duration
  percentiles ``kernel_p50_ns``/``kernel_p90_ns``/``kernel_p99_ns`` (nearest-rank),
  ``small_kernel_share`` (share of those kernels shorter than :data:`SMALL_KERNEL_NS`)
  and ``small_kernel_time_share`` (their share of the kernel time).
* **Launch-scale gaps**: gaps of the GPU's busy union (``gaps.gaps``) shorter than
  :data:`SHORT_GAP_NS`, the time between back-to-back kernels that a launch and the
  GPU's scheduling take: ``short_gap_count``, ``short_gap_ns`` and ``short_gap_share``
  (over the window).
* **Launch-bound** (``launch_bound``): at least :data:`LAUNCH_BOUND_SMALL_SHARE` of
  the kernels are small and launch-scale gaps are at least
  :data:`LAUNCH_BOUND_GAP_SHARE` of the window: the GPU spends a large part of its time
  between tiny kernels, so the launch path, not the work, sets the pace.
* ``durations``: per GPU, kernel count and time per duration bucket
  (:data:`DURATION_BUCKET_LABELS`).
* ``configs``: per GPU, the :data:`TOP_KERNELS` kernel names with the most kernel time
  (whole trace, not only the window: launch configurations are read aggregated per
  kernel name in SQL for each process's top names, ``nsysan.ingest.resources``), one
  row per (name, grid, block):
  ``blocks`` (grid x*y*z), ``threads_per_block`` (block x*y*z), ``launches``,
  ``total_ns``, ``time_share`` (of the GPU's kernel time), and the flags
  ``one_thread_blocks`` (1 thread per block: one lane of a 32-lane warp does work),
  ``sub_warp_blocks`` (fewer than 32 threads a block) and ``single_block`` (a grid of
  one block runs on one SM).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import polars as pl

__all__ = [
    "DURATION_BUCKET_LABELS",
    "LAUNCH_BOUND_GAP_SHARE",
    "LAUNCH_BOUND_SMALL_SHARE",
    "SHORT_GAP_NS",
    "SMALL_KERNEL_NS",
    "TOP_KERNELS",
    "WARP_THREADS",
    "LaunchResult",
    "measure_launch",
]

SMALL_KERNEL_NS = 10_000
SHORT_GAP_NS = 10_000
LAUNCH_BOUND_SMALL_SHARE = 0.5
LAUNCH_BOUND_GAP_SHARE = 0.2
TOP_KERNELS = 5
WARP_THREADS = 32
DURATION_BUCKET_EDGES_NS = (1_000, 10_000, 100_000, 1_000_000)
DURATION_BUCKET_LABELS = ("<1 µs", "1–10 µs", "10–100 µs", "0.1–1 ms", "≥1 ms")


@dataclass(frozen=True)
class LaunchResult:
    """Launch overhead per GPU, kernel duration buckets and the top kernels' configurations.

    ``per_gpu``: ``gpu, window_ns, kernels, kernel_ns, launch_rate, kernel_p50_ns,
    kernel_p90_ns, kernel_p99_ns, small_kernel_count, small_kernel_share,
    small_kernel_time_share, gap_count, short_gap_count, short_gap_ns, short_gap_share,
    launch_bound``.
    ``durations``: ``gpu, bucket, label, count, time_ns``.
    ``configs``: ``gpu, short_name, grid_x … block_z, blocks, threads_per_block,
    launches, total_ns, time_share, one_thread_blocks, sub_warp_blocks, single_block``;
    empty when ``configs_available`` is False (the export has no grid/block columns).
    """

    per_gpu: pl.DataFrame
    durations: pl.DataFrame
    configs: pl.DataFrame
    configs_available: bool

    def gpu(self, gpu: int) -> dict[str, object] | None:
        rows = self.per_gpu.filter(pl.col("gpu") == gpu)
        return rows.row(0, named=True) if rows.height else None


def measure_launch(
    kernels: pl.DataFrame,
    gaps: pl.DataFrame,
    windows: pl.DataFrame,
    launch_configs: pl.DataFrame,
) -> LaunchResult:
    """Launch overhead per GPU over its window; configurations of its top kernels."""
    w = windows.select(
        pl.col("gpu").cast(pl.Int32), "window_start_ns", "window_end_ns"
    ).with_columns((pl.col("window_end_ns") - pl.col("window_start_ns")).alias("window_ns"))

    stats, counted = _duration_stats(_window_durations(kernels, w))
    g = gaps.select(pl.col("gpu").cast(pl.Int32), "duration_ns")
    short = pl.col("duration_ns") < SHORT_GAP_NS
    gap_stats = g.group_by("gpu").agg(
        pl.len().cast(pl.Int64).alias("gap_count"),
        short.sum().cast(pl.Int64).alias("short_gap_count"),
        pl.col("duration_ns").filter(short).sum().alias("short_gap_ns"),
    )
    per_gpu = (
        w.join(stats, on="gpu", how="left")
        .join(gap_stats, on="gpu", how="left")
        .with_columns(
            pl.col("kernels", "kernel_ns", "small_kernel_count", "_small_ns").fill_null(0),
            pl.col("gap_count", "short_gap_count", "short_gap_ns").fill_null(0),
        )
        .with_columns(
            _share(pl.col("kernels") * 1e9, "window_ns").alias("launch_rate"),
            _share(pl.col("small_kernel_count"), "kernels").alias("small_kernel_share"),
            _share(pl.col("_small_ns"), "kernel_ns").alias("small_kernel_time_share"),
            _share(pl.col("short_gap_ns"), "window_ns").alias("short_gap_share"),
        )
        .with_columns(
            (
                (pl.col("small_kernel_share").fill_null(0) >= LAUNCH_BOUND_SMALL_SHARE)
                & (pl.col("short_gap_share").fill_null(0) >= LAUNCH_BOUND_GAP_SHARE)
            ).alias("launch_bound")
        )
        .select(
            "gpu",
            "window_ns",
            "kernels",
            "kernel_ns",
            "launch_rate",
            "kernel_p50_ns",
            "kernel_p90_ns",
            "kernel_p99_ns",
            "small_kernel_count",
            "small_kernel_share",
            "small_kernel_time_share",
            "gap_count",
            "short_gap_count",
            "short_gap_ns",
            "short_gap_share",
            "launch_bound",
        )  # fmt: skip
        .sort("gpu")
    )
    durations = _durations(counted, w)
    kernel_ns = (
        kernels.lazy()
        .select(pl.col("gpu").cast(pl.Int32), (pl.col("end_ns") - pl.col("start_ns")).alias("_d"))
        .filter(pl.col("gpu").is_not_null())
        .group_by("gpu")
        .agg(pl.col("_d").sum().alias("_gpu_ns"))
        .collect()
    )
    configs = _configs(launch_configs, kernel_ns)
    return LaunchResult(
        per_gpu=per_gpu,
        durations=durations,
        configs=configs,
        configs_available=launch_configs.height > 0,
    )


def _share(num: pl.Expr, den: str) -> pl.Expr:
    return pl.when(pl.col(den) > 0).then(num / pl.col(den))


# What _duration_stats returns: per GPU, and per GPU and duration bucket.
_PERCENTILES = ((0.5, "kernel_p50_ns"), (0.9, "kernel_p90_ns"), (0.99, "kernel_p99_ns"))
_STATS = {
    "gpu": pl.Int32,
    "kernels": pl.UInt32,
    "kernel_ns": pl.Int64,
    **{name: pl.Int64 for _, name in _PERCENTILES},
    "small_kernel_count": pl.Int64,
    "_small_ns": pl.Int64,
}
_COUNTED = {"gpu": pl.Int32, "bucket": pl.Int32, "count": pl.Int64, "time_ns": pl.Int64}


def _window_durations(
    kernels: pl.DataFrame, windows: pl.DataFrame
) -> Iterator[tuple[int, np.ndarray]]:
    """Per GPU of ``windows`` in order, the durations of its kernels that start in its
    window, sorted.

    One GPU at a time: a sort of every GPU's durations by GPU and duration took +1.5 GB
    at 20M kernels (the filtered copy, its row-encoded keys and the sorted copy), a GPU's
    own durations a few tens of MB.
    """
    rows = windows.select("gpu", "window_start_ns", "window_end_ns").sort("gpu")
    for gpu, start, end in rows.iter_rows():
        durations = (
            kernels.lazy()
            .filter(
                (pl.col("gpu") == gpu)
                & pl.col("end_ns").is_not_null()
                & (pl.col("start_ns") >= start)
                & (pl.col("start_ns") < end)
            )
            .select((pl.col("end_ns") - pl.col("start_ns")).alias("_d"))
            .collect()
            .get_column("_d")
            .to_numpy()
        )
        if len(durations):
            yield gpu, np.sort(durations)


def _duration_stats(
    per_gpu: Iterable[tuple[int, np.ndarray]],
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Per GPU of ``per_gpu`` (its kernels' durations in order, :func:`_window_durations`).

    Returns its kernel statistics (``gpu, kernels, kernel_ns``, the nearest-rank
    percentiles, ``small_kernel_count, _small_ns``) and, per GPU and duration bucket,
    ``gpu, bucket, count, time_ns``. A percentile is one element of the sorted block, the
    kernels under an edge a binary search, their time the sum of a slice. No per-kernel
    bucket, mask or sorted copy per percentile is made (those were +0.37 GB beside host
    attribution at 5M kernels).
    """
    stats: dict[str, list[int]] = {name: [] for name in _STATS}
    counted: dict[str, list[int]] = {"gpu": [], "bucket": [], "count": [], "time_ns": []}
    for gpu, block in per_gpu:
        n = len(block)
        small = int(np.searchsorted(block, SMALL_KERNEL_NS, side="left"))
        stats["gpu"].append(gpu)
        stats["kernels"].append(n)
        stats["kernel_ns"].append(int(block.sum()))
        for q, name in _PERCENTILES:
            # Nearest rank: the smallest duration with at least q of the kernels at or below.
            stats[name].append(int(block[max(math.ceil(n * q), 1) - 1]))
        stats["small_kernel_count"].append(small)
        stats["_small_ns"].append(int(block[:small].sum()))
        # Bucket i holds the durations below edge i and at or above edge i - 1.
        cuts = [0, *np.searchsorted(block, DURATION_BUCKET_EDGES_NS, side="left"), n]
        for bucket, (lo, hi) in enumerate(itertools.pairwise(cuts)):
            counted["gpu"].append(gpu)
            counted["bucket"].append(bucket)
            counted["count"].append(int(hi - lo))
            counted["time_ns"].append(int(block[lo:hi].sum()))
    return pl.DataFrame(stats, schema=_STATS), pl.DataFrame(counted, schema=_COUNTED)


def _durations(counted: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """``counted`` (:func:`_duration_stats`) with its labels, every bucket of every GPU."""
    buckets = pl.DataFrame(
        {"bucket": list(range(len(DURATION_BUCKET_LABELS))), "label": list(DURATION_BUCKET_LABELS)},
        schema={"bucket": pl.Int32, "label": pl.String},
    )
    grid = windows.select("gpu").join(buckets, how="cross")
    return (
        grid.join(counted, on=["gpu", "bucket"], how="left")
        .with_columns(pl.col("count", "time_ns").fill_null(0))
        .sort("gpu", "bucket")
    )


def _configs(launch_configs: pl.DataFrame, kernel_ns: pl.DataFrame) -> pl.DataFrame:
    cfg = launch_configs.filter(pl.col("gpu").is_not_null())
    dims = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")
    keys = ["gpu", "short_name", *dims]
    merged = cfg.group_by(keys).agg(pl.col("launches").sum(), pl.col("total_ns").sum())
    by_name = merged.group_by("gpu", "short_name").agg(pl.col("total_ns").sum().alias("_name_ns"))
    top = (
        by_name.sort(["gpu", "_name_ns", "short_name"], descending=[False, True, False])
        .group_by("gpu", maintain_order=True)
        .head(TOP_KERNELS)
    )
    threads = pl.col("block_x") * pl.col("block_y") * pl.col("block_z")
    blocks = pl.col("grid_x").cast(pl.Int64) * pl.col("grid_y") * pl.col("grid_z")
    return (
        merged.join(top, on=["gpu", "short_name"], how="inner")
        .join(kernel_ns, on="gpu")
        .with_columns(
            blocks.alias("blocks"),
            threads.cast(pl.Int64).alias("threads_per_block"),
            _share(pl.col("total_ns"), "_gpu_ns").alias("time_share"),
        )
        .with_columns(
            (pl.col("threads_per_block") == 1).alias("one_thread_blocks"),
            (pl.col("threads_per_block") < WARP_THREADS).alias("sub_warp_blocks"),
            (pl.col("blocks") == 1).alias("single_block"),
        )
        .sort(["gpu", "_name_ns", "short_name", "total_ns"], descending=[False, True, False, True])
        .select(
            "gpu",
            "short_name",
            *dims,
            "blocks",
            "threads_per_block",
            "launches",
            "total_ns",
            "time_share",
            "one_thread_blocks",
            "sub_warp_blocks",
            "single_block",
        )  # fmt: skip
    )
