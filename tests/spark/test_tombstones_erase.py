"""Erasing a subject takes its tombstones too, from every snapshot of the side table: erased means
forgotten (lakeloader.jobs.erase over a table with tombstones)."""

from __future__ import annotations

import pytest

from lakeloader.engine import apply_batch, tombstones
from lakeloader.spark.inputs import list_inputs
from lakeloader.spark.session import CATALOG
from tests.spark.tombstone_world import DMS, change, held_tombstones, load, rows, target

pytestmark = pytest.mark.spark


@pytest.mark.slow
@pytest.mark.parametrize("how", ["key", "where"])
def test_erase_removes_the_subjects_tombstones_from_all_history(spark, raw, make_table, how):
    from lakeloader.jobs.erase import erase

    table = make_table()
    raw.write_parquet("src/20261101-0800.parquet", [change("I", 1, "ann", 0), change("I", 2, "bob", 0)], DMS)
    load(spark, table, raw)
    raw.write_parquet("src/20261101-0900.parquet", [change("D", 1, None, 60), change("D", 2, None, 60)], DMS)
    load(spark, table, raw)
    raw.write_parquet("src/20261101-0901.parquet", [change("I", 3, "cy", 61)], DMS)
    load(spark, table, raw)
    assert [k for k, _ in held_tombstones(spark, table)] == [1, 2]
    if how == "key":
        result = erase(spark, table, catalog=CATALOG, keys=["1"], who="tester")
    else:  # names only the key: applies to the tombstones as written
        result = erase(spark, table, catalog=CATALOG, where="id = 1", who="tester")
    assert result.verified and result.tombstones_erased == 1
    assert [k for k, _ in held_tombstones(spark, table)] == [2]
    side = f"{target(table)}{tombstones.SUFFIX}"
    for (snapshot,) in spark.sql(f"SELECT snapshot_id FROM {side}.snapshots").collect():
        assert spark.sql(f"SELECT * FROM {side} VERSION AS OF {snapshot} WHERE id = 1").count() == 0
    # erased means forgotten: a late insert of the subject's key is loaded again like any new key
    # (only the new file: the expired snapshots no longer record the older ones as loaded)
    raw.write_parquet("src/20261101-0902.parquet", [change("I", 1, "ann-again", 30)], DMS)
    files = [f for f in list_inputs(str(raw.root), table.source.prefix) if f.name.endswith("0902.parquet")]
    apply_batch(spark, table, files, catalog=CATALOG, run_id="after-erasure")
    assert rows(spark, table) == [(1, "ann-again"), (3, "cy")]


@pytest.mark.slow
def test_erase_by_a_where_on_other_columns_finds_the_keys_through_the_rows(spark, raw, make_table):
    from lakeloader.jobs.erase import erase

    table = make_table()
    raw.write_parquet("src/20261101-0800.parquet", [change("I", 1, "ann", 0), change("D", 7, None, 0)], DMS)
    load(spark, table, raw)
    raw.write_parquet("src/20261101-0900.parquet", [change("D", 1, None, 60)], DMS)
    load(spark, table, raw)
    raw.write_parquet("src/20261101-0901.parquet", [change("I", 1, "ann", 61)], DMS)
    load(spark, table, raw)  # ann is back, her tombstone stays
    assert [k for k, _ in held_tombstones(spark, table)] == [1, 7]
    result = erase(spark, table, catalog=CATALOG, where="name = 'ann'", who="tester")
    assert result.verified and result.tombstones_erased == 1
    assert [k for k, _ in held_tombstones(spark, table)] == [7]
