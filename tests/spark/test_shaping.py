"""Columns kept or dropped at read, and soft deletes (delete_when), on real Iceberg tables."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakeloader.spark.errors import BadInputError
from tests.spark.merge_batches import at, load, rows

pytestmark = pytest.mark.spark

WIDE = pa.schema(
    [
        ("Op", pa.string()),
        ("id", pa.int64()),
        ("name", pa.string()),
        ("ssn", pa.string()),
        ("is_deleted", pa.bool_()),
        ("last_update_time", pa.timestamp("us")),
    ]
)


def wide(op: str, id_: int, name: str, minute: int, *, deleted: bool = False) -> dict:
    return {
        "Op": op,
        "id": id_,
        "name": name,
        "ssn": f"000-00-{id_:04d}",
        "is_deleted": deleted,
        "last_update_time": at(minute),
    }


def columns_of(spark, table) -> list[str]:
    return spark.table(f"{table.target.database}.{table.target.table}").columns


@pytest.mark.slow
def test_an_excluded_column_never_reaches_the_table(spark, raw, make_table):
    table = make_table(columns={"exclude": ["SSN"]})  # matched case-insensitively, like every name
    raw.write_parquet("src/0001.parquet", [wide("I", 1, "a", 1)], WIDE)
    load(spark, table, raw)
    assert "ssn" not in columns_of(spark, table)  # not even when the table was created
    raw.write_parquet("src/0002.parquet", [wide("U", 1, "b", 2)], WIDE)
    load(spark, table, raw)
    assert "ssn" not in columns_of(spark, table) and rows(spark, table) == [(1, "b")]


def test_include_keeps_the_listed_columns_and_what_the_merge_needs(spark, raw, make_table):
    table = make_table(columns={"include": ["name"]})
    raw.write_parquet("src/0001.parquet", [wide("I", 1, "a", 1)], WIDE)
    load(spark, table, raw)
    assert sorted(columns_of(spark, table)) == ["id", "last_update_time", "name"]


@pytest.mark.slow
def test_delete_when_turns_soft_deletes_into_deletes_with_a_tombstone(spark, raw, make_table):
    table = make_table(delete_when="is_deleted = true")
    raw.write_parquet("src/0001.parquet", [wide("I", 1, "a", 1), wide("I", 2, "b", 1)], WIDE)
    load(spark, table, raw)
    raw.write_parquet("src/0002.parquet", [wide("U", 2, "b", 5, deleted=True)], WIDE)
    result = load(spark, table, raw)
    assert result.deleted == 1 and rows(spark, table) == [(1, "a")]
    # an older change arriving late stays deleted: the soft delete left a tombstone
    raw.write_parquet("src/0003.parquet", [wide("U", 2, "late", 3)], WIDE)
    load(spark, table, raw)
    assert rows(spark, table) == [(1, "a")]


def test_a_delete_when_on_an_unknown_column_names_the_table_and_setting(spark, raw, make_table):
    table = make_table(delete_when="removed_flag = 'Y'")
    raw.write_parquet("src/0001.parquet", [wide("I", 1, "a", 1)], WIDE)
    with pytest.raises(BadInputError, match="delete_when \"removed_flag = 'Y'\" cannot be evaluated"):
        load(spark, table, raw)
