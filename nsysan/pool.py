"""Work offered to a thread pool from inside one of its own workers.

Host attribution runs in the analyses' thread pool and takes longest; its thread
groups are independent. Offered to the pool, a group goes to a worker that has
finished its own analysis, so both cores stay busy to the end. The caller runs
every group no worker has started yet, so waiting on the pool from inside it never
deadlocks, and with one worker (or no pool) the groups simply run in turn.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from typing import TypeVar

__all__ = ["results_as_done"]

T = TypeVar("T")


def results_as_done(
    pool: Executor | None, calls: Sequence[Callable[[], T]]
) -> Iterator[tuple[int, T]]:
    """``(index, result)`` of every call in ``calls``, each as soon as it is done.

    The calls are offered to ``pool``; the caller takes them back in order and runs
    those no worker has started, then waits for the ones the workers took. A call's
    exception is raised here.
    """
    if pool is None:
        for index, call in enumerate(calls):
            yield index, call()
        return
    taken: dict[Future[T], int] = {}
    offered = [pool.submit(call) for call in calls]
    for index, (future, call) in enumerate(zip(offered, calls, strict=True)):
        if future.cancel():
            yield index, call()
        else:
            taken[future] = index
        for done in [f for f in taken if f.done()]:
            yield taken.pop(done), done.result()
    while taken:
        finished, _ = wait(taken, return_when=FIRST_COMPLETED)
        for done in finished:
            yield taken.pop(done), done.result()
