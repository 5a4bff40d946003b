"""CUDA graph executions: reading them, and counting them as GPU work.

With ``--cuda-graph-trace=graph`` (Nsight Systems' default) a graph replay is one row of
``CUPTI_ACTIVITY_KIND_GRAPH_TRACE`` and its kernels are *not* in
``CUPTI_ACTIVITY_KIND_KERNEL``; the row's ``correlationId`` is that of the
``cudaGraphLaunch``/``cuGraphLaunch`` call. With ``--cuda-graph-trace=node`` the kernels
are in the kernel table (with a ``graphNodeId``) and their correlation id is the graph
launch's, so they need nothing here: host attribution finds their launch call by it.

A graph execution is GPU work for every per-GPU analysis (busy time, gaps, stagger,
imbalance, host attribution, the per-GPU tables): :func:`with_graph_work` appends the
executions to the kernels as rows named ``CUDA graph <graphId>``. The ingested
``Trace.kernels`` stays the kernel table alone, so per-name kernel totals equal
``nsys stats``'s ``cuda_gpu_kern_sum``, which leaves graph-level rows out
(docs/metrics/graphs.md).
"""

from __future__ import annotations

import dataclasses

import polars as pl

from nsysan import model
from nsysan.ingest import nsys
from nsysan.ingest.sqlite import ExportDB

__all__ = [
    "GRAPH_LAUNCH_APIS",
    "GRAPH_NAME_PREFIX",
    "GRAPH_TABLE",
    "graph_work",
    "is_graph_work",
    "read_graph_executions",
    "with_graph_work",
]

GRAPH_TABLE = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
GRAPH_NAME_PREFIX = "CUDA graph "
# Runtime and driver calls that launch a graph (version suffixes stripped at ingest).
GRAPH_LAUNCH_APIS = ("cudaGraphLaunch", "cuGraphLaunch")

_GRAPH_COLUMNS = {
    **nsys.GPU_ACTIVITY_COLUMNS,
    "green_context_id": "greenContextId",
    "graph_id": "graphId",
    "graph_exec_id": "graphExecId",
}


def read_graph_executions(db: ExportDB, source: int) -> pl.DataFrame:
    """Graph-level executions of one export (``model.GRAPHS`` plus ``global_pid``).

    Rows failing the read checks (``nsysan.ingest.validate``) are dropped with a note;
    CUPTI writes 0 for both bounds when it could not time a graph: those rows are
    dropped and counted in the notes too.
    """
    df = db.read_checked(GRAPH_TABLE, _GRAPH_COLUMNS)
    schema = {**model.GRAPHS, "global_pid": pl.Int64}
    if df is None:
        return model.empty_frame(schema)
    untimed = (pl.col("start_ns") == 0) & (pl.col("end_ns") == 0)
    n_untimed = int(df.select(untimed.sum()).item())
    if n_untimed:
        df = df.filter(~untimed)
        db.notes.append(f"{GRAPH_TABLE}: {n_untimed} graph execution(s) without timestamps ignored")
    df = df.with_columns(nsys.pid_of(pl.col("global_pid")).alias("pid"))
    df = df.with_columns(pl.lit(source, dtype=pl.Int32).alias("source"))
    return model.conform(df, schema)


def graph_work(graphs: pl.DataFrame) -> pl.DataFrame:
    """Graph executions as rows of the kernels table, named ``CUDA graph <graphId>``."""
    label = pl.concat_str(
        pl.lit(GRAPH_NAME_PREFIX), pl.col("graph_id").cast(pl.String).fill_null("?")
    ).cast(pl.Categorical)
    return model.conform(
        graphs.with_columns(label.alias("short_name"), label.alias("name")), model.KERNELS
    )


def is_graph_work(name: pl.Expr) -> pl.Expr:
    """Whether a kernels-table name is a graph execution added by :func:`graph_work`."""
    return name.cast(pl.String).str.starts_with(GRAPH_NAME_PREFIX)


def with_graph_work(trace: model.Trace) -> model.Trace:
    """``trace`` with its graph executions appended to the kernels, in (gpu, start) order."""
    if trace.graphs.is_empty():
        return trace
    kernels = pl.concat([trace.kernels, graph_work(trace.graphs)], how="vertical_relaxed").sort(
        "gpu", "start_ns", "end_ns", maintain_order=True
    )
    return dataclasses.replace(trace, kernels=model.conform(kernels, model.KERNELS))
