"""What a trace holds: the summary behind ``nsysan info``.

A plain dict (JSON-ready, ``INFO_SCHEMA_VERSION``) built from a loaded trace, and a
text rendering of it. No analysis here: counts, identities, spans, and what is missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from nsysan import model
from nsysan.ingest import kernel_launch_calls
from nsysan.ingest.census import TableCensus

INFO_SCHEMA_VERSION = 2

_SPAN_TABLES = ("kernels", "graphs", "memcpy", "memset", "cuda_api", "nvtx", "osrt")


def _span(trace: model.Trace, counted: Mapping[str, TableCensus]) -> tuple[int | None, int | None]:
    """Earliest start and latest end over :data:`_SPAN_TABLES` (those with a known span)."""
    starts: list[int] = []
    ends: list[int] = []
    for name in _SPAN_TABLES:
        df = trace.table(name)
        if name in counted:
            c = counted[name]
            if c.rows and c.start_ns is not None and c.end_ns is not None:
                starts.append(c.start_ns)
                ends.append(c.end_ns)
        elif df.height:
            first, last_end, last_start = (
                df.lazy()
                .select(
                    pl.col("start_ns").min(),
                    pl.col("end_ns").drop_nulls().max(),
                    pl.col("start_ns").max().alias("_last_start"),
                )
                .collect()
                .row(0)
            )
            starts.append(int(first))
            ends.append(int(last_end or last_start))
    return (min(starts), max(ends)) if starts else (None, None)


def _kernel_groups(trace: model.Trace, counted: Mapping[str, TableCensus]) -> pl.DataFrame:
    """Per GPU, file and process: kernels, their summed duration, first start, last end."""
    census = counted.get("kernels")
    if census is not None and census.groups is not None:
        return census.groups.select(
            "gpu", "source", "pid", "kernels", "kernel_time_ns", "first_ns", "last_ns"
        )
    return trace.kernels.group_by("gpu", "source", "pid").agg(
        pl.len().cast(pl.Int64).alias("kernels"),
        (pl.col("end_ns") - pl.col("start_ns")).sum().alias("kernel_time_ns"),
        pl.col("start_ns").min().alias("first_ns"),
        pl.col("end_ns").max().alias("last_ns"),
    )


def _gpu_processes(trace: model.Trace, kernel_groups: pl.DataFrame) -> pl.DataFrame:
    """Each (gpu, source, pid) that ran kernels, graphs, copies or sets, once."""
    return pl.concat(
        [
            kernel_groups.select("gpu", "source", "pid"),
            *(
                trace.table(t).select("gpu", "source", "pid")
                for t in ("graphs", "memcpy", "memset")
            ),
        ],
        how="vertical_relaxed",
    ).unique()


def _gpu_rows(
    trace: model.Trace, kernel_groups: pl.DataFrame, gpu_procs: pl.DataFrame
) -> list[dict[str, Any]]:
    if trace.gpus.is_empty():
        return []
    k = kernel_groups.group_by("gpu").agg(
        pl.col("kernels", "kernel_time_ns").sum(),
        pl.col("first_ns").min(),
        pl.col("last_ns").max(),
    )
    graphs = trace.graphs.group_by("gpu").agg(
        pl.len().alias("graph_executions"),
        (pl.col("end_ns") - pl.col("start_ns")).sum().alias("graph_time_ns"),
    )
    procs = gpu_procs.group_by("gpu").agg(pl.col("pid").sort().alias("pids"))
    rows = (
        trace.gpus.join(k, on="gpu", how="left")
        .join(graphs, on="gpu", how="left")
        .join(procs, on="gpu", how="left")
        .sort("gpu")
        .with_columns(
            pl.col("kernels", "kernel_time_ns", "graph_executions", "graph_time_ns").fill_null(0)
        )
    )
    return rows.select(
        "gpu",
        "name",
        "gpu_key",
        "identity",
        "uuid",
        "pci_bus",
        "host",
        "sm_count",
        "kernels",
        "kernel_time_ns",
        "graph_executions",
        "graph_time_ns",
        "first_ns",
        "last_ns",
        "pids",
    ).to_dicts()


def _process_rows(trace: model.Trace, gpu_procs: pl.DataFrame) -> list[dict[str, Any]]:
    if gpu_procs.is_empty():
        return []
    grouped = gpu_procs.group_by("source", "pid").agg(pl.col("gpu").unique().sort().alias("gpus"))
    names = trace.processes.select("source", "pid", "name")
    return grouped.join(names, on=["source", "pid"], how="left").sort("source", "pid").to_dicts()


def summarize(
    trace: model.Trace, counted: Mapping[str, TableCensus] | None = None
) -> dict[str, Any]:
    """The JSON-ready summary of what ``trace`` holds.

    ``counted``: tables counted instead of read (:func:`nsysan.ingest.load_census`);
    their counts, spans and launch calls come from there. A table counted by its
    stored rows is listed under ``stored_counts`` and has no span: ``span_covers``
    names the tables with rows the span is taken over, ``kernel_launch_calls`` is None where
    the launches were not counted.
    """
    counted = counted or {}
    start, end = _span(trace, counted)
    stored = [name for name in model.EVENT_TABLES if name in counted and counted[name].stored]
    counts = {
        name: counted[name].rows if name in counted else trace.table(name).height
        for name in model.EVENT_TABLES
    }
    api = counted.get("cuda_api")
    launches = api.launch_calls if api else kernel_launch_calls(trace.cuda_api)
    kernel_groups = _kernel_groups(trace, counted)
    gpu_procs = _gpu_processes(trace, kernel_groups)
    return {
        "schema_version": INFO_SCHEMA_VERSION,
        "sources": trace.sources.to_dicts(),
        "gpus": _gpu_rows(trace, kernel_groups, gpu_procs),
        "processes_with_gpu_work": _process_rows(trace, gpu_procs),
        "span_ns": {
            "start": start,
            "end": end,
            "duration": (end - start) if start is not None and end is not None else None,
        },
        "span_covers": [name for name in _SPAN_TABLES if name not in stored and counts[name]],
        "stored_counts": stored,
        "counts": counts,
        "kernel_launch_calls": launches,
        "missing": list(trace.capabilities.missing),
        "notes": list(trace.notes),
    }


def _seconds(ns: int | None) -> str:
    return "n/a" if ns is None else f"{ns / 1e9:.6f} s"


def render_text(summary: dict[str, Any]) -> str:
    """Human-readable rendering of :func:`summarize`'s output."""
    lines: list[str] = []
    for s in summary["sources"]:
        version = s["export_version"]
        if s["schema_version"]:
            version += f" (schema {s['schema_version']})"
        if s["capture_version_hint"]:
            version += f", captured with ~{s['capture_version_hint']}"
        lines.append(f"file {s['source']}: {s['path']}")
        lines.append(f"  export: {version}")
        if s["host"]:
            lines.append(f"  host: {s['host']}")
        if len(summary["sources"]) > 1:
            lines.append(
                f"  UTC session start: {s['utc_start_ns']} ns (offset {s['offset_ns']} ns)"
            )
    span = summary["span_ns"]
    stored = summary["stored_counts"]
    lines.append(
        f"time span: {_seconds(span['start'])} .. {_seconds(span['end'])} "
        f"({_seconds(span['duration'])})"
        + (f" over {', '.join(summary['span_covers'])}" if stored else "")
    )
    gpus = summary["gpus"]
    lines.append(f"GPUs that ran work: {len(gpus)}")
    for g in gpus:
        ident = g["uuid"] or g["pci_bus"] or g["gpu_key"]
        lines.append(
            f"  GPU {g['gpu']}: {g['name'] or 'unknown model'} [{g['identity']}: {ident}] "
            f"{g['kernels']} kernels, {g['kernel_time_ns'] / 1e6:.3f} ms kernel time, "
            + (
                f"{g['graph_executions']} CUDA graph executions, "
                f"{g['graph_time_ns'] / 1e6:.3f} ms graph time, "
                if g["graph_executions"]
                else ""
            )
            + f"PIDs {', '.join(str(p) for p in g['pids'] or [])}"
        )
    procs = summary["processes_with_gpu_work"]
    lines.append(f"processes with GPU work: {len(procs)}")
    for p in procs:
        lines.append(
            f"  file {p['source']} PID {p['pid']} {p['name'] or ''} -> GPU "
            f"{', '.join(str(g) for g in p['gpus'])}".rstrip()
        )
    lines.append("rows per table:")
    for name, n in summary["counts"].items():
        lines.append(f"  {name:<12} {n}" + ("  (stored)" if name in stored else ""))
    if stored:
        lines.append(
            "  (stored): rows the table stores, not checked, without their time span; "
            "--exact counts the rows a full read keeps"
        )
    if summary["missing"]:
        lines.append("missing:")
        lines.extend(f"  {m}" for m in summary["missing"])
    if summary["notes"]:
        lines.append("notes:")
        lines.extend(f"  {n}" for n in summary["notes"])
    return "\n".join(lines)
