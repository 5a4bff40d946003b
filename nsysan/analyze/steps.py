"""Step and request latency per GPU, and throughput.

Definitions (docs/metrics/steps.md):

* **Steps.** With iterations from a repeated NVTX range (``imbalance.iteration_source
  == "nvtx"``, its text in ``iteration_label``; see docs/metrics/balance.md), the steps
  of a GPU are that range's instances on the processes that ran kernels on the GPU, and
  a step's time is the range's duration on the host. With iterations from a repeated
  kernel sequence (``"kernel_sequence"``), the steps are those iterations (boundaries
  common to all GPUs, from one reference GPU's sequence), on every GPU. Only steps that
  overlap the GPU's window count.
* Per GPU: ``steps``; ``steps_per_s`` = steps / (last step end − first step start);
  ``step_p50_ns``, ``step_p90_ns``, ``step_p99_ns`` (nearest rank), ``step_max_ns``;
  ``step_tail_ratio`` = p99 / p50. ``slowest``: the :data:`SLOWEST` longest steps per
  GPU with their start on the trace timeline and their time over the median.
* **Requests.** NVTX ranges whose text starts with "request" (case-insensitive; e.g.
  vLLM-style ``request 17`` start/end ranges) on the GPU's processes: ``requests``,
  ``requests_per_s`` (over their span), latency ``request_p50_ns``/``p99``/``max``
  and ``request_tail_ratio``. Null when the trace has none.
* ``kernels_per_s``: kernels starting in the window / window (docs/metrics/launch.md's
  ``launch_rate``), for throughput next to steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from nsysan.interval_arrays import rows_by_unit
from nsysan.names import distinct, is_one_of, values_matching
from nsysan.stored import HostTable

__all__ = ["REQUEST_PATTERN", "SLOWEST", "StepsResult", "measure_steps"]

SLOWEST = 5
REQUEST_PATTERN = r"(?i)^request\b"

_PER_GPU = {
    "gpu": pl.Int32,
    "source": pl.String,
    "label": pl.String,
    "steps": pl.Int64,
    "steps_per_s": pl.Float64,
    "step_p50_ns": pl.Int64,
    "step_p90_ns": pl.Int64,
    "step_p99_ns": pl.Int64,
    "step_max_ns": pl.Int64,
    "step_tail_ratio": pl.Float64,
    "kernels": pl.Int64,
    "kernels_per_s": pl.Float64,
    "requests": pl.Int64,
    "requests_per_s": pl.Float64,
    "request_p50_ns": pl.Int64,
    "request_p99_ns": pl.Int64,
    "request_max_ns": pl.Int64,
    "request_tail_ratio": pl.Float64,
}


@dataclass(frozen=True)
class StepsResult:
    """``per_gpu`` (see the module doc), ``steps`` (``gpu, step, start_ns, end_ns,
    duration_ns``), ``slowest`` (``gpu, start_ns, end_ns, duration_ns, over_median``) and
    ``requests`` (``gpu, text, start_ns, end_ns, duration_ns``)."""

    per_gpu: pl.DataFrame
    steps: pl.DataFrame
    slowest: pl.DataFrame
    requests: pl.DataFrame

    def gpu(self, gpu: int) -> dict[str, object] | None:
        rows = self.per_gpu.filter(pl.col("gpu") == gpu)
        return rows.row(0, named=True) if rows.height else None


def _rank(q: float) -> pl.Expr:
    """Nearest rank: the index, in ascending order, of the smallest value with at least
    ``q`` of the group's values at or below it."""
    return (pl.len() * q).ceil().cast(pl.Int64).clip(1) - 1


def _q(col: str, q: float) -> pl.Expr:
    """The nearest-rank ``q`` quantile of ``col`` (:func:`_rank`)."""
    return pl.col(col).sort().gather(_rank(q)).first().cast(pl.Int64)


def _spans_of_gpus(
    nvtx: HostTable, processes: pl.DataFrame, windows: pl.DataFrame, text_filter: pl.Expr
) -> pl.DataFrame:
    """NVTX ranges (``text_filter``) of each GPU's processes that overlap its window."""
    ranges = (
        nvtx.lazy()
        .filter(pl.col("end_ns").is_not_null() & (pl.col("end_ns") > pl.col("start_ns")))
        .filter(text_filter)
        .select("source", "pid", pl.col("text").cast(pl.String), "start_ns", "end_ns")
        .collect()
    )
    return (
        processes.join(ranges, on=["source", "pid"])
        .join(windows, on="gpu")
        .filter(
            (pl.col("end_ns") > pl.col("window_start_ns"))
            & (pl.col("start_ns") < pl.col("window_end_ns"))
        )
        .select("gpu", "text", "start_ns", "end_ns")
        .unique()
        .sort("gpu", "start_ns", "end_ns")
        .with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("duration_ns"))
    )


def measure_steps(
    nvtx: HostTable,
    processes: pl.DataFrame,
    windows: pl.DataFrame,
    launch_per_gpu: pl.DataFrame | None,
    iterations: pl.DataFrame | None,
    iteration_source: str | None,
    iteration_label: str | None,
    step_table: bool = True,
) -> StepsResult:
    """Steps, requests and throughput per GPU.

    ``processes``: ``gpu, source, pid`` (the processes that ran kernels on each GPU).
    ``step_table``: keep ``steps``, a row per GPU and step (only ``analyze --detail
    full`` shows it); without it ``steps`` is empty and every other field the same.
    """
    w = windows.select(pl.col("gpu").cast(pl.Int32), "window_start_ns", "window_end_ns")
    procs = processes.select(
        pl.col("gpu").cast(pl.Int32), pl.col("source").cast(pl.Int32), "pid"
    ).unique()
    if iteration_source == "nvtx" and iteration_label:
        spans = _spans_of_gpus(nvtx, procs, w, pl.col("text") == iteration_label)
        blocks = _blocks_of(spans)
    elif iteration_source == "kernel_sequence" and iterations is not None and w.height:
        blocks = _iteration_blocks(iterations, w)
    else:
        blocks = []
    step_stats, slowest = _step_stats(blocks)
    steps = _step_table(blocks if step_table else [])
    found = sum(len(starts) for _, starts, _ in blocks)
    requests = (
        # The pattern runs over the distinct texts, not over millions of NVTX rows.
        _spans_of_gpus(
            nvtx,
            procs,
            w,
            is_one_of(
                pl.col("text"), values_matching(distinct(nvtx.lazy(), "text"), REQUEST_PATTERN)
            ),
        )
        if nvtx.height
        else pl.DataFrame(
            schema={
                "gpu": pl.Int32,
                "text": pl.String,
                "start_ns": pl.Int64,
                "end_ns": pl.Int64,
                "duration_ns": pl.Int64,
            }
        )
    )
    request_stats = requests.group_by("gpu").agg(
        pl.len().cast(pl.Int64).alias("requests"),
        (pl.len() * 1e9 / (pl.col("end_ns").max() - pl.col("start_ns").min())).alias(
            "requests_per_s"
        ),
        _q("duration_ns", 0.5).alias("request_p50_ns"),
        _q("duration_ns", 0.99).alias("request_p99_ns"),
        pl.col("duration_ns").max().alias("request_max_ns"),
    )
    kernels = (
        launch_per_gpu.select(
            pl.col("gpu").cast(pl.Int32),
            pl.col("kernels").cast(pl.Int64),
            pl.col("launch_rate").alias("kernels_per_s"),
        )
        if launch_per_gpu is not None
        else pl.DataFrame(
            schema={"gpu": pl.Int32, "kernels": pl.Int64, "kernels_per_s": pl.Float64}
        )
    )
    per_gpu = (
        w.select("gpu")
        .join(step_stats, on="gpu", how="left")
        .join(kernels, on="gpu", how="left")
        .join(request_stats, on="gpu", how="left")
        .with_columns(
            pl.lit(iteration_source if found else None, pl.String).alias("source"),
            pl.lit(iteration_label if found else None, pl.String).alias("label"),
            pl.col("steps").fill_null(0),
            _ratio("step_p99_ns", "step_p50_ns").alias("step_tail_ratio"),
            _ratio("request_p99_ns", "request_p50_ns").alias("request_tail_ratio"),
        )
        .select(list(_PER_GPU))
        .cast(_PER_GPU)  # type: ignore[arg-type]
        .sort("gpu")
    )
    return StepsResult(per_gpu=per_gpu, steps=steps, slowest=slowest, requests=requests)


# What _step_stats gives per GPU: the per_gpu columns it computes.
_STEP_STATS = {
    c: _PER_GPU[c]
    for c in (
        "gpu",
        "steps",
        "steps_per_s",
        "step_p50_ns",
        "step_p90_ns",
        "step_p99_ns",
        "step_max_ns",
    )
}
_STEPS = {
    "gpu": pl.Int32,
    "step": pl.Int64,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "duration_ns": pl.Int64,
}
_SLOWEST = {
    "gpu": pl.Int32,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "duration_ns": pl.Int64,
    "over_median": pl.Float64,
}


# One GPU's steps: the GPU, their starts and ends, in start order.
StepBlock = tuple[int, np.ndarray, np.ndarray]


def _blocks_of(spans: pl.DataFrame) -> list[StepBlock]:
    """:class:`StepBlock` per GPU of ``spans`` (``gpu, start_ns, end_ns``, sorted by GPU
    and start)."""
    gpu = spans.get_column("gpu").to_numpy()
    starts, ends = (spans.get_column(c).to_numpy() for c in ("start_ns", "end_ns"))
    rows = rows_by_unit(gpu, np.unique(gpu).tolist())
    return [(g, starts[at], ends[at]) for g, at in rows.items()]


def _iteration_blocks(iterations: pl.DataFrame, windows: pl.DataFrame) -> list[StepBlock]:
    """Per GPU of ``windows``, in GPU order, the ``iterations`` that overlap its window,
    in start order: views of the iterations' columns where their starts and ends both
    ascend (one binary search each way), else a filter. Not a table of every GPU's
    iterations (10M rows at 20M kernels), nor a cross join of every GPU with every
    iteration first."""
    ordered = iterations.select("start_ns", "end_ns").sort("start_ns", maintain_order=True)
    starts, ends = (ordered.get_column(c).to_numpy() for c in ("start_ns", "end_ns"))
    in_order = bool(np.all(ends[1:] >= ends[:-1]))
    blocks = []
    for gpu, low, high in windows.sort("gpu").iter_rows():
        if in_order:
            rows: slice | np.ndarray = slice(
                int(np.searchsorted(ends, low, side="right")),
                int(np.searchsorted(starts, high, side="left")),
            )
        else:
            rows = (ends > low) & (starts < high)
        blocks.append((gpu, starts[rows], ends[rows]))
    return blocks


def _step_table(blocks: list[StepBlock]) -> pl.DataFrame:
    """``StepsResult.steps`` of ``blocks``: ``gpu, step, start_ns, end_ns, duration_ns``."""
    frames = [
        pl.DataFrame(
            {
                "gpu": np.full(len(starts), gpu, dtype=np.int32),
                "step": np.arange(len(starts), dtype=np.int64),
                "start_ns": starts,
                "end_ns": ends,
                "duration_ns": ends - starts,
            }
        )
        for gpu, starts, ends in blocks
        if len(starts)
    ]
    return pl.concat([pl.DataFrame(schema=_STEPS), *frames]).cast(_STEPS)  # type: ignore[arg-type]


def _step_stats(blocks: list[StepBlock]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Per GPU of ``blocks`` with steps: ``steps``, ``steps_per_s``, the nearest-rank
    percentiles and the longest step; and its :data:`SLOWEST` longest steps, longest
    first (of equal length, the earlier start, then the earlier step), with their time
    over the median.

    A GPU's lengths are sorted alone, and its slowest found by a partition: a sort of
    every step by GPU, length and start took 2.4 s of the 2.7 s of the steps at 20M
    kernels (10M steps: 8 GPUs of 1.25M kernel-sequence iterations).
    """
    stats: dict[str, list[object]] = {name: [] for name in _STEP_STATS}
    slowest: dict[str, list[np.ndarray]] = {name: [] for name in _SLOWEST}
    for gpu, starts, ends in blocks:
        n = len(starts)
        if not n:
            continue
        lengths = ends - starts
        ordered = np.sort(lengths)
        stats["gpu"].append(gpu)
        stats["steps"].append(n)
        with np.errstate(divide="ignore"):
            span = np.float64(int(ends.max()) - int(starts.min()))
            stats["steps_per_s"].append(float(n * 1e9 / span))
        for q in (0.5, 0.9, 0.99):
            # Nearest rank: the smallest length with at least q of the steps at or below.
            stats[f"step_p{round(q * 100)}_ns"].append(int(ordered[max(math.ceil(n * q), 1) - 1]))
        stats["step_max_ns"].append(int(ordered[-1]))
        rows = _longest(lengths, starts)
        median = stats["step_p50_ns"][-1]
        slowest["gpu"].append(np.full(len(rows), gpu, dtype=np.int32))
        slowest["start_ns"].append(starts[rows])
        slowest["end_ns"].append(ends[rows])
        slowest["duration_ns"].append(lengths[rows])
        # Divided in numpy, as the quotient: polars divides by a joined column of one
        # value (one GPU) as a product with its reciprocal, one unit in the last place off.
        with np.errstate(divide="ignore", invalid="ignore"):
            slowest["over_median"].append(lengths[rows] / np.float64(median))
    return pl.DataFrame(stats, schema=_STEP_STATS), pl.DataFrame(
        {name: np.concatenate(parts) if parts else [] for name, parts in slowest.items()},
        schema=_SLOWEST,
    )


def _longest(lengths: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The rows of the :data:`SLOWEST` longest ``lengths``, longest first; of equal
    length, the earlier start, then the earlier row."""
    n = len(lengths)
    if n > SLOWEST:
        # The SLOWEST-th longest length: every longer step is in, then the ties.
        cut = np.partition(lengths, n - SLOWEST)[n - SLOWEST]
        longer = np.flatnonzero(lengths > cut)
        tied = np.flatnonzero(lengths == cut)
        tied = tied[np.lexsort((tied, starts[tied]))][: SLOWEST - len(longer)]
        rows = np.concatenate([longer, tied])
    else:
        rows = np.arange(n)
    return rows[np.lexsort((rows, starts[rows], -lengths[rows]))]


def _ratio(num: str, den: str) -> pl.Expr:
    return pl.when(pl.col(den) > 0).then(pl.col(num) / pl.col(den))
