"""Host attribution's loops that name the NVTX text of host time, compiled.

For each host portion of a gap, the time inside each NVTX text (the innermost range's
text of the segments the portion overlaps; :func:`~nsysan.analyze.host_loops.cause_segments`
cuts the segments), with the cause loops' search
(:func:`~nsysan.analyze.host_loops.first_meeting`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nsysan.analyze.host_loops import CROSSING, OUTSIDE, Segments, first_meeting
from nsysan.compiled import compiled as _compiled

__all__ = ["time_per_key_and_text", "time_per_text"]


def time_per_text(
    segments: Segments,
    range_codes: np.ndarray,
    crossing_code: int,
    counted_cause: int,
    portions: Sequence[np.ndarray],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per portion and text, the time of the segments with that text inside the portion.

    A segment's text is ``range_codes`` of its innermost range (``crossing_code``
    where ranges cross); segments in no range are left out. ``counted_cause``: the
    cause whose time also counts as ``counted_ns``. ``portions``: thread, start,
    end, in any order and possibly overlapping one another. Returns, one row per
    (portion, text) met: the portion's row and the innermost range of the first
    segment with that text (to name it; int32, ``CROSSING`` for crossing ranges),
    ``covered_ns`` and ``counted_ns``. Each portion searches its
    thread's segments once and walks the run it meets; no table of (portion,
    segment) pairs is built.
    """
    text = (segments.nvtx_range, np.ascontiguousarray(range_codes), crossing_code)
    p_th, p_start, p_end = (np.ascontiguousarray(a) for a in portions)
    seg = (segments.bounds, segments.start, segments.end)
    rows = _texts_met(*seg, *text, p_th, p_start, p_end)
    return _text_totals(*seg, *text, segments.cause, counted_cause, p_th, p_start, p_end, rows)


@_compiled
def _text_of(range_rows, range_codes, crossing_code, k):  # type: ignore[no-untyped-def]
    """The text code of ``range_rows[k]`` (a range row or a marker); OUTSIDE for OUTSIDE."""
    r = range_rows[k]
    if r >= 0:
        return range_codes[r]
    return crossing_code if r == CROSSING else OUTSIDE


@_compiled
def _texts_met(  # type: ignore[no-untyped-def]
    seg_bounds, start, end, seg_range, range_codes, crossing_code, p_th, p_start, p_end
):
    """Distinct texts per portion: its rows in the output."""
    rows = np.zeros(len(p_th), dtype=np.int64)
    seen = np.empty(0, dtype=np.int64)
    hints = seg_bounds[:-1].copy()
    for p in range(len(p_th)):
        i, hi = first_meeting(seg_bounds, end, p_th[p], p_start[p], hints)
        first = i
        while i < hi and start[i] < p_end[p]:
            i += 1
        if len(seen) < i - first:
            seen = np.empty(2 * (i - first), dtype=np.int64)
        n = 0
        for k in range(first, i):
            if seg_range[k] == OUTSIDE or min(end[k], p_end[p]) <= max(start[k], p_start[p]):
                continue
            text = _text_of(seg_range, range_codes, crossing_code, k)
            known = False
            for m in range(n):
                if seen[m] == text:
                    known = True
                    break
            if not known:
                seen[n] = text
                n += 1
        rows[p] = n
    return rows


@_compiled
def _text_totals(  # type: ignore[no-untyped-def]
    seg_bounds,
    start,
    end,
    seg_range,
    range_codes,
    crossing_code,
    seg_cause,
    counted_cause,
    p_th,
    p_start,
    p_end,
    rows,
):
    total = rows.sum()
    portion = np.empty(total, dtype=np.int32)
    named_range = np.empty(total, dtype=np.int32)
    covered = np.zeros(total, dtype=np.int64)
    counted_ns = np.zeros(total, dtype=np.int64)
    out = 0
    hints = seg_bounds[:-1].copy()
    for p in range(len(p_th)):
        i, hi = first_meeting(seg_bounds, end, p_th[p], p_start[p], hints)
        n = 0  # texts of this portion so far: rows out .. out + n
        while i < hi and start[i] < p_end[p]:
            o = min(end[i], p_end[p]) - max(start[i], p_start[p])
            if o > 0 and seg_range[i] != OUTSIDE:
                text = _text_of(seg_range, range_codes, crossing_code, i)
                at = -1
                for m in range(n):
                    if _text_of(named_range, range_codes, crossing_code, out + m) == text:
                        at = out + m
                        break
                if at < 0:
                    at = out + n
                    n += 1
                    portion[at], named_range[at] = p, seg_range[i]
                covered[at] += o
                if seg_cause[i] == counted_cause:
                    counted_ns[at] += o
            i += 1
        out += n
    return portion, named_range, covered, counted_ns


def time_per_key_and_text(
    segments: Segments,
    range_texts: np.ndarray,
    crossing_text: int,
    text_count: int,
    counted_cause: int,
    portions: Sequence[np.ndarray],
    portion_key: np.ndarray,
    key_count: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`time_per_text` summed over the portions of each key: one row per (key, text) met.

    Texts and keys are numbered ``0 .. text_count - 1`` and ``0 .. key_count - 1``:
    ``range_texts`` per range (``crossing_text`` where ranges cross), ``portion_key``
    per portion. Returns the rows' key, the innermost range of the first segment met
    with that text and key (int32, ``CROSSING`` for crossing ranges), ``covered_ns``
    and ``counted_ns``, in (key, text) order. One walk of each portion's segments adds
    to a (key, text) table: no row per portion and text, no second walk to find them.
    """
    covered = np.zeros((key_count, text_count), dtype=np.int64)
    counted = np.zeros((key_count, text_count), dtype=np.int64)
    first_range = np.full((key_count, text_count), OUTSIDE, dtype=np.int32)
    p_th, p_start, p_end = (np.ascontiguousarray(a) for a in portions)
    _add_key_texts(
        segments.bounds,
        segments.start,
        segments.end,
        segments.nvtx_range,
        np.ascontiguousarray(range_texts),
        crossing_text,
        segments.cause,
        counted_cause,
        p_th,
        p_start,
        p_end,
        np.ascontiguousarray(portion_key),
        covered,
        counted,
        first_range,
    )
    # A (key, text) met has time: a segment counts only where it overlaps a portion.
    met = np.flatnonzero(covered.ravel() > 0)
    return (
        met // max(text_count, 1),
        first_range.ravel()[met],
        covered.ravel()[met],
        counted.ravel()[met],
    )


@_compiled
def _add_key_texts(  # type: ignore[no-untyped-def]
    seg_bounds,
    start,
    end,
    seg_range,
    range_texts,
    crossing_text,
    seg_cause,
    counted_cause,
    p_th,
    p_start,
    p_end,
    p_key,
    covered,
    counted,
    first_range,
):
    hints = seg_bounds[:-1].copy()
    for p in range(len(p_th)):
        i, hi = first_meeting(seg_bounds, end, p_th[p], p_start[p], hints)
        key = p_key[p]
        while i < hi and start[i] < p_end[p]:
            o = min(end[i], p_end[p]) - max(start[i], p_start[p])
            r = seg_range[i]
            if o > 0 and r != OUTSIDE:
                text = range_texts[r] if r >= 0 else crossing_text
                if first_range[key, text] == OUTSIDE:
                    first_range[key, text] = r
                covered[key, text] += o
                if seg_cause[i] == counted_cause:
                    counted[key, text] += o
            i += 1
