"""`columns: include` with updates and deletes, not inserts alone: the format's operation columns are
kept at read although the list does not name them, so a U updates and a D deletes (DMS and flattened
Debezium), and the columns left out never reach the table."""

from __future__ import annotations

import json

import pytest

from tests.spark.merge_batches import DMS, change, load, rows
from tests.spark.test_shaping import WIDE, columns_of, wide

pytestmark = pytest.mark.spark


@pytest.mark.slow
def test_dms_updates_and_deletes_apply_with_an_include_list(spark, raw, make_table):
    table = make_table(columns={"include": ["name"]})
    raw.write_parquet(
        "src/0001.parquet", [wide("I", 1, "a", 1), wide("I", 2, "b", 1), wide("I", 3, "c", 1)], WIDE
    )
    load(spark, table, raw)
    raw.write_parquet("src/0002.parquet", [wide("U", 1, "a2", 2), wide("D", 2, "b", 2)], WIDE)

    result = load(spark, table, raw)

    assert (result.inserted, result.updated, result.deleted) == (0, 1, 1)
    assert rows(spark, table) == [(1, "a2"), (3, "c")]
    assert sorted(columns_of(spark, table)) == ["id", "last_update_time", "name"]
    raw.write_parquet("src/0003.parquet", [change("U", 3, "c3", 3)], DMS)  # a narrower file: same rules
    load(spark, table, raw)
    assert rows(spark, table) == [(1, "a2"), (3, "c3")]


@pytest.mark.slow
def test_debezium_updates_and_deletes_apply_with_an_include_list(spark, raw, make_table):
    table = make_table(
        source={"format": "json", "cdc": "debezium"}, keys=["id"], columns={"include": ["name"]}
    )

    def event(op: str, id_: int, name: str, ts: int, deleted: bool = False) -> str:
        row = {"id": id_, "name": name, "secret": "x", "__op": op, "__source_ts_ms": ts, "__deleted": deleted}
        return json.dumps(row) + "\n"

    raw.write_text("src/0001.json", event("c", 1, "a", 1) + event("c", 2, "b", 1))
    load(spark, table, raw)
    raw.write_text("src/0002.json", event("u", 1, "a2", 2) + event("d", 2, "b", 2, deleted=True))

    result = load(spark, table, raw)

    assert (result.updated, result.deleted) == (1, 1)
    assert rows(spark, table) == [(1, "a2")]
    assert "secret" not in columns_of(spark, table) and "__op" not in columns_of(spark, table)
