"""Which rows `lakeloader reconcile --repair` writes (lakeloader.engine.repair.written_counts): every
missing and different key, and the extra keys' deletes unless the table keeps what its source deletes;
and the repair's other Spark-free parts: how the export is read, what a comparison counts and notes."""

from __future__ import annotations

import pytest
from pyspark.sql import types as T

from lakeloader.config import TableConfig
from lakeloader.engine.full_copy import FullCopyChanges
from lakeloader.engine.repair import Comparison, _uncompared, reading_config, written_counts
from lakeloader.spark.columns import OP, SEQ

COUNTS = {"missing": 3, "extra": 2, "different": 1}


def table(**source) -> TableConfig:
    return TableConfig.model_validate(
        {
            "id": "shop.orders",
            "source": {"prefix": "src/", "format": "parquet", "cdc": "snapshot", **source},
            "target": {"database": "shop", "table": "orders"},
            "keys": ["id"],
        }
    )


@pytest.mark.parametrize("source", [{}, {"deletes": "delete"}], ids=["default", "deletes: delete"])
def test_a_repair_writes_every_missing_extra_and_different_key(source):
    assert written_counts(table(**source), COUNTS) == COUNTS


def test_a_repair_of_a_table_that_ignores_deletes_writes_no_delete():
    assert written_counts(table(deletes="ignore"), COUNTS) == {"missing": 3, "different": 1}


def test_a_comparisons_counts_name_each_kind_of_difference():
    """missing keys are the diff's inserts, extra keys its deletes, different keys its updates."""
    changes = FullCopyChanges(rows=None, inserts=3, updates=1, deletes=2)
    comparison = Comparison("glue_catalog.shop.orders", T.StructType([]), 10, 9, [], changes, None)
    assert comparison.counts == COUNTS and comparison.notes == []


def test_a_snapshot_tables_export_is_read_as_plain_rows_and_any_other_table_as_its_own_files():
    snapshot = table()
    read = reading_config(snapshot)
    assert read.source.cdc == "none" and snapshot.source.cdc == "snapshot"
    assert read.source.model_dump(exclude={"cdc"}) == snapshot.source.model_dump(exclude={"cdc"})
    dms = TableConfig.model_validate(
        {
            "id": "shop.lines",
            "source": {"prefix": "src/", "format": "parquet", "cdc": "dms"},
            "target": {"database": "shop", "table": "lines"},
            "keys": ["id"],
        }
    )
    assert reading_config(dms) is dms


class Frame:
    def __init__(self, *columns: str) -> None:
        self.columns = [OP, *columns, SEQ]


def test_columns_only_one_side_holds_are_named_as_not_compared():
    """Keys, sequence columns and SCD2's own columns are never 'not compared'; the rest of each side's
    columns the other lacks are named, in the side's order and spelling."""
    target = T.StructType([T.StructField(c, T.StringType()) for c in ("ID", "name", "legacy", "old_code")])
    rows = Frame("id", "Name", "lakeloader_snapshot", "phone", "email")
    assert _uncompared(table(), rows, target) == [
        "not compared, only the snapshot holds them: phone, email",
        "not compared, only the table holds them: legacy, old_code",
    ]
    assert _uncompared(table(), Frame("id", "name", "legacy", "old_code"), target) == []
