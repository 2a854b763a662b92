"""The batch's tombstones (lakeloader.engine.latest.deletes): found from the deleted keys' changes alone
(a large batch on Spark 4.1) or from every key's latest change, the same rows."""

from __future__ import annotations

import pytest

from lakeloader.engine import cdc, latest
from lakeloader.spark.columns import find_column
from lakeloader.spark.inputs import list_inputs
from tests.spark.merge_batches import DMS, at, change, load

pytestmark = pytest.mark.spark


def test_the_deletes_among_the_latest_changes_are_the_same_from_the_deleted_keys_alone(
    spark, raw, make_table
):
    """Key 1 deleted then re-inserted leaves no tombstone; key 2 updated then deleted, key 3 deleted
    twice (the later delete) and key 9, which the table does not hold, leave one; key 4, never
    deleted, none."""
    table = make_table()
    raw.write_parquet("src/20261101-0800.parquet", [change("I", i, "a", 0) for i in range(1, 5)], DMS)
    load(spark, table, raw)
    batch = [
        *(change("D", 1, None, 10), change("I", 1, "b", 20)),
        *(change("U", 2, "b", 10), change("D", 2, None, 20)),
        *(change("D", 3, None, 30), change("D", 3, None, 10)),
        change("U", 4, "b", 10),
        change("D", 9, None, 10),
    ]
    raw.write_parquet("src/20261101-0900.parquet", batch, DMS)
    files = [f for f in list_inputs(str(raw.root), "src/") if f.name.endswith("0900.parquet")]
    changes = cdc.read_changes(spark, table, files).rows
    target_schema = spark.table(f"{table.target.database}.{table.target.table}").schema
    seq = [c for s in table.sequence_columns if (c := find_column(target_schema.fieldNames(), s))]
    aligned, _ = latest.aligned(changes, table, target_schema, seq)

    def tombstones(*, from_deleted_keys: bool) -> list[tuple]:
        found = latest.deletes(
            changes, aligned, table, target_schema, seq, from_deleted_keys=from_deleted_keys
        )
        return sorted(tuple(r) for r in found.select("id", *seq).collect())

    expected = [(2, at(20)), (3, at(30)), (9, at(10))]
    assert tombstones(from_deleted_keys=True) == tombstones(from_deleted_keys=False) == expected
