"""GPU metrics by name: their keys and units.

The part of :mod:`nsysan.analyze.contention` that recognises the samples' metric
names (:data:`METRIC_KINDS`), lists every name found (``metrics_found``) and converts
the values to shares or MHz; the module docstring there defines the input and units.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import polars as pl

__all__ = [
    "CLOCK_HZ_MIN",
    "HZ_PER_MHZ",
    "METRICS_FOUND_SCHEMA",
    "METRIC_KINDS",
    "PERCENT",
    "MetricKind",
    "metric_key",
    "metric_name_table",
    "metrics_found",
    "normalise_units",
]


@dataclass(frozen=True)
class MetricKind:
    """One recognised GPU metric: its key, unit after normalisation and name pattern."""

    key: str
    unit: str  # "share" (of peak / of time) or "MHz"
    pattern: str  # regex on the normalised name (lower case, no bracketed suffix)
    canonical: str  # NVIDIA's name in Nsight Systems 2023-2024 exports


METRIC_KINDS: tuple[MetricKind, ...] = (
    MetricKind("gr_active", "share", r"^gr active\b", "GR Active"),
    MetricKind("sm_active", "share", r"^sm active\b", "SM Active"),
    MetricKind("sm_issue", "share", r"^sm issue\b", "SM Issue"),
    MetricKind("tensor_active", "share", r"^tensor\b.*\bactive\b", "Tensor Active"),
    MetricKind("dram_read", "share", r"^dram read\b", "DRAM Read Throughput"),
    MetricKind("dram_write", "share", r"^dram write\b", "DRAM Write Throughput"),
    MetricKind(
        "pcie_rx", "share", r"^pcie (rx|read)\b.*\b(throughput|bandwidth)\b", "PCIe RX Throughput"
    ),
    MetricKind(
        "pcie_tx", "share", r"^pcie (tx|write)\b.*\b(throughput|bandwidth)\b", "PCIe TX Throughput"
    ),
    MetricKind("nvlink_rx", "share", r"^nvlink (rx|read)\b", "NVLink RX Throughput"),
    MetricKind("nvlink_tx", "share", r"^nvlink (tx|write)\b", "NVLink TX Throughput"),
    MetricKind("gpc_clock", "MHz", r"^gpc clock\b", "GPC Clock Frequency"),
    MetricKind("sys_clock", "MHz", r"^sys clock\b", "SYS Clock Frequency"),
)
# No GPU clock runs below 0.1 MHz or above 100 GHz: a median above this is hertz.
CLOCK_HZ_MIN = 1e5
HZ_PER_MHZ = 1e6
PERCENT = 100.0

_BRACKETED = re.compile(r"\s*[\[(][^\])]*[\])]")
_SPACES = re.compile(r"\s+")

METRICS_FOUND_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "gpu": pl.Int32,
    "metric": pl.String,
    "key": pl.String,
    "used": pl.Boolean,
    "stored_unit": pl.String,
    "samples": pl.Int64,
    "first_ns": pl.Int64,
    "last_ns": pl.Int64,
}


def _normalised_name(name: str) -> str:
    return _SPACES.sub(" ", _BRACKETED.sub("", name)).strip().lower()


def metric_key(name: str) -> str | None:
    """The key of a GPU metric name (``"SM Active"`` -> ``"sm_active"``), None if unknown."""
    norm = _normalised_name(name)
    for kind in METRIC_KINDS:
        if re.search(kind.pattern, norm):
            return kind.key
    return None


def metric_name_table(names: list[str]) -> pl.DataFrame:
    """Key, unit and preference rank of each distinct metric name (a loop over names, not rows)."""
    canonical = {k.key: k.canonical.lower() for k in METRIC_KINDS}
    units = {k.key: k.unit for k in METRIC_KINDS}
    ranked: list[tuple[tuple[int, int, str], str | None]] = []
    for name in names:
        key = metric_key(name)
        # Canonical name first, then the shortest, then alphabetical.
        exact = 0 if key and _normalised_name(name) == canonical[key] else 1
        ranked.append(((exact, len(name), name), key))
    ranked.sort()
    return pl.DataFrame(
        [
            {"metric": rank[2], "key": key, "unit": units.get(key) if key else None, "_rank": i}
            for i, (rank, key) in enumerate(ranked)
        ],
        schema={"metric": pl.String, "key": pl.String, "unit": pl.String, "_rank": pl.Int64},
    )


def normalise_units(used: pl.DataFrame) -> pl.DataFrame:
    """Values as shares or MHz; ``stored_unit`` per (gpu, metric)."""
    median = pl.col("value").median().over("gpu", "metric")
    stored = (
        pl.when(pl.col("unit") == "MHz")
        .then(pl.when(median > CLOCK_HZ_MIN).then(pl.lit("Hz")).otherwise(pl.lit("MHz")))
        .otherwise(pl.lit("percent"))
    )
    factor = (
        pl.when(pl.col("stored_unit") == "Hz")
        .then(1.0 / HZ_PER_MHZ)
        .when(pl.col("stored_unit") == "percent")
        .then(1.0 / PERCENT)
        .otherwise(1.0)
    )
    return used.with_columns(stored.alias("stored_unit")).with_columns(
        (pl.col("value") * factor).alias("value")
    )


def metrics_found(metrics: pl.DataFrame, names: pl.DataFrame, stored: pl.DataFrame) -> pl.DataFrame:
    """Every (gpu, metric) stored, with its key, whether it is used, and its stored unit."""
    found = (
        metrics.group_by("gpu", "metric")
        .agg(
            pl.len().cast(pl.Int64).alias("samples"),
            pl.col("time_ns").min().alias("first_ns"),
            pl.col("time_ns").max().alias("last_ns"),
        )
        .join(names.select("metric", "key", "_rank"), on="metric", how="left")
    )
    best = (
        found.filter(pl.col("key").is_not_null())
        .group_by("gpu", "key")
        .agg(pl.col("_rank").min().alias("_best"))
    )
    return (
        found.join(best, on=["gpu", "key"], how="left", nulls_equal=True)
        .join(stored, on=["gpu", "metric"], how="left", nulls_equal=True)
        .with_columns(
            (pl.col("key").is_not_null() & (pl.col("_rank") == pl.col("_best"))).alias("used")
        )
        .sort("gpu", "metric", nulls_last=True)
        .select(list(METRICS_FOUND_SCHEMA))
        .cast(METRICS_FOUND_SCHEMA)  # type: ignore[arg-type]
    )
