"""Memory- vs compute-bound: Nsight Compute classes weighted by nsys kernel time.

Definition (docs/metrics/bound.md):

* **Class of one ncu launch** -- Nsight Compute's own SOLBottleneck rule, applied to
  memory SOL ``m`` (:data:`MEMORY_SOL_METRICS`, first present) and compute SOL ``c``
  (:data:`COMPUTE_SOL_METRICS`), both % of peak:
  ``m >= BOUND_PCT or c >= BOUND_PCT`` -> the higher one ("compute" on a tie);
  else ``m < LATENCY_PCT and c < LATENCY_PCT`` -> "latency";
  else ``|c - m| >= BALANCED_POINTS`` -> the higher one; else "balanced".
  A launch without both numbers is "unclassified".
* **Arithmetic intensity** (FLOP per DRAM byte, as ncu's roofline computes it) when
  the counters are there: FLOP = sum over precisions (d, f, h) whose add, mul and fma
  instruction counts are all present of ``w_add*add + w_mul*mul + w_fma*fma`` with
  ncu's weights (1, 1, 2 for d and f; 2, 2, 4 for h); bytes = ``dram__bytes.sum``
  (or read + write, or the per-second rate times the duration). Null otherwise.
* **Class of a kernel profiled several times**: the rule applied to the
  duration-weighted mean SOLs of its launches (which is the SOL of the launches run
  back to back); ``classes_seen`` keeps the per-launch classes.
* **Join to nsys** (per distinct nsys kernel: GPU, name, launch config), first match
  wins, over :data:`JOIN_LEVELS`: "exact" (ncu kernel name == nsys demangled name),
  "normalized" (the same after :func:`normalize_kernel_name`), "short_name" (ncu base
  function name == nsys short name). At each level the launch config (grid, block)
  is used when ncu has a launch with the same config; otherwise all ncu launches of
  that name are pooled.
* **Per GPU**: the sum of kernel durations (overlaps counted twice; this is kernel
  time, not busy time) split by class, with "unjoined" (no ncu data for that kernel)
  and "unclassified" (ncu data without both SOL numbers) as explicit classes; shares
  sum to 1.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce

import polars as pl

__all__ = [
    "BALANCED_POINTS",
    "BOUND_PCT",
    "CLASSES",
    "COMPUTE_SOL_METRICS",
    "GPU_CLASSES",
    "JOIN_LEVELS",
    "LATENCY_PCT",
    "MEMORY_SOL_METRICS",
    "BoundResult",
    "classify_kernels",
    "kernel_base_name",
    "measure_bound",
    "normalize_kernel_name",
    "sol_class",
    "summarize_kernels",
]

# Thresholds of ncu's SOLBottleneck rule (sections/SpeedOfLight rules, ncu 2022-2025).
BOUND_PCT = 80.0
LATENCY_PCT = 60.0
BALANCED_POINTS = 10.0

MEMORY_SOL_METRICS = (
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    # DRAM-only fallbacks: they miss L1/L2 traffic, so they can understate memory SOL.
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
)
COMPUTE_SOL_METRICS = ("sm__throughput.avg.pct_of_peak_sustained_elapsed",)
DURATION_METRIC = "gpu__time_duration.sum"
CYCLES_PER_SECOND_METRIC = "smsp__cycles_elapsed.avg.per_second"

UNJOINED = "unjoined"
UNCLASSIFIED = "unclassified"
CLASSES = ("memory", "compute", "latency", "balanced", UNCLASSIFIED)
GPU_CLASSES = (*CLASSES, UNJOINED)
JOIN_LEVELS = ("exact", "normalized", "short_name")

# (precision letter, operation, FLOP per thread instruction) as ncu's roofline counts
# them (its derived__*_x2 / _x4 metrics): an FMA is 2 FLOP, a half2 op 2 lanes.
_PRECISIONS = {"d": 1, "f": 1, "h": 2}  # lanes per instruction (half2)
_FLOP_TERMS = tuple(
    (p, op, w * lanes)
    for p, lanes in _PRECISIONS.items()
    for op, w in (("add", 1), ("mul", 1), ("fma", 2))
)
_CONFIG = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")
_LAUNCH_COLUMNS: dict[str, type[pl.DataType]] = {
    "kernel_name": pl.String,
    "device": pl.Int32,
    **{c: pl.Int32 for c in _CONFIG},
}

# Inline namespaces that encode a library version ("cub::CUB_200300_89_NS::").
_VERSIONED_NAMESPACE = r"\b(?:CUB|THRUST|CCCL|LIBCUDACXX|CUDA)_\d+(?:_\d+)*_NS::"
_INTEGER_CAST = (
    r"\((?:bool|char|signed char|unsigned char|short|unsigned short|int|unsigned int|"
    r"long|unsigned long|long long|unsigned long long)\)(-?\d+)"
)


@dataclass(frozen=True)
class BoundResult:
    """Memory/compute-bound shares per GPU and the per-kernel join behind them.

    ``per_gpu``: one row per GPU: ``kernel_time_ns`` and, for each class in
    :data:`GPU_CLASSES`, ``<class>_ns`` and ``<class>_share`` (shares sum to 1).
    ``kernels``: one row per distinct nsys kernel (gpu, name, short_name, launch
    config): ``launches``, ``time_ns``, ``class``, ``join`` (level or null),
    ``config_match``, the ncu numbers used and ``ncu_ids`` (the ncu launches pooled).
    """

    per_gpu: pl.DataFrame
    kernels: pl.DataFrame


def _num(name: str) -> pl.Expr:
    return pl.col(name).cast(pl.Float64, strict=False)


def _first_present(columns: Sequence[str], candidates: Sequence[str]) -> pl.Expr:
    present = [c for c in candidates if c in columns]
    if not present:
        return pl.lit(None, dtype=pl.Float64)
    return pl.coalesce([_num(c) for c in present])


def _metric_used(columns: Sequence[str], candidates: Sequence[str]) -> pl.Expr:
    expr: pl.Expr = pl.lit(None, dtype=pl.String)
    for name in reversed([c for c in candidates if c in columns]):
        expr = pl.when(pl.col(name).is_not_null()).then(pl.lit(name)).otherwise(expr)
    return expr


def sol_class(memory_pct: pl.Expr, compute_pct: pl.Expr) -> pl.Expr:
    """ncu's SOLBottleneck rule as an expression (thresholds: module constants)."""
    higher = pl.when(compute_pct >= memory_pct).then(pl.lit("compute")).otherwise(pl.lit("memory"))
    return (
        pl.when(memory_pct.is_null() | compute_pct.is_null())
        .then(pl.lit(UNCLASSIFIED))
        .when(memory_pct.is_nan() | compute_pct.is_nan())
        .then(pl.lit(UNCLASSIFIED))
        .when((memory_pct >= BOUND_PCT) | (compute_pct >= BOUND_PCT))
        .then(higher)
        .when((memory_pct < LATENCY_PCT) & (compute_pct < LATENCY_PCT))
        .then(pl.lit("latency"))
        .when((compute_pct - memory_pct).abs() >= BALANCED_POINTS)
        .then(higher)
        .otherwise(pl.lit("balanced"))
    )


def _flop_term(columns: Sequence[str], name: str, weight: int, seconds: pl.Expr) -> pl.Expr | None:
    """FLOP of one instruction kind over the launch, from its count or its rate."""
    base = f"smsp__sass_thread_inst_executed_op_{name}_pred_on.sum"
    derived = f"derived__smsp__sass_thread_inst_executed_op_{name}_pred_on_x{weight}"
    sources: list[pl.Expr] = []
    if base in columns:
        sources.append(_num(base) * weight)
    if CYCLES_PER_SECOND_METRIC in columns:
        cycles = _num(CYCLES_PER_SECOND_METRIC) * seconds
        if f"{base}.per_cycle_elapsed" in columns:
            sources.append(_num(f"{base}.per_cycle_elapsed") * weight * cycles)
        if derived in columns:
            sources.append(_num(derived) * cycles)  # ncu already applied the weight
    return pl.coalesce(sources) if sources else None


def _flop(columns: Sequence[str], seconds: pl.Expr) -> pl.Expr:
    """Total FLOP of a launch over the precisions whose three terms are all present."""
    groups: list[pl.Expr] = []
    for precision in _PRECISIONS:
        found = [
            _flop_term(columns, f"{p}{op}", weight, seconds)
            for p, op, weight in _FLOP_TERMS
            if p == precision
        ]
        terms = [term for term in found if term is not None]
        if len(terms) == len(found):
            # "+" keeps a null when one term has no value for this launch.
            groups.append(reduce(operator.add, terms))
    if not groups:
        return pl.lit(None, dtype=pl.Float64)
    return pl.when(pl.any_horizontal([g.is_not_null() for g in groups])).then(
        pl.sum_horizontal(groups)
    )


def _dram_bytes(columns: Sequence[str], seconds: pl.Expr) -> pl.Expr:
    sources: list[pl.Expr] = []
    if "dram__bytes.sum" in columns:
        sources.append(_num("dram__bytes.sum"))
    if "dram__bytes_read.sum" in columns and "dram__bytes_write.sum" in columns:
        sources.append(_num("dram__bytes_read.sum") + _num("dram__bytes_write.sum"))
    if "dram__bytes.sum.per_second" in columns:
        sources.append(_num("dram__bytes.sum.per_second") * seconds)
    return pl.coalesce(sources) if sources else pl.lit(None, dtype=pl.Float64)


def classify_kernels(ncu: pl.DataFrame) -> pl.DataFrame:
    """One row per ncu launch (a :func:`nsysan.ingest.ncu.read_ncu_csv` table) with its class.

    Columns: id, kernel_name, device, grid_*, block_*, duration_ns, memory_sol_pct,
    memory_sol_metric, compute_sol_pct, flop, dram_bytes, intensity_flop_per_byte,
    class.
    """
    columns = ncu.columns
    duration = (
        _num(DURATION_METRIC) if DURATION_METRIC in columns else pl.lit(None, dtype=pl.Float64)
    )
    seconds = duration / 1e9
    launch = [
        pl.col(c).cast(t) if c in columns else pl.lit(None, dtype=t).alias(c)
        for c, t in _LAUNCH_COLUMNS.items()
    ]
    return ncu.select(
        pl.col("id"),
        *launch,
        duration.alias("duration_ns"),
        _first_present(columns, MEMORY_SOL_METRICS).alias("memory_sol_pct"),
        _metric_used(columns, MEMORY_SOL_METRICS).alias("memory_sol_metric"),
        _first_present(columns, COMPUTE_SOL_METRICS).alias("compute_sol_pct"),
        _flop(columns, seconds).cast(pl.Float64).alias("flop"),
        _dram_bytes(columns, seconds).cast(pl.Float64).alias("dram_bytes"),
    ).with_columns(
        pl.when(pl.col("dram_bytes") > 0)
        .then(pl.col("flop") / pl.col("dram_bytes"))
        .alias("intensity_flop_per_byte"),
        sol_class(pl.col("memory_sol_pct"), pl.col("compute_sol_pct")).alias("class"),
    )


def summarize_kernels(classes: pl.DataFrame, by: Sequence[str] = ("kernel_name",)) -> pl.DataFrame:
    """Per group of launches (default: per ncu kernel name) the pooled class.

    SOLs are means weighted by launch duration (a launch without a duration gets the
    group's mean duration; a group without any, equal weights); intensity is total
    FLOP / total bytes over the launches that have both.
    """
    keys = list(by)
    weight = (
        pl.col("duration_ns")
        .fill_null(pl.col("duration_ns").mean().over(keys))
        .fill_null(1.0)
        .alias("weight")
    )

    def weighted(column: str) -> pl.Expr:
        has = pl.col(column).is_not_null() & pl.col(column).is_not_nan()
        total = pl.col("weight").filter(has).sum()
        return pl.when(total > 0).then(
            (pl.col(column) * pl.col("weight")).filter(has).sum() / total
        )

    both = pl.col("flop").is_not_null() & (pl.col("dram_bytes") > 0)
    return (
        classes.with_columns(weight)
        .group_by(keys, maintain_order=True)
        .agg(
            pl.len().alias("ncu_launches"),
            pl.col("id").sort().alias("ncu_ids"),
            pl.col("duration_ns").sum().alias("ncu_duration_ns"),
            weighted("memory_sol_pct").alias("memory_sol_pct"),
            weighted("compute_sol_pct").alias("compute_sol_pct"),
            pl.when(both.any())
            .then(pl.col("flop").filter(both).sum() / pl.col("dram_bytes").filter(both).sum())
            .alias("intensity_flop_per_byte"),
            pl.col("class").unique().sort().str.join(",").alias("classes_seen"),
        )
        .with_columns(sol_class(pl.col("memory_sol_pct"), pl.col("compute_sol_pct")).alias("class"))
    )


def normalize_kernel_name(name: pl.Expr) -> pl.Expr:
    """A demangled name with printing differences removed.

    Drops version-tagged inline namespaces (``CUB_200300_89_NS::``), integer casts on
    template arguments (``(bool)1`` -> ``1``) and all whitespace.
    """
    return (
        name.cast(pl.String)
        .str.replace_all(_VERSIONED_NAMESPACE, "")
        .str.replace_all(_INTEGER_CAST, "${1}")
        .str.replace_all(r"\s+", "")
    )


def kernel_base_name(name: pl.Expr) -> pl.Expr:
    """The function's own name: before the first ``<`` or ``(``, last ``::`` component.

    ``void cub::DeviceReduceKernel<...>(T2, ...)`` -> ``DeviceReduceKernel``; this is
    what nsys stores as the short name.
    """
    head = name.cast(pl.String).str.extract(r"^([^<(]*)", 1).str.strip_chars()
    return head.str.split(" ").list.last().str.split("::").list.last()


def _ncu_keys(level: str) -> pl.Expr:
    name = pl.col("kernel_name")
    if level == "exact":
        return name
    if level == "normalized":
        return normalize_kernel_name(name)
    return kernel_base_name(name)


def _nsys_keys(level: str) -> pl.Expr:
    if level == "exact":
        return pl.col("name")
    if level == "normalized":
        return normalize_kernel_name(pl.col("name"))
    return pl.coalesce(pl.col("short_name"), kernel_base_name(pl.col("name")))


_MATCH_COLUMNS: dict[str, pl.DataType | type[pl.DataType]] = {
    "class": pl.String,
    "join": pl.String,
    "config_match": pl.Boolean,
    "ncu_launches": pl.UInt32,
    "ncu_ids": pl.List(pl.Int64),
    "memory_sol_pct": pl.Float64,
    "compute_sol_pct": pl.Float64,
    "intensity_flop_per_byte": pl.Float64,
    "classes_seen": pl.String,
}
_SUMMARY_COLUMNS = [c for c in _MATCH_COLUMNS if c not in ("join", "config_match")]


def measure_bound(
    kernels: pl.DataFrame,
    ncu_classes: pl.DataFrame,
    *,
    join_levels: Sequence[str] = JOIN_LEVELS,
) -> BoundResult:
    """Split each GPU's kernel time by ncu class (see the module docstring).

    ``kernels`` is the model KERNELS table; ``ncu_classes`` is :func:`classify_kernels`
    output; ``join_levels`` is an ordered subset of :data:`JOIN_LEVELS`.
    """
    unknown = [level for level in join_levels if level not in JOIN_LEVELS]
    if unknown:
        raise ValueError(f"unknown join level {unknown[0]!r}; expected one of {JOIN_LEVELS}")
    group_keys = ["gpu", "name", "short_name", *_CONFIG]
    nsys = (
        kernels.group_by(group_keys, maintain_order=True)
        .agg(
            pl.len().alias("launches"),
            (pl.col("end_ns") - pl.col("start_ns")).sum().cast(pl.Int64).alias("time_ns"),
        )
        .with_columns(pl.col("name", "short_name").cast(pl.String))
        .with_row_index("_row")
    )

    matched: list[pl.DataFrame] = []
    remaining = nsys
    for level in join_levels:
        keyed = ncu_classes.with_columns(_ncu_keys(level).alias("_key"))
        for config_match in (True, False):
            if remaining.height == 0:
                break
            by = ["_key", *_CONFIG] if config_match else ["_key"]
            summary = summarize_kernels(keyed.filter(pl.col("_key").is_not_null()), by)
            joined = remaining.with_columns(_nsys_keys(level).alias("_key")).join(
                summary.select(*by, *_SUMMARY_COLUMNS),
                on=by,
                how="inner",
            )
            if joined.height:
                matched.append(
                    joined.with_columns(
                        pl.lit(level).alias("join"), pl.lit(config_match).alias("config_match")
                    )
                )
                remaining = remaining.join(joined.select("_row"), on="_row", how="anti")

    unjoined = remaining.with_columns(
        pl.lit(UNJOINED).alias("class"),
        *(pl.lit(None, dtype=t).alias(c) for c, t in _MATCH_COLUMNS.items() if c != "class"),
    )
    per_kernel_columns = ["_row", *group_keys, "launches", "time_ns", *_MATCH_COLUMNS]
    per_kernel = (
        pl.concat(
            [
                frame.select(per_kernel_columns).with_columns(
                    *(pl.col(c).cast(t) for c, t in _MATCH_COLUMNS.items())
                )
                for frame in [*matched, unjoined]
            ],
            how="vertical",
        )
        .sort("_row")
        .drop("_row")
    )
    return BoundResult(per_gpu=_per_gpu(per_kernel), kernels=per_kernel)


def _per_gpu(per_kernel: pl.DataFrame) -> pl.DataFrame:
    totals = per_kernel.group_by("gpu").agg(pl.col("time_ns").sum().alias("kernel_time_ns"))
    by_class = per_kernel.group_by("gpu", "class").agg(pl.col("time_ns").sum())
    exprs: list[pl.Expr] = []
    for name in GPU_CLASSES:
        part = by_class.filter(pl.col("class") == name).select(
            "gpu", pl.col("time_ns").alias(f"{name}_ns")
        )
        totals = totals.join(part, on="gpu", how="left")
        exprs.append(pl.col(f"{name}_ns").fill_null(0).cast(pl.Int64))
    shares = [
        pl.when(pl.col("kernel_time_ns") > 0)
        .then(pl.col(f"{name}_ns") / pl.col("kernel_time_ns"))
        .alias(f"{name}_share")
        for name in GPU_CLASSES
    ]
    return totals.with_columns(exprs).with_columns(shares).sort("gpu")
