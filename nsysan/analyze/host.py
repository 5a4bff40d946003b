"""Host-side cause of each GPU gap: what the process feeding the GPU was doing.

Definition (docs/metrics/host.md):

* **Feeding operation and thread.** The operation that *ends* a gap is the GPU
  operation (kernel, memcpy or memset) of the same unit (GPU, or process-device in
  ``nvidia`` busy mode) that starts exactly at the gap's end. Among several starting
  at that instant: a kernel before a memcpy before a memset, then the smallest
  (source, pid, correlation id). Its **launch call** is the CUDA
  API row with the same (source, pid, correlation id), whatever its name
  (cudaLaunchKernel, cuLaunchKernelEx, cudaGraphLaunch, cudaMemcpyAsync, ...); when
  several rows share the id, the earliest-starting one. The feeding process is the
  operation's (source, pid), the feeding thread the launch call's tid.
* **Primary class.** With the gap ``[S, E)`` and the launch call ``[L, Le)``:
  ``launched_late`` when ``L >= S - launch_slack_ns`` (the host had not started the
  launch when the GPU ran dry), ``gpu_wait`` otherwise (the work was being queued
  before the gap began; the GPU waited on something else). ``no_launch_record``
  when no operation starts at ``E`` (the gap ends at the window's end or at a
  profiler-overhead range) or its correlation id has no CUDA API row; ``no_data``
  when the trace has no CUDA API table at all.
* **Time split.** Every nanosecond of a gap gets exactly one cause, so causes sum
  to the gap: ``[S, clamp(L))`` is the *host portion*, ``[clamp(L), clamp(Le))`` is
  ``launch_call`` and ``[clamp(Le), E)`` is ``gpu_wait`` (queued, not running), with
  ``clamp`` into ``[S, E]``. Gaps without a launch record are wholly
  ``no_launch_record`` (``unattributed_no_data`` without a CUDA API table).
* **Host portion**, per instant, by precedence (:data:`HOST_CAUSES`): the feeding
  thread was in a CUDA synchronizing call (:data:`CUDA_SYNC_APIS`) > in a GIL-like
  wait (see below) > in another blocking OS call (:data:`BLOCKING_OS_CALLS`) > in
  another CUDA API call > in another OS runtime call > descheduled (between a
  switch-out and the next switch-in in SCHED_EVENTS) > inside an NVTX range of that
  thread > ``unattributed``. Waits outrank work, a traced call outranks bare
  descheduling (which it explains), and any call outranks a named phase. Time no
  available source explains is ``unattributed_no_data`` instead of
  ``unattributed`` when a source that could have explained it (OS runtime,
  scheduling, NVTX) is missing from the trace.
* **GIL signature.** A thread waiting for the GIL sleeps in a timed condition wait
  of CPython's switch interval (:data:`GIL_SWITCH_INTERVAL_NS`, the default
  ``sys.getswitchinterval()``), then asks again: its waits pile up at the interval
  and never exceed it. A feeding thread shows the signature for one call of
  :data:`GIL_WAIT_CALLS` (outermost calls only) when at least :data:`GIL_MIN_WAITS`
  of them last the interval ± :data:`GIL_TOLERANCE_NS`, and at least
  :data:`GIL_MIN_SHARE` of those longer than :data:`GIL_LONG_WAIT_NS` end within the
  interval + tolerance. Then every wait of that call no longer than the interval +
  tolerance is ``gil_wait`` (the last wait of an acquisition is woken early); its
  other blocking calls stay ``blocking_os``.
* **NVTX text.** The innermost range (the most recently opened one still open) on
  the feeding thread. Per gap, ``nvtx_text`` is the innermost text covering most of
  the host portion whatever its cause; per GPU, :attr:`HostResult.nvtx` gives per
  text the time attributed to ``nvtx`` and the host-portion time it covers.
* **Unavailable.** A cause whose table is missing (:attr:`Capabilities.present`) is
  never assigned; :attr:`HostResult.unavailable` names it with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from nsysan.model import Capabilities, Trace
from nsysan.settings import Settings

__all__ = [
    "BLOCKING_OS_CALLS",
    "CAUSES",
    "CAUSE_LABELS",
    "CUDA_SYNC_APIS",
    "GIL_LONG_WAIT_NS",
    "GIL_MIN_SHARE",
    "GIL_MIN_WAITS",
    "GIL_SWITCH_INTERVAL_NS",
    "GIL_TOLERANCE_NS",
    "GIL_WAIT_CALLS",
    "HOST_CAUSES",
    "PRIMARY_CLASSES",
    "HostResult",
    "attribute_gaps",
    "descheduled_intervals",
    "gil_threads",
    "host_segments",
    "unavailable_causes",
]

# CPython's default switch interval (sys.getswitchinterval() == 0.005): a thread
# that wants the GIL waits this long on a condition variable, then asks again.
GIL_SWITCH_INTERVAL_NS = 5_000_000
GIL_TOLERANCE_NS = 1_000_000
GIL_MIN_WAITS = 3
GIL_MIN_SHARE = 0.5
GIL_LONG_WAIT_NS = 1_000_000

# Host-portion causes in precedence order (the first that covers an instant wins).
HOST_CAUSES = (
    "cuda_sync",
    "gil_wait",
    "blocking_os",
    "cuda_api",
    "os_call",
    "descheduled",
    "nvtx",
)
CAUSES = (
    *HOST_CAUSES,
    "unattributed",
    "unattributed_no_data",
    "launch_call",
    "gpu_wait",
    "no_launch_record",
)
# Causes that happen on the host (for host_share); gpu_wait and no_launch_record do not.
HOST_SIDE_CAUSES = (*HOST_CAUSES, "unattributed", "unattributed_no_data", "launch_call")
CAUSE_LABELS = {
    "cuda_sync": "in a CUDA synchronizing call",
    "gil_wait": "GIL signature (repeated ~5 ms condition waits)",
    "blocking_os": "in a blocking OS call (lock, condition wait, poll, sleep)",
    "descheduled": "descheduled (off CPU outside any traced call)",
    "cuda_api": "in another CUDA API call",
    "os_call": "in another OS runtime call (I/O, ...)",
    "nvtx": "inside a named NVTX range",
    "unattributed": "unattributed",
    "unattributed_no_data": "unattributed (no data)",
    "launch_call": "in the launch call of the next operation",
    "gpu_wait": "GPU-side wait (work already queued)",
    "no_launch_record": "no launch record",
}
PRIMARY_CLASSES = ("launched_late", "gpu_wait", "no_launch_record", "no_data")

# Calls that block the host until GPU work completes: explicit synchronization and
# the synchronous (non-Async) copies. Names after _v<N>/_ptsz/_ptds are stripped.
CUDA_SYNC_APIS = frozenset(
    {
        "cudaDeviceSynchronize",
        "cudaThreadSynchronize",
        "cudaStreamSynchronize",
        "cudaEventSynchronize",
        "cudaMemcpy",
        "cudaMemcpy2D",
        "cudaMemcpy3D",
        "cudaMemcpyPeer",
        "cudaMemcpy3DPeer",
        "cudaMemcpyToSymbol",
        "cudaMemcpyFromSymbol",
        "cudaMemcpyToArray",
        "cudaMemcpyFromArray",
        "cudaMemcpy2DToArray",
        "cudaMemcpy2DFromArray",
        "cuCtxSynchronize",
        "cuStreamSynchronize",
        "cuEventSynchronize",
        "cuMemcpy",
        "cuMemcpyHtoD",
        "cuMemcpyDtoH",
        "cuMemcpyDtoD",
        "cuMemcpyPeer",
        "cuMemcpy2D",
        "cuMemcpy2DUnaligned",
        "cuMemcpy3D",
        "cuMemcpy3DPeer",
        "cuMemcpyHtoA",
        "cuMemcpyAtoH",
    }
)

# OS runtime calls that put the thread to sleep until something else happens: locks,
# condition variables, semaphores, futexes, I/O multiplexing, sleeps, joins, waits
# for a child or a message. Plain read/write are left out: they are mostly file I/O.
BLOCKING_OS_CALLS = frozenset(
    {
        "pthread_cond_wait",
        "pthread_cond_timedwait",
        "pthread_cond_clockwait",
        "pthread_mutex_lock",
        "pthread_mutex_timedlock",
        "pthread_mutex_clocklock",
        "pthread_rwlock_rdlock",
        "pthread_rwlock_wrlock",
        "pthread_rwlock_timedrdlock",
        "pthread_rwlock_timedwrlock",
        "pthread_rwlock_clockrdlock",
        "pthread_rwlock_clockwrlock",
        "pthread_barrier_wait",
        "pthread_join",
        "sem_wait",
        "sem_timedwait",
        "sem_clockwait",
        "futex",
        "poll",
        "ppoll",
        "select",
        "pselect",
        "pselect6",
        "epoll_wait",
        "epoll_pwait",
        "epoll_pwait2",
        "nanosleep",
        "clock_nanosleep",
        "usleep",
        "sleep",
        "pause",
        "sigwait",
        "sigwaitinfo",
        "sigtimedwait",
        "wait",
        "waitpid",
        "waitid",
        "wait3",
        "wait4",
        "msgrcv",
        "semop",
        "semtimedop",
        "mq_receive",
        "mq_timedreceive",
        "accept",
        "accept4",
        "recv",
        "recvfrom",
        "recvmsg",
        "recvmmsg",
        "io_getevents",
    }
)
# The GIL is a mutex plus a condition variable; contended waits show up as these.
GIL_WAIT_CALLS = frozenset(
    {"pthread_cond_wait", "pthread_cond_timedwait", "pthread_cond_clockwait", "futex"}
)

# Which table each cause needs, and what its absence means for the user.
_NEEDS = {
    "cuda_api": "no CUDA API trace",
    "osrt": "no OS runtime trace",
    "sched": "no thread scheduling events",
    "nvtx": "no NVTX ranges",
}
_CAUSE_TABLE = {
    "launch_call": "cuda_api",
    "gpu_wait": "cuda_api",
    "cuda_sync": "cuda_api",
    "cuda_api": "cuda_api",
    "gil_wait": "osrt",
    "blocking_os": "osrt",
    "os_call": "osrt",
    "descheduled": "sched",
    "nvtx": "nvtx",
}
# Sources that explain host-portion time; one missing makes the remainder "no data".
_HOST_TABLES = ("osrt", "sched", "nvtx")
NVTX_NO_TEXT = "(no text)"
NVTX_CROSSING = "(crossing NVTX ranges)"

_THREAD = ("source", "pid", "tid")
_TH = "_th"


@dataclass(frozen=True)
class HostResult:
    """Host-side attribution of gap time.

    ``gaps``: one row per gap: the unit keys, ``start_ns``, ``end_ns``,
    ``duration_ns``, the feeding ``source``/``pid``/``tid``, ``next_kind``,
    ``next_correlation_id``, ``launch_name``, ``launch_start_ns``, ``launch_end_ns``,
    ``primary`` (:data:`PRIMARY_CLASSES`), ``cause`` (the cause with the most time
    in the gap), ``nvtx_text`` and ``<cause>_ns`` for every cause in :data:`CAUSES`
    (summing to ``duration_ns``).
    ``per_gpu``: one row per GPU: ``gap_count``, ``gap_ns``, gap counts per primary
    class (``<class>_count``), ``<cause>_ns`` and ``<cause>_share`` (of ``gap_ns``;
    they sum to 1; null when the GPU has no gap time), ``host_share`` (the host-side
    causes together) and ``dominant_cause``.
    ``shares``: the same in long form: ``gpu, cause, label, time_ns, share``.
    ``nvtx``: per GPU and innermost NVTX text: ``nvtx_ns`` (time attributed to the
    ``nvtx`` cause), ``covered_ns`` (host-portion time inside that range, any
    cause), ``nvtx_share`` (``nvtx_ns`` over the GPU's gap time); largest first.
    ``gil_threads``: feeding threads and wait calls that show the GIL signature
    (columns of :func:`gil_threads`; counted over the whole trace).
    ``unavailable``: one line per cause that cannot be attributed and why;
    ``unavailable_causes``: their ids.
    """

    gaps: pl.DataFrame
    per_gpu: pl.DataFrame
    shares: pl.DataFrame
    nvtx: pl.DataFrame
    gil_threads: pl.DataFrame
    unavailable: tuple[str, ...]
    unavailable_causes: tuple[str, ...]


def unavailable_causes(capabilities: Capabilities) -> dict[str, str]:
    """Causes whose source table the trace lacks, each with the reason in words."""
    return {
        cause: _NEEDS[table] for cause, table in _CAUSE_TABLE.items() if not capabilities.has(table)
    }


def _base_name(name: pl.Expr) -> pl.Expr:
    return name.str.replace(r"@.*$", "").str.replace(r"(_v\d+|_pt(sz|ds))+$", "")


# Preference among operations starting at the same instant.
_KIND_ORDER = ("kernel", "memcpy", "memset")


def _operations(trace: Trace) -> pl.DataFrame:
    cols = ["source", "pid", "device_id", "gpu", "correlation_id", "start_ns"]
    parts = [
        trace.table(table).select(*cols, pl.lit(rank, dtype=pl.Int8).alias("_kind_rank"))
        for rank, table in enumerate(("kernels", "memcpy", "memset"))
    ]
    return pl.concat(parts).drop_nulls(["gpu", "start_ns"])


def _next_operations(gaps: pl.DataFrame, ops: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Per gap (``_gap`` index): the operation starting exactly at the gap's end, if any."""
    first = (
        ops.sort(
            [*keys, "start_ns", "_kind_rank", "source", "pid", "correlation_id"], nulls_last=True
        )
        .unique(subset=[*keys, "start_ns"], keep="first", maintain_order=True)
        .select(
            *keys,
            pl.col("start_ns").alias("end_ns"),
            pl.col("source").alias("_op_source"),
            pl.col("pid").alias("_op_pid"),
            pl.col("correlation_id").alias("next_correlation_id"),
            pl.col("_kind_rank")
            .replace_strict(
                list(range(len(_KIND_ORDER))), list(_KIND_ORDER), return_dtype=pl.String
            )
            .alias("next_kind"),
        )
    )
    return (
        gaps.select("_gap", *keys, "end_ns")
        .join(first, on=[*keys, "end_ns"], how="inner")
        .select("_gap", "_op_source", "_op_pid", "next_correlation_id", "next_kind")
    )


def _launch_calls(cuda_api: pl.DataFrame, wanted: pl.DataFrame) -> pl.DataFrame:
    """The earliest CUDA API row per (source, pid, correlation id) in ``wanted``."""
    return (
        cuda_api.join(wanted, on=["source", "pid", "correlation_id"], how="semi")
        .drop_nulls(["start_ns", "end_ns"])
        .sort("start_ns", "end_ns")
        .unique(subset=["source", "pid", "correlation_id"], keep="first", maintain_order=True)
        .select(
            "source",
            "pid",
            "correlation_id",
            "tid",
            pl.col("name").alias("launch_name"),
            pl.col("start_ns").alias("launch_start_ns"),
            pl.col("end_ns").alias("launch_end_ns"),
        )
    )


def descheduled_intervals(sched: pl.DataFrame) -> pl.DataFrame:
    """Per thread, ``[switch-out, next switch-in)``: ``source, pid, tid, start_ns, end_ns``.

    A switch-out with no later switch-in (thread exit, end of capture) has no known
    end and is left out.
    """
    ordered = sched.drop_nulls(["tid", "time_ns", "is_sched_in"]).sort(*_THREAD, "time_ns")
    nxt = ordered.with_columns(
        pl.col("time_ns").shift(-1).over(_THREAD).alias("_next_t"),
        pl.col("is_sched_in").shift(-1).over(_THREAD).alias("_next_in"),
    )
    return nxt.filter(~pl.col("is_sched_in") & pl.col("_next_in").fill_null(False)).select(
        *_THREAD, pl.col("time_ns").alias("start_ns"), pl.col("_next_t").alias("end_ns")
    )


_GIL_KEYS = (*_THREAD, "call")


def _gil_marked(osrt: pl.DataFrame) -> pl.DataFrame:
    """Outermost GIL-family waits with ``call`` (base name), ``_near`` and ``_long`` flags."""
    duration = pl.col("end_ns") - pl.col("start_ns")
    return (
        osrt.with_columns(_base_name(pl.col("name")).alias("call"))
        .filter(
            pl.col("call").is_in(list(GIL_WAIT_CALLS)) & (pl.col("nesting_level").fill_null(0) == 0)
        )
        .with_columns(
            ((duration - GIL_SWITCH_INTERVAL_NS).abs() <= GIL_TOLERANCE_NS).alias("_near"),
            (duration >= GIL_LONG_WAIT_NS).alias("_long"),
            (duration <= GIL_SWITCH_INTERVAL_NS + GIL_TOLERANCE_NS).alias("_slice"),
        )
    )


def gil_threads(osrt: pl.DataFrame) -> pl.DataFrame:
    """Threads and wait calls whose durations pile up at, and stop at, the GIL switch interval.

    Columns: ``source, pid, tid, call``; ``gil_waits``: waits within tolerance of the
    interval; ``long_waits``: waits over :data:`GIL_LONG_WAIT_NS`; ``capped_waits``:
    those of them no longer than the interval plus tolerance; ``gil_wait_ns``: total
    time of the waits counted as ``gil_wait`` (every wait of that call no longer than
    the interval plus tolerance).
    """
    duration = pl.col("end_ns") - pl.col("start_ns")
    per_call = (
        _gil_marked(osrt)
        .group_by(_GIL_KEYS)
        .agg(
            pl.col("_near").sum().cast(pl.Int64).alias("gil_waits"),
            pl.col("_long").sum().cast(pl.Int64).alias("long_waits"),
            (pl.col("_long") & pl.col("_slice")).sum().cast(pl.Int64).alias("capped_waits"),
            duration.filter(pl.col("_slice")).sum().cast(pl.Int64).alias("gil_wait_ns"),
        )
    )
    # A thread waiting for the GIL never waits longer than one interval: the wait
    # times out and the thread asks again, so long waits stop at the interval.
    return per_call.filter(
        (pl.col("gil_waits") >= GIL_MIN_WAITS)
        & (pl.col("capped_waits") >= GIL_MIN_SHARE * pl.col("long_waits"))
    ).sort(_GIL_KEYS)


def _positive(df: pl.DataFrame) -> pl.DataFrame:
    return df.drop_nulls(["start_ns", "end_ns"]).filter(pl.col("end_ns") > pl.col("start_ns"))


def _layers(trace: Trace, threads: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """Per host cause, the intervals of the feeding threads (``_th, start_ns, end_ns``)."""

    def own(df: pl.DataFrame) -> pl.DataFrame:
        return _positive(df.join(threads, on=list(_THREAD), how="inner"))

    cols = [_TH, "start_ns", "end_ns"]
    api = own(trace.cuda_api).with_columns(
        _base_name(pl.col("name")).is_in(list(CUDA_SYNC_APIS)).alias("_sync")
    )
    osrt = own(trace.osrt).with_columns(_base_name(pl.col("name")).alias("_name"))
    is_blocking = pl.col("_name").is_in(list(BLOCKING_OS_CALLS))
    signature = gil_threads(trace.osrt.join(threads, on=list(_THREAD), how="semi"))
    # The last wait of a GIL acquisition is woken early, so every slice-or-shorter
    # wait of the signature call counts, not only the ~5 ms ones.
    gil = (
        _gil_marked(osrt)
        .filter(pl.col("_slice"))
        .join(signature.select(_GIL_KEYS), on=list(_GIL_KEYS), how="semi")
    )
    return {
        "cuda_sync": api.filter(pl.col("_sync")).select(cols),
        "gil_wait": gil.select(cols),
        "blocking_os": osrt.filter(is_blocking).select(cols),
        "cuda_api": api.filter(~pl.col("_sync")).select(cols),
        "os_call": osrt.filter(~is_blocking).select(cols),
        "descheduled": own(
            descheduled_intervals(trace.sched.join(threads, on=list(_THREAD), how="semi"))
        ).select(cols),
        "nvtx": own(trace.nvtx).select(cols),
    }


def _nvtx_ranges(trace: Trace, threads: pl.DataFrame) -> pl.DataFrame:
    """Feeding-thread NVTX ranges with their nesting depth (1 = outermost)."""
    ranges = (
        _positive(trace.nvtx.join(threads, on=list(_THREAD), how="inner"))
        .select(_TH, "start_ns", "end_ns", pl.col("text").fill_null(NVTX_NO_TEXT))
        .sort([_TH, "start_ns", "end_ns"], descending=[False, False, True])
        .with_columns(pl.int_range(pl.len()).over(_TH).alias("_pos"))
    )
    ends = (
        ranges.select(_TH, "end_ns")
        .sort(_TH, "end_ns")
        .with_columns(pl.int_range(1, pl.len() + 1).over(_TH).alias("_closed"))
        .group_by(_TH, "end_ns")
        .agg(pl.col("_closed").max())
        .sort("end_ns")
    )
    # Depth = ranges opened so far (this one included) - ranges closed by its start;
    # exact for properly nested (push/pop) ranges.
    return (
        ranges.sort("start_ns")
        .join_asof(
            ends,
            left_on="start_ns",
            right_on="end_ns",
            by=_TH,
            strategy="backward",
            check_sortedness=False,
        )
        .select(
            _TH,
            "start_ns",
            pl.col("end_ns").alias("_range_end"),
            "text",
            (pl.col("_pos") + 1 - pl.col("_closed").fill_null(0)).cast(pl.Int64).alias("_depth"),
        )
        .sort("start_ns")
    )


def host_segments(trace: Trace, threads: pl.DataFrame) -> pl.DataFrame:
    """The feeding threads' timelines cut into segments with one host cause each.

    ``threads`` has ``source, pid, tid, _th``. Returns ``_th, start_ns, end_ns,
    cause, nvtx_text``: disjoint segments where at least one host cause applies, the
    cause chosen by :data:`HOST_CAUSES` precedence, ``nvtx_text`` the innermost NVTX
    range (null outside any range).
    """
    layers = _layers(trace, threads)
    events = pl.concat(
        [
            df.select(
                _TH,
                pl.col(edge).alias("_t"),
                pl.lit(k, dtype=pl.Int8).alias("_layer"),
                pl.lit(step, dtype=pl.Int32).alias("_d"),
            )
            for k, df in enumerate(layers[cause] for cause in HOST_CAUSES)
            for edge, step in (("start_ns", 1), ("end_ns", -1))
        ]
    )
    empty = pl.DataFrame(
        schema={
            _TH: threads.schema[_TH],
            "start_ns": pl.Int64,
            "end_ns": pl.Int64,
            "cause": pl.String,
            "nvtx_text": pl.String,
        }
    )
    if events.is_empty():
        return empty
    depth = [f"_depth{k}" for k in range(len(HOST_CAUSES))]
    swept = (
        events.sort(_TH, "_t")
        .with_columns(
            pl.when(pl.col("_layer") == k)
            .then(pl.col("_d"))
            .otherwise(0)
            .cum_sum()
            .over(_TH)
            .alias(d)
            for k, d in enumerate(depth)
        )
        # The state after every event at an instant holds until the next instant.
        .group_by(_TH, "_t", maintain_order=True)
        .agg(pl.col(d).last() for d in depth)
        .with_columns(pl.col("_t").shift(-1).over(_TH).alias("end_ns"))
        .drop_nulls("end_ns")
        .filter(pl.col("end_ns") > pl.col("_t"))
        .select(
            _TH,
            pl.col("_t").alias("start_ns"),
            "end_ns",
            pl.coalesce(
                pl.when(pl.col(d) > 0).then(pl.lit(cause))
                for d, cause in zip(depth, HOST_CAUSES, strict=True)
            ).alias("cause"),
            pl.col(depth[HOST_CAUSES.index("nvtx")]).cast(pl.Int64).alias("_depth"),
        )
        .filter(pl.col("cause").is_not_null())
    )
    ranges = _nvtx_ranges(trace, threads)
    latest = ranges.select(
        _TH, "start_ns", pl.col("_range_end").alias("_any_end"), pl.col("text").alias("_any_text")
    )
    named = (
        swept.sort("start_ns")
        .join_asof(
            ranges, on="start_ns", by=[_TH, "_depth"], strategy="backward", check_sortedness=False
        )
        .join_asof(latest, on="start_ns", by=_TH, strategy="backward", check_sortedness=False)
        .with_columns(
            pl.when(pl.col("_depth") <= 0)
            .then(None)
            .when(pl.col("_range_end") >= pl.col("end_ns"))
            .then(pl.col("text"))
            # Only ranges that cross instead of nesting get here: the most recently
            # opened range if it is still open, else no single innermost range.
            .when(pl.col("_any_end") >= pl.col("end_ns"))
            .then(pl.col("_any_text"))
            .otherwise(pl.lit(NVTX_CROSSING))
            .alias("nvtx_text")
        )
    )
    return named.select(empty.columns).sort(_TH, "start_ns")


def _overlaps(portions: pl.DataFrame, segments: pl.DataFrame) -> pl.DataFrame:
    """Interval join: ``_gap, cause, nvtx_text, overlap_ns`` for each portion x segment overlap.

    ``portions`` (``_gap, _th, start_ns, end_ns``) may overlap one another;
    ``segments`` are disjoint per thread. Each portion meets a contiguous run of its
    thread's segments, found with two as-of joins and expanded.
    """
    segs = segments.sort(_TH, "start_ns").with_row_index("_i")
    starts = segs.select(_TH, pl.col("start_ns").alias("_s"), "_i").sort("_s")
    first_of_thread = segs.group_by(_TH).agg(pl.col("_i").min().alias("_i_first"))
    probe = portions.select(
        "_gap", _TH, pl.col("start_ns").alias("_a"), pl.col("end_ns").alias("_b")
    ).with_columns((pl.col("_b") - 1).alias("_b_last"))
    runs = (
        probe.sort("_a")
        .join_asof(
            starts, left_on="_a", right_on="_s", by=_TH, strategy="backward", check_sortedness=False
        )
        .rename({"_i": "_i0"})
        .drop("_s")
        .sort("_b_last")
        .join_asof(
            starts,
            left_on="_b_last",
            right_on="_s",
            by=_TH,
            strategy="backward",
            check_sortedness=False,
        )
        .rename({"_i": "_i1"})
        .join(first_of_thread, on=_TH, how="left")
        .with_columns(pl.coalesce("_i0", "_i_first").alias("_i0"))
        .filter(pl.col("_i1").is_not_null() & (pl.col("_i1") >= pl.col("_i0")))
        .select(
            "_gap", "_a", "_b", pl.int_ranges("_i0", pl.col("_i1") + 1, dtype=pl.UInt32).alias("_i")
        )
        .explode("_i")
    )
    overlap = pl.min_horizontal("end_ns", "_b") - pl.max_horizontal("start_ns", "_a")
    return (
        runs.join(segs.select("_i", "start_ns", "end_ns", "cause", "nvtx_text"), on="_i")
        .select("_gap", "cause", "nvtx_text", overlap.alias("overlap_ns"))
        .filter(pl.col("overlap_ns") > 0)
    )


def _clamp(col: str) -> pl.Expr:
    return pl.min_horizontal(pl.max_horizontal(pl.col(col), "start_ns"), "end_ns")


def _feeding_launches(trace: Trace, gaps: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """``gaps`` (with ``_gap``) plus the next operation and its launch call, where found."""
    nxt = _next_operations(gaps, _operations(trace), keys)
    launches = _launch_calls(
        trace.cuda_api,
        nxt.select(
            pl.col("_op_source").alias("source"),
            pl.col("_op_pid").alias("pid"),
            pl.col("next_correlation_id").alias("correlation_id"),
        ),
    )
    return (
        gaps.join(nxt, on="_gap", how="left")
        .join(
            launches,
            left_on=["_op_source", "_op_pid", "next_correlation_id"],
            right_on=["source", "pid", "correlation_id"],
            how="left",
        )
        .rename({"_op_source": "_feed_source", "_op_pid": "_feed_pid"})
    )


_LAUNCHED = pl.col("launch_start_ns").is_not_null()


def _classified(table: pl.DataFrame, has_api: bool, slack_ns: int) -> pl.DataFrame:
    """Adds ``primary``, ``duration_ns`` and the launch call clamped into the gap (``_l, _le``)."""
    return table.with_columns(
        pl.when(pl.lit(not has_api))
        .then(pl.lit("no_data"))
        .when(~_LAUNCHED)
        .then(pl.lit("no_launch_record"))
        .when(pl.col("launch_start_ns") >= pl.col("start_ns") - slack_ns)
        .then(pl.lit("launched_late"))
        .otherwise(pl.lit("gpu_wait"))
        .alias("primary"),
        (pl.col("end_ns") - pl.col("start_ns")).alias("duration_ns"),
        pl.when(_LAUNCHED).then(_clamp("launch_start_ns")).alias("_l"),
        pl.when(_LAUNCHED).then(_clamp("launch_end_ns")).alias("_le"),
    )


def _host_portions(table: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The feeding threads (``source, pid, tid, _th``) and the host portions of the gaps.

    A host portion is ``_gap, _th, start_ns, end_ns``: from the gap's start to its
    launch call's start, for gaps whose launch began after the gap did.
    """
    with_host = table.filter(_LAUNCHED & (pl.col("_l") > pl.col("start_ns")))
    threads = (
        with_host.select(
            pl.col("_feed_source").alias("source"), pl.col("_feed_pid").alias("pid"), "tid"
        )
        .unique()
        .sort(list(_THREAD))
        .with_row_index(_TH)
    )
    portions = with_host.join(
        threads, left_on=["_feed_source", "_feed_pid", "tid"], right_on=list(_THREAD), how="inner"
    ).select("_gap", _TH, "start_ns", pl.col("_l").alias("end_ns"))
    return threads, portions


def _split(
    table: pl.DataFrame, hits: pl.DataFrame, has_api: bool, no_host_data: bool
) -> pl.DataFrame:
    """Adds ``<cause>_ns`` for every cause, ``cause`` and ``nvtx_text`` to each gap."""
    per_cause = hits.group_by("_gap").agg(
        pl.col("overlap_ns").filter(pl.col("cause") == c).sum().alias(f"{c}_ns")
        for c in HOST_CAUSES
    )
    host_ns = [f"{c}_ns" for c in HOST_CAUSES]
    host_len = pl.when(_LAUNCHED).then(pl.col("_l") - pl.col("start_ns")).otherwise(0)
    rest = host_len - pl.sum_horizontal(host_ns)
    cause_ns = [f"{c}_ns" for c in CAUSES]
    return (
        table.join(per_cause, on="_gap", how="left")
        .join(_top_texts(hits), on="_gap", how="left")
        .with_columns(pl.col(c).fill_null(0) for c in host_ns)
        .with_columns(
            (pl.lit(0) if no_host_data else rest).alias("unattributed_ns"),
            (rest if no_host_data else pl.lit(0)).alias("unattributed_no_data_ns"),
            pl.when(_LAUNCHED)
            .then(pl.col("_le") - pl.col("_l"))
            .otherwise(0)
            .alias("launch_call_ns"),
            pl.when(_LAUNCHED)
            .then(pl.col("end_ns") - pl.col("_le"))
            .otherwise(0)
            .alias("gpu_wait_ns"),
            pl.when(_LAUNCHED)
            .then(0)
            .otherwise(pl.col("duration_ns"))
            .alias("no_launch_record_ns"),
        )
        .with_columns(
            # Without a CUDA API table there is no launch to look for: nothing is known.
            *(
                ()
                if has_api
                else (
                    pl.col("no_launch_record_ns").alias("unattributed_no_data_ns"),
                    pl.lit(0).alias("no_launch_record_ns"),
                )
            )
        )
        .with_columns(pl.col(c).cast(pl.Int64) for c in cause_ns)
        .with_columns(
            pl.when(pl.col("duration_ns") > 0).then(_largest(cause_ns, CAUSES)).alias("cause")
        )
    )


def _largest(columns: Sequence[str], names: Sequence[str]) -> pl.Expr:
    """Name of the largest column per row (the first on a tie)."""
    return (
        pl.concat_list(columns)
        .list.arg_max()
        .replace_strict(list(range(len(names))), list(names), return_dtype=pl.String)
    )


def _text_time(hits: pl.DataFrame) -> pl.DataFrame:
    return (
        hits.filter(pl.col("nvtx_text").is_not_null())
        .group_by("_gap", "nvtx_text")
        .agg(
            pl.col("overlap_ns").sum().alias("covered_ns"),
            pl.col("overlap_ns").filter(pl.col("cause") == "nvtx").sum().alias("nvtx_ns"),
        )
    )


def _top_texts(hits: pl.DataFrame) -> pl.DataFrame:
    return (
        _text_time(hits)
        .sort(["covered_ns", "nvtx_text"], descending=[True, False])
        .unique(subset="_gap", keep="first", maintain_order=True)
        .select("_gap", "nvtx_text")
    )


def attribute_gaps(
    trace: Trace,
    gaps: pl.DataFrame,
    settings: Settings | None = None,
    keys: Sequence[str] = ("gpu",),
) -> HostResult:
    """Attribute every gap's time to host-side and GPU-side causes (see the module docstring).

    ``gaps`` is :attr:`GapsResult.gaps` (``keys`` + ``start_ns, end_ns``) and ``keys``
    its unit keys (:attr:`GapsResult.keys`); ``gpu`` must be among them.
    """
    settings = settings or Settings()
    keys = list(keys)
    if "gpu" not in keys:
        raise ValueError(f"gap keys {keys} must include 'gpu'")
    caps = trace.capabilities
    missing = unavailable_causes(caps)
    has_api = caps.has("cuda_api")
    no_host_data = any(not caps.has(t) for t in _HOST_TABLES)

    numbered = gaps.select(*keys, "start_ns", "end_ns").with_row_index("_gap")
    table = _classified(
        _feeding_launches(trace, numbered, keys),
        has_api,
        settings.launch_slack_ns,
    )
    threads, portions = _host_portions(table)
    hits = _overlaps(portions, host_segments(trace, threads))
    table = _split(table, hits, has_api, no_host_data)

    feed = [
        *([pl.col("_feed_source").alias("source")] if "source" not in keys else []),
        *([pl.col("_feed_pid").alias("pid")] if "pid" not in keys else []),
    ]
    out = table.sort("_gap").select(
        *keys,
        "start_ns",
        "end_ns",
        "duration_ns",
        *feed,
        "tid",
        "next_kind",
        "next_correlation_id",
        "launch_name",
        "launch_start_ns",
        "launch_end_ns",
        "primary",
        "cause",
        "nvtx_text",
        *(f"{c}_ns" for c in CAUSES),
    )
    gpus = pl.concat(
        [trace.gpus.select(pl.col("gpu").cast(pl.Int32)), out.select(pl.col("gpu").cast(pl.Int32))]
    ).unique()
    per_gpu = _per_gpu(out, gpus)
    nvtx = _nvtx_table(
        _text_time(hits).join(table.select("_gap", "gpu"), on="_gap"),
        per_gpu.select("gpu", "gap_ns"),
    )
    return HostResult(
        gaps=out,
        per_gpu=per_gpu,
        shares=_long_shares(per_gpu),
        nvtx=nvtx,
        gil_threads=gil_threads(trace.osrt.join(threads, on=list(_THREAD), how="semi")),
        unavailable=tuple(f"{CAUSE_LABELS[c]}: {why}" for c, why in missing.items()),
        unavailable_causes=tuple(missing),
    )


def _per_gpu(gaps: pl.DataFrame, gpus: pl.DataFrame) -> pl.DataFrame:
    cause_ns = [f"{c}_ns" for c in CAUSES]
    sums = gaps.group_by(pl.col("gpu").cast(pl.Int32)).agg(
        pl.len().cast(pl.Int64).alias("gap_count"),
        pl.col("duration_ns").sum().alias("gap_ns"),
        *(
            (pl.col("primary") == p).sum().cast(pl.Int64).alias(f"{p}_count")
            for p in PRIMARY_CLASSES
        ),
        *(pl.col(c).sum() for c in cause_ns),
    )
    counts = ["gap_count", "gap_ns", *(f"{p}_count" for p in PRIMARY_CLASSES), *cause_ns]
    joined = gpus.join(sums, on="gpu", how="left").with_columns(
        pl.col(c).fill_null(0).cast(pl.Int64) for c in counts
    )

    def share(col: pl.Expr) -> pl.Expr:
        return pl.when(pl.col("gap_ns") > 0).then(col / pl.col("gap_ns"))

    host = pl.sum_horizontal(f"{c}_ns" for c in HOST_SIDE_CAUSES)
    return (
        joined.with_columns(
            *(share(pl.col(f"{c}_ns")).alias(f"{c}_share") for c in CAUSES),
            share(host).alias("host_share"),
            pl.when(pl.col("gap_ns") > 0).then(_largest(cause_ns, CAUSES)).alias("dominant_cause"),
        )
        .select(
            "gpu",
            "gap_count",
            "gap_ns",
            *(f"{p}_count" for p in PRIMARY_CLASSES),
            *cause_ns,
            *(f"{c}_share" for c in CAUSES),
            "host_share",
            "dominant_cause",
        )
        .sort("gpu")
    )


def _long_shares(per_gpu: pl.DataFrame) -> pl.DataFrame:
    return pl.concat(
        [
            per_gpu.select(
                "gpu",
                pl.lit(c).alias("cause"),
                pl.lit(CAUSE_LABELS[c]).alias("label"),
                pl.col(f"{c}_ns").alias("time_ns"),
                pl.col(f"{c}_share").alias("share"),
            )
            for c in CAUSES
        ]
    ).sort("gpu")


def _nvtx_table(text_time: pl.DataFrame, gap_ns: pl.DataFrame) -> pl.DataFrame:
    return (
        text_time.group_by(pl.col("gpu").cast(pl.Int32), "nvtx_text")
        .agg(pl.col("nvtx_ns").sum().cast(pl.Int64), pl.col("covered_ns").sum().cast(pl.Int64))
        .join(gap_ns, on="gpu", how="left")
        .select(
            "gpu",
            pl.col("nvtx_text").alias("text"),
            "nvtx_ns",
            "covered_ns",
            pl.when(pl.col("gap_ns") > 0)
            .then(pl.col("nvtx_ns") / pl.col("gap_ns"))
            .alias("nvtx_share"),
        )
        .sort(["gpu", "nvtx_ns", "covered_ns", "text"], descending=[False, True, True, False])
    )
