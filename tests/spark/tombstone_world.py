"""A small DMS table for the tombstone tests (test_tombstones.py, test_tombstones_erase.py): its
changes, one batch loaded, and what the table and its side table hold."""

from __future__ import annotations

from datetime import datetime, timedelta

import pyarrow as pa

from lakeloader.engine import apply_batch, tombstones
from lakeloader.spark.inputs import list_inputs
from lakeloader.spark.session import CATALOG

T0 = datetime(2026, 11, 1, 8, 0, 0)
DMS = pa.schema(
    [("Op", pa.string()), ("id", pa.int64()), ("name", pa.string()), ("last_update_time", pa.timestamp("us"))]
)


def change(op: str, id_: int, name: str | None, minute: int) -> dict:
    return {"Op": op, "id": id_, "name": name, "last_update_time": T0 + timedelta(minutes=minute)}


def load(spark, table, raw):
    files = list_inputs(str(raw.root), table.source.prefix)
    return apply_batch(spark, table, files, catalog=CATALOG, run_id="run")


def target(table) -> str:
    return f"{CATALOG}.{table.target.database}.{table.target.table}"


def rows(spark, table) -> list[tuple]:
    return [tuple(r) for r in spark.sql(f"SELECT id, name FROM {target(table)} ORDER BY id").collect()]


def current(spark, table) -> list[tuple]:
    """SCD2: the current versions."""
    query = f"SELECT id, name FROM {target(table)} WHERE is_current ORDER BY id"
    return [tuple(r) for r in spark.sql(query).collect()]


def held_tombstones(spark, table) -> list[tuple]:
    name = f"{target(table)}{tombstones.SUFFIX}"
    return [tuple(r) for r in spark.sql(f"SELECT id, last_update_time FROM {name} ORDER BY 1, 2").collect()]
