"""The benchmark's verdict "same table from every engine" compares figures that do not depend on the order
rows are added in: the same rows, held in another order, give the same checksum from Spark and from
PyIceberg (2026-11-30: a sum of the amounts as doubles told two equal 16M-row tables apart by a cent)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from benchmarks import data
from benchmarks.engines import MOR, PyIcebergEngine, SparkTables, table_config

pytestmark = pytest.mark.spark

# One large amount and a hundred cents: added large first, each cent rounds to 5/512 of a cent of the
# double's precision there, and the doubles' sum ends 0.02 lower than added cents first.
AMOUNTS = [2.0**43 + 0.5, *[0.01] * 100]


def added_in_order(values: list[float]) -> float:
    """The doubles added one after the other, as Spark's sum does (Python 3.12's `sum` compensates)."""
    total = 0.0
    for value in values:
        total += value
    return total


def rows_with_amounts(amounts: list[float]) -> pa.Table:
    rows = data.base_rows(0, len(amounts))
    return rows.set_column(rows.schema.get_field_index("amount"), "amount", pa.array(amounts, pa.float64()))


def test_the_same_rows_in_another_order_give_the_same_checksum_from_spark_and_pyiceberg(spark, tmp_path):
    forward, backward = tmp_path / "forward.parquet", tmp_path / "backward.parquet"
    rows = rows_with_amounts(AMOUNTS)
    pq.write_table(rows, forward)
    pq.write_table(rows.take(list(range(rows.num_rows - 1, -1, -1))), backward)  # the large amount last
    assert added_in_order(AMOUNTS) != added_in_order(AMOUNTS[::-1])  # as doubles, the order counts

    tables = SparkTables(spark)
    pyiceberg = PyIcebergEngine(tmp_path / "pyiceberg")
    checksums = {}
    try:
        for label, path in (("checksum_forward", forward), ("checksum_backward", backward)):
            tables.create(label, [path], MOR, table_config(label, MOR))
            checksums[f"spark {label}"] = tables.checksum(label)
            pyiceberg.create(label, [path], MOR)
            checksums[f"pyiceberg {label}"] = pyiceberg.checksum(label)
    finally:
        for label in ("checksum_forward", "checksum_backward"):
            spark.sql(f"DROP TABLE IF EXISTS {tables.qualified(label)}")

    cents = round(2.0**43 * 100) + 50 + 100
    assert set(checksums.values()) == {(101, sum(range(101)), cents)}, checksums
