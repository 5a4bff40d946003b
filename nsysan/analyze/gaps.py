"""Gaps: maximal idle intervals of a GPU inside its analysis window.

Definition (docs/metrics/gaps.md#gap): a gap is a maximal interval of positive
length inside the window that no busy interval covers (busy as defined in
:mod:`nsysan.analyze.busy`, per GPU or, in ``nvidia`` mode, per process-device).
Operations that touch leave no gap; a zero-length operation splits a gap in two.

Per measured unit the summary gives ``window_ns``, ``busy_ns``, ``gap_ns``
(``busy_ns + gap_ns == window_ns``), ``gap_count``, ``gap_share = gap_ns /
window_ns`` and ``kernel_active_share`` (kernel union / window). The
distribution counts gaps and their total time per size bucket: "<1 µs", then one
bucket per decade from 1 µs to 10 s, then "≥10 s" (lower bound inclusive).

:func:`nvidia_gpu_gaps` reproduces Nsight Systems' ``gpu_gaps`` rule row for row:
per (PID, device), gaps between the operations of
:func:`nsysan.analyze.busy.nvidia_operations` inside the first→last operation
range, kept when strictly longer than the threshold, ordered by duration
(longest first) then start, each with the context id of the operation that ended
when the gap began.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from nsysan.intervals import complement_in
from nsysan.window import PROCESS_KEYS

__all__ = [
    "GAP_BUCKET_EDGES_NS",
    "GAP_BUCKET_LABELS",
    "GapsResult",
    "gap_distribution",
    "measure_gaps",
    "nvidia_gpu_gaps",
]

# Lower bounds of the size buckets after the first ("<1 µs"): one per decade.
GAP_BUCKET_EDGES_NS = (
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
    1_000_000_000,
    10_000_000_000,
)
GAP_BUCKET_LABELS = (
    "<1 µs",
    "1–10 µs",
    "10–100 µs",
    "100 µs–1 ms",
    "1–10 ms",
    "10–100 ms",
    "100 ms–1 s",
    "1–10 s",
    "≥10 s",
)
# nsys analyze -r gpu_gaps default: gaps longer than 500 ms.
NVIDIA_DEFAULT_GAP_MS = 500
NS_PER_MS = 1_000_000


@dataclass(frozen=True)
class GapsResult:
    """Gaps, their per-unit summary and their size distribution."""

    keys: tuple[str, ...]
    #: keys + start_ns, end_ns, duration_ns, sorted by keys and start
    gaps: pl.DataFrame
    #: keys + window_ns, busy_ns, gap_ns, gap_count, gap_share, kernel_active_share
    summary: pl.DataFrame
    #: keys + bucket (0..8), label, lower_ns, upper_ns (null for the last), count, total_ns
    distribution: pl.DataFrame


def _buckets() -> pl.DataFrame:
    lower = [0, *GAP_BUCKET_EDGES_NS]
    upper: list[int | None] = [*GAP_BUCKET_EDGES_NS, None]
    return pl.DataFrame(
        {
            "bucket": list(range(len(GAP_BUCKET_LABELS))),
            "label": list(GAP_BUCKET_LABELS),
            "lower_ns": lower,
            "upper_ns": upper,
        },
        schema={"bucket": pl.Int32, "label": pl.String, "lower_ns": pl.Int64, "upper_ns": pl.Int64},
    )


def _at_least(gaps: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Per unit, count (``_n{b}``) and total time (``_t{b}``) of the gaps in bucket ``b`` or above.

    One pass per unit instead of a group per (unit, bucket): bucket ``b`` holds
    ``_n{b} - _n{b+1}`` gaps. ``_n0``/``_t0`` are all the unit's gaps.
    """
    duration = pl.col("duration_ns")
    reaches = [duration >= edge for edge in GAP_BUCKET_EDGES_NS]
    return gaps.group_by(keys).agg(
        pl.len().cast(pl.Int64).alias("_n0"),
        duration.sum().alias("_t0"),
        *(r.sum().cast(pl.Int64).alias(f"_n{b}") for b, r in enumerate(reaches, 1)),
        *(duration.filter(r).sum().alias(f"_t{b}") for b, r in enumerate(reaches, 1)),
    )


def _distribution(at_least: pl.DataFrame, units: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    last = len(GAP_BUCKET_LABELS) - 1

    def above(col: str, b: int) -> pl.Expr:
        return pl.col(f"{col}{b + 1}") if b < last else pl.lit(0, pl.Int64)

    counted = pl.concat(
        at_least.select(
            *keys,
            pl.lit(b, pl.Int32).alias("bucket"),
            (pl.col(f"_n{b}") - above("_n", b)).alias("count"),
            (pl.col(f"_t{b}") - above("_t", b)).alias("total_ns"),
        )
        for b in range(last + 1)
    )
    return (
        units.select(keys)
        .unique()
        .join(_buckets(), how="cross")
        .join(counted, on=[*keys, "bucket"], how="left")
        .with_columns(pl.col("count").fill_null(0), pl.col("total_ns").fill_null(0))
        .sort(*keys, "bucket")
    )


def gap_distribution(gaps: pl.DataFrame, units: pl.DataFrame, keys: Sequence[str]) -> pl.DataFrame:
    """Count and total time of ``gaps`` per size bucket for every unit in ``units``, zeros kept."""
    keys = list(keys)
    return _distribution(_at_least(gaps, keys), units, keys)


def measure_gaps(busy: pl.DataFrame, summary: pl.DataFrame, keys: Sequence[str]) -> GapsResult:
    """Gaps from the busy intervals and windows of :func:`nsysan.analyze.busy.measure_busy`.

    ``busy`` is ``BusyResult.intervals`` and ``summary`` is ``BusyResult.summary``
    (keys, window bounds, ``window_ns``, ``busy_ns``, ``kernel_active_share``).
    """
    keys = list(keys)
    # complement_in lists the gaps by unit and start already.
    gaps = complement_in(busy, summary, keys).with_columns(
        (pl.col("end_ns") - pl.col("start_ns")).alias("duration_ns")
    )
    at_least = _at_least(gaps, keys)
    per_unit = at_least.select(
        *keys, pl.col("_t0").alias("gap_ns"), pl.col("_n0").alias("gap_count")
    )
    table = (
        summary.select(*keys, "window_ns", "busy_ns", "kernel_active_share")
        .join(per_unit, on=keys, how="left")
        .with_columns(pl.col("gap_ns").fill_null(0), pl.col("gap_count").fill_null(0))
        .with_columns(
            pl.when(pl.col("window_ns") > 0)
            .then(pl.col("gap_ns") / pl.col("window_ns"))
            .alias("gap_share")
        )
        .select(
            *keys,
            "window_ns",
            "busy_ns",
            "gap_ns",
            "gap_count",
            "gap_share",
            "kernel_active_share",
        )
        .sort(keys)
    )
    return GapsResult(
        keys=tuple(keys),
        gaps=gaps,
        summary=table,
        distribution=_distribution(at_least, summary, keys),
    )


def nvidia_gpu_gaps(ops: pl.DataFrame, min_gap_ms: int = NVIDIA_DEFAULT_GAP_MS) -> pl.DataFrame:
    """Nsight Systems' ``gpu_gaps`` rule (``nsys analyze -r gpu_gaps:gap=<min_gap_ms>``).

    ``ops`` comes from :func:`nsysan.analyze.busy.nvidia_operations`. A gap is kept
    when its duration is *strictly* greater than ``min_gap_ms`` milliseconds (so
    ``min_gap_ms=0`` lists every gap). Columns: ``row`` (NVIDIA's Row#),
    ``duration_ns``, ``start_ns``, ``end_ns``, the process keys and ``context_id``.
    """
    keys = list(PROCESS_KEYS)
    windows = ops.group_by(keys).agg(
        pl.col("start_ns").min().alias("window_start_ns"),
        pl.col("end_ns").max().alias("window_end_ns"),
    )
    # The rule pairs each gap with the operation whose end opens it; among
    # operations ending at the same instant its choice is arbitrary, ours the
    # smallest context id.
    enders = ops.group_by(*keys, "end_ns").agg(pl.col("context_id").min())
    gaps = (
        complement_in(ops, windows, keys)
        .with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("duration_ns"))
        .filter(pl.col("duration_ns") > min_gap_ms * NS_PER_MS)
        .join(enders.rename({"end_ns": "start_ns"}), on=[*keys, "start_ns"], how="left")
    )
    return (
        gaps.sort(
            ["duration_ns", "start_ns", *keys], descending=[True, False, *([False] * len(keys))]
        )
        .with_row_index("row", offset=1)
        .select("row", "duration_ns", "start_ns", "end_ns", *keys, "context_id")
    )
