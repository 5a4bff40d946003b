"""Host CPUs during GPU gaps: saturated cores, or feeding threads blocked?

Definitions (docs/metrics/cpu.md):

* **What is measured.** ``SCHED_EVENTS`` (``nsys profile --cpuctxsw=process-tree``, on
  by default with CPU sampling) records when the threads **of the profiled processes**
  are switched onto and off a CPU. A thread is *on CPU* from a switch-in to its next
  switch-out. Nothing is recorded for other programs: a core with no profiled thread
  on it may have been idle or running anything else, so nsysan never calls a core
  idle, only "not running the profiled processes".
* **Per host** (files with the same ``host`` name together; a file without one is a
  host of its own, named by its file name, so ranks of one node without host names
  are seen apart): the window is
  from the earliest window start to the latest window end of the host's GPUs; *gap
  time* is the union of those GPUs' gaps (time at least one of them idles).
  ``cores`` is ``TARGET_INFO_SYSTEM_ENV.CpuCores`` (the host's logical CPUs; null when
  the export lacks it), ``cores_seen`` the CPUs the profiled threads ran on.
* **Per core**: ``busy_share`` = time the core ran a profiled thread / window;
  ``gap_busy_share`` = the same over gap time.
* ``busy_cores_gap_mean`` = mean number of cores running profiled threads during gap
  time; ``saturated_gap_share`` = share of gap time during which at least
  :data:`SATURATED_CORE_SHARE` of ``cores`` ran profiled threads at once (null without
  ``cores``).
* **Per feeding thread** (the thread whose launch call ends a gap, see
  docs/metrics/host.md), over the gaps it ended, per GPU: ``gap_ns``, ``running_share``
  (on CPU), ``waiting_share`` (inside a CUDA synchronizing call, a GIL-signature wait
  or another blocking OS call: host attribution's ``cuda_sync + gil_wait +
  blocking_os``) and ``descheduled_share`` (off CPU outside any traced call: waiting
  for a core, or in an untraced block: host attribution's ``descheduled``). A spinning
  wait is both waiting and running, so the shares need not sum to 1.
* **Verdict** per host: ``saturated`` when ``saturated_gap_share`` ≥
  :data:`SATURATED_GAP_SHARE` (the profiled processes alone fill the cores — more cores
  or fewer threads help); ``blocked`` when the feeding threads' waiting share is ≥
  :data:`BLOCKED_WAIT_SHARE` of their gap time and fewer than
  :data:`SATURATED_CORE_SHARE` of the cores run profiled threads on average
  (serialization: a lock, a queue, the GIL — more cores will not help);
  ``feeding_thread_busy`` when, with as few cores busy, the feeding threads are on CPU
  ≥ :data:`THREAD_STATE_SHARE` of their gap time (one thread's own host work on the
  launch path); ``off_cpu`` when they are off CPU outside any traced call that share of
  it (waiting for a core that other programs hold, which is not recorded, or blocked in
  an untraced call); ``mixed`` otherwise; ``unknown`` without gaps or core count.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from nsysan.interval_arrays import merge_arrays
from nsysan.intervals import union_intervals

__all__ = [
    "BLOCKED_WAIT_SHARE",
    "THREAD_STATE_SHARE",
    "SATURATED_CORE_SHARE",
    "SATURATED_GAP_SHARE",
    "HOST_GAP_COLUMNS",
    "CpuResult",
    "measure_cpu",
    "on_cpu_intervals",
]

SATURATED_CORE_SHARE = 0.9
SATURATED_GAP_SHARE = 0.5
BLOCKED_WAIT_SHARE = 0.5
THREAD_STATE_SHARE = 0.5
WAIT_CAUSES = ("cuda_sync", "gil_wait", "blocking_os")

_THREAD = ["source", "pid", "tid"]

#: The columns of host attribution's per-gap table that :func:`measure_cpu` reads.
HOST_GAP_COLUMNS = (
    "gpu",
    "start_ns",
    "end_ns",
    "duration_ns",
    *_THREAD,
    *(f"{c}_ns" for c in (*WAIT_CAUSES, "descheduled")),
)


@dataclass(frozen=True)
class CpuResult:
    """Host CPU use by the profiled processes, over the window and during GPU gaps.

    ``hosts``: ``host, cores, cores_seen, window_start_ns, window_end_ns, window_ns,
    gap_ns, busy_cores_mean, busy_cores_gap_mean, saturated_gap_share,
    feeding_waiting_share, feeding_descheduled_share, feeding_running_share, verdict``.
    ``cores``: ``host, cpu, busy_ns, busy_share, gap_busy_ns, gap_busy_share``.
    ``threads``: ``host, gpu, source, pid, tid, gaps, gap_ns, running_ns, waiting_ns,
    descheduled_ns, running_share, waiting_share, descheduled_share``.
    """

    hosts: pl.DataFrame
    cores: pl.DataFrame
    threads: pl.DataFrame


def on_cpu_intervals(sched: pl.DataFrame) -> pl.DataFrame:
    """Per thread, ``[switch-in, next switch-out)`` on a CPU: ``source, pid, tid, cpu, start_ns, end_ns``."""
    ordered = sched.drop_nulls(["tid", "time_ns", "is_sched_in"]).sort([*_THREAD, "time_ns"])
    same = pl.all_horizontal(pl.col(c) == pl.col(c).shift(-1) for c in _THREAD)
    return (
        ordered.with_columns(
            pl.col("time_ns").shift(-1).alias("end_ns"),
            (~pl.col("is_sched_in").shift(-1) & same).alias("_closes"),
        )
        .filter(pl.col("is_sched_in") & pl.col("_closes").fill_null(False))
        .select(*_THREAD, "cpu", pl.col("time_ns").alias("start_ns"), "end_ns")
    )


def _covered(a_s: np.ndarray, a_e: np.ndarray, b_s: np.ndarray, b_e: np.ndarray) -> int:
    """Length of (disjoint, sorted) ``a`` ∩ (disjoint, sorted) ``b``."""
    if a_s.size == 0 or b_s.size == 0:
        return 0
    cum = np.concatenate(([0], np.cumsum(a_e - a_s)))

    def upto(t: np.ndarray) -> np.ndarray:
        i = np.searchsorted(a_s, t, side="right") - 1
        j = np.clip(i, 0, None)
        inside = np.clip(np.minimum(t, a_e[j]) - a_s[j], 0, None)
        return np.where(i >= 0, cum[j] + inside, 0)

    return int(np.sum(upto(b_e) - upto(b_s)))


def _clip(s: np.ndarray, e: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    s, e = np.clip(s, lo, hi), np.clip(e, lo, hi)
    keep = e > s
    return s[keep], e[keep]


def _level_at_least(
    starts: list[np.ndarray], ends: list[np.ndarray], k: int
) -> tuple[np.ndarray, np.ndarray]:
    """Intervals during which at least ``k`` of the (per-core disjoint) sets are busy."""
    times = np.concatenate([*starts, *ends])
    if times.size == 0 or k <= 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    steps = np.concatenate(
        [np.ones(sum(a.size for a in starts)), -np.ones(sum(a.size for a in ends))]
    )
    order = np.lexsort((steps, times))  # ends before starts at one instant
    t, level = times[order], np.cumsum(steps[order])
    full = level[:-1] >= k
    s, e = t[:-1][full], t[1:][full]
    keep = e > s
    return merge_arrays(s[keep], e[keep])


def measure_cpu(
    sched: pl.DataFrame,
    sources: pl.DataFrame,
    gpu_sources: pl.DataFrame,
    windows: pl.DataFrame,
    gaps: pl.DataFrame,
    host_gaps: pl.DataFrame | None,
) -> CpuResult:
    """Per host, per core and per feeding thread; ``sched`` must have rows.

    ``gpu_sources``: ``gpu, source`` pairs (which file's processes ran work on each GPU).
    """
    host_of_source = sources.select(
        "source",
        pl.coalesce(pl.col("host"), pl.col("path").str.split("/").list.last()).alias("host"),
    )
    cores_of_host = (
        sources.drop("host")
        .join(host_of_source, on="source")
        .group_by("host")
        .agg(pl.col("cpu_cores").max().alias("cores"))
    )
    on_cpu = on_cpu_intervals(sched).join(host_of_source, on="source")
    hosts_rows, core_rows = [], []
    # A GPU's host is the host of the file whose process ran kernels on it.
    gpu_host = (
        gpu_sources.select(pl.col("gpu").cast(pl.Int32), pl.col("source").cast(pl.Int32))
        .join(host_of_source, on="source")
        .group_by("gpu")
        .agg(pl.col("host").min())
    )
    w = windows.select(pl.col("gpu").cast(pl.Int32), "window_start_ns", "window_end_ns").join(
        gpu_host, on="gpu", how="inner"
    )
    for host in sorted(set(on_cpu["host"].to_list())):
        mine_w = w.filter(pl.col("host") == host)
        if mine_w.is_empty():
            continue
        lo, hi = int(mine_w["window_start_ns"].min()), int(mine_w["window_end_ns"].max())  # type: ignore[arg-type]
        g = gaps.filter(pl.col("gpu").cast(pl.Int32).is_in(mine_w["gpu"].to_list()))
        gap_s, gap_e = merge_arrays(
            g["start_ns"].to_numpy().astype(np.int64), g["end_ns"].to_numpy().astype(np.int64)
        )
        gap_s, gap_e = _clip(gap_s, gap_e, lo, hi)
        gap_ns = int(np.sum(gap_e - gap_s))
        per_core = union_intervals(on_cpu.filter(pl.col("host") == host), ["cpu"])
        starts, ends = [], []
        for (cpu,), part in per_core.group_by(["cpu"], maintain_order=True):
            s, e = _clip(
                part["start_ns"].to_numpy().astype(np.int64),
                part["end_ns"].to_numpy().astype(np.int64),
                lo,
                hi,
            )
            starts.append(s)
            ends.append(e)
            busy = int(np.sum(e - s))
            in_gaps = _covered(s, e, gap_s, gap_e)
            core_rows.append(
                (
                    host,
                    int(cpu),
                    busy,
                    busy / (hi - lo) if hi > lo else None,
                    in_gaps,
                    in_gaps / gap_ns if gap_ns else None,
                )
            )
        cores = cores_of_host.filter(pl.col("host") == host)["cores"]
        n_cores = int(cores[0]) if cores.len() and (cores[0] or 0) > 0 else None
        busy_total = sum(int(np.sum(e - s)) for s, e in zip(starts, ends, strict=True))
        busy_gap_total = sum(
            _covered(s, e, gap_s, gap_e) for s, e in zip(starts, ends, strict=True)
        )
        saturated = None
        if n_cores and gap_ns:
            k = int(np.ceil(SATURATED_CORE_SHARE * n_cores))
            sat_s, sat_e = _level_at_least(starts, ends, k)
            saturated = _covered(sat_s, sat_e, gap_s, gap_e) / gap_ns
        hosts_rows.append(
            {
                "host": host,
                "cores": n_cores,
                "cores_seen": len(starts),
                "window_start_ns": lo,
                "window_end_ns": hi,
                "window_ns": hi - lo,
                "gap_ns": gap_ns,
                "busy_cores_mean": busy_total / (hi - lo) if hi > lo else None,
                "busy_cores_gap_mean": busy_gap_total / gap_ns if gap_ns else None,
                "saturated_gap_share": saturated,
            }
        )
    threads = _threads(on_cpu, host_gaps, w)
    hosts = _with_verdicts(
        pl.DataFrame(hosts_rows, schema=_HOSTS_SCHEMA, orient="row")
        if hosts_rows
        else pl.DataFrame(schema=_HOSTS_SCHEMA),
        threads,
    )
    cores_df = pl.DataFrame(core_rows, schema=_CORES_SCHEMA, orient="row")
    return CpuResult(hosts=hosts, cores=cores_df.sort("host", "cpu"), threads=threads)


_HOSTS_SCHEMA = {
    "host": pl.String,
    "cores": pl.Int32,
    "cores_seen": pl.Int32,
    "window_start_ns": pl.Int64,
    "window_end_ns": pl.Int64,
    "window_ns": pl.Int64,
    "gap_ns": pl.Int64,
    "busy_cores_mean": pl.Float64,
    "busy_cores_gap_mean": pl.Float64,
    "saturated_gap_share": pl.Float64,
}
_CORES_SCHEMA = {
    "host": pl.String,
    "cpu": pl.Int32,
    "busy_ns": pl.Int64,
    "busy_share": pl.Float64,
    "gap_busy_ns": pl.Int64,
    "gap_busy_share": pl.Float64,
}
_THREADS_SCHEMA = {
    "host": pl.String,
    "gpu": pl.Int32,
    "source": pl.Int32,
    "pid": pl.Int32,
    "tid": pl.Int32,
    "gaps": pl.Int64,
    "gap_ns": pl.Int64,
    "running_ns": pl.Int64,
    "waiting_ns": pl.Int64,
    "descheduled_ns": pl.Int64,
    "running_share": pl.Float64,
    "waiting_share": pl.Float64,
    "descheduled_share": pl.Float64,
}


def _threads(on_cpu: pl.DataFrame, host_gaps: pl.DataFrame | None, w: pl.DataFrame) -> pl.DataFrame:
    """Running, waiting and descheduled time of each feeding thread over the gaps it ended."""
    if host_gaps is None or host_gaps.is_empty() or "tid" not in host_gaps.columns:
        return pl.DataFrame(schema=_THREADS_SCHEMA)
    fed = host_gaps.filter(pl.col("tid").is_not_null()).select(
        pl.col("gpu").cast(pl.Int32),
        pl.col("source").cast(pl.Int32),
        "pid",
        "tid",
        "start_ns",
        "end_ns",
        "duration_ns",
        pl.sum_horizontal([f"{c}_ns" for c in WAIT_CAUSES if f"{c}_ns" in host_gaps.columns]).alias(
            "_wait"
        ),
        (pl.col("descheduled_ns") if "descheduled_ns" in host_gaps.columns else pl.lit(0)).alias(
            "_desched"
        ),
    )
    if fed.is_empty():
        return pl.DataFrame(schema=_THREADS_SCHEMA)
    keys = ["gpu", *_THREAD]
    rows = []
    cpu_by_thread = {k: v for k, v in on_cpu.partition_by(_THREAD, as_dict=True).items()}
    for key, part in fed.partition_by(keys, as_dict=True).items():
        gpu, source, pid, tid = key
        gs, ge = merge_arrays(
            part["start_ns"].to_numpy().astype(np.int64), part["end_ns"].to_numpy().astype(np.int64)
        )
        mine = cpu_by_thread.get((source, pid, tid))
        running = 0
        if mine is not None:
            s, e = merge_arrays(
                mine["start_ns"].to_numpy().astype(np.int64),
                mine["end_ns"].to_numpy().astype(np.int64),
            )
            running = _covered(s, e, gs, ge)
        rows.append(
            (
                gpu,
                source,
                pid,
                tid,
                part.height,
                int(part["duration_ns"].sum()),
                running,
                int(part["_wait"].sum()),
                int(part["_desched"].sum()),
            )
        )
    df = pl.DataFrame(
        rows,
        schema={
            k: _THREADS_SCHEMA[k]
            for k in (
                "gpu",
                "source",
                "pid",
                "tid",
                "gaps",
                "gap_ns",
                "running_ns",
                "waiting_ns",
                "descheduled_ns",
            )
        },
        orient="row",
    )
    share = lambda c: pl.when(pl.col("gap_ns") > 0).then(pl.col(c) / pl.col("gap_ns"))  # noqa: E731
    return (
        df.join(w.select("gpu", "host"), on="gpu", how="left")
        .with_columns(
            share("running_ns").alias("running_share"),
            share("waiting_ns").alias("waiting_share"),
            share("descheduled_ns").alias("descheduled_share"),
        )
        .select(list(_THREADS_SCHEMA))
        .sort("host", "gpu", "source", "pid", "tid")
    )


def _with_verdicts(hosts: pl.DataFrame, threads: pl.DataFrame) -> pl.DataFrame:
    pooled = threads.group_by("host").agg(
        (pl.col(c).sum() / pl.col("gap_ns").sum()).alias(f"feeding_{c.removesuffix('_ns')}_share")
        for c in ("waiting_ns", "descheduled_ns", "running_ns")
    )
    out = hosts.join(pooled, on="host", how="left")
    for c in ("feeding_waiting_share", "feeding_descheduled_share", "feeding_running_share"):
        if c not in out.columns:
            out = out.with_columns(pl.lit(None, pl.Float64).alias(c))
    saturated = pl.col("saturated_gap_share").fill_null(0) >= SATURATED_GAP_SHARE
    few_cores = pl.col("busy_cores_gap_mean") < SATURATED_CORE_SHARE * pl.col("cores")
    few = few_cores.fill_null(False)
    blocked = (pl.col("feeding_waiting_share").fill_null(0) >= BLOCKED_WAIT_SHARE) & few
    running = (pl.col("feeding_running_share").fill_null(0) >= THREAD_STATE_SHARE) & few
    off_cpu = (pl.col("feeding_descheduled_share").fill_null(0) >= THREAD_STATE_SHARE) & few
    verdict = (
        pl.when((pl.col("gap_ns") == 0) | pl.col("cores").is_null())
        .then(pl.lit("unknown"))
        .when(saturated)
        .then(pl.lit("saturated"))
        .when(blocked)
        .then(pl.lit("blocked"))
        .when(running)
        .then(pl.lit("feeding_thread_busy"))
        .when(off_cpu)
        .then(pl.lit("off_cpu"))
        .otherwise(pl.lit("mixed"))
    )
    return out.with_columns(verdict.alias("verdict")).sort("host")
