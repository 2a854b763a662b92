"""The Spark-free parts of `cdc: snapshot`'s diff (lakeloader.engine.full_copy): which columns make an
update, and what the changes count. The NULL-safe comparison itself: tests/spark/test_snapshot_diff.py."""

from __future__ import annotations

import re

import pytest
from pyspark.sql import types as T

from lakeloader.config import TableConfig
from lakeloader.engine.full_copy import FullCopyChanges, _held_key, _held_value, compared_columns
from lakeloader.spark.columns import FILE, OP, SEQ
from lakeloader.spark.errors import BadInputError


class Frame:
    """What compared_columns reads of a snapshot: its columns (the engine's meta columns among them)."""

    def __init__(self, *columns: str) -> None:
        self.columns = [OP, *columns, SEQ, f"{SEQ}_1", FILE]


TARGET = T.StructType(
    [T.StructField(c, T.StringType()) for c in ("ID", "Name", "city", "snap", "seq2", "kept_only_here")]
)


def table(**source) -> TableConfig:
    """A `cdc: snapshot` table given `source` settings, else (as `reconcile` compares any table) a DMS
    table ordered by two sequence columns."""
    spec = {"cdc": "snapshot", "snapshot_by": "snap", **source} if source else {"cdc": "dms"}
    return TableConfig.model_validate(
        {
            "id": "crm.people",
            "source": {"prefix": "crm/people/", "format": "parquet", **spec},
            "target": {"database": "crm", "table": "people"},
            "keys": ["id"],
            **({} if source else {"sequence_by": ["snap", "seq2"]}),
        }
    )


def test_by_default_every_data_column_the_table_holds_but_the_keys_and_sequence_columns_is_compared():
    """Source spelling, any case; a column only the snapshot holds is not compared (the table has
    nothing to compare it with), nor are the engine's meta columns."""
    snapshot = Frame("id", "name", "CITY", "Snap", "SEQ2", "only_in_snapshot")
    assert compared_columns(table(), snapshot, TARGET) == ["name", "CITY"]


def test_compare_columns_names_the_compared_ones_in_the_snapshots_spelling():
    snapshot = Frame("id", "name", "CITY", "snap", "seq2")
    assert compared_columns(table(compare_columns=["city"]), snapshot, TARGET) == ["CITY"]


def test_a_compare_columns_column_missing_from_the_snapshot_is_named():
    with pytest.raises(BadInputError) as error:
        compared_columns(table(compare_columns=["name", "phone"]), Frame("id", "name", "snap"), TARGET)
    assert "crm.people" in str(error.value) and "phone" in str(error.value)
    assert re.search(r"\ba compare_columns column is missing from the snapshot\b", str(error.value))


def test_the_changes_count_every_insert_update_and_delete():
    assert FullCopyChanges(rows=None, inserts=3, updates=5, deletes=7).count == 15


def test_the_held_columns_are_named_apart_per_position():
    names = [_held_key(i) for i in range(3)] + [_held_value(i) for i in range(3)]
    assert len(set(names)) == 6 and all(n.startswith("_ll_") for n in names)
