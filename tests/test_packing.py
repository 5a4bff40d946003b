"""Integer keys packed into one: look-ups and filters equal the joins they replace."""

from __future__ import annotations

import polars as pl
import pytest

from nsysan.packing import among, looked_up


def _left_join(df: pl.DataFrame, table: pl.DataFrame, keys: list[str], value: str) -> list:
    joined = df.select(keys).join(
        table.select(*keys, value), on=keys, how="left", maintain_order="left"
    )
    return joined.get_column(value).cast(pl.String).to_list()


@pytest.mark.parametrize(
    "ids",
    [
        [0, 1, 7, 2**32 - 1],  # packed into one integer
        [-3, 1, 7, 2**40],  # a negative id: joined
        [1, 1, 7, 9],  # a key twice (pid 5, id 1): joined, as the rows it repeats
    ],
    ids=["packed", "negative", "repeated"],
)
def test_looked_up_values_equal_a_left_join(ids: list[int]) -> None:
    table = pl.DataFrame(
        {
            "pid": pl.Series([5, 5, 9, 9], dtype=pl.Int32),
            "domain_id": ids,
            "domain": pl.Series(["NCCL", "app", "NCCL", "io"], dtype=pl.Categorical()),
        }
    )
    # Every (pid, id) pair, an id no row has, one pid's id under the other pid, a null
    # id, and an id wider than the table's (it would collide if packed unchecked).
    probes = [*ids, 3, None, ids[2] + 2**32]
    df = pl.DataFrame(
        {
            "pid": pl.Series([p for p in (5, 9, None) for _ in probes], dtype=pl.Int32),
            "domain_id": [i for _ in (5, 9, None) for i in probes],
        }
    )
    keys = ["pid", "domain_id"]
    got = looked_up(df, table, keys, "domain")
    # Repeated keys give a row per match, as the join they fall back to.
    assert got.cast(pl.String).to_list() == _left_join(df, table, keys, "domain")
    if len(set(zip([5, 5, 9, 9], ids, strict=True))) == 4:
        assert got.dtype == pl.Categorical()
        assert got.drop_nulls().len() == 4  # each of the table's rows once


def test_a_null_key_in_the_table_matches_nothing() -> None:
    table = pl.DataFrame({"a": [1, None], "b": [2, 2], "v": [10, 20]})
    df = pl.DataFrame({"a": [1, None, 0], "b": [2, 2, 2]})
    assert looked_up(df, table, ["a", "b"], "v").to_list() == [10, None, None]


@pytest.mark.parametrize(
    "ids",
    [[0, 1, 7, 2**32 - 1], [-3, 1, 7, 2**40], [1, 1, 7, 9]],
    ids=["packed", "negative", "repeated"],
)
def test_among_keeps_the_rows_a_semi_join_keeps(ids: list[int]) -> None:
    keys = pl.DataFrame({"pid": pl.Series([5, 5, 9, None], dtype=pl.Int32), "id": ids})
    probes = [*ids, 3, None, ids[2] + 2**32]
    rows = pl.DataFrame(
        {
            "pid": pl.Series([p for p in (5, 9, None) for _ in probes], dtype=pl.Int32),
            "id": [i for _ in (5, 9, None) for i in probes],
        }
    ).with_row_index("row")
    cols = ["pid", "id"]
    got = among(rows.lazy(), keys, cols).collect()
    expected = rows.join(keys, on=cols, how="semi", maintain_order="left")
    assert got.equals(expected)
    assert got["row"].is_sorted()  # the rows' own order
