"""nsysan: why is a multi-GPU job slower than it should be?

Reads Nsight Systems SQLite exports (and Nsight Compute CSVs) and diagnoses load
imbalance. Public API: :func:`load_trace` (ingest), more in later modules.
"""

from __future__ import annotations

import os

# Polars' allocator (jemalloc) hands freed memory back to the system within about a
# second; an analysis that frees and allocates tables of millions of rows then pays
# a page fault per 4 KiB to get it back, which on virtual machines was a third of
# its time. Keeping freed memory 30 s (decay) makes it reusable at once. It only
# applies when nsysan is imported before polars (the CLI always is); a value the
# user set wins. benchmarks/README.md has the figures.
os.environ.setdefault(
    "_RJEM_MALLOC_CONF", "background_thread:true,dirty_decay_ms:30000,muzzy_decay_ms:30000"
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
