"""The C library allocator's settings, for a process that is nsysan's own (the CLI).

numpy's arrays and numba's buffers come from the C library's ``malloc`` (polars has
its own allocator, set in :mod:`nsysan`). glibc gives each thread that allocates an
arena of its own (up to 8 per core), and once a large array is freed it raises the
size from which arrays are mapped (and unmapped when freed) to that array's, up to
32 MiB: every smaller array is then carved from the arenas, and what is freed stays
there. Host attribution's groups allocate and free arrays of tens of MB from two
threads at once: at 5M kernels the arenas held 0.15-0.3 GB of freed memory at the
peak. A fixed threshold of 4 MiB and one arena per analysis thread lowered the
report's peak RSS from 2.24-2.62 GB to 2.04-2.15 GB in the same time
(benchmarks/README.md).

A setting the user made in the environment (``MALLOC_MMAP_THRESHOLD_``,
``MALLOC_ARENA_MAX``) wins. Elsewhere than glibc this does nothing.
"""

from __future__ import annotations

import ctypes
import os

__all__ = ["MMAP_THRESHOLD_BYTES", "tune_c_allocator"]

MMAP_THRESHOLD_BYTES = 4 << 20
# glibc's mallopt parameters (malloc.h).
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8


def tune_c_allocator(cpus: int | None = None) -> None:
    """Fixes glibc's mmap threshold and caps its arenas at the analysis threads (2-4)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc
        return
    if "MALLOC_MMAP_THRESHOLD_" not in os.environ:
        mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
    if "MALLOC_ARENA_MAX" not in os.environ:
        mallopt(_M_ARENA_MAX, max(2, min(4, cpus or os.cpu_count() or 1)))
