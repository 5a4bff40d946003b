"""Work offered to a thread pool from inside one of its workers (nsysan/pool.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from nsysan.pool import results_as_done


def squares(n: int, log: list[tuple[int, int]] | None = None) -> list[Callable[[], int]]:
    def square(k: int) -> int:
        if log is not None:
            log.append((k, threading.get_ident()))
        return k * k

    return [lambda k=k: square(k) for k in range(n)]


def test_without_a_pool_the_calls_run_in_turn_on_the_caller() -> None:
    log: list[tuple[int, int]] = []
    assert list(results_as_done(None, squares(5, log))) == [(k, k * k) for k in range(5)]
    assert log == [(k, threading.get_ident()) for k in range(5)]


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_from_inside_a_worker_every_result_comes_once_without_deadlock(workers: int) -> None:
    log: list[tuple[int, int]] = []
    with ThreadPoolExecutor(max_workers=workers) as pool:
        inside = pool.submit(lambda: list(results_as_done(pool, squares(40, log))))
        results = inside.result(timeout=60)
    assert sorted(results) == [(k, k * k) for k in range(40)]
    assert sorted(k for k, _ in log) == list(range(40))


def test_a_worker_that_is_free_takes_calls_the_caller_has_not_reached() -> None:
    # The first call waits for the last one: it returns True only if the two ran at
    # once, on the caller and on the pool's free worker.
    last_ran = threading.Event()
    calls = [
        lambda: last_ran.wait(timeout=30),
        lambda: "middle",
        lambda: last_ran.set() or "last",
    ]
    with ThreadPoolExecutor(max_workers=2) as pool:
        # The caller takes one of the two workers.
        results = pool.submit(lambda: dict(results_as_done(pool, calls))).result(timeout=60)
    assert results == {0: True, 1: "middle", 2: "last"}


def test_an_exception_of_a_call_is_raised_to_the_caller() -> None:
    def fails() -> int:
        raise ValueError("broken group")

    with ThreadPoolExecutor(max_workers=2) as pool, pytest.raises(ValueError, match="broken"):
        list(results_as_done(pool, [lambda: 1, fails, lambda: 3]))
