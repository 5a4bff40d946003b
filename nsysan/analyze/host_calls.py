"""The launch-call look-up of host attribution, compiled (meaning in :mod:`nsysan.analyze.host_launch`).

A GPU operation's launch call is the CUDA API row with the same (source, pid,
correlation id). CUPTI numbers the calls of a process one after another, so a
process's ids fill a range about as long as its calls: a table indexed by the id
(one slot per id of each process's range, holding the preferred call's row) answers
each look-up in one read, in two passes over the calls and none over a sort
(:func:`direct_call_table`, :func:`direct_call_rows`). Where the ids are sparse or the
processes many, the calls' keys packed into one integer are sorted and searched
(:func:`gather_sorted`, :func:`find_rows`).

Reading a table on disk, only the calls that some look-up asks for are kept: the
asked ids marked in a table of one byte per id (:func:`asked_ids`), each batch of
calls tested against it as it is decoded (:func:`asked_rows`). Where only the calls'
thread and times are wanted, no call is kept at all: each batch updates every asked
key's preferred call so far (:func:`prefer_calls`).
"""

from __future__ import annotations

import numpy as np

from nsysan.analyze.host_loops import last_at_or_before
from nsysan.compiled import compiled as _compiled

__all__ = [
    "MAX_DIRECT_PROCESSES",
    "NO_CALL",
    "asked_ids",
    "asked_rows",
    "direct_call_rows",
    "direct_call_table",
    "find_rows",
    "gather_sorted",
    "prefer_calls",
]

# The start and end :func:`prefer_calls` holds for a query without a call: no earlier
# than any call's (a call starting at this very nanosecond, some 292 years into a
# trace, counts as none).
NO_CALL = np.iinfo(np.int64).max

# Processes a direct table is built for; beyond, the packed keys are sorted (a
# process is found by a scan over those seen, a handful in a real run).
MAX_DIRECT_PROCESSES = 64


@_compiled
def _process_at(processes, count, key, hint):  # type: ignore[no-untyped-def]
    """The index of ``key`` among the first ``count`` ``processes``, -1 if absent.

    ``hint``, the previous answer, is tried first: calls come in runs of one process.
    """
    if 0 <= hint < count and processes[hint] == key:
        return hint
    for j in range(count):
        if processes[j] == key:
            return j
    return -1


@_compiled
def _process_key(source, pid):  # type: ignore[no-untyped-def]
    # Both are non-negative 32-bit values (the caller checks), so this is distinct per pair.
    return (np.int64(source) << 32) | np.int64(pid)


@_compiled
def _id_ranges(source, pid, ids):  # type: ignore[no-untyped-def]
    """The distinct processes of the calls and each one's lowest and highest id.

    The count is -1 when there are more than :data:`MAX_DIRECT_PROCESSES`.
    """
    processes = np.empty(MAX_DIRECT_PROCESSES, dtype=np.int64)
    low = np.empty(MAX_DIRECT_PROCESSES, dtype=np.int64)
    high = np.empty(MAX_DIRECT_PROCESSES, dtype=np.int64)
    count = 0
    at = -1
    for i in range(len(ids)):
        key = _process_key(source[i], pid[i])
        at = _process_at(processes, count, key, at)
        if at < 0:
            if count == MAX_DIRECT_PROCESSES:
                return processes, low, high, -1
            processes[count] = key
            low[count] = ids[i]
            high[count] = ids[i]
            at = count
            count += 1
        low[at] = min(low[at], ids[i])
        high[at] = max(high[at], ids[i])
    return processes, low, high, count


@_compiled
def _fill_table(source, pid, ids, start, end, processes, count, low, base, table):  # type: ignore[no-untyped-def]
    """Each slot: the call with that id of the earliest (start, end), then the first row."""
    at = -1
    for i in range(len(ids)):
        at = _process_at(processes, count, _process_key(source[i], pid[i]), at)
        slot = base[at] + ids[i] - low[at]
        held = table[slot]
        if held < 0 or start[i] < start[held] or (start[i] == start[held] and end[i] < end[held]):
            table[slot] = i


def _id_layout(
    source: np.ndarray, pid: np.ndarray, ids: np.ndarray, max_slots: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int] | None:
    """The processes of the keys, each one's lowest and highest id and first slot, and
    the slots in all: one slot per id of each process's range. None beyond
    :data:`MAX_DIRECT_PROCESSES` processes or ``max_slots`` slots."""
    processes, low, high, count = _id_ranges(source, pid, ids)
    if count < 0:
        return None
    processes, low, high = processes[:count], low[:count], high[:count]
    sizes = high - low + 1
    slots = int(sizes.sum())
    if slots > max_slots:
        return None
    base = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    return processes, low, high, base, slots


def direct_call_table(
    source: np.ndarray,
    pid: np.ndarray,
    ids: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    max_slots: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """The id-indexed table of the calls (non-negative source, pid and id; no nulls).

    Returns the processes (packed source and pid), each one's lowest and highest id,
    its first slot, and the table (the preferred call's row per slot, -1 where no
    call has that id). None when the processes are more than
    :data:`MAX_DIRECT_PROCESSES` or the ranges need more than ``max_slots`` slots.
    """
    layout = _id_layout(source, pid, ids, max_slots)
    if layout is None:
        return None
    processes, low, high, base, slots = layout
    row_type = np.int32 if len(ids) < np.iinfo(np.int32).max else np.int64
    table = np.full(slots, -1, dtype=row_type)
    _fill_table(source, pid, ids, start, end, processes, len(processes), low, base, table)
    return processes, low, high, base, table


@_compiled
def _look_up(processes, low, high, base, table, source, pid, ids):  # type: ignore[no-untyped-def]
    found = np.full(len(ids), -1, dtype=np.int64)
    count = len(processes)
    at = -1
    for k in range(len(ids)):
        if source[k] < 0 or pid[k] < 0:
            continue
        hit = _process_at(processes, count, _process_key(source[k], pid[k]), at)
        if hit < 0:
            continue
        at = hit
        if low[at] <= ids[k] <= high[at]:
            found[k] = table[base[at] + ids[k] - low[at]]
    return found


def direct_call_rows(
    lookup: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    source: np.ndarray,
    pid: np.ndarray,
    ids: np.ndarray,
) -> np.ndarray:
    """Per query (source, pid, id; -1 for a missing value), its call's row in ``lookup``; -1 if none."""
    processes, low, high, base, table = lookup
    return _look_up(processes, low, high, base, table, source, pid, ids)


@_compiled
def gather_sorted(keys, order):  # type: ignore[no-untyped-def]
    """``keys[order]`` (sorted by ``order``) and whether two of them are equal."""
    table = np.empty(len(order), dtype=keys.dtype)
    repeated = False
    for i in range(len(order)):
        table[i] = keys[order[i]]
        if i and table[i] == table[i - 1]:
            repeated = True
    return table, repeated


@_compiled
def find_rows(table, rows, queries):  # type: ignore[no-untyped-def]
    """Per query, ``rows[i]`` for the ``i`` with ``table[i] == query``; -1 where none.

    ``table`` is sorted with distinct values. Queries mostly rise (ids in time
    order), so each search gallops from where the previous one ended.
    """
    found = np.full(len(queries), -1, dtype=np.int64)
    n = len(table)
    if n == 0:
        return found
    at = 0
    for k in range(len(queries)):
        at = last_at_or_before(table, 0, n, at, queries[k])
        if table[at] == queries[k]:
            found[k] = rows[at]
    return found


@_compiled
def _mark_ids(source, pid, ids, processes, count, low, base, marks):  # type: ignore[no-untyped-def]
    at = -1
    for i in range(len(ids)):
        at = _process_at(processes, count, _process_key(source[i], pid[i]), at)
        marks[base[at] + ids[i] - low[at]] = 1


def asked_ids(
    source: np.ndarray, pid: np.ndarray, ids: np.ndarray, max_slots: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """The (source, pid, id) keys asked for (non-negative; no nulls) as a table of one
    byte per id of each process's range, 1 where asked; laid out as
    :func:`direct_call_table`'s. None when the processes are more than
    :data:`MAX_DIRECT_PROCESSES` or the ranges need more than ``max_slots`` slots.
    """
    layout = _id_layout(source, pid, ids, max_slots)
    if layout is None:
        return None
    processes, low, high, base, slots = layout
    marks = np.zeros(slots, dtype=np.uint8)
    _mark_ids(source, pid, ids, processes, len(processes), low, base, marks)
    return processes, low, high, base, marks


def asked_rows(
    asked: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    source: np.ndarray,
    pid: np.ndarray,
    ids: np.ndarray,
) -> np.ndarray:
    """Per call (source, pid, id; -1 for a missing value), whether :func:`asked_ids`
    marked its key."""
    # The marks are a table of 0 and 1: the direct look-up reads them, -1 off its ranges.
    return direct_call_rows(asked, source, pid, ids) == 1


@_compiled
def prefer_calls(  # type: ignore[no-untyped-def]
    keys, queries, widths, source, pid, ids, tid, start, end, best, hint
):
    """Updates each query's preferred call with a batch of calls; returns the next ``hint``.

    ``keys`` are the queries' (source, pid, id) keys packed with ``widths`` (bits of
    source, pid, id; :func:`nsysan.packing.packed_key`), sorted; ``queries[i]`` is the
    query of ``keys[i]``. A call's key is packed alike (a call whose values do not fit
    the widths, or are negative, is no query's). ``best`` holds per query the call's
    start, end and tid so far (rows ``0, 1, 2``), start and end the largest Int64 while
    there is none (:data:`NO_CALL`). A call replaces the one held when it starts
    earlier, or starts with it and ends earlier: over the calls in table order, that is
    the earliest-starting call, then the earliest-ending, then the first in the table.
    ``hint`` is where the previous search ended (calls come in runs of rising ids).
    """
    count = len(keys)
    if count == 0:
        return hint
    source_bits, pid_bits, id_bits = widths[0], widths[1], widths[2]
    at = hint
    for i in range(len(ids)):
        s, p, c = source[i], pid[i], ids[i]
        if s < 0 or p < 0 or c < 0:
            continue
        if s >> source_bits or p >> pid_bits or c >> id_bits:
            continue
        key = (((s << pid_bits) + p) << id_bits) + c
        at = last_at_or_before(keys, 0, count, at, key)
        j = at
        # Queries sharing the key (CUDA graph kernels share their launch's id).
        while j >= 0 and keys[j] == key:
            q = queries[j]
            if start[i] < best[0, q] or (start[i] == best[0, q] and end[i] < best[1, q]):
                best[0, q] = start[i]
                best[1, q] = end[i]
                best[2, q] = tid[i]
            j -= 1
    return at
