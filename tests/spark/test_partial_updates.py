"""Partial updates: a column an update leaves out (Debezium's placeholder, DMS's NULL LOB) keeps its value."""

from __future__ import annotations

from datetime import datetime, timedelta

import pyarrow as pa
import pytest

from lakeloader.engine import apply_batch
from lakeloader.formats.debezium import Debezium
from lakeloader.spark.inputs import list_inputs
from lakeloader.spark.session import CATALOG

pytestmark = pytest.mark.spark

KEEP = Debezium.placeholder
DEBEZIUM = pa.schema(
    [
        ("__op", pa.string()),
        ("__source_ts_ms", pa.int64()),
        ("__deleted", pa.string()),
        ("id", pa.int64()),
        ("name", pa.string()),
        ("body", pa.string()),
    ]
)
T0 = datetime(2026, 11, 1, 8, 0, 0)
DMS = pa.schema(
    [
        ("Op", pa.string()),
        ("id", pa.int64()),
        ("name", pa.string()),
        ("body", pa.string()),
        ("last_update_time", pa.timestamp("us")),
    ]
)


def dbz(op: str, id_: int, name: str | None, body: str | None, ts: int) -> dict:
    deleted = "true" if op == "d" else "false"
    return {"__op": op, "__source_ts_ms": ts, "__deleted": deleted, "id": id_, "name": name, "body": body}


def dms(op: str, id_: int, name: str | None, body: str | None, minute: int) -> dict:
    at = T0 + timedelta(minutes=minute)
    return {"Op": op, "id": id_, "name": name, "body": body, "last_update_time": at}


def debezium_table(make_table, mode: str, **partial):
    return make_table(
        source={"prefix": "src/", "format": "parquet", "cdc": "debezium"}, mode=mode, partial_updates=partial
    )


def load(spark, table, raw):
    files = list_inputs(str(raw.root), table.source.prefix)
    return apply_batch(spark, table, files, catalog=CATALOG, run_id="run")


def rows(spark, table, where: str = "") -> list[tuple]:
    name = f"{CATALOG}.{table.target.database}.{table.target.table}"
    query = f"SELECT id, name, body FROM {name} {where} ORDER BY id"
    return [tuple(r) for r in spark.sql(query).collect()]


def live(spark, table) -> list[tuple]:
    return rows(spark, table, "WHERE is_current" if table.mode == "scd2" else "")


@pytest.fixture(params=["merge", "scd2"])
def mode(request) -> str:
    return request.param


@pytest.mark.slow
def test_debezium_placeholder_keeps_the_current_value(spark, raw, make_table, mode):
    table = debezium_table(make_table, mode)  # placeholder: Debezium's by default
    first = [dbz("c", 1, "a", "long text", 1), dbz("c", 2, "b", "x", 1)]
    raw.write_parquet("src/0001.parquet", first, DEBEZIUM)
    load(spark, table, raw)
    raw.write_parquet("src/0002.parquet", [dbz("u", 1, "a2", KEEP, 2), dbz("u", 2, "b2", "y", 2)], DEBEZIUM)
    load(spark, table, raw)
    assert live(spark, table) == [(1, "a2", "long text"), (2, "b2", "y")]


@pytest.mark.slow
def test_dms_null_lob_is_kept_only_in_the_chosen_columns(spark, raw, make_table, mode):
    table = make_table(mode=mode, partial_updates={"columns": ["body"], "ignore_nulls": True})
    raw.write_parquet("src/0001.parquet", [dms("I", 1, "a", "lob", 1)], DMS)
    load(spark, table, raw)
    raw.write_parquet("src/0002.parquet", [dms("U", 1, None, None, 2)], DMS)
    load(spark, table, raw)
    assert live(spark, table) == [(1, None, "lob")]  # name is not a partial column: NULL is NULL


@pytest.mark.slow
def test_within_batch_chain_takes_the_last_real_value_in_sequence_order(spark, raw, make_table, mode):
    table = debezium_table(make_table, mode)
    start = [dbz("c", k, f"n{k}", f"v0-{k}", 1) for k in (1, 2, 3, 4)]
    raw.write_parquet("src/0001.parquet", start, DEBEZIUM)
    load(spark, table, raw)
    # the newest file name holds the OLDER changes: sequence order, not file order, decides
    raw.write_parquet(
        "src/0002.parquet",
        [
            dbz("u", 1, "n1c", KEEP, 4),  # after a real value in this batch
            dbz("u", 2, "n2c", KEEP, 4),  # no real value in the batch: the table's
            dbz("u", 3, "n3c", KEEP, 5),  # delete, insert, placeholder: the insert's
            dbz("u", 4, "n4c", KEEP, 4),  # delete then placeholder: nothing to keep
        ],
        DEBEZIUM,
    )
    raw.write_parquet(
        "src/0003.parquet",
        [
            dbz("u", 1, "n1b", "v1-1", 3),
            dbz("u", 2, "n2b", KEEP, 3),
            dbz("d", 3, "n3", KEEP, 2),
            dbz("c", 3, "n3b", "v1-3", 3),
            dbz("d", 4, "n4", KEEP, 2),
        ],
        DEBEZIUM,
    )
    load(spark, table, raw)
    assert live(spark, table) == [
        (1, "n1c", "v1-1"),
        (2, "n2c", "v0-2"),
        (3, "n3c", "v1-3"),
        (4, "n4c", None),
    ]


@pytest.mark.slow
def test_a_value_older_than_the_row_held_does_not_replace_it(spark, raw, make_table):
    table = debezium_table(make_table, "merge")
    raw.write_parquet("src/0001.parquet", [dbz("c", 1, "a", "v0", 1)], DEBEZIUM)
    load(spark, table, raw)
    raw.write_parquet("src/0002.parquet", [dbz("u", 1, "a", "held", 10)], DEBEZIUM)
    load(spark, table, raw)
    # a late change (older than the row held) and a newer one that leaves body out
    late_and_new = [dbz("u", 1, "a", "stale", 5), dbz("u", 1, "b", KEEP, 12)]
    raw.write_parquet("src/0003.parquet", late_and_new, DEBEZIUM)
    load(spark, table, raw)
    assert live(spark, table) == [(1, "b", "held")]


@pytest.mark.slow
def test_scd2_opens_no_version_for_an_update_that_changes_nothing_it_carries(spark, raw, make_table):
    table = debezium_table(make_table, "scd2")
    raw.write_parquet("src/0001.parquet", [dbz("c", 1, "a", "long", 1)], DEBEZIUM)
    load(spark, table, raw)
    raw.write_parquet("src/0002.parquet", [dbz("u", 1, "a", KEEP, 2)], DEBEZIUM)
    result = load(spark, table, raw)
    assert result.inserted == 0
    assert rows(spark, table) == [(1, "a", "long")]  # still one version
