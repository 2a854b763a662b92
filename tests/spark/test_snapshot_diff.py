"""`cdc: snapshot`'s diff (lakeloader.engine.full_copy.as_changes) on small frames, no Iceberg table: which
keys become inserts, updates and deletes, NULLs included (the rule lives in a Spark expression)."""

from __future__ import annotations

from datetime import datetime

import pytest

from lakeloader.engine.full_copy import as_changes
from lakeloader.spark.columns import FILE, FILE_POS, OP, ROW_POS, SEQ

pytestmark = pytest.mark.spark

SNAP = datetime(2026, 11, 27)


def test_a_change_to_or_from_null_is_an_update_and_null_on_both_sides_is_unchanged(spark, make_table):
    """Compared NULL-safely: NULL -> value and value -> NULL are changed rows (U); NULL on both sides, or
    equal values, are unchanged (no change row); a key only the table holds is a delete, one only the
    snapshot holds an insert."""
    table = make_table(source={"cdc": "snapshot", "snapshot_by": "snap"})
    held = [  # id, name, city, snap: the table's rows
        (1, "a", None, SNAP),  # unchanged: NULL city on both sides
        (2, "b", None, SNAP),  # city NULL -> value
        (3, "c", "oslo", SNAP),  # city value -> NULL
        (4, None, None, SNAP),  # unchanged: every value NULL on both sides
        (5, "e", "rome", SNAP),  # only the table holds it
        (7, "g", "kyiv", SNAP),  # unchanged values
    ]
    spark.createDataFrame(held, "id long, name string, city string, snap timestamp").createOrReplaceTempView(
        "snapshot_diff_held"
    )
    given = [
        (1, "a", None),
        (2, "b", "lima"),
        (3, "c", None),
        (4, None, None),
        (6, "f", None),
        (7, "g", "kyiv"),
    ]
    snapshot = spark.createDataFrame(
        [("I", *row, SNAP, SNAP, "snap/part-0.parquet", 0, n) for n, row in enumerate(given)],
        f"{OP} string, id long, name string, city string, snap timestamp, {SEQ} timestamp, {FILE} string, "
        f"{FILE_POS} int, {ROW_POS} int",
    )

    found = as_changes(spark, "snapshot_diff_held", table, snapshot, spark.table("snapshot_diff_held").schema)

    ops = {r["id"]: r[OP] for r in found.rows.collect()}
    assert ops == {2: "U", 3: "U", 5: "D", 6: "I"}
    assert (found.inserts, found.updates, found.deletes) == (1, 2, 1)
