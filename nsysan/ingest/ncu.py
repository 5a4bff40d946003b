"""Read an Nsight Compute CSV export into one tidy table: one row per profiled launch.

Accepted input is what ``ncu --import R.ncu-rep --csv --page raw`` or ``--page details``
writes (ncu 2022.3 to 2024.2 at least), with or without the ``==PROF==`` lines and
application output that ``ncu --csv`` prints before the header when it profiles live.
The page is detected from the header: ``details`` has "Metric Name"/"Metric Value"
columns (one row per kernel, section and metric) and is pivoted to the wide form of
``raw`` (one row per kernel, a units row under the header). See docs/ncu.md.

Output of :func:`read_ncu_csv`, sorted by ``id``:

* identification columns (:data:`ID_COLUMNS`, always present, in this order):
  ``id`` (ncu's launch ID, Int64), ``pid``, ``process_name``, ``host_name``,
  ``kernel_name`` (as ncu prints it, demangled), ``context``, ``stream``, ``device``
  (the "Device" column, else the ``device__attribute_device_index`` or
  ``launch__device_id`` metric), ``cc`` (compute capability text such as "8.9"),
  ``block_x/y/z`` and ``grid_x/y/z`` (from "Block Size"/"Grid Size" "(256, 1, 1)",
  else from the ``launch__block_dim_*``/``launch__grid_dim_*`` metrics; null when
  neither is there). ncu 2022.3's "Kernel Time" (a wall-clock timestamp) is dropped.
* then one column per metric, named by ncu's metric name (``gpu__time_duration.sum``).
  On the details page metrics have display names ("Duration"); the ones in
  :data:`DETAILS_METRIC_NAMES` are renamed to the metric they display, the others
  are named ``"<Section Name>: <Metric Name>"``.
  A metric is Float64 in **base units** (time in ns; bytes; rates per second;
  frequencies in Hz; "%" stays 0..100; counts as counts) unless one of its values
  is not a number and the metric has no unit (``device__attribute_display_name``),
  in which case it is a String column. "n/a", "no data", "nan" and empty are null.

Any malformed input raises :class:`nsysan.errors.NcuCsvError` with a one-line
message naming the file (and the line, where there is one). Reading the file, finding
the header and typing the identification cells is :mod:`nsysan.ingest.ncu_csv`'s; this
module turns either page into launches: page shapes, display names, units, the pivot.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from nsysan.ingest.ncu_csv import csv_error, parse_ids, parse_ints, parse_launch_dims, read_rows

__all__ = [
    "ID_COLUMNS",
    "DETAILS_METRIC_NAMES",
    "NULL_TOKENS",
    "read_ncu_csv",
    "unit_factor",
]

ID_COLUMNS: dict[str, pl.DataType | type[pl.DataType]] = {
    "id": pl.Int64,
    "pid": pl.Int64,
    "process_name": pl.String,
    "host_name": pl.String,
    "kernel_name": pl.String,
    "context": pl.Int64,
    "stream": pl.Int64,
    "device": pl.Int32,
    "cc": pl.String,
    "block_x": pl.Int32,
    "block_y": pl.Int32,
    "block_z": pl.Int32,
    "grid_x": pl.Int32,
    "grid_y": pl.Int32,
    "grid_z": pl.Int32,
}

# ncu header text -> our identification column (Block/Grid Size are split into x/y/z).
_HEADER_ID = {
    "ID": "id",
    "Process ID": "pid",
    "Process Name": "process_name",
    "Host Name": "host_name",
    "Kernel Name": "kernel_name",
    "Context": "context",
    "Stream": "stream",
    "Device": "device",
    "CC": "cc",
    "Block Size": "block",
    "Grid Size": "grid",
}
_HEADER_DROPPED = frozenset({"Kernel Time"})
_DETAILS_ONLY = frozenset(
    {
        "Section Name",
        "Metric Name",
        "Metric Unit",
        "Metric Value",
        "Rule Name",
        "Rule Type",
        "Rule Description",
        "Estimated Speedup Type",
        "Estimated Speedup",
    }
)

# Details-page display names -> the metric they display, per section (names differ
# between ncu versions: "Memory [%]" in 2022.3 is "Memory Throughput" in 2024.2).
# Each pair was checked against the raw page of the same report (tests/test_ncu.py).
_SOL = "GPU Speed Of Light Throughput"
_LAUNCH = "Launch Statistics"
_OCC = "Occupancy"
_MWA = "Memory Workload Analysis"
_CWA = "Compute Workload Analysis"
_SCHED = "Scheduler Statistics"
_INST = "Instruction Statistics"
_WARP = "Warp State Statistics"
_SRC = "Source Counters"
_DIST = "GPU and Memory Workload Distribution"
DETAILS_METRIC_NAMES: dict[tuple[str, str], str] = {
    (_SOL, "Duration"): "gpu__time_duration.sum",
    (_SOL, "Elapsed Cycles"): "gpc__cycles_elapsed.max",
    (_SOL, "SM Active Cycles"): "sm__cycles_active.avg",
    (_SOL, "SM Frequency"): "gpc__cycles_elapsed.avg.per_second",
    (_SOL, "DRAM Frequency"): "dram__cycles_elapsed.avg.per_second",
    (_SOL, "Memory Throughput"): "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    (_SOL, "Memory [%]"): "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    (_SOL, "Compute (SM) Throughput"): "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    (_SOL, "Compute (SM) [%]"): "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    (_SOL, "DRAM Throughput"): "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    (_SOL, "L1/TEX Cache Throughput"): "l1tex__throughput.avg.pct_of_peak_sustained_active",
    (_SOL, "L2 Cache Throughput"): "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    (_LAUNCH, "Block Size"): "launch__block_size",
    (_LAUNCH, "Grid Size"): "launch__grid_size",
    (_LAUNCH, "Registers Per Thread"): "launch__registers_per_thread",
    (_LAUNCH, "Threads"): "launch__thread_count",
    (_LAUNCH, "Waves Per SM"): "launch__waves_per_multiprocessor",
    (_LAUNCH, "# SMs"): "launch__sm_count",
    (_LAUNCH, "Function Cache Configuration"): "launch__func_cache_config",
    (_LAUNCH, "Shared Memory Configuration Size"): "launch__shared_mem_config_size",
    (_LAUNCH, "Driver Shared Memory Per Block"): "launch__shared_mem_per_block_driver",
    (_LAUNCH, "Dynamic Shared Memory Per Block"): "launch__shared_mem_per_block_dynamic",
    (_LAUNCH, "Static Shared Memory Per Block"): "launch__shared_mem_per_block_static",
    (_LAUNCH, "Uses Green Context"): "launch__uses_green_context",
    (_OCC, "Block Limit Registers"): "launch__occupancy_limit_registers",
    (_OCC, "Block Limit Shared Mem"): "launch__occupancy_limit_shared_mem",
    (_OCC, "Block Limit Warps"): "launch__occupancy_limit_warps",
    (_OCC, "Block Limit SM"): "launch__occupancy_limit_blocks",
    (_OCC, "Achieved Occupancy"): "sm__warps_active.avg.pct_of_peak_sustained_active",
    (_OCC, "Achieved Active Warps Per SM"): "sm__warps_active.avg.per_cycle_active",
    (_OCC, "Theoretical Occupancy"): "sm__maximum_warps_per_active_cycle_pct",
    (_OCC, "Theoretical Active Warps per SM"): "sm__maximum_warps_avg_per_active_cycle",
    (_MWA, "Memory Throughput"): "dram__bytes.sum.per_second",
    (_OCC, "Block Limit Barriers"): "launch__occupancy_limit_barriers",
    (_LAUNCH, "Cluster Scheduling Policy"): "launch__cluster_scheduling_policy",
    (_LAUNCH, "Cluster Size"): "launch__cluster_size",
    (_OCC, "Max Cluster Size"): "launch__cluster_max_potential_size",
    (_OCC, "Max Active Clusters"): "launch__cluster_max_active",
    (_MWA, "Mem Busy"): "gpu__compute_memory_access_throughput.avg.pct_of_peak_sustained_elapsed",
    (_MWA, "Max Bandwidth"): (
        "gpu__compute_memory_request_throughput.avg.pct_of_peak_sustained_elapsed"
    ),
    (_MWA, "Mem Pipes Busy"): "sm__memory_throughput.avg.pct_of_peak_sustained_elapsed",
    (_MWA, "L1/TEX Hit Rate"): "l1tex__t_sector_hit_rate.pct",
    (_MWA, "L2 Hit Rate"): "lts__t_sector_hit_rate.pct",
    (_CWA, "Executed Ipc Active"): "sm__inst_executed.avg.per_cycle_active",
    (_CWA, "Executed Ipc Elapsed"): "sm__inst_executed.avg.per_cycle_elapsed",
    (_CWA, "Issued Ipc Active"): "sm__inst_issued.avg.per_cycle_active",
    (_CWA, "Issue Slots Busy"): "sm__inst_issued.avg.pct_of_peak_sustained_active",
    (_CWA, "SM Busy"): "sm__instruction_throughput.avg.pct_of_peak_sustained_active",
    (_SCHED, "Active Warps Per Scheduler"): "smsp__warps_active.avg.per_cycle_active",
    (_SCHED, "Eligible Warps Per Scheduler"): "smsp__warps_eligible.avg.per_cycle_active",
    (_SCHED, "Issued Warp Per Scheduler"): "smsp__issue_active.avg.per_cycle_active",
    (_SCHED, "No Eligible"): "smsp__issue_inst0.avg.pct_of_peak_sustained_active",
    (_SCHED, "One or More Eligible"): "smsp__issue_active.avg.pct_of_peak_sustained_active",
    (_INST, "Executed Instructions"): "smsp__inst_executed.sum",
    (_INST, "Issued Instructions"): "smsp__inst_issued.sum",
    (_INST, "Avg. Executed Instructions Per Scheduler"): "smsp__inst_executed.avg",
    (_INST, "Avg. Issued Instructions Per Scheduler"): "smsp__inst_issued.avg",
    (_WARP, "Avg. Not Predicated Off Threads Per Warp"): (
        "smsp__thread_inst_executed_pred_on_per_inst_executed.ratio"
    ),
    (_SRC, "Branch Instructions"): "smsp__inst_executed_op_branch.sum",
    (_SRC, "Branch Efficiency"): "smsp__sass_average_branch_targets_threads_uniform.pct",
    (_SRC, "Avg. Divergent Branches"): "smsp__sass_branch_targets_threads_divergent.avg",
    (_DIST, "Average DRAM Active Cycles"): "dram__cycles_active.avg",
    (_DIST, "Total DRAM Elapsed Cycles"): "dram__cycles_elapsed.sum",
    (_DIST, "Average L1 Active Cycles"): "l1tex__cycles_active.avg",
    (_DIST, "Total L1 Elapsed Cycles"): "l1tex__cycles_elapsed.sum",
    (_DIST, "Average L2 Active Cycles"): "lts__cycles_active.avg",
    (_DIST, "Total L2 Elapsed Cycles"): "lts__cycles_elapsed.sum",
    (_DIST, "Average SM Active Cycles"): "sm__cycles_active.avg",
    (_DIST, "Total SM Elapsed Cycles"): "sm__cycles_elapsed.sum",
    (_DIST, "Average SMSP Active Cycles"): "smsp__cycles_active.avg",
    (_DIST, "Total SMSP Elapsed Cycles"): "smsp__cycles_elapsed.sum",
}

# Cell text meaning "no value", compared case-insensitively after stripping blanks.
NULL_TOKENS = ("", "n/a", "no data", "nan", "-nan")

# A number as ncu prints it: optional sign, optional thousands separators, decimals,
# exponent.
_NUMBER = r"^[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][+-]?\d+)?$"
_HAS_DIGIT = r"\d"

# --- units ---------------------------------------------------------------------------

_DECIMAL_PREFIX = {
    "K": 1e3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "m": 1e-3,
    "u": 1e-6,
    "µ": 1e-6,
    "n": 1e-9,
    "p": 1e-12,
}
_BINARY_PREFIX = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40}
# Frequencies: ncu writes "Ghz"/"Mhz"; a milli-hertz clock is meaningless, so the
# prefix letter is read case-insensitively.
_HZ_PREFIX = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_TIME_WORDS = frozenset({"second", "seconds", "sec", "s"})
_BYTE_WORDS = frozenset({"byte", "bytes", "B"})
# Count units ncu prints; a count is already in base form. An alphabetic unit word
# not listed here is also taken as a count (factor 1) unless it is a scale prefix
# followed by a known word ("Kinst").
_COUNT_WORDS = frozenset(
    {
        "inst",
        "cycle",
        "cycles",
        "warp",
        "warps",
        "thread",
        "threads",
        "block",
        "blocks",
        "sector",
        "sectors",
        "request",
        "requests",
        "register",
        "registers",
        "SM",
        "cluster",
        "clusters",
        "pass",
        "passes",
        "branch",
        "branches",
        "wavefront",
        "wavefronts",
        "instance",
        "instances",
        "op",
        "ops",
        "flop",
        "FLOP",
    }
)
_UNIT_WORD = re.compile(r"^[A-Za-zµ_]+$")


def _word_factor(word: str, *, denominator: bool) -> float | None:
    """Factor to the base unit for one unit word, or None if it is not understood.

    Time is based on ns in a numerator ("msecond" -> 1e6) and on seconds in a
    denominator ("Gbyte/second" -> 1e9 byte/s), as the module docstring states.
    """
    time_base = 1.0 if denominator else 1e9
    if word in _TIME_WORDS:
        return time_base
    if word in _BYTE_WORDS or word in _COUNT_WORDS:
        return 1.0
    if word.lower().endswith("hz"):
        prefix = word[:-2].lower()
        return _HZ_PREFIX.get(prefix)
    for table in (_BINARY_PREFIX, _DECIMAL_PREFIX):
        for prefix, scale in table.items():
            if not word.startswith(prefix):
                continue
            rest = word[len(prefix) :]
            if rest in _TIME_WORDS:
                return scale * time_base
            if rest in _BYTE_WORDS or rest in _COUNT_WORDS:
                return scale
    if _UNIT_WORD.match(word):
        return 1.0
    return None


def unit_factor(unit: str) -> float | None:
    """Multiplier from ``unit`` to nsysan's base unit; None if ``unit`` is not a unit.

    "" and "%" are 1; "usecond"/"us" 1e3 (to ns); "Mbyte" 1e6; "Gbyte/second" 1e9
    (to byte/s); "Ghz" 1e9 (to Hz); "cycle/nsecond" 1e9 (to cycle/s).
    """
    unit = unit.strip()
    if unit in ("", "%"):
        return 1.0
    parts = unit.split("/")
    if len(parts) > 2 or not all(parts):
        return None
    numerator = _word_factor(parts[0], denominator=False)
    if numerator is None:
        return None
    if len(parts) == 1:
        return numerator
    denominator = _word_factor(parts[1], denominator=True)
    if denominator is None:
        return None
    return numerator / denominator


# --- reading -------------------------------------------------------------------------


# A CSV that joins less of the trace's kernel time than this is probably of another
# program or run: the report and the command line warn.
NCU_JOIN_MIN_SHARE = 0.5


def join_warning(joined_share: float, source: str) -> tuple[str, str] | None:
    """(English, Chinese) warning when ``joined_share`` of kernel time has ncu data."""
    if joined_share >= NCU_JOIN_MIN_SHARE:
        return None
    pct = f"{joined_share * 100:.1f}%"
    return (
        f"warning: {source} matches only {pct} of the trace's kernel time (kernel names and launches); "
        "it may come from another program or run, so the memory- vs compute-bound view covers little of the trace.",
        f"警告：{source} 只匹配到追踪中 {pct} 的内核时间（按内核名与发射）；它可能来自另一个程序或另一次运行，"
        "因此带宽受限与计算受限视图只覆盖了追踪的一小部分。",
    )


def read_ncu_csv(path: str | Path) -> pl.DataFrame:
    """Read an ncu ``--csv --page raw`` or ``--page details`` export (see module doc)."""
    path = Path(path)
    _, header, rows = read_rows(path)
    if "Metric Name" in header and "Metric Value" in header:
        long, idents = _details_to_long(path, header, rows)
        order = long.get_column("metric").unique(maintain_order=True).to_list()
    else:
        long, idents = _raw_to_long(path, header, rows)
        order = [n for n in header if n not in _HEADER_ID and n not in _HEADER_DROPPED]
    metrics = _pivot_metrics(path, long, order)
    wide = idents.join(metrics, on="id", how="left") if metrics.width > 1 else idents
    return _finish(path, wide)


def _raw_to_long(
    path: Path, header: list[str], rows: list[tuple[int, list[str]]]
) -> tuple[pl.DataFrame, pl.DataFrame]:
    if not rows:
        raise csv_error(path, "raw page without its units row (expected under the header)")
    units_line, units = rows[0]
    if len(units) != len(header):
        raise csv_error(
            path, f"units row has {len(units)} fields, the header has {len(header)}", units_line
        )
    if units[header.index("ID")].strip():
        raise csv_error(
            path,
            "expected the units row under the header (ncu --page raw writes one), found "
            f"{units[header.index('ID')]!r} in the ID column",
            units_line,
        )
    for name, unit in zip(header, units, strict=True):
        if name not in _HEADER_ID and name not in _HEADER_DROPPED and unit_factor(unit) is None:
            raise csv_error(
                path, f"units row: {unit!r} (column {name!r}) is not a unit", units_line
            )
    data = rows[1:]
    for line, fields in data:
        if len(fields) != len(header):
            raise csv_error(path, f"{len(fields)} fields, the header has {len(header)}", line)

    columns = list(zip(*(fields for _, fields in data), strict=True)) if data else []
    table = pl.DataFrame(
        {"line": [line for line, _ in data]}
        | {
            name: list(columns[i]) if columns else []
            for i, name in enumerate(header)
            if name not in _HEADER_DROPPED
        },
        schema={"line": pl.Int64} | {n: pl.String for n in header if n not in _HEADER_DROPPED},
    )
    idents = _identification(path, table)
    metric_names = [n for n in header if n not in _HEADER_ID and n not in _HEADER_DROPPED]
    unit_of = dict(zip(header, units, strict=True))
    long = (
        table.with_columns(parse_ids(path, table).alias("id"))
        .select("line", "id", *metric_names)
        .unpivot(index=["line", "id"], variable_name="metric", value_name="text")
        .with_columns(
            pl.col("metric").replace_strict(unit_of, return_dtype=pl.String).alias("unit")
        )
    )
    return long, idents


def _details_to_long(
    path: Path, header: list[str], rows: list[tuple[int, list[str]]]
) -> tuple[pl.DataFrame, pl.DataFrame]:
    needed = header.index("Metric Value") + 1
    for line, fields in rows:
        # Rows without a rule end after "Metric Value": shorter rows are normal here.
        if len(fields) > len(header) or len(fields) < needed:
            raise csv_error(path, f"{len(fields)} fields, expected {needed} to {len(header)}", line)
    keep = [n for n in header if n not in _HEADER_DROPPED]
    index = {name: i for i, name in enumerate(header)}
    table = pl.DataFrame(
        {"line": [line for line, _ in rows]}
        | {
            name: [fields[index[name]] if index[name] < len(fields) else "" for _, fields in rows]
            for name in keep
        },
        schema={"line": pl.Int64} | {n: pl.String for n in keep},
    )
    table = table.with_columns(parse_ids(path, table).alias("id"))
    idents = _identification(path, table.unique("id", keep="first", maintain_order=True))
    mapping = pl.DataFrame(
        {
            "Section Name": [s for s, _ in DETAILS_METRIC_NAMES],
            "Metric Name": [m for _, m in DETAILS_METRIC_NAMES],
            "mapped": list(DETAILS_METRIC_NAMES.values()),
        }
    )
    long = (
        table.filter(pl.col("Metric Name").str.strip_chars() != "")
        .join(mapping, on=["Section Name", "Metric Name"], how="left")
        .select(
            "line",
            "id",
            pl.coalesce(
                "mapped", pl.format("{}: {}", pl.col("Section Name"), pl.col("Metric Name"))
            ).alias("metric"),
            pl.col("Metric Value").alias("text"),
            pl.col("Metric Unit").alias("unit"),
        )
    )
    for unit in long.get_column("unit").unique().to_list():
        if unit_factor(unit) is None:
            first = long.filter(pl.col("unit") == unit).sort("line")
            raise csv_error(path, f"Metric Unit {unit!r} is not a unit", first.item(0, "line"))
    return long, idents


def _identification(path: Path, table: pl.DataFrame) -> pl.DataFrame:
    """The identification columns present in the header, typed (others added later)."""
    columns: list[pl.Series] = [parse_ids(path, table).alias("id"), table.get_column("line")]
    for header, name in _HEADER_ID.items():
        if header not in table.columns or name == "id":
            continue
        if name in ("block", "grid"):
            columns.extend(parse_launch_dims(path, table, header, name))
        elif ID_COLUMNS[name] == pl.String:
            columns.append(table.get_column(header).alias(name))
        else:
            columns.append(parse_ints(path, table, header, ID_COLUMNS[name]).alias(name))
    idents = pl.DataFrame(columns)
    duplicated = idents.filter(pl.col("id").is_duplicated())
    if duplicated.height:
        raise csv_error(
            path,
            f"launch ID {duplicated.item(0, 'id')} appears twice (one row per launch expected)",
            duplicated.item(-1, "line"),
        )
    return idents.drop("line")


def _pivot_metrics(path: Path, long: pl.DataFrame, order: list[str]) -> pl.DataFrame:
    """Long (line, id, metric, text, unit) -> one row per id, one column per metric in ``order``."""
    units = long.get_column("unit").unique().to_list()
    factors = pl.DataFrame(
        {"unit": units, "factor": [unit_factor(u) for u in units]},
        schema={"unit": pl.String, "factor": pl.Float64},
    )
    text = pl.col("text").str.strip_chars()
    cells = long.join(factors, on="unit", how="left").with_columns(
        is_null=text.str.to_lowercase().is_in(list(NULL_TOKENS)) | text.is_null(),
        is_number=text.str.contains(_NUMBER) & text.str.contains(_HAS_DIGIT),
    )
    has_unit = pl.col("unit").str.strip_chars() != ""
    bad = cells.filter(~pl.col("is_null") & ~pl.col("is_number") & has_unit)
    if bad.height:
        first = bad.sort("line").row(0, named=True)
        raise csv_error(
            path,
            f"value {first['text']!r} of metric {first['metric']!r} (unit {first['unit']!r}) "
            "is not a number",
            first["line"],
        )
    if not order:
        return long.select("id").unique()
    textual = set(
        cells.filter(~pl.col("is_null") & ~pl.col("is_number"))
        .get_column("metric")
        .unique()
        .to_list()
    )
    numeric = set(order) - textual
    values = cells.with_columns(
        number=pl.when(pl.col("is_number"))
        .then(
            text.str.replace_all(",", "", literal=True).cast(pl.Float64, strict=False)
            * pl.col("factor")
        )
        .otherwise(None),
        string=pl.when(pl.col("is_null")).then(None).otherwise(text),
    )
    ids = long.select("id").unique(maintain_order=True).with_row_index("row")
    metrics = pl.DataFrame({"metric": order}).with_row_index("column")
    # A dense (metric-major) grid sliced into columns: far faster than DataFrame.pivot
    # with thousands of metrics.
    grid = (
        metrics.join(ids, how="cross")
        .join(
            values.unique(["id", "metric"], keep="first", maintain_order=True),
            on=["id", "metric"],
            how="left",
        )
        .sort("column", "row")
    )
    n = ids.height
    numbers, strings = grid.get_column("number"), grid.get_column("string")
    columns = [
        (numbers if name in numeric else strings).slice(k * n, n).alias(name)
        for k, name in enumerate(order)
    ]
    return pl.DataFrame([ids.get_column("id"), *columns])


def _finish(path: Path, wide: pl.DataFrame) -> pl.DataFrame:
    """Fill identification columns the header lacked from metrics; fixed column order."""
    fallbacks: dict[str, list[str]] = {
        "device": ["device__attribute_device_index", "launch__device_id"],
        "block_x": ["launch__block_dim_x"],
        "block_y": ["launch__block_dim_y"],
        "block_z": ["launch__block_dim_z"],
        "grid_x": ["launch__grid_dim_x"],
        "grid_y": ["launch__grid_dim_y"],
        "grid_z": ["launch__grid_dim_z"],
        "context": ["launch__context_id"],
        "stream": ["launch__stream_id"],
    }
    exprs: list[pl.Expr] = []
    for name, dtype in ID_COLUMNS.items():
        sources = [name] if name in wide.columns else []
        sources += [m for m in fallbacks.get(name, []) if wide.schema.get(m) == pl.Float64]
        if name == "cc" and name not in wide.columns:
            major, minor = (
                "device__attribute_compute_capability_major",
                "device__attribute_compute_capability_minor",
            )
            if wide.schema.get(major) == pl.Float64 and wide.schema.get(minor) == pl.Float64:
                exprs.append(
                    pl.format(
                        "{}.{}", pl.col(major).cast(pl.Int64), pl.col(minor).cast(pl.Int64)
                    ).alias("cc")
                )
                continue
        if sources:
            exprs.append(
                pl.coalesce([pl.col(s).cast(dtype, strict=False) for s in sources]).alias(name)
            )
        else:
            exprs.append(pl.lit(None, dtype=dtype).alias(name))
    metric_columns = [c for c in wide.columns if c not in ID_COLUMNS]
    return wide.select(*exprs, *metric_columns).sort("id")
