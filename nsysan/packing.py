"""Integer key columns packed into one Int64 that sorts like them.

A look-up, group or sort by a key of several integer columns (a thread's source, pid
and tid; a process and a correlation id; an NCCL instance) then costs one column's:
a binary search, a hash of one integer. Packing holds only non-negative values whose
bit widths add up to at most :data:`PACKED_BITS`; callers keep a path by the columns
themselves for keys that do not fit.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

__all__ = ["PACKED_BITS", "among", "bit_widths", "looked_up", "packed", "packed_key", "unpacked"]

# Integer key columns packed into one Int64, in their order of significance, when
# they fit in 62 bits (in every real trace: ids are 32-bit, pids under 2^22).
PACKED_BITS = 62


def bit_widths(frames: Sequence[pl.DataFrame], cols: Sequence[str]) -> list[int] | None:
    """Bits per column that hold every value of ``cols`` in ``frames``; None when they do
    not pack (a negative value, or more than :data:`PACKED_BITS` in all)."""
    widths = []
    for col in cols:
        values = [f[col] for f in frames if f[col].null_count() < f.height]
        if not values:
            widths.append(0)
            continue
        if min(v.min() for v in values) < 0:  # type: ignore[operator]
            return None
        widths.append(max(int(v.max()) for v in values).bit_length())  # type: ignore[arg-type]
    return widths if sum(widths) <= PACKED_BITS else None


def packed_key(cols: Sequence[str], widths: Sequence[int]) -> pl.Expr:
    """``cols`` packed into one Int64 that sorts like the tuple (null where any is null)."""
    key = pl.lit(0, dtype=pl.Int64)
    for col, width in zip(cols, widths, strict=True):
        key = key * (1 << width) + pl.col(col).cast(pl.Int64)
    return key


def packed(df: pl.DataFrame, cols: Sequence[str], widths: Sequence[int]) -> pl.Series:
    """``cols`` of ``df`` packed by :func:`packed_key`, as a Series named ``_key``."""
    return df.select(packed_key(cols, widths).alias("_key")).to_series()


def unpacked(
    keys: pl.Series, cols: Sequence[str], widths: Sequence[int], schema: pl.Schema
) -> pl.DataFrame:
    """The columns ``cols`` (dtypes from ``schema``) that :func:`packed` packed into ``keys``."""
    shifts = np.cumsum([0, *reversed(widths)])[:-1][::-1]
    return keys.to_frame("_key").select(
        ((pl.col("_key") // (1 << int(shift))) % (1 << width)).cast(schema[col]).alias(col)
        for col, width, shift in zip(cols, widths, shifts, strict=True)
    )


def looked_up(df: pl.DataFrame, table: pl.DataFrame, keys: Sequence[str], value: str) -> pl.Series:
    """Per row of ``df``, ``value`` from the row of the small ``table`` with the same
    integer ``keys`` (null where none, or where a key is null): a left join's column.

    The keys are packed into one integer and looked up among the table's: a join on
    several columns row-encodes every row's keys (millions of kernels or NVTX events:
    hundreds of MB and twice the time) and copies every other column. A join stays
    where the table's keys do not pack or repeat.
    """
    table = table.select(*keys, value).drop_nulls(keys)
    widths = bit_widths([table], keys)
    if widths is None or table.select(keys).is_duplicated().any():
        joined = df.select(keys).join(table, on=list(keys), how="left", maintain_order="left")
        return joined.get_column(value)
    fits = pl.all_horizontal(
        pl.col(c).is_between(0, (1 << w) - 1) for c, w in zip(keys, widths, strict=True)
    )
    return df.select(
        pl.when(fits)
        .then(packed_key(keys, widths))
        .replace_strict(
            packed(table, keys, widths),
            table.get_column(value),
            default=None,
            return_dtype=table.schema[value],
        )
        .alias(value)
    ).to_series()


#: Up to this many keys, :func:`among` tests them column by column.
FEW_KEYS = 32


def among(rows: pl.LazyFrame, keys: pl.DataFrame, cols: Sequence[str]) -> pl.LazyFrame:
    """The ``rows`` whose integer ``cols`` are one of ``keys``' rows, in their order (a
    semi join): their packed key looked up among the keys', since a join on several
    columns row-encodes the keys of every row; a join where the keys do not pack.

    For reading a few processes', threads' or calls' rows out of a table on disk. Up
    to :data:`FEW_KEYS` keys are tested column by column, which a Parquet scan also
    tests against each row group's statistics: a main thread's 4M CUDA calls at 5M
    kernels (stored by thread) read in 0.10 s, against 0.14–0.17 s by the packed key.
    """
    keys = keys.select(cols).drop_nulls().unique(maintain_order=True)
    if keys.is_empty():
        return rows.clear()
    if keys.height <= FEW_KEYS:
        return rows.filter(
            pl.any_horizontal(
                pl.all_horizontal(pl.col(c) == v for c, v in zip(cols, key, strict=True))
                for key in keys.iter_rows()
            )
        )
    widths = bit_widths([keys], cols)
    if widths is None:
        return rows.join(keys.lazy(), on=list(cols), how="semi", maintain_order="left")
    fits = pl.all_horizontal(
        pl.col(c).is_between(0, (1 << w) - 1) for c, w in zip(cols, widths, strict=True)
    )
    return rows.filter(fits & packed_key(cols, widths).is_in(packed(keys, cols, widths).implode()))
