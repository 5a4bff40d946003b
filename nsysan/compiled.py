"""Loops compiled by numba, cached on disk when a cache folder is writable.

The analyses' loops over every gap or interval edge (host attribution's sweeps,
the stagger's pairwise co-idle time) take plain numpy arrays. Compiled with
``nogil``, they run beside the other analyses in the thread pool; the compiled code is
cached next to the module (or in numba's user cache), so only the first run after an
install pays the compilation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numba import njit

__all__ = ["NO_EDGE", "compiled"]

# The next time of a sweep's edge list with no edge left: later than any time.
NO_EDGE = np.iinfo(np.int64).max


def compiled(function: Callable[..., Any]) -> Any:
    """``function`` compiled by numba, cached on disk when a cache folder is writable."""
    try:
        return njit(nogil=True, cache=True)(function)
    except RuntimeError:
        # Neither the package folder nor numba's user cache can be written (a
        # read-only install): compile once per process instead.
        return njit(nogil=True)(function)
