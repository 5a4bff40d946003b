"""The CUDA API rows of one export that share their key with a GPU operation.

A GPU operation's (kernel, graph execution, memcpy, memset) launch call is the CUDA
API row with its (source, pid, correlation id) (:mod:`nsysan.analyze.host_launch`).
Host attribution looks up the launch calls of the operations that end its gaps, and
the NVTX iterations those of every kernel; both read only rows with an operation's key. Yet those are a third of a big trace's calls
(scale8 workload, 5M kernels: 5.0M of 16.3M), and on a cached run each look-up read
all of them back from disk: at 5M kernels 1.5–1.8 s of every run, 0.45–0.8 s for the
rows with a key alone.

So when a first run leaves the export's CUDA calls in the table cache
(:class:`~nsysan.stored.StoredTable`), those rows are kept apart as well, in the calls'
own order (:func:`operation_calls`), and the trace offers them as
:attr:`~nsysan.model.Trace.operation_calls`. They are read from the stored calls a
file at a time, each file's keys tested against a table of the operations' ids (one
byte per id, :func:`~nsysan.analyze.host_calls.asked_ids`), or, where the ids are too
sparse for one, looked up among the operations' packed keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import polars as pl

from nsysan.analyze.host_calls import asked_ids, asked_rows
from nsysan.packing import among
from nsysan.stored import StoredTable, TablePart

__all__ = ["OPERATION_KEYS", "operation_calls"]

#: What ties an operation to its launch call.
OPERATION_KEYS = ("source", "pid", "correlation_id")


def operation_calls(
    cuda_api: StoredTable, operations: Sequence[pl.DataFrame], threads: int = 1
) -> pl.DataFrame:
    """The rows of ``cuda_api`` whose :data:`OPERATION_KEYS` are those of a row of
    ``operations`` (the kernel, graph execution, memcpy and memset tables), in table
    order, every column, a chunk per file; the files read by up to ``threads`` at once
    (the reads and the test release the GIL)."""
    keys = pl.concat([ops.select(OPERATION_KEYS) for ops in operations]).drop_nulls()
    keys = keys.filter(pl.all_horizontal(pl.all() >= 0))
    if keys.is_empty():
        return pl.DataFrame(schema=cuda_api.schema)
    marks = asked_ids(*_key_columns(keys), max_slots=4 * cuda_api.height + (1 << 20))
    files = cuda_api.parts or (TablePart(cuda_api.query, cuda_api.height),)

    def kept(part: TablePart) -> pl.DataFrame:
        if marks is None:
            return among(part.query, keys, OPERATION_KEYS).collect()
        calls = part.query.collect()
        return calls.filter(pl.Series(asked_rows(marks, *_key_columns(calls))))

    with ThreadPoolExecutor(max_workers=threads) as pool:
        # The files' rows side by side, not copied into one chunk: the cache writes
        # them a slice at a time (at 20M kernels a copy was +0.8 GB on a first run).
        return pl.concat(list(pool.map(kept, files)), rechunk=False)


def _key_columns(df: pl.DataFrame) -> list[np.ndarray]:
    """The key columns as numpy arrays, a missing value as -1 (no operation's key)."""
    return [df[col].fill_null(-1).to_numpy() for col in OPERATION_KEYS]
