"""nsysan: why is a multi-GPU job slower than it should be?

Reads Nsight Systems SQLite exports (and Nsight Compute CSVs) and diagnoses load
imbalance. Public API: :func:`load_trace` (ingest), more in later modules.
"""

from __future__ import annotations

from nsysan.ingest import load_trace
from nsysan.model import Trace

__version__ = "0.1.0"
__all__ = ["Trace", "__version__", "load_trace"]
