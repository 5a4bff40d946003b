"""Matching a string column of millions of rows (kernel names, labels) against a few values."""

from __future__ import annotations

import polars as pl

__all__ = ["FEW_VALUES", "is_one_of"]

# Up to this many strings are matched by comparing with each, more by hashing.
FEW_VALUES = 3


def is_one_of(column: pl.Expr, values: list[str]) -> pl.Expr:
    """Whether ``column`` holds one of ``values`` (False for null).

    A few values are compared one by one: comparing strings mostly stops at their
    length and prefix, which is cheaper than hashing millions of them.
    """
    if not values:
        return pl.lit(False)
    if len(values) <= FEW_VALUES:
        return pl.any_horizontal(*(column == value for value in values)).fill_null(False)
    return column.is_in(pl.Series(values, dtype=pl.String).implode()).fill_null(False)
