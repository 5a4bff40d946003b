"""Host attribution's sums: per GPU, the gap time of each cause and its share, and the
time of each NVTX text.

:func:`~nsysan.analyze.host.attribute_gaps` splits every gap's time into causes; what
the report and the diagnosis read is summed here, from the per-gap table it builds.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from nsysan.analyze.host_causes import CAUSE_LABELS, CAUSES, HOST_SIDE_CAUSES, PRIMARY_CLASSES

__all__ = [
    "cause_sums",
    "in_steady_state",
    "long_shares",
    "nvtx_table",
    "per_gpu_sums",
    "texts_per_gpu",
]


def per_gpu_sums(
    gaps: pl.DataFrame | pl.LazyFrame, gpus: pl.DataFrame, constant: frozenset[str] = frozenset()
) -> pl.DataFrame:
    """Per GPU sums and shares; ``constant`` names the cause columns that are 0 throughout."""
    return cause_sums(gaps, gpus, constant)[0]


def cause_sums(
    gaps: pl.DataFrame | pl.LazyFrame,
    gpus: pl.DataFrame,
    constant: frozenset[str] = frozenset(),
    steady: bool = False,
) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """Per GPU, the gaps' sums and shares (:attr:`HostResult.per_gpu`) and, with
    ``steady``, the sums of the gaps flagged ``_steady`` (:func:`in_steady_state`:
    :attr:`HostResult.steady`), in one pass over ``gaps``.

    ``gaps``: the per-gap table, or the plan of its cause columns
    (:func:`~nsysan.analyze.host.attribute_gaps` without the per-gap detail): its rows
    are then summed a batch at a time, never held whole. ``gpus``: every GPU's
    ``gpu`` (a row each, gaps or not). ``constant`` names the cause columns that are 0
    throughout. A GPU without a steady gap has no steady row.
    """
    cause_ns = [f"{c}_ns" for c in CAUSES]
    flag = pl.col("_steady")
    # Sums of the column where steady, else 0 (a filter per column and group is several
    # times slower).
    steady_sums = (
        [
            flag.sum().alias("_steady_gaps"),
            *(
                pl.lit(0, dtype=pl.Int64).alias(f"_steady_{c}")
                if c in constant
                else pl.when(flag).then(pl.col(c)).otherwise(0).sum().alias(f"_steady_{c}")
                for c in ["duration_ns", *cause_ns]
            ),
        ]
        if steady
        else []
    )
    plan = gaps.lazy()
    sums = (
        plan.group_by(pl.col("gpu").cast(pl.Int32))
        .agg(
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
            *steady_sums,
        )
        .collect(engine="streaming")
    )
    per_steady = None
    if steady:
        per_steady = (
            sums.filter(pl.col("_steady_gaps") > 0)
            .select(
                "gpu",
                pl.col("_steady_duration_ns").cast(pl.Int64).alias("gap_ns"),
                *(pl.col(f"_steady_{c}").cast(pl.Int64).alias(c) for c in cause_ns),
            )
            .sort("gpu")
        )
    return _shares(sums.select(pl.exclude("^_steady_.*$")), gpus), per_steady


def in_steady_state(gaps: pl.DataFrame, steady_starts: pl.DataFrame) -> pl.Series:
    """``_steady``: per gap of ``gaps``, whether it starts at or after its GPU's steady
    start (``steady_starts``: ``gpu, steady_start_ns``, :attr:`DominantResult.per_gpu`);
    null on a GPU without one."""
    starts = steady_starts.drop_nulls("steady_start_ns")
    # The few GPUs are cast to the gaps' type, not the millions of gaps to Int64.
    steady_start = pl.col("gpu").replace_strict(
        starts["gpu"].cast(gaps.schema["gpu"]),
        starts["steady_start_ns"].cast(pl.Int64),
        default=None,
    )
    return gaps.select((pl.col("start_ns") >= steady_start).alias("_steady")).to_series()


def _shares(sums: pl.DataFrame, gpus: pl.DataFrame) -> pl.DataFrame:
    cause_ns = [f"{c}_ns" for c in CAUSES]
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
        .group_by(gpu.name, "nvtx_text")
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
