"""The GIL signature: which wait calls of a thread are waits for Python's GIL.

Part of host attribution (:mod:`nsysan.analyze.host`, whose docstring defines the
signature). A thread waiting for the GIL sleeps in timed condition waits of
CPython's switch interval, so its waits pile up at the interval and never exceed
it. :func:`gil_threads` finds the threads and calls that show it; the host timeline
(:mod:`nsysan.analyze.host_timeline`) counts their waits as ``gil_wait``.
"""

from __future__ import annotations

import polars as pl

from nsysan.analyze.host_causes import base_name, name_in
from nsysan.analyze.host_tables import ENGINE, THREAD_KEYS

__all__ = [
    "GIL_KEYS",
    "GIL_LONG_WAIT_NS",
    "GIL_MIN_SHARE",
    "GIL_MIN_WAITS",
    "GIL_SWITCH_INTERVAL_NS",
    "GIL_TOLERANCE_NS",
    "GIL_WAIT_CALLS",
    "gil_family_waits",
    "gil_threads",
]

# CPython's default switch interval (sys.getswitchinterval() == 0.005): a thread
# that wants the GIL waits this long on a condition variable, then asks again.
GIL_SWITCH_INTERVAL_NS = 5_000_000
GIL_TOLERANCE_NS = 1_000_000
GIL_MIN_WAITS = 3
GIL_MIN_SHARE = 0.5
GIL_LONG_WAIT_NS = 1_000_000

# The GIL is a mutex plus a condition variable; contended waits show up as these.
GIL_WAIT_CALLS = frozenset(
    {"pthread_cond_wait", "pthread_cond_timedwait", "pthread_cond_clockwait", "futex"}
)

# The signature is per thread and wait call.
GIL_KEYS = (*THREAD_KEYS, "call")


def gil_family_waits(osrt: pl.DataFrame) -> pl.DataFrame:
    """Outermost GIL-family waits with ``call`` (base name) and flags.

    ``_near``: within tolerance of the interval; ``_long``: at least
    :data:`GIL_LONG_WAIT_NS`; ``_slice``: no longer than the interval plus tolerance.
    """
    duration = pl.col("end_ns") - pl.col("start_ns")
    return (
        osrt.lazy()
        .filter(name_in(osrt["name"], GIL_WAIT_CALLS) & (pl.col("nesting_level").fill_null(0) == 0))
        .with_columns(
            base_name(pl.col("name")).alias("call"),
            ((duration - GIL_SWITCH_INTERVAL_NS).abs() <= GIL_TOLERANCE_NS).alias("_near"),
            (duration >= GIL_LONG_WAIT_NS).alias("_long"),
            (duration <= GIL_SWITCH_INTERVAL_NS + GIL_TOLERANCE_NS).alias("_slice"),
        )
        .collect(engine=ENGINE)
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
        gil_family_waits(osrt)
        .group_by(GIL_KEYS)
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
    ).sort(GIL_KEYS)
