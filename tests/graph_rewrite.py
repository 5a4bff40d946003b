"""Test helper: a copy of a real export in which runs of kernels become CUDA graph executions.

What Nsight Systems would have recorded had the program captured those kernels in a
graph and replayed it, traced at graph level (``--cuda-graph-trace=graph``): each run of
back-to-back kernels on one stream becomes one ``CUPTI_ACTIVITY_KIND_GRAPH_TRACE`` row
from its first kernel's start to its last kernel's end, its kernels leave the kernel
table, the first kernel's launch call becomes the ``cudaGraphLaunch`` (the row keeps its
correlation id) and the other launch calls go. The original file is never opened for
writing: the copy lives in a temporary folder.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

GRAPH_TRACE_DDL = """CREATE TABLE CUPTI_ACTIVITY_KIND_GRAPH_TRACE (
    start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
    contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL,
    correlationId INTEGER, globalPid INTEGER, graphId INTEGER NOT NULL,
    graphExecId INTEGER NOT NULL)"""
GRAPH_LAUNCH = "cudaGraphLaunch_v10000"


def as_graph_trace(
    src: Path, dst: Path, *, max_gap_ns: int = 2_000, max_nodes: int = 64, min_nodes: int = 2
) -> dict[str, int]:
    """Copy ``src`` to ``dst`` with runs of kernels rewritten as graph executions.

    A run: kernels of one (process, device, stream) in start order, each starting at most
    ``max_gap_ns`` after the previous one ends, at most ``max_nodes`` long; runs of at
    least ``min_nodes`` kernels become graphs (``graphId`` = the run's length, as one
    captured graph per shape). Returns counts: kernels before, graphs, kernels converted.
    """
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    try:
        rows = con.execute(
            "SELECT rowid, globalPid, deviceId, contextId, streamId, correlationId, start, end "
            "FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY globalPid, deviceId, streamId, start, end"
        ).fetchall()
        runs: list[list[tuple[int, ...]]] = []
        for row in rows:
            last = runs[-1][-1] if runs else None
            if (
                last is not None
                and (last[1], last[2], last[4]) == (row[1], row[2], row[4])
                and row[6] - last[7] <= max_gap_ns
                and len(runs[-1]) < max_nodes
            ):
                runs[-1].append(row)
            else:
                runs.append([row])
        graphs = [run for run in runs if len(run) >= min_nodes]
        con.execute(GRAPH_TRACE_DDL)
        (launch_id,) = con.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM StringIds").fetchone()
        con.execute("INSERT INTO StringIds (id, value) VALUES (?, ?)", (launch_id, GRAPH_LAUNCH))
        for run in graphs:
            first = run[0]
            gpid, dev, ctx, stream, corr = first[1:6]
            con.execute(
                "INSERT INTO CUPTI_ACTIVITY_KIND_GRAPH_TRACE VALUES (?,?,?,?,NULL,?,?,?,?,?)",
                (
                    first[6],
                    max(r[7] for r in run),
                    dev,
                    ctx,
                    stream,
                    corr,
                    gpid,
                    len(run),
                    len(run),
                ),
            )
            con.executemany(
                "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid = ?", [(r[0],) for r in run]
            )
            pid = gpid >> 24
            con.execute(
                "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET nameId = ? "
                "WHERE correlationId = ? AND globalTid >> 24 = ?",
                (launch_id, corr, pid),
            )
            con.executemany(
                "DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME "
                "WHERE correlationId = ? AND globalTid >> 24 = ?",
                [(r[5], pid) for r in run[1:]],
            )
        con.commit()
    finally:
        con.close()
    return {
        "kernels": len(rows),
        "graphs": len(graphs),
        "converted": sum(len(run) for run in graphs),
    }
