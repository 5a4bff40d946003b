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

from dataclasses import dataclass

import numpy as np
import polars as pl

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


def _q_descending(col: str, q: float) -> pl.Expr:
    """:func:`_q` of a group already in descending order (rank counted from its end)."""
    return pl.col(col).gather(pl.len().cast(pl.Int64) - 1 - _rank(q)).first().cast(pl.Int64)


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
) -> StepsResult:
    """Steps, requests and throughput per GPU.

    ``processes``: ``gpu, source, pid`` (the processes that ran kernels on each GPU).
    """
    w = windows.select(pl.col("gpu").cast(pl.Int32), "window_start_ns", "window_end_ns")
    procs = processes.select(
        pl.col("gpu").cast(pl.Int32), pl.col("source").cast(pl.Int32), "pid"
    ).unique()
    if iteration_source == "nvtx" and iteration_label:
        steps = _spans_of_gpus(nvtx, procs, w, pl.col("text") == iteration_label).drop("text")
    elif iteration_source == "kernel_sequence" and iterations is not None and w.height:
        # Per GPU, the iterations overlapping its window: not a cross join of every
        # GPU with every iteration first (2.5M rows at 5M kernels).
        bounds = iterations.select("start_ns", "end_ns")
        steps = pl.concat(
            [
                bounds.filter(
                    (pl.col("end_ns") > window["window_start_ns"])
                    & (pl.col("start_ns") < window["window_end_ns"])
                ).select(
                    pl.lit(window["gpu"], dtype=pl.Int32).alias("gpu"),
                    "start_ns",
                    "end_ns",
                    (pl.col("end_ns") - pl.col("start_ns")).alias("duration_ns"),
                )
                for window in w.iter_rows(named=True)
            ],
            how="vertical",
        ).sort("gpu", "start_ns")
    else:
        steps = pl.DataFrame(
            schema={
                "gpu": pl.Int32,
                "start_ns": pl.Int64,
                "end_ns": pl.Int64,
                "duration_ns": pl.Int64,
            }
        )
    steps = steps.with_columns(
        pl.int_range(pl.len()).over("gpu").cast(pl.Int64).alias("step")
    ).select("gpu", "step", "start_ns", "end_ns", "duration_ns")
    # Longest first, per GPU: the slowest steps lead each GPU's block, and a
    # percentile is one element of it; no sorted copy per statistic.
    by_length = steps.sort(
        ["gpu", "duration_ns", "start_ns"], descending=[False, True, False], maintain_order=True
    )
    step_stats = by_length.group_by("gpu", maintain_order=True).agg(
        pl.len().cast(pl.Int64).alias("steps"),
        (pl.len() * 1e9 / (pl.col("end_ns").max() - pl.col("start_ns").min())).alias("steps_per_s"),
        _q_descending("duration_ns", 0.5).alias("step_p50_ns"),
        _q_descending("duration_ns", 0.9).alias("step_p90_ns"),
        _q_descending("duration_ns", 0.99).alias("step_p99_ns"),
        pl.col("duration_ns").first().alias("step_max_ns"),
    )
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
            pl.lit(iteration_source if steps.height else None, pl.String).alias("source"),
            pl.lit(iteration_label if steps.height else None, pl.String).alias("label"),
            pl.col("steps").fill_null(0),
            _ratio("step_p99_ns", "step_p50_ns").alias("step_tail_ratio"),
            _ratio("request_p99_ns", "request_p50_ns").alias("request_tail_ratio"),
        )
        .select(list(_PER_GPU))
        .cast(_PER_GPU)  # type: ignore[arg-type]
        .sort("gpu")
    )
    slowest = (
        by_length.group_by("gpu", maintain_order=True)
        .head(SLOWEST)
        .join(per_gpu.select("gpu", "step_p50_ns"), on="gpu", maintain_order="left")
    )
    # Divided in numpy: polars divides by a joined column of one value (one GPU) as a
    # product with its reciprocal, one unit in the last place off the quotient.
    with np.errstate(divide="ignore", invalid="ignore"):
        over_median = slowest["duration_ns"].to_numpy() / slowest["step_p50_ns"].to_numpy()
    slowest = slowest.select("gpu", "start_ns", "end_ns", "duration_ns").with_columns(
        pl.Series("over_median", over_median, dtype=pl.Float64)
    )
    return StepsResult(per_gpu=per_gpu, steps=steps, slowest=slowest, requests=requests)


def _ratio(num: str, den: str) -> pl.Expr:
    return pl.when(pl.col(den) > 0).then(pl.col(num) / pl.col(den))
