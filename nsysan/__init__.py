"""nsysan: why is a multi-GPU job slower than it should be?

Reads Nsight Systems SQLite exports (and Nsight Compute CSVs) and diagnoses load
imbalance. Public API: :func:`load_trace` (ingest), more in later modules.
"""

from __future__ import annotations

import os

# Polars' allocator (jemalloc) settings. Freed memory is kept 1 s (decay) before it
# goes back to the system: reused at once by the next table of an analysis, without a
# page fault per 4 KiB, yet not held while numpy and numba (which allocate elsewhere)
# need memory. A 30 s decay was as fast and peaked 1 GB higher at 5M kernels. One
# arena per CPU (jemalloc's default is four): a thread then reuses what the others
# freed, 0.1 GB less peak at 5M kernels at the same speed. It only applies when nsysan
# is imported before polars (the CLI always is); a value the user set wins.
# docs/architecture.md has the figures.
os.environ.setdefault(
    "_RJEM_MALLOC_CONF",
    f"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:1000,narenas:{os.cpu_count() or 1}",
)

from typing import TYPE_CHECKING, Any  # noqa: E402

if TYPE_CHECKING:
    from nsysan.ingest import load_trace
    from nsysan.model import Trace

__version__ = "0.1.0"
__all__ = ["Trace", "__version__", "load_trace"]


def __getattr__(name: str) -> Any:
    # Imported on first use: ``import nsysan`` stays light, so the console script can
    # catch a Ctrl-C while polars and numba load (nsysan._launcher).
    if name == "load_trace":
        from nsysan.ingest import load_trace

        return load_trace
    if name == "Trace":
        from nsysan.model import Trace

        return Trace
    raise AttributeError(f"module 'nsysan' has no attribute {name!r}")
