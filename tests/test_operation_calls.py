"""The CUDA calls kept apart for launch look-ups (nsysan.ingest.operation_calls): every
call with an operation's key, in the table's order, across the stored table's files."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsysan.analyze.host_tables import with_rows_on_threads
from nsysan.ingest import load_trace
from nsysan.ingest.operation_calls import OPERATION_KEYS, operation_calls
from nsysan.model import CUDA_API
from nsysan.stored import StoredTable, TablePart

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

_KEYS = st.tuples(st.integers(0, 1), st.integers(5, 6), st.integers(0, 40))


def _calls(keys: list[tuple[int, int, int | None]]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "source": [k[0] for k in keys],
            "pid": [k[1] for k in keys],
            "tid": [i % 3 for i in range(len(keys))],
            "correlation_id": [k[2] for k in keys],
            "start_ns": list(range(len(keys))),
            "end_ns": [i + 1 for i in range(len(keys))],
            "name": ["cudaLaunchKernel"] * len(keys),
        },
        schema=CUDA_API,
    )


def _operations(keys: list[tuple[int, int, int | None]]) -> pl.DataFrame:
    return pl.DataFrame(
        {c: [k[i] for k in keys] for i, c in enumerate(OPERATION_KEYS)},
        schema={"source": pl.Int32, "pid": pl.Int32, "correlation_id": pl.Int64},
    )


def _stored(calls: pl.DataFrame, file_rows: int) -> StoredTable:
    """``calls`` as a stored table of files of ``file_rows`` rows (a part each)."""
    parts = tuple(
        TablePart(calls.slice(first, file_rows).lazy(), calls.slice(first, file_rows).height)
        for first in range(0, calls.height, file_rows)
    )
    return StoredTable(calls.lazy(), calls.height, calls.schema, parts=parts)


def _reference(calls: pl.DataFrame, operations: list[pl.DataFrame]) -> pl.DataFrame:
    keys = pl.concat([o.select(OPERATION_KEYS) for o in operations]).unique()
    return calls.join(keys, on=list(OPERATION_KEYS), how="semi", maintain_order="left")


@settings(max_examples=200, deadline=None)
@given(
    call_keys=st.lists(st.one_of(_KEYS, st.tuples(st.just(0), st.just(5), st.none())), max_size=60),
    kernel_keys=st.lists(_KEYS, max_size=20),
    copy_keys=st.lists(_KEYS, max_size=5),
    file_rows=st.integers(1, 25),
    sparse=st.booleans(),
)
def test_every_call_with_an_operations_key_in_table_order(
    call_keys: list[tuple[int, int, int | None]],
    kernel_keys: list[tuple[int, int, int]],
    copy_keys: list[tuple[int, int, int]],
    file_rows: int,
    sparse: bool,
) -> None:
    if sparse:
        # An id far above the others leaves no table of ids: the packed keys are looked up.
        kernel_keys = [*kernel_keys, (0, 5, 1 << 45)]
    calls = _calls(call_keys)
    operations = [_operations(kernel_keys), _operations(copy_keys)]
    got = operation_calls(_stored(calls, file_rows), operations, threads=2)
    assert got.equals(_reference(calls, operations))


def test_no_operation_keeps_no_call() -> None:
    calls = _calls([(0, 5, 1), (0, 5, 2)])
    got = operation_calls(_stored(calls, 1), [_operations([]), _operations([])])
    assert got.is_empty()
    assert got.schema == calls.schema


@pytest.mark.usefixtures("cache_on")
def test_the_calls_kept_apart_stand_in_for_stored_calls_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from nsysan import stored
    from nsysan.ingest import cache

    monkeypatch.setattr(stored, "STORE_MIN_ROWS", 0)
    # Files of a few rows, each sorted by thread: the kept calls, in files of their own,
    # must keep the stored order (a look-up's last tie-break), not be sorted again.
    monkeypatch.setattr(cache, "SLICE_ROWS", 64)
    path = FIXTURES / "gil-blocked.sqlite"
    cold = load_trace(path, store_host_tables=True)
    assert isinstance(cold.operation_calls, StoredTable)
    kept = stored.collected(cold.operation_calls)
    all_calls = stored.collected(cold.cuda_api)
    assert len(cold.operation_calls.parts) > 1
    kernels = cold.kernels.select(OPERATION_KEYS)
    assert kept.equals(_reference(all_calls, [kernels, cold.memcpy, cold.memset, cold.graphs]))
    # The entry's copy is left unread where the calls are in memory.
    in_memory = load_trace(path)
    assert isinstance(in_memory.cuda_api, pl.DataFrame)
    assert in_memory.operation_calls is None
    assert in_memory.calls_of_operations() is in_memory.cuda_api
    # A group's rows of the calls are no superset of the kept ones: those go.
    threads = cold.cuda_api.lazy().select("source", "pid", "tid").unique().head(1).collect()
    group = with_rows_on_threads(cold, threads)
    assert group.operation_calls is None
    assert group.calls_of_operations() is group.cuda_api
