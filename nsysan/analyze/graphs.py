"""CUDA graph work per GPU: graph-level executions and node-level kernels by graph launch.

Definitions (docs/metrics/graphs.md):

* **Graph level**: per GPU and graph id, the executions (``trace.graphs``) and their
  summed duration (``time_ns``), clipped to nothing: an execution is one unit of work.
* **Node level**: per GPU, the kernels whose launch call, found by (source, pid,
  correlation id) among the CUDA API rows, is ``cudaGraphLaunch``/``cuGraphLaunch``;
  ``executions`` is the number of distinct launches they came from and ``time_ns`` the
  sum of the kernels' durations.

``level`` says which; one trace can hold both (processes captured differently).
"""

from __future__ import annotations

import polars as pl

from nsysan.ingest.graphs import GRAPH_LAUNCH_APIS
from nsysan.model import CALL_KEYS, Trace
from nsysan.names import distinct, is_one_of, values_matching
from nsysan.packing import bit_widths, packed_key
from nsysan.stored import HostTable

__all__ = ["graph_work_per_gpu"]

_SCHEMA = {
    "gpu": pl.Int32,
    "level": pl.String,
    "graph_id": pl.Int64,
    "executions": pl.Int64,
    "kernels": pl.Int64,
    "time_ns": pl.Int64,
}


def _graph_launch_names(cuda_api: HostTable) -> list[str]:
    names = values_matching(distinct(cuda_api.lazy(), "name"), "GraphLaunch")
    return [n for n in names if n in GRAPH_LAUNCH_APIS]


def graph_work_per_gpu(trace: Trace) -> pl.DataFrame:
    """One row per (gpu, level, graph id): ``gpu, level, graph_id, executions, kernels,
    time_ns`` (``graph_id`` null at node level, where kernels do not name their graph)."""
    duration = (pl.col("end_ns") - pl.col("start_ns")).sum().cast(pl.Int64)
    parts = []
    if trace.graphs.height:
        parts.append(
            trace.graphs.group_by("gpu", "graph_id").agg(
                pl.lit("graph").alias("level"),
                pl.len().cast(pl.Int64).alias("executions"),
                pl.lit(None, dtype=pl.Int64).alias("kernels"),
                duration.alias("time_ns"),
            )
        )
    launches = _graph_launch_names(trace.cuda_api) if trace.cuda_api.height else []
    if launches:
        calls = (
            trace.cuda_api.lazy()
            .filter(is_one_of(pl.col("name"), launches))
            .select(CALL_KEYS)
            .unique()
            .collect()
        )
        # Graph-level executions share their launch's correlation id: not node kernels.
        nodes = _launched_by(trace.kernels, calls, trace.graphs.select(CALL_KEYS))
        if nodes.height:
            parts.append(
                nodes.group_by("gpu").agg(
                    pl.lit("node").alias("level"),
                    pl.lit(None, dtype=pl.Int64).alias("graph_id"),
                    pl.struct(CALL_KEYS).n_unique().cast(pl.Int64).alias("executions"),
                    pl.len().cast(pl.Int64).alias("kernels"),
                    duration.alias("time_ns"),
                )
            )
    if not parts:
        return pl.DataFrame(schema=_SCHEMA)
    return pl.concat([p.select(list(_SCHEMA)).cast(_SCHEMA) for p in parts]).sort(  # type: ignore[arg-type]
        "gpu", "level", "graph_id", nulls_last=True
    )


def _launched_by(
    kernels: pl.DataFrame, calls: pl.DataFrame, executions: pl.DataFrame
) -> pl.DataFrame:
    """The ``kernels`` with the (source, pid, correlation id) of one of ``calls`` and of none of
    ``executions``: a semi join, then an anti join, on those keys.

    The keys are one packed integer where they fit (nsysan.packing): joins on the three
    columns row-encoded them for every kernel of the trace.
    """
    widths = bit_widths([kernels, calls, executions], CALL_KEYS)
    if widths is None:
        return kernels.join(calls, on=CALL_KEYS, how="semi").join(
            executions, on=CALL_KEYS, how="anti"
        )
    key = packed_key(CALL_KEYS, widths)
    launched = calls.select(key).to_series().drop_nulls()
    executed = executions.select(key).to_series().drop_nulls()
    # A null key is in neither (it matched nothing in the joins either).
    return kernels.filter(key.is_in(launched.implode()) & ~key.is_in(executed.implode()))
