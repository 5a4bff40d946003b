"""The vocabulary of host attribution (:mod:`nsysan.analyze.host`): causes and the calls behind them.

The causes of gap time, host causes in precedence order, with their labels; the
primary classes of a gap; the CUDA calls that synchronize and the OS calls that
block; which trace table each cause needs; the texts of NVTX time that no single
named range covers. Calls are matched by base name (:func:`base_name`), once per
distinct name.
"""

from __future__ import annotations

import polars as pl

from nsysan.model import Capabilities

__all__ = [
    "BLOCKING_OS_CALLS",
    "CAUSES",
    "CAUSE_LABELS",
    "CUDA_SYNC_APIS",
    "HOST_CAUSES",
    "HOST_SIDE_CAUSES",
    "HOST_TABLES",
    "NVTX_CROSSING",
    "NVTX_NO_TEXT",
    "PRIMARY_CLASSES",
    "base_name",
    "name_in",
    "unavailable_causes",
]

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
HOST_TABLES = ("osrt", "sched", "nvtx")
NVTX_NO_TEXT = "(no text)"
NVTX_CROSSING = "(crossing NVTX ranges)"


def unavailable_causes(capabilities: Capabilities) -> dict[str, str]:
    """Causes whose source table the trace lacks, each with the reason in words."""
    return {
        cause: _NEEDS[table] for cause, table in _CAUSE_TABLE.items() if not capabilities.has(table)
    }


def base_name(name: pl.Expr) -> pl.Expr:
    """A call's name without an ``@...`` suffix and ``_v<N>``/``_ptsz``/``_ptds`` suffixes."""
    return name.cast(pl.String).str.replace(r"@.*$", "").str.replace(r"(_v\d+|_pt(sz|ds))+$", "")


def name_in(names: pl.Series, base_names: frozenset[str]) -> pl.Expr:
    """Whether the ``name`` column's base name is in ``base_names`` (null for a null name).

    ``names`` holds (at least) every name the column can take.
    """
    # The regex runs once per distinct name, not once per row of a million-row table.
    distinct = names.drop_nulls().unique().cast(pl.String).to_frame("name")
    raw = distinct.filter(base_name(pl.col("name")).is_in(list(base_names)))["name"]
    return pl.col("name").is_in(raw.to_list())
