"""Host attribution's sums: per GPU, the gap time of each cause and its share, and the
time of each NVTX text.

:func:`~nsysan.analyze.host.attribute_gaps` splits every gap's time into causes; what
the report and the diagnosis read is summed here, from the per-gap table it builds.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from nsysan.analyze.host_causes import CAUSE_LABELS, CAUSES, HOST_SIDE_CAUSES, PRIMARY_CLASSES

__all__ = ["long_shares", "nvtx_table", "per_gpu_sums", "steady_cause_sums", "texts_per_gpu"]


def per_gpu_sums(
    gaps: pl.DataFrame, gpus: pl.DataFrame, constant: frozenset[str] = frozenset()
) -> pl.DataFrame:
    """Per GPU sums and shares; ``constant`` names the cause columns that are 0 throughout."""
    cause_ns = [f"{c}_ns" for c in CAUSES]
    sums = gaps.group_by(pl.col("gpu").cast(pl.Int32)).agg(
        pl.len().cast(pl.Int64).alias("gap_count"),
        pl.col("duration_ns").sum().alias("gap_ns"),
        *(
            (pl.col("primary") == p).sum().cast(pl.Int64).alias(f"{p}_count")
            for p in PRIMARY_CLASSES
        ),
        *(
            pl.lit(0, dtype=pl.Int64).alias(c) if c in constant else pl.col(c).sum()
            for c in cause_ns
        ),
    )
    counts = ["gap_count", "gap_ns", *(f"{p}_count" for p in PRIMARY_CLASSES), *cause_ns]
    joined = gpus.join(sums, on="gpu", how="left").with_columns(
        pl.col(c).fill_null(0).cast(pl.Int64) for c in counts
    )

    def share(col: pl.Expr) -> pl.Expr:
        return pl.when(pl.col("gap_ns") > 0).then(col / pl.col("gap_ns"))

    host = pl.sum_horizontal(f"{c}_ns" for c in HOST_SIDE_CAUSES)
    return (
        joined.with_columns(
            *(share(pl.col(f"{c}_ns")).alias(f"{c}_share") for c in CAUSES),
            share(host).alias("host_share"),
            pl.when(pl.col("gap_ns") > 0).then(_largest(cause_ns, CAUSES)).alias("dominant_cause"),
        )
        .select(
            "gpu",
            "gap_count",
            "gap_ns",
            *(f"{p}_count" for p in PRIMARY_CLASSES),
            *cause_ns,
            *(f"{c}_share" for c in CAUSES),
            "host_share",
            "dominant_cause",
        )
        .sort("gpu")
    )


def steady_cause_sums(gaps: pl.DataFrame, steady_starts: pl.DataFrame) -> pl.DataFrame:
    """Per GPU, the gap time from its steady state's start on: ``gpu, gap_ns, <cause>_ns``.

    ``gaps``: :attr:`HostResult.gaps`; ``steady_starts``: ``gpu, steady_start_ns``
    (:attr:`DominantResult.per_gpu`). A gap counts when it starts at or after its GPU's
    steady start; a GPU without such a gap has no row.
    """
    cause_ns = [f"{c}_ns" for c in CAUSES if f"{c}_ns" in gaps.columns]
    starts = steady_starts.drop_nulls("steady_start_ns")
    steady_start = (
        pl.col("gpu")
        .cast(pl.Int64)
        .replace_strict(
            starts["gpu"].cast(pl.Int64), starts["steady_start_ns"].cast(pl.Int64), default=None
        )
    )
    return (
        gaps.lazy()
        .filter(pl.col("start_ns") >= steady_start)
        .group_by(pl.col("gpu").cast(pl.Int32))
        .agg(pl.col("duration_ns").sum().alias("gap_ns"), *(pl.col(c).sum() for c in cause_ns))
        .sort("gpu")
        # Streamed: the steady-state rows (most of the gaps) are summed batch by batch,
        # not filtered into a copy first.
        .collect(engine="streaming")
    )


def long_shares(per_gpu: pl.DataFrame) -> pl.DataFrame:
    return pl.concat(
        [
            per_gpu.select(
                "gpu",
                pl.lit(c).alias("cause"),
                pl.lit(CAUSE_LABELS[c]).alias("label"),
                pl.col(f"{c}_ns").alias("time_ns"),
                pl.col(f"{c}_share").alias("share"),
            )
            for c in CAUSES
        ]
    ).sort("gpu")


def texts_per_gpu(text_time: pl.DataFrame, gpu: pl.Series) -> pl.DataFrame:
    """``text_time`` (per gap and text) summed per GPU and text; ``gpu`` is each gap's GPU."""
    # A gap's number is its row in the gap table (_gap_table): a gather, not a join.
    return (
        text_time.with_columns(gpu.gather(text_time["_gap"]))
        .group_by("gpu", "nvtx_text")
        .agg(pl.col("nvtx_ns").sum(), pl.col("covered_ns").sum())
    )


def nvtx_table(text_time: pl.DataFrame, gap_ns: pl.DataFrame) -> pl.DataFrame:
    """Per GPU and text, from ``text_time`` (``gpu, nvtx_text, nvtx_ns, covered_ns`` rows)."""
    return (
        text_time.group_by(pl.col("gpu").cast(pl.Int32), "nvtx_text")
        .agg(pl.col("nvtx_ns").sum().cast(pl.Int64), pl.col("covered_ns").sum().cast(pl.Int64))
        .join(gap_ns, on="gpu", how="left")
        .select(
            "gpu",
            pl.col("nvtx_text").cast(pl.String).alias("text"),
            "nvtx_ns",
            "covered_ns",
            pl.when(pl.col("gap_ns") > 0)
            .then(pl.col("nvtx_ns") / pl.col("gap_ns"))
            .alias("nvtx_share"),
        )
        .sort(["gpu", "nvtx_ns", "covered_ns", "text"], descending=[False, True, True, False])
    )


def _largest(columns: Sequence[str], names: Sequence[str]) -> pl.Expr:
    """Name of the largest column per row (the first on a tie)."""
    # Picks an index, then names it: concat_list(...).list.arg_max() or string
    # literals per row are several times slower on a million rows.
    top = pl.max_horizontal(columns)
    return pl.coalesce(
        pl.when(pl.col(c) == top).then(pl.lit(i, dtype=pl.Int8)) for i, c in enumerate(columns)
    ).replace_strict(list(range(len(names))), list(names), return_dtype=pl.String)
