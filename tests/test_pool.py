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


def test_a_settled_future_carries_the_result_or_the_exception() -> None:
    from concurrent.futures import Future

    from nsysan.pool import settle_in

    with ThreadPoolExecutor(max_workers=2) as pool:
        ok: Future[int] = Future()
        # Submitted first, it waits on a job submitted after it, on the other worker.
        waiting = pool.submit(lambda: ok.result(timeout=30) + 1)
        settle_in(pool, ok, lambda: 41)
        assert waiting.result(timeout=30) == 42
        failed: Future[int] = Future()
        settle_in(pool, failed, lambda: 1 // 0)
        with pytest.raises(ZeroDivisionError):
            failed.result(timeout=30)


@pytest.mark.parametrize("workers", [1, 2])
def test_the_analyses_end_with_one_worker_or_two(
    workers: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Host attribution waits for the dominant gaps: with one worker that job must come
    # first in the queue, with two it comes next.
    from conftest import REPO

    from nsysan import analysis
    from nsysan.ingest import load_trace
    from nsysan.settings import Settings

    monkeypatch.setattr(analysis, "ANALYSIS_THREADS", workers)
    trace = load_trace(REPO / "fixtures" / "gil-blocked.sqlite")
    done: list[object] = []
    runner = threading.Thread(
        target=lambda: done.append(analysis.analyze(trace, Settings())), daemon=True
    )
    runner.start()
    runner.join(timeout=120)
    assert done, "the analyses did not end"
    assert done[0].host is not None and done[0].host.steady is not None
