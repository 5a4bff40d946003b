"""The CLI's C allocator settings (nsysan.allocator)."""

from __future__ import annotations

import ctypes
import subprocess
import sys

import pytest

from nsysan import allocator


class _FakeLibc:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return 1


def test_threshold_is_fixed_and_arenas_follow_the_analysis_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    libc = _FakeLibc()
    monkeypatch.setattr(ctypes, "CDLL", lambda name: libc)
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    allocator.tune_c_allocator(cpus=16)
    assert libc.calls == [(-3, 4 << 20), (-8, 4)]
    libc.calls.clear()
    allocator.tune_c_allocator(cpus=1)
    assert libc.calls == [(-3, 4 << 20), (-8, 2)]


def test_the_users_settings_win(monkeypatch: pytest.MonkeyPatch) -> None:
    libc = _FakeLibc()
    monkeypatch.setattr(ctypes, "CDLL", lambda name: libc)
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "1048576")
    monkeypatch.setenv("MALLOC_ARENA_MAX", "8")
    allocator.tune_c_allocator()
    assert libc.calls == []


def test_without_mallopt_nothing_happens(monkeypatch: pytest.MonkeyPatch) -> None:
    class NoMallopt:
        pass

    monkeypatch.setattr(ctypes, "CDLL", lambda name: NoMallopt())
    allocator.tune_c_allocator()  # macOS, musl without it: no error


_MAPPED_AFTER_A_BIG_FREE = """
import ctypes, sys
import numpy
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]
libc = ctypes.CDLL(None)
if not hasattr(libc, "mallinfo2"):
    print("no mallinfo2"); sys.exit(0)
libc.mallinfo2.restype = Info
if sys.argv[1] == "tuned":
    from nsysan.allocator import tune_c_allocator
    tune_c_allocator()
big = numpy.ones(20 << 17)  # 20 MiB: mapped, and (untuned) the threshold rises to it
del big
before = libc.mallinfo2().hblkhd
mid = numpy.ones(5 << 17)  # 5 MiB
print(libc.mallinfo2().hblkhd - before >= 5 << 20)
"""


@pytest.mark.parametrize(("mode", "mapped"), [("tuned", "True"), ("untuned", "False")])
def test_the_c_library_takes_the_threshold(mode: str, mapped: str) -> None:
    # A process of its own: the settings are process-wide. Untuned, glibc carves a
    # 5 MiB array from its arenas once a 20 MiB one was freed; tuned, it maps it.
    done = subprocess.run(
        [sys.executable, "-c", _MAPPED_AFTER_A_BIG_FREE, mode],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    if done.stdout.strip() == "no mallinfo2":
        pytest.skip("not glibc 2.33 or later")
    assert done.stdout.strip() == mapped
