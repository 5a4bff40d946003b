"""The files' tables of a run put on one timeline: each file's times moved by its clock
offset, inverted rows dropped; a host table some files left on disk as one query.
"""

from __future__ import annotations

import polars as pl

from nsysan import model
from nsysan.ingest import validate
from nsysan.stored import HostTable, StoredTable, TablePart, frame_part

__all__ = ["INVERTED", "shifted", "stored_assembled", "without_inverted"]


def stored_assembled(
    parts: list[HostTable], offsets: pl.DataFrame, schema: model.Schema
) -> tuple[StoredTable, int]:
    """A host table some files left on disk, as one query on the trace's timeline (what
    the in-memory path does, planned instead of done), and its inverted rows' count.

    Each stored file (and each file's table in memory) is also planned alone, as a
    :class:`~nsysan.stored.TablePart` whose span is moved to the trace's timeline. The
    files' counts of inverted rows, written with them, spare a read of the whole table's
    times (at 20M kernels, 1.9 s of each run).
    """
    pieces = [
        (source, piece)
        for source, part in enumerate(parts)
        for piece in (
            part.parts or (TablePart(part.query, part.height),)
            if isinstance(part, StoredTable)
            else (frame_part(part),)
        )
    ]
    if all(piece.inverted is not None for _, piece in pieces):
        rows = sum(piece.rows for _, piece in pieces)
        dropped = sum(piece.inverted or 0 for _, piece in pieces)
    else:
        whole = shifted(
            pl.concat([p.lazy() for p in parts], how="vertical_relaxed"), offsets, len(parts)
        )
        inverted = INVERTED if "end_ns" in whole.collect_schema().names() else pl.lit(0)
        rows, dropped = (
            int(v or 0) for v in whole.select(pl.len(), inverted.sum()).collect().row(0)
        )

    def planned(query: pl.LazyFrame) -> pl.LazyFrame:
        query = shifted(query, offsets, len(parts))
        return model.conform(query.filter(~INVERTED) if dropped else query, schema)

    query = planned(pl.concat([p.lazy() for p in parts], how="vertical_relaxed"))
    # As shifted moves each row by its source's offset (none for one file).
    shift = (
        dict(zip(offsets["source"], offsets["offset_ns"], strict=True)) if len(parts) > 1 else {}
    )
    table_parts = tuple(
        TablePart(
            planned(piece.query),
            piece.rows,
            None
            if piece.span is None
            else (piece.span[0] + shift.get(s, 0), piece.span[1] + shift.get(s, 0)),
            piece.inverted,
        )
        for s, piece in pieces
    )
    keep = tuple(k for p in parts if isinstance(p, StoredTable) for k in p.keep)
    table = StoredTable(
        query=query,
        height=rows - dropped,
        schema=pl.Schema(schema),
        keep=keep,
        parts=table_parts,
    )
    return table, dropped


#: A damaged record: it ends before it starts.
INVERTED = pl.col("end_ns").is_not_null() & (pl.col("end_ns") < pl.col("start_ns"))


def shifted(df: model.FrameT, offsets: pl.DataFrame, n_files: int) -> model.FrameT:
    """``df`` with its time columns moved by its source's offset onto the trace's
    timeline (nothing moves for one file)."""
    if n_files <= 1 or (isinstance(df, pl.DataFrame) and df.is_empty()):
        return df
    time_cols = [c for c in df.collect_schema().names() if c in validate.TIME_COLUMNS]
    # Only the time columns are new: a join on the source copied every column.
    offset = pl.col("source").replace_strict(
        offsets["source"], offsets["offset_ns"], default=None, return_dtype=pl.Int64
    )
    return df.with_columns([(pl.col(c) + offset).alias(c) for c in time_cols])


def without_inverted(df: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """Drop intervals with ``end_ns < start_ns`` (damaged records); count them."""
    if "end_ns" not in df.columns or df.is_empty():
        return df, 0
    n_bad = int(df.select(INVERTED.sum()).item())
    return (df.filter(~INVERTED), n_bad) if n_bad else (df, 0)
