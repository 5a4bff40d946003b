"""Where the traces of a batch run: a local process pool, or a Dask cluster.

Both call :func:`nsysan.batch.worker.process_trace` once per trace and hand each
outcome to ``on_done`` in the client process as it arrives. Neither schedules work
itself beyond that: the pool is ``concurrent.futures``, the cluster is
``dask.distributed`` (its scheduler places the tasks).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from nsysan.batch.rows import empty_row
from nsysan.batch.worker import TraceOutcome, TraceTask, init_worker, process_trace
from nsysan.errors import SettingsError

OnDone = Callable[[TraceOutcome], None]
WORKER_DIED = "the worker process died (out of memory, or a crash in a native library)"


def _died(task: TraceTask, why: str = WORKER_DIED) -> TraceOutcome:
    row = empty_row(task.trace_id, task.files, "failed", why)
    row["content_hash"] = task.content_hash
    return TraceOutcome(task.trace_id, row)


def run_local(tasks: Sequence[TraceTask], jobs: int, on_done: OnDone) -> None:
    """``jobs`` worker processes, one trace each at a time.

    Workers are spawned (not forked: polars and numba threads do not survive a fork).
    When a worker dies, the pool is lost; the traces not finished are then run one
    per fresh single-worker pool, so only the trace that kills its worker fails.
    """
    if not tasks:
        return
    workers = max(1, min(jobs, len(tasks)))
    threads = max(1, (os.cpu_count() or 1) // workers)
    ctx = multiprocessing.get_context("spawn")
    unfinished = _run_pool(list(tasks), workers, threads, ctx, on_done)
    for task in unfinished:
        if _run_pool([task], 1, threads, ctx, on_done):
            on_done(_died(task))


def _run_pool(
    tasks: list[TraceTask], workers: int, threads: int, ctx: object, on_done: OnDone
) -> list[TraceTask]:
    """Run ``tasks``; return those lost to a broken pool."""
    lost: list[TraceTask] = []
    with ProcessPoolExecutor(
        max_workers=workers, mp_context=ctx, initializer=init_worker, initargs=(threads,)
    ) as pool:  # type: ignore[call-arg]
        futures = {pool.submit(process_trace, t): t for t in tasks}
        try:
            for fut in as_completed(futures):
                # Drop the future with its result (a report's bytes): the client holds
                # one outcome at a time, not every trace's.
                task = futures.pop(fut)
                try:
                    outcome = fut.result()
                except BrokenProcessPool:
                    lost.append(task)
                    continue
                on_done(outcome)
                del outcome
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    return lost


def dask_client(address: str | None, scheduler_file: Path | None) -> object:
    """A ``distributed.Client`` of an existing cluster (not a new local one)."""
    try:
        from distributed import Client
    except ImportError:
        raise SettingsError(
            "--dask needs the distributed package: pip install 'nsysan[dask]'"
        ) from None
    try:
        if scheduler_file is not None:
            return Client(scheduler_file=str(scheduler_file), timeout="30s")
        return Client(address, timeout="30s")
    except (OSError, TimeoutError, ValueError) as exc:
        where = scheduler_file or address
        raise SettingsError(f"cannot reach the Dask scheduler at {where}: {exc}") from None


def run_dask(
    tasks: Sequence[TraceTask],
    address: str | None,
    scheduler_file: Path | None,
    on_done: OnDone,
) -> None:
    """The same tasks on a Dask cluster; outcomes come back to this (the client) process.

    Workers read the inputs at the paths given here, so they need the same file
    system view (a shared file system); the client writes every output.
    """
    if not tasks:
        return
    from distributed import as_completed as dask_completed

    client = dask_client(address, scheduler_file)
    with client:  # type: ignore[attr-defined]
        futures = client.map(  # type: ignore[attr-defined]
            process_trace,
            list(tasks),
            key=[f"nsysan-batch-{t.trace_id}-{t.content_hash[:12]}" for t in tasks],
            pure=False,
        )
        by_key = {f.key: t for f, t in zip(futures, tasks, strict=True)}
        completed = dask_completed(futures)
        del futures  # as_completed holds the pending ones; each is dropped once handled
        for fut in completed:
            try:
                outcome = fut.result()
            except Exception as exc:
                outcome = _died(
                    by_key[fut.key], f"the Dask task failed: {type(exc).__name__}: {exc}"
                )
            on_done(outcome)
            fut.release()
