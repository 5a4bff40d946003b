"""Matching a string column of millions of rows (kernel names, labels) against a few values."""

from __future__ import annotations

import polars as pl

__all__ = ["FEW_VALUES", "distinct", "is_one_of", "values_matching"]

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


def distinct(rows: pl.LazyFrame, column: str) -> pl.Series:
    """The distinct values of ``column`` in ``rows`` (a table in memory or on disk)."""
    return rows.select(pl.col(column).unique()).collect().to_series()


def values_matching(column: pl.Series, pattern: str) -> list[str]:
    """The distinct values of ``column`` (String or Categorical) that contain ``pattern``.

    The regex runs over the few distinct names, not over millions of rows; match the
    rows with :func:`is_one_of`.
    """
    distinct = column.drop_nulls().unique().cast(pl.String)
    return sorted(distinct.filter(distinct.str.contains(pattern)).to_list())
