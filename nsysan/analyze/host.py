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

How, without a Python loop over gaps (millions in big exports): the next operation
is an exact as-of join on the kernels, which ingest keeps in (gpu, start) order, so
neither side is sorted again; only operations tied at one instant are ranked. The
launch call is a look-up among the CUDA API rows keyed by (source, pid, correlation
id) packed into one integer, only the keys sorted (an as-of join when the ids are too
wide to pack). One sweep over the edges of the feeding threads' intervals (written
from the whole tables into per-thread runs, no filtered copies) cuts their timelines,
inside the host portions only, into segments of one cause and one innermost NVTX
range; each host portion then adds up the run of segments it overlaps, found by
binary search, for its split and, when inside NVTX ranges, its texts. Those loops
are compiled (:mod:`nsysan.analyze.host_loops`); the segments stay numpy arrays.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import polars as pl

from nsysan.analyze.host_loops import (
    CROSSING,
    EdgeStreams,
    Segments,
    cause_segments,
    find_rows,
    first_largest,
    gather_sorted,
    time_per_cause,
    time_per_text,
)
from nsysan.intervals import rows_by_unit, sort_if_needed
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
    "gpu_transfer",
    "gpu_wait",
    "no_launch_record",
)
# Per-segment causes as an Enum: a million string literals are slow to build.
_HOST_CAUSE = pl.Enum(HOST_CAUSES)
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
    "gpu_transfer": "GPU busy with a transfer (memcpy/memset)",
    "gpu_wait": "GPU-side wait (work already queued)",
    "no_launch_record": "no launch record",
}
PRIMARY_CLASSES = ("launched_late", "gpu_wait", "no_launch_record", "no_data")
# Per-gap labels as Enums: millions of short strings are slow to build.
_PRIMARY = pl.Enum(PRIMARY_CLASSES)
_CAUSE = pl.Enum(CAUSES)

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

# Plans here are sorts and as-of joins over millions of rows; the in-memory engine
# runs them about twice as fast as the streaming one (polars' default).
_ENGINE: Final = "in-memory"

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
    (summing to ``duration_ns``). ``next_kind``, ``primary`` and ``cause`` are
    Enums of those names, ``launch_name`` and ``nvtx_text`` categoricals (all compare
    equal to the plain strings).
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
    return name.cast(pl.String).str.replace(r"@.*$", "").str.replace(r"(_v\d+|_pt(sz|ds))+$", "")


def _name_in(names: pl.Series, base_names: frozenset[str]) -> pl.Expr:
    """Whether the ``name`` column's base name is in ``base_names`` (null for a null name).

    ``names`` holds (at least) every name the column can take.
    """
    # The regex runs once per distinct name, not once per row of a million-row table.
    distinct = names.drop_nulls().unique().cast(pl.String).to_frame("name")
    raw = distinct.filter(_base_name(pl.col("name")).is_in(list(base_names)))["name"]
    return pl.col("name").is_in(raw.to_list())


def _sorted(df: pl.LazyFrame, cols: Sequence[str]) -> pl.LazyFrame:
    # Stable single-column sorts run several times faster than one multi-column sort
    # on millions of unordered rows; sorting the least significant column first gives
    # the same order.
    for col in reversed(cols):
        df = df.sort(col, maintain_order=True)
    return df


def _run_starts(cols: Sequence[str]) -> pl.Expr:
    """True on the first row of each run of equal ``cols`` in a frame sorted by them."""
    changed = pl.any_horizontal(pl.col(c).ne_missing(pl.col(c).shift(1)) for c in cols)
    return changed | (pl.int_range(pl.len()) == 0)


# Preference among operations starting at the same instant.
_KIND_ORDER = ("kernel", "memcpy", "memset")
_KIND = pl.Enum(_KIND_ORDER)


def _by_gpu_then(df: pl.DataFrame, col: str) -> pl.DataFrame:
    """``df`` in (gpu, ``col``) order: ordered by ``col`` within every unit.

    That is all an as-of join ``by`` the unit keys needs (a unit is one GPU or a
    process-device on one GPU). The ingested kernels and the gaps already are in that
    order, so they usually cost one check.
    """
    return sort_if_needed(df, "gpu", col)


def _preferred_per_instant(
    df: pl.DataFrame, keys: Sequence[str], at: str, prefer: Sequence[str]
) -> pl.DataFrame:
    """One row per (``keys``, ``at``): the smallest by ``prefer``, then the first in the table.

    ``df`` is ordered by ``at`` within ``keys`` groups; the order is kept. Only rows
    sharing their instant with a neighbour are ranked (in real traces a few), so
    no full-table sort is needed.
    """
    keys = list(keys)
    same = pl.col(at).eq_missing(pl.col(at).shift(1))
    tied_with_next = pl.col(at).eq_missing(pl.col(at).shift(-1))
    indexed = df.with_row_index("_row")
    tied = indexed.filter(same | tied_with_next)
    if tied.is_empty():
        return df
    losers = (
        tied.lazy()
        .sort([*keys, at, *prefer, "_row"])
        .filter(~_run_starts([*keys, at]))
        .select("_row")
        .collect(engine=_ENGINE)
    )
    return indexed.filter(~pl.col("_row").is_in(losers["_row"].implode())).drop("_row")


_OPERATION_COLUMNS = ["source", "pid", "device_id", "gpu", "correlation_id", "start_ns"]


def _starting_operations(
    trace: Trace, keys: list[str], tables: Sequence[str], ranks: Sequence[int]
) -> pl.DataFrame:
    """The preferred operation of ``tables`` per (unit, start): columns ready for the look-up."""
    parts = [
        trace.table(table).select(
            *_OPERATION_COLUMNS, pl.lit(rank, dtype=pl.Int8).alias("_kind_rank")
        )
        for table, rank in zip(tables, ranks, strict=True)
    ]
    ops = (parts[0] if len(parts) == 1 else pl.concat(parts)).drop_nulls(
        list(dict.fromkeys(["gpu", *keys, "start_ns"]))
    )
    ops = _by_gpu_then(ops, "start_ns")
    ops = _preferred_per_instant(
        ops, keys, "start_ns", ["_kind_rank", "source", "pid", "correlation_id"]
    )
    return ops.select(
        *keys,
        pl.col("start_ns").alias("_op_start"),
        pl.col("source").alias("_feed_source"),
        pl.col("pid").alias("_feed_pid"),
        pl.col("correlation_id").alias("next_correlation_id"),
        "_kind_rank",
    )


def _operation_at(gaps: pl.DataFrame, ops: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """``gaps`` (ordered by end within unit) plus the operation of ``ops`` starting at their end."""
    return gaps.join_asof(
        ops,
        left_on="end_ns",
        right_on="_op_start",
        by=keys,
        strategy="backward",
        tolerance=0,
        check_sortedness=False,
    ).drop("_op_start")


def _next_operations(trace: Trace, gaps: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """``gaps`` plus the operation starting exactly at each gap's end, if any.

    A kernel is preferred to a memcpy or memset at the same instant, so the kernels
    (millions of rows, already in start order) are searched first and only the
    gaps no kernel ends are searched among the copies and sets.
    """
    gaps = _by_gpu_then(gaps, "end_ns")
    found = _operation_at(gaps, _starting_operations(trace, keys, ["kernels"], [0]), keys)
    if trace.memcpy.is_empty() and trace.memset.is_empty():
        return found
    missing = found.filter(pl.col("_kind_rank").is_null())
    if missing.is_empty():
        return found
    copies = _starting_operations(trace, keys, ["memcpy", "memset"], [1, 2])
    return pl.concat(
        [
            found.filter(pl.col("_kind_rank").is_not_null()),
            _operation_at(missing.select(gaps.columns), copies, keys),
        ]
    )


# A process and a correlation id packed into one integer: (source, pid, id) in that
# order of significance, when the three fit in 62 bits (in every real trace: ids are
# 32-bit, pids under 2^22). Then finding each gap's launch call is one binary search.
_PACKED_BITS = 62
_CALL_KEYS = ["_feed_source", "_feed_pid", "next_correlation_id"]


def _bit_widths(frames: Sequence[pl.DataFrame], cols: Sequence[str]) -> list[int] | None:
    """Bits per column that hold every value of ``cols`` in ``frames``; None if negative."""
    widths = []
    for col in cols:
        values = [f[col] for f in frames if f[col].null_count() < f.height]
        if not values:
            widths.append(0)
            continue
        if min(v.min() for v in values) < 0:  # type: ignore[operator]
            return None
        widths.append(max(int(v.max()) for v in values).bit_length())  # type: ignore[arg-type]
    return widths


def _packed_key(cols: Sequence[str], widths: Sequence[int]) -> pl.Expr:
    """``cols`` packed into one Int64 that sorts like the tuple (null where any is null)."""
    key = pl.lit(0, dtype=pl.Int64)
    for col, width in zip(cols, widths, strict=True):
        key = key * (1 << width) + pl.col(col).cast(pl.Int64)
    return key


def _packed(df: pl.DataFrame, cols: Sequence[str], widths: Sequence[int]) -> pl.Series:
    """``cols`` of ``df`` packed by :func:`_packed_key`, as a Series named ``_key``."""
    return df.select(_packed_key(cols, widths).alias("_key")).to_series()


def _unpacked(
    keys: pl.Series, cols: Sequence[str], widths: Sequence[int], schema: pl.Schema
) -> pl.DataFrame:
    """The columns ``cols`` (dtypes from ``schema``) that :func:`_packed` packed into ``keys``."""
    shifts = np.cumsum([0, *reversed(widths)])[:-1][::-1]
    return keys.to_frame("_key").select(
        ((pl.col("_key") // (1 << int(shift))) % (1 << width)).cast(schema[col]).alias(col)
        for col, width, shift in zip(cols, widths, shifts, strict=True)
    )


def _launch_calls(cuda_api: pl.DataFrame) -> pl.DataFrame:
    """CUDA API rows that can be launch calls, named for the gap table."""
    return cuda_api.select(
        pl.col("correlation_id").alias("next_correlation_id"),
        pl.col("source").alias("_feed_source"),
        pl.col("pid").alias("_feed_pid"),
        "tid",
        pl.col("name").alias("launch_name"),
        pl.col("start_ns").alias("launch_start_ns"),
        pl.col("end_ns").alias("launch_end_ns"),
    ).drop_nulls(["next_correlation_id", "launch_start_ns", "launch_end_ns"])


_PREFERRED_CALL = ["launch_start_ns", "launch_end_ns"]


def _launch_of(found: pl.DataFrame, calls: pl.DataFrame) -> pl.DataFrame:
    """``found`` plus, per row, the call with its (source, pid, correlation id), row order kept.

    Of calls sharing an id, the earliest-starting (then earliest-ending, then first
    in the table).
    """
    widths = _bit_widths([found, calls], _CALL_KEYS)
    if widths is None or sum(widths) > _PACKED_BITS:
        return _launch_of_unpacked(found, calls)
    calls = calls.drop_nulls(_CALL_KEYS)
    keys = _packed(calls, _CALL_KEYS, widths).to_numpy()
    # Only the keys are sorted, not the calls. Ids rise with time in each process,
    # so the rows come in a few long runs, which a stable sort (timsort) merges fast.
    order = np.argsort(keys, kind="stable")
    table, repeated = gather_sorted(keys, order)
    if repeated:
        order, table = _preferred_calls(calls, order, table)
    queries = _packed(found, _CALL_KEYS, widths).fill_null(-1).to_numpy()
    rows = find_rows(table, order, queries)
    extra = [c for c in calls.columns if c not in _CALL_KEYS]
    return pl.concat(
        [found, calls.select(pl.col(extra).gather(_positions(rows)))], how="horizontal"
    )


def _preferred_calls(
    calls: pl.DataFrame, order: np.ndarray, table: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``order`` and its sorted ``table`` of keys with one row per key: the preferred call."""
    ranked = pl.concat(
        [
            pl.DataFrame({"_key": table, "_call": order}),
            calls.select(_PREFERRED_CALL).gather(order),
        ],
        how="horizontal",
    )
    # Rows sharing a key are in table order (a stable sort): the last tie-break.
    kept = _preferred_per_instant(ranked, [], "_key", _PREFERRED_CALL)
    return kept["_call"].to_numpy(), kept["_key"].to_numpy()


def _launch_of_unpacked(found: pl.DataFrame, calls: pl.DataFrame) -> pl.DataFrame:
    """:func:`_launch_of` for keys too wide to pack: an as-of join, then back in order."""
    ordered = _preferred_per_instant(
        calls.sort("next_correlation_id", maintain_order=True),
        ["_feed_source", "_feed_pid"],
        "next_correlation_id",
        _PREFERRED_CALL,
    )
    return (
        found.with_row_index("_order")
        .sort("next_correlation_id", maintain_order=True)
        .join_asof(
            ordered,
            on="next_correlation_id",
            by=["_feed_source", "_feed_pid"],
            strategy="backward",
            tolerance=0,
            check_sortedness=False,
        )
        .sort("_order")
        .drop("_order")
    )


def _feeding_launches(trace: Trace, gaps: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """``gaps`` (``_gap``, keys, ``end_ns``) plus next operation and launch call, in gap order."""
    found = _next_operations(trace, gaps, keys)
    if not found["_gap"].is_sorted():
        found = found.sort("_gap")
    return _launch_of(found, _launch_calls(trace.cuda_api))


def descheduled_intervals(sched: pl.DataFrame) -> pl.DataFrame:
    """Per thread, ``[switch-out, next switch-in)``: ``source, pid, tid, start_ns, end_ns``.

    A switch-out with no later switch-in (thread exit, end of capture) has no known
    end and is left out.
    """
    thread_time = [*_THREAD, "time_ns"]
    ordered = _sorted(sched.lazy().drop_nulls(["tid", "time_ns", "is_sched_in"]), thread_time)
    # The next row of the same thread, whatever the order of events at one instant.
    same_thread = pl.all_horizontal(pl.col(c).eq_missing(pl.col(c).shift(-1)) for c in _THREAD)
    return (
        ordered.with_columns(
            pl.col("time_ns").shift(-1).alias("_next_t"),
            (pl.col("is_sched_in").shift(-1) & same_thread).alias("_next_in"),
        )
        .filter(~pl.col("is_sched_in") & pl.col("_next_in").fill_null(False))
        .select(*_THREAD, pl.col("time_ns").alias("start_ns"), pl.col("_next_t").alias("end_ns"))
        .collect(engine=_ENGINE)
    )


_GIL_KEYS = (*_THREAD, "call")


def _gil_marked(osrt: pl.DataFrame) -> pl.DataFrame:
    """Outermost GIL-family waits with ``call`` (base name), ``_near`` and ``_long`` flags."""
    duration = pl.col("end_ns") - pl.col("start_ns")
    return (
        osrt.lazy()
        .filter(
            _name_in(osrt["name"], GIL_WAIT_CALLS) & (pl.col("nesting_level").fill_null(0) == 0)
        )
        .with_columns(
            _base_name(pl.col("name")).alias("call"),
            ((duration - GIL_SWITCH_INTERVAL_NS).abs() <= GIL_TOLERANCE_NS).alias("_near"),
            (duration >= GIL_LONG_WAIT_NS).alias("_long"),
            (duration <= GIL_SWITCH_INTERVAL_NS + GIL_TOLERANCE_NS).alias("_slice"),
        )
        .collect(engine=_ENGINE)
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


def _positive(df: pl.LazyFrame) -> pl.LazyFrame:
    return df.drop_nulls(["start_ns", "end_ns"]).filter(pl.col("end_ns") > pl.col("start_ns"))


def _feeding(df: pl.DataFrame, threads: pl.DataFrame) -> pl.LazyFrame:
    """The rows of ``df`` on the feeding threads, with their ``_th``, in ``df``'s order."""
    if threads.height == 1:
        # The usual case: one process feeds its GPU from one thread.
        (row,) = threads.iter_rows(named=True)
        return (
            df.lazy()
            .filter(pl.all_horizontal(pl.col(c) == row[c] for c in _THREAD))
            .with_columns(pl.lit(row[_TH], dtype=threads.schema[_TH]).alias(_TH))
        )
    widths = _bit_widths([threads], _THREAD)
    if threads.is_empty() or widths is None or sum(widths) > _PACKED_BITS:
        return df.lazy().join(threads.lazy(), on=list(_THREAD), how="inner", maintain_order="left")
    # A thread is a packed integer: a hash look-up of one column instead of a join
    # of millions of rows on three.
    fits = pl.all_horizontal(
        pl.col(c).is_between(0, (1 << w) - 1) for c, w in zip(_THREAD, widths, strict=True)
    )
    keys = _packed(threads, _THREAD, widths)
    return (
        df.lazy()
        .with_columns(pl.when(fits).then(_packed_key(_THREAD, widths)).alias("_thread_key"))
        .filter(pl.col("_thread_key").is_in(keys.implode()))
        .with_columns(
            pl.col("_thread_key")
            .replace_strict(keys, threads[_TH], return_dtype=threads.schema[_TH])
            .alias(_TH)
        )
        .drop("_thread_key")
    )


def _thread_numbers(df: pl.DataFrame, threads: pl.DataFrame) -> pl.Series:
    """Per row of ``df``, the ``_th`` of its thread (Int32); null off the feeding threads."""
    th = pl.col(_TH).cast(pl.Int32)
    if threads.height == 1:
        # The usual case: one process feeds its GPU from one thread.
        (row,) = threads.iter_rows(named=True)
        on_thread = pl.all_horizontal(pl.col(c) == row[c] for c in _THREAD)
        return df.select(
            pl.when(on_thread).then(pl.lit(row[_TH], dtype=pl.Int32)).alias(_TH)
        ).to_series()
    widths = _bit_widths([threads], _THREAD)
    if threads.is_empty() or widths is None or sum(widths) > _PACKED_BITS:
        return (
            df.select(_THREAD)
            .join(threads.select(*_THREAD, th), on=list(_THREAD), how="left", maintain_order="left")
            .get_column(_TH)
        )
    # A thread is a packed integer: a hash look-up of one column instead of a join
    # of millions of rows on three.
    fits = pl.all_horizontal(
        pl.col(c).is_between(0, (1 << w) - 1) for c, w in zip(_THREAD, widths, strict=True)
    )
    keys = _packed(threads, _THREAD, widths)
    return df.select(
        pl.when(fits)
        .then(_packed_key(_THREAD, widths))
        .replace_strict(keys, threads[_TH].cast(pl.Int32), default=None, return_dtype=pl.Int32)
        .alias(_TH)
    ).to_series()


_IS_POSITIVE = (
    pl.col("start_ns").is_not_null()
    & pl.col("end_ns").is_not_null()
    & (pl.col("end_ns") > pl.col("start_ns"))
)


def _add_table(streams: EdgeStreams, df: pl.DataFrame, thread: pl.Series, layer: pl.Expr) -> None:
    """Adds ``df``'s positive intervals on the feeding threads (``thread`` not null) in ``layer``.

    ``layer`` gives each row's layer number (null: in none).
    """
    layers = df.select(
        pl.when(thread.is_not_null() & _IS_POSITIVE).then(layer).fill_null(-1).cast(pl.Int8)
    ).to_series()
    streams.add_rows(
        layers.to_numpy(),
        thread.fill_null(0).to_numpy(),
        df["start_ns"].fill_null(0).to_numpy(),
        df["end_ns"].fill_null(0).to_numpy(),
    )


def _layer_number(cause: str) -> pl.Expr:
    return pl.lit(HOST_CAUSES.index(cause), dtype=pl.Int8)


def _gil_rows(osrt: pl.DataFrame, thread: pl.Series, signature: pl.DataFrame) -> pl.Expr:
    """Whether each row of ``osrt`` is a wait of a GIL signature call (``thread``: its ``_th``)."""
    if signature.is_empty():
        return pl.lit(False)
    feeding = (
        osrt.select(*_THREAD, "name", "nesting_level", "start_ns", "end_ns")
        .with_row_index("_row")
        .filter(thread.is_not_null() & _IS_POSITIVE)
    )
    # The last wait of a GIL acquisition is woken early, so every slice-or-shorter
    # wait of the signature call counts, not only the ~5 ms ones.
    rows = (
        _gil_marked(feeding)
        .filter(pl.col("_slice"))
        .join(signature.select(_GIL_KEYS), on=list(_GIL_KEYS), how="semi")["_row"]
    )
    return pl.int_range(pl.len(), dtype=pl.UInt32).is_in(rows.implode())


def _edge_streams(
    trace: Trace,
    threads: pl.DataFrame,
    signature: pl.DataFrame,
    ranges: pl.DataFrame,
    portions: pl.DataFrame | None,
) -> EdgeStreams:
    """The edges of every host cause's intervals on the feeding threads (and of ``portions``).

    Each interval is in one layer, numbered by its cause's place in
    :data:`HOST_CAUSES`: a CUDA call is ``cuda_sync`` or ``cuda_api``, an OS call
    ``gil_wait``, ``blocking_os`` or ``os_call`` (a GIL wait is also a blocking call,
    but only the first layer open counts, so it need not be in both). ``ranges`` are
    :func:`_nvtx_ranges`, added in their order; ``portions``, if any, are the layer
    after the causes.
    """
    streams = EdgeStreams(threads.height)
    api = trace.cuda_api
    sync = _name_in(api["name"], CUDA_SYNC_APIS)
    _add_table(
        streams,
        api,
        _thread_numbers(api, threads),
        pl.when(sync).then(_layer_number("cuda_sync")).when(~sync).then(_layer_number("cuda_api")),
    )
    osrt = trace.osrt
    thread = _thread_numbers(osrt, threads)
    blocking = _name_in(osrt["name"], BLOCKING_OS_CALLS)
    _add_table(
        streams,
        osrt,
        thread,
        pl.when(_gil_rows(osrt, thread, signature))
        .then(_layer_number("gil_wait"))
        .when(blocking)
        .then(_layer_number("blocking_os"))
        .when(~blocking)
        .then(_layer_number("os_call")),
    )
    descheduled = descheduled_intervals(trace.sched.join(threads, on=list(_THREAD), how="semi"))
    _add_table(
        streams,
        descheduled,
        _thread_numbers(descheduled, threads),
        _layer_number("descheduled"),
    )
    if ranges.height:
        streams.add_layer(
            HOST_CAUSES.index("nvtx"),
            ranges[_TH].to_numpy(),
            ranges["start_ns"].to_numpy(),
            ranges["_range_end"].to_numpy(),
        )
    if portions is not None:
        streams.add_layer(
            len(HOST_CAUSES),
            portions[_TH].to_numpy(),
            portions["start_ns"].to_numpy(),
            portions["end_ns"].to_numpy(),
        )
    return streams


def _nvtx_ranges(trace: Trace, threads: pl.DataFrame) -> pl.DataFrame:
    """Feeding-thread NVTX ranges with their nesting depth (1 = outermost).

    Sorted by ``_th``, then start, ranges opened at one instant outermost (longest)
    first. Columns ``_th, start_ns, _range_end, text, _depth``.
    """
    ranges = (
        _positive(_feeding(trace.nvtx, threads))
        .select(
            _TH,
            "start_ns",
            pl.col("end_ns").alias("_range_end"),
            pl.col("text").fill_null(NVTX_NO_TEXT),
        )
        .collect(engine=_ENGINE)
    )
    ranges = ranges[_range_order(*(ranges[c].to_numpy() for c in (_TH, "start_ns", "_range_end")))]
    depth = _nesting_depth(
        ranges[_TH].to_numpy(), ranges["start_ns"].to_numpy(), ranges["_range_end"].to_numpy()
    )
    return ranges.with_columns(pl.Series("_depth", depth))


def _range_order(thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The permutation sorting ranges by thread, start, then end descending (stable).

    Ranges come in about time order, threads interleaved: a stable sort by the small
    thread number, then by start within the threads whose ranges are out of order
    (a few, nearly sorted: timsort takes them in about one pass), is the whole sort
    unless two ranges open at one instant with the inner one first (then the full
    three-key sort runs).
    """
    if len(start):
        narrow = thread.astype(np.uint16) if thread.max() < 1 << 16 else thread
        order = np.argsort(narrow, kind="stable")
        t, s = thread[order], start[order]
        cuts = [0, *(np.flatnonzero(t[1:] != t[:-1]) + 1), len(t)]
        for lo, hi in itertools.pairwise(cuts):
            if np.any(s[lo + 1 : hi] < s[lo : hi - 1]):
                by_start = np.argsort(s[lo:hi], kind="stable")
                order[lo:hi], s[lo:hi] = order[lo:hi][by_start], s[lo:hi][by_start]
        e = end[order]
        if not np.any((t[1:] == t[:-1]) & (s[1:] == s[:-1]) & (e[1:] > e[:-1])):
            return order
    return np.lexsort((-end, start, thread))


def _nesting_depth(thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per range (sorted by thread, start), the ranges of its thread open at its start.

    Ranges opened so far (this one included) minus those ended by its start; exact
    for properly nested (push/pop) ranges.
    """
    depth = np.empty(len(thread), dtype=np.int64)
    cuts = [0, *(np.flatnonzero(np.diff(thread)) + 1), len(thread)]
    for lo, hi in itertools.pairwise(cuts):
        # Ends come nearly in order (ranges nest): timsort takes them in about one pass.
        ended = np.sort(end[lo:hi], kind="stable")
        opened = np.arange(1, hi - lo + 1)
        depth[lo:hi] = opened - np.searchsorted(ended, start[lo:hi], side="right")
    return depth


def _cause_segments(
    trace: Trace,
    threads: pl.DataFrame,
    signature: pl.DataFrame,
    ranges: pl.DataFrame,
    portions: pl.DataFrame | None = None,
    merge: bool = False,
) -> Segments:
    """The feeding threads' timelines cut into segments with one host cause each.

    ``ranges`` are the feeding threads' :func:`_nvtx_ranges`. Returns disjoint
    segments where at least one host cause applies, per thread (``_th``) in start
    order: their cause (its position in :data:`HOST_CAUSES`, chosen by precedence)
    and innermost NVTX range (a row of ``ranges``, or
    :data:`~nsysan.analyze.host_loops.CROSSING` / :data:`~nsysan.analyze.host_loops.OUTSIDE`).
    With ``portions`` (``_th, start_ns, end_ns``), only the time inside them: on a
    busy host the whole timeline has several segments per kernel, most of them where
    no gap ever looks. With ``merge``, segments are cut only where the cause or the
    range changes (time sums are the same, and there are fewer segments to store).
    """
    streams = _edge_streams(trace, threads, signature, ranges, portions)
    return cause_segments(
        streams,
        len(HOST_CAUSES),
        HOST_CAUSES.index("nvtx") if ranges.height else -1,
        ranges["_depth"].to_numpy(),
        ranges["_range_end"].to_numpy(),
        len(HOST_CAUSES) if portions is not None else -1,
        merge,
    )


def _range_texts(ranges: pl.DataFrame, rows: np.ndarray) -> pl.Series:
    """``nvtx_text`` of range ``rows``: :data:`NVTX_CROSSING` for ``CROSSING``, null for ``OUTSIDE``."""
    if ranges.height and (len(rows) == 0 or rows.min() >= 0):
        # Every row names a range (the usual case): one gather, no per-row choice.
        return ranges["text"].gather(rows).alias("nvtx_text")
    dtype = ranges.schema["text"]
    at = pl.lit(pl.Series(rows))
    text = (
        ranges["text"].gather(np.maximum(rows, 0))
        if ranges.height
        else pl.repeat(None, len(rows), dtype=dtype, eager=True)
    )
    return pl.select(
        pl.when(at >= 0)
        .then(pl.lit(text))
        .when(at == CROSSING)
        .then(pl.lit(NVTX_CROSSING).cast(dtype))
        .alias("nvtx_text")
    ).to_series()


def host_segments(
    trace: Trace, threads: pl.DataFrame, signature: pl.DataFrame | None = None
) -> pl.DataFrame:
    """The feeding threads' timelines cut into segments with one host cause each.

    ``threads`` has ``source, pid, tid, _th``; ``signature`` is :func:`gil_threads`
    of their OS runtime calls (computed when not given). Returns ``_th, start_ns,
    end_ns, cause, nvtx_text``, sorted by ``_th, start_ns``: disjoint segments where
    at least one host cause applies, ``cause`` (an Enum of :data:`HOST_CAUSES`)
    chosen by their precedence, ``nvtx_text`` the innermost NVTX range (null outside
    any range).
    """
    if signature is None:
        signature = gil_threads(trace.osrt.join(threads, on=list(_THREAD), how="semi"))
    ranges = _nvtx_ranges(trace, threads)
    segments = _cause_segments(trace, threads, signature, ranges)
    numbers = list(range(len(HOST_CAUSES)))
    return pl.DataFrame(
        [
            pl.Series(_TH, segments.thread(), dtype=threads.schema[_TH]),
            pl.Series("start_ns", segments.start),
            pl.Series("end_ns", segments.end),
            pl.Series("cause", segments.cause).replace_strict(
                numbers, list(HOST_CAUSES), return_dtype=_HOST_CAUSE
            ),
            _range_texts(ranges, segments.nvtx_range),
        ]
    )


def _time_in(portions: pl.DataFrame, segments: Segments, gaps: int) -> dict[str, np.ndarray]:
    """Per gap, its host portion's time in the host causes that occur and in NVTX ranges.

    ``<cause>_ns`` for every cause of :data:`HOST_CAUSES` some segment has (the others
    are 0 everywhere), and ``_nvtx_ns``.

    A portion's time in a cause is its overlap with the ``segments`` of that cause;
    ``_nvtx_ns`` its overlap with segments inside at least one NVTX range. Gaps
    without a portion get 0.
    """
    present, spent = time_per_cause(
        segments,
        len(HOST_CAUSES),
        [portions[c].to_numpy() for c in (_TH, "start_ns", "end_ns", "_gap")],
        gaps,
    )
    names = [*(f"{HOST_CAUSES[c]}_ns" for c in present), "_nvtx_ns"]
    return dict(zip(names, spent, strict=True))


def _clamp(col: str) -> pl.Expr:
    return pl.min_horizontal(pl.max_horizontal(pl.col(col), "start_ns"), "end_ns")


_LAUNCHED = pl.col("launch_start_ns").is_not_null()


def _classified(table: pl.LazyFrame, has_api: bool, slack_ns: int) -> pl.LazyFrame:
    """Adds ``primary``, ``duration_ns`` and the launch call clamped into the gap (``_l, _le``)."""
    return table.with_columns(
        pl.when(pl.lit(not has_api))
        .then(pl.lit("no_data", dtype=_PRIMARY))
        .when(~_LAUNCHED)
        .then(pl.lit("no_launch_record", dtype=_PRIMARY))
        .when(pl.col("launch_start_ns") >= pl.col("start_ns") - slack_ns)
        .then(pl.lit("launched_late", dtype=_PRIMARY))
        .otherwise(pl.lit("gpu_wait", dtype=_PRIMARY))
        .alias("primary"),
        (pl.col("end_ns") - pl.col("start_ns")).alias("duration_ns"),
        pl.when(_LAUNCHED).then(_clamp("launch_start_ns")).alias("_l"),
        pl.when(_LAUNCHED).then(_clamp("launch_end_ns")).alias("_le"),
    )


def _gap_table(
    trace: Trace, gaps: pl.DataFrame, keys: list[str], has_api: bool, slack_ns: int
) -> pl.DataFrame:
    """The gaps, numbered (``_gap``) and classified, with their next operation and launch."""
    numbered = gaps.select(*keys, "start_ns", "end_ns").with_row_index("_gap")
    # Only what the look-ups need goes through them; back in gap order, the result
    # sits beside the gaps.
    found = _feeding_launches(trace, numbered.select("_gap", *keys, "end_ns"), keys).drop(
        "_gap", *keys, "end_ns"
    )
    joined = pl.concat([numbered, found], how="horizontal")
    return _classified(joined.lazy(), has_api, slack_ns).collect(engine=_ENGINE)


def _host_portions(table: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The feeding threads (``source, pid, tid, _th``) and the host portions of the gaps.

    A host portion is ``_gap, _th, start_ns, end_ns``: from the gap's start to its
    launch call's start, for gaps whose launch began after the gap did; in gap order.
    """
    with_host = (
        table.lazy()
        .filter(_LAUNCHED & (pl.col("_l") > pl.col("start_ns")))
        .select(
            "_gap",
            pl.col("_feed_source").alias("source"),
            pl.col("_feed_pid").alias("pid"),
            "tid",
            "start_ns",
            pl.col("_l").alias("end_ns"),
        )
        .collect(engine=_ENGINE)
    )
    widths = _bit_widths([with_host], _THREAD)
    if (
        widths is None
        or sum(widths) > _PACKED_BITS
        or with_host.select(_THREAD).null_count().sum_horizontal().item()
    ):
        threads = with_host.select(_THREAD).unique().sort(list(_THREAD)).with_row_index(_TH)
        portions = (
            _feeding(with_host, threads)
            .select("_gap", _TH, "start_ns", "end_ns")
            .collect(engine=_ENGINE)
        )
        return threads, portions
    # A thread is one packed integer: the distinct ones of a million rows are a
    # one-column unique, and a thread's number a binary search among a handful.
    keys = _packed(with_host, _THREAD, widths)
    distinct = keys.unique().sort()
    threads = _unpacked(distinct, _THREAD, widths, with_host.schema).with_row_index(_TH)
    number = np.searchsorted(distinct.to_numpy(), keys.to_numpy())
    portions = with_host.select(
        "_gap", pl.Series(_TH, number, dtype=threads.schema[_TH]), "start_ns", "end_ns"
    )
    return threads, portions


def _transfer_pieces(table: pl.DataFrame, transfers: pl.DataFrame) -> tuple[np.ndarray, ...]:
    """The parts of the gaps under a transfer: ``gap, start, end`` arrays.

    Gaps of one GPU are disjoint and in start order, and so is each GPU's transfer
    union: each transfer interval meets a run of consecutive gaps, found by binary
    search, so the cost follows the transfers (few), not the gaps (millions).
    """
    gpu = table["gpu"].to_numpy()
    g_start = table["start_ns"].to_numpy()
    g_end = table["end_ns"].to_numpy()
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    by_gpu = transfers.partition_by("gpu", as_dict=True, maintain_order=True)
    rows = rows_by_unit(gpu, [int(key[0]) for key in by_gpu])
    for key, iv in by_gpu.items():
        where = np.arange(len(gpu))[rows[int(key[0])]]
        if where.size == 0:
            continue
        order = np.argsort(g_start[where], kind="stable")
        where = where[order]
        starts, ends = g_start[where], g_end[where]
        t_start, t_end = iv["start_ns"].to_numpy(), iv["end_ns"].to_numpy()
        first = np.searchsorted(ends, t_start, side="right")
        stop = np.searchsorted(starts, t_end, side="left")
        counts = np.clip(stop - first, 0, None)
        total = int(counts.sum())
        if total == 0:
            continue
        which = np.repeat(np.arange(len(t_start)), counts)
        offset = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
        gap = where[np.repeat(first, counts) + offset]
        lo = np.maximum(t_start[which], g_start[gap])
        hi = np.minimum(t_end[which], g_end[gap])
        keep = hi > lo
        parts.append((gap[keep], lo[keep], hi[keep]))
    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    return tuple(np.concatenate(arrays) for arrays in zip(*parts, strict=True))


def _transfer_time(
    table: pl.DataFrame,
    portions: pl.DataFrame,
    segments: Segments,
    transfers: pl.DataFrame,
) -> tuple[pl.DataFrame, dict[str, np.ndarray]]:
    """Each gap's time with a transfer running on its GPU, by where it falls.

    Adds ``_t_gap`` (in the whole gap), ``_t_host`` (in its host portion ``[S, l)``)
    and ``_t_call`` (in its launch call ``[l, le)``) to ``table``; returns, per gap, the
    host causes' time inside the transfers (to take out of those causes) and
    ``_nvtx_ns`` likewise.
    """
    n = table.height
    iv = transfers.select(pl.col("gpu").cast(table.schema["gpu"]), "start_ns", "end_ns")
    gap, lo, hi = _transfer_pieces(table, iv)
    start = table["start_ns"].to_numpy()
    launch = table.select(pl.coalesce("_l", "start_ns")).to_series().to_numpy()
    returned = table.select(pl.coalesce("_le", "start_ns")).to_series().to_numpy()
    l_at, le_at = launch[gap], returned[gap]

    def per_gap(lengths: np.ndarray) -> np.ndarray:
        return np.bincount(gap, weights=np.clip(lengths, 0, None), minlength=n).astype(np.int64)

    host_end = np.minimum(hi, l_at)
    table = table.with_columns(
        pl.Series("_t_gap", per_gap(hi - lo)),
        pl.Series("_t_host", per_gap(host_end - lo)),
        pl.Series("_t_call", per_gap(np.minimum(hi, le_at) - np.maximum(lo, l_at))),
    )
    # The host portions' pieces under a transfer, with their gap's feeding thread.
    thread = np.full(n, -1, dtype=np.int64)
    thread[portions["_gap"].to_numpy()] = portions[_TH].to_numpy()
    host = (host_end > lo) & (thread[gap] >= 0) & (lo >= start[gap])
    if not host.any():
        return table, {}
    pieces = pl.DataFrame(
        {
            "_gap": gap[host].astype(np.uint32),
            _TH: thread[gap[host]],
            "start_ns": lo[host],
            "end_ns": host_end[host],
        }
    ).with_columns(
        pl.col("_gap").cast(portions.schema["_gap"]), pl.col(_TH).cast(portions.schema[_TH])
    )
    return table, _time_in(pieces, segments, n)


def _split(
    table: pl.DataFrame,
    per_cause: dict[str, np.ndarray],
    text_time: pl.DataFrame,
    has_api: bool,
    no_host_data: bool,
    carve: bool = False,
) -> tuple[pl.DataFrame, frozenset[str]]:
    """Adds ``<cause>_ns`` for every cause, ``cause`` and ``nvtx_text`` to each gap.

    With ``carve``, ``table`` has the transfer time of each gap in all (``_t_gap``), in
    its host portion (``_t_host``) and in its launch call (``_t_call``): that time is
    ``gpu_transfer`` and leaves the positional parts it falls in.

    Also returns the cause columns that are 0 for every gap: they stay constant
    columns, which take no memory (a dozen columns of millions of rows would).
    """
    zero = pl.lit(0, dtype=pl.Int64)
    t_gap, t_host, t_call = (
        (pl.col("_t_gap"), pl.col("_t_host"), pl.col("_t_call")) if carve else (zero, zero, zero)
    )
    host_len = pl.when(_LAUNCHED).then(pl.col("_l") - pl.col("start_ns") - t_host).otherwise(0)
    rest = host_len - pl.sum_horizontal(pl.lit(0), *(pl.col(name) for name in per_cause))
    columns: dict[str, pl.Expr | None] = {f"{c}_ns": None for c in CAUSES}
    if carve:
        columns["gpu_transfer_ns"] = t_gap
    if not has_api:
        # Without a CUDA API table there is no launch to look for: nothing is known.
        columns["unattributed_no_data_ns"] = pl.col("duration_ns") - t_gap
    else:
        columns["unattributed_no_data_ns" if no_host_data else "unattributed_ns"] = rest
        columns["launch_call_ns"] = (
            pl.when(_LAUNCHED).then(pl.col("_le") - pl.col("_l") - t_call).otherwise(0)
        )
        columns["gpu_wait_ns"] = (
            pl.when(_LAUNCHED)
            .then(pl.col("end_ns") - pl.col("_le") - (t_gap - t_host - t_call))
            .otherwise(0)
        )
        columns["no_launch_record_ns"] = (
            pl.when(_LAUNCHED).then(0).otherwise(pl.col("duration_ns") - t_gap)
        )
    constant = frozenset(
        name for name, expr in columns.items() if expr is None and name not in per_cause
    )
    split = (
        table.with_columns(pl.Series(name, values) for name, values in per_cause.items())
        .with_columns(_nvtx_texts(table["_gap"], text_time))
        .lazy()
        .with_columns(
            pl.lit(0, dtype=pl.Int64).alias(name)
            if name in constant
            else (pl.col(name) if expr is None else expr).cast(pl.Int64).alias(name)
            for name, expr in columns.items()
        )
        .collect(engine=_ENGINE)
    )
    # Causes sum to the gap, so a gap with time has a positive largest cause, which a
    # constant 0 column never ties: only the others are compared.
    top = first_largest(
        [None if f"{c}_ns" in constant else split[f"{c}_ns"].to_numpy() for c in CAUSES],
        (split["duration_ns"] > 0).to_numpy(),
    )
    cause = pl.Series(top).replace_strict(
        list(range(len(CAUSES))), list(CAUSES), default=None, return_dtype=_CAUSE
    )
    return split.with_columns(cause.alias("cause")), constant


def _positions(at: np.ndarray) -> pl.Series:
    """Row positions for a gather; -1 (nothing there) becomes null."""
    return pl.select(pl.when(pl.lit(at) >= 0).then(pl.lit(at)).cast(pl.UInt32)).to_series()


def _largest(columns: Sequence[str], names: Sequence[str]) -> pl.Expr:
    """Name of the largest column per row (the first on a tie)."""
    # Picks an index, then names it: concat_list(...).list.arg_max() or string
    # literals per row are several times slower on a million rows.
    top = pl.max_horizontal(columns)
    return pl.coalesce(
        pl.when(pl.col(c) == top).then(pl.lit(i, dtype=pl.Int8)) for i, c in enumerate(columns)
    ).replace_strict(list(range(len(names))), list(names), return_dtype=pl.String)


def _text_time(portions: pl.DataFrame, segments: Segments, ranges: pl.DataFrame) -> pl.DataFrame:
    """Per gap and innermost NVTX text: ``covered_ns`` and ``nvtx_ns``.

    ``portions`` (``_gap, _th, start_ns, end_ns``, one per gap) may overlap one
    another; ``segments`` are :func:`_cause_segments` with ``ranges``. ``covered_ns``
    is the portion time inside ranges of that text, any cause; ``nvtx_ns`` the part of
    it attributed to the ``nvtx`` cause.
    """
    # A text is its category code; crossing ranges get the code of their label (that
    # of any range named like them too), so a portion's texts are distinct.
    crossing = pl.Series([NVTX_CROSSING]).cast(ranges.schema["text"]).to_physical()[0]
    portion, named_range, covered, nvtx = time_per_text(
        segments,
        ranges["text"].to_physical().to_numpy(),
        int(crossing),
        HOST_CAUSES.index("nvtx"),
        [portions[c].to_numpy() for c in (_TH, "start_ns", "end_ns")],
    )
    return pl.DataFrame(
        [
            portions["_gap"].gather(portion),
            _range_texts(ranges, named_range),
            pl.Series("covered_ns", covered),
            pl.Series("nvtx_ns", nvtx),
        ]
    )


def _nvtx_texts(gaps: pl.Series, text_time: pl.DataFrame) -> pl.Series:
    """Per gap of ``gaps``, the innermost NVTX text covering most of its host portion."""
    if text_time.is_empty():
        return pl.repeat(None, len(gaps), dtype=pl.Categorical(), eager=True).alias("nvtx_text")
    top = (
        text_time.lazy()
        .sort(["covered_ns", "nvtx_text"], descending=[True, False])
        .sort("_gap", maintain_order=True)
        .filter(_run_starts(["_gap"]))
        .select("_gap", "nvtx_text")
    )
    # Only the gap numbers go through the join, not the whole gap table.
    return (
        gaps.to_frame()
        .lazy()
        .join(top, on="_gap", how="left", maintain_order="left")
        .collect(engine=_ENGINE)["nvtx_text"]
    )


def attribute_gaps(
    trace: Trace,
    gaps: pl.DataFrame,
    settings: Settings | None = None,
    keys: Sequence[str] = ("gpu",),
    transfers: pl.DataFrame | None = None,
) -> HostResult:
    """Attribute every gap's time to host-side and GPU-side causes (see the module docstring).

    ``gaps`` is :attr:`GapsResult.gaps` (``keys`` + ``start_ns, end_ns``) and ``keys``
    its unit keys (:attr:`GapsResult.keys`); ``gpu`` must be among them. ``transfers``
    (``gpu, start_ns, end_ns``, per-GPU memcpy/memset time) is gap time of its own
    cause, ``gpu_transfer``, whatever the host did meanwhile (per-GPU keys only).
    """
    settings = settings or Settings()
    keys = list(keys)
    if "gpu" not in keys:
        raise ValueError(f"gap keys {keys} must include 'gpu'")
    caps = trace.capabilities
    missing = unavailable_causes(caps)
    has_api = caps.has("cuda_api")
    no_host_data = any(not caps.has(t) for t in _HOST_TABLES)

    table = _gap_table(trace, gaps, keys, has_api, settings.launch_slack_ns)
    threads, portions = _host_portions(table)
    signature = gil_threads(trace.osrt.join(threads, on=list(_THREAD), how="semi"))
    ranges = _nvtx_ranges(trace, threads)
    segments = _cause_segments(trace, threads, signature, ranges, portions, merge=True)
    spent = _time_in(portions, segments, table.height)
    carve = transfers is not None and transfers.height > 0 and keys == ["gpu"]
    if carve:
        assert transfers is not None
        table, in_transfer = _transfer_time(table, portions, segments, transfers)
        for name, values in in_transfer.items():
            spent[name] = spent.get(name, np.zeros(table.height, dtype=np.int64)) - values
    # Only portions with time inside NVTX ranges need the costlier interval join.
    in_ranges = portions.filter(spent.pop("_nvtx_ns")[portions["_gap"].to_numpy()] > 0)
    text_time = _text_time(in_ranges, segments, ranges)
    del segments, ranges
    table, constant = _split(table, spent, text_time, has_api, no_host_data, carve)

    feed = [
        *([pl.col("_feed_source").alias("source")] if "source" not in keys else []),
        *([pl.col("_feed_pid").alias("pid")] if "pid" not in keys else []),
    ]
    out = table.select(
        *keys,
        "start_ns",
        "end_ns",
        "duration_ns",
        *feed,
        "tid",
        pl.col("_kind_rank")
        .replace_strict(list(range(len(_KIND_ORDER))), list(_KIND_ORDER), return_dtype=_KIND)
        .alias("next_kind"),
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
    per_gpu = _per_gpu(out, gpus, constant)
    nvtx = _nvtx_table(
        text_time.join(table.select("_gap", "gpu"), on="_gap"),
        per_gpu.select("gpu", "gap_ns"),
    )
    return HostResult(
        gaps=out,
        per_gpu=per_gpu,
        shares=_long_shares(per_gpu),
        nvtx=nvtx,
        gil_threads=signature,
        unavailable=tuple(f"{CAUSE_LABELS[c]}: {why}" for c, why in missing.items()),
        unavailable_causes=tuple(missing),
    )


def _per_gpu(
    gaps: pl.DataFrame, gpus: pl.DataFrame, constant: frozenset[str] = frozenset()
) -> pl.DataFrame:
    """Per GPU sums and shares; ``constant`` names the cause columns that are 0 throughout."""
    cause_ns = [f"{c}_ns" for c in CAUSES]
    sums = gaps.group_by(pl.col("gpu").cast(pl.Int32)).agg(
        pl.len().cast(pl.Int64).alias("gap_count"),
        pl.col("duration_ns").sum().alias("gap_ns"),
        *(
            (pl.col("primary") == p).sum().cast(pl.Int64).alias(f"{p}_count")
            for p in PRIMARY_CLASSES
        ),
        *(
            pl.lit(0, dtype=pl.Int64).alias(c) if c in constant else pl.col(c).sum()
            for c in cause_ns
        ),
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
            pl.col("nvtx_text").cast(pl.String).alias("text"),
            "nvtx_ns",
            "covered_ns",
            pl.when(pl.col("gap_ns") > 0)
            .then(pl.col("nvtx_ns") / pl.col("gap_ns"))
            .alias("nvtx_share"),
        )
        .sort(["gpu", "nvtx_ns", "covered_ns", "text"], descending=[False, True, True, False])
    )
