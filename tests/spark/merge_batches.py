"""Small hand-made DMS batches and how the merge tests load and read them (shared by test_merge*.py)."""

from __future__ import annotations

from datetime import datetime

import pyarrow as pa

from lakeloader.engine import apply_batch, merge
from lakeloader.spark.inputs import list_inputs
from lakeloader.spark.session import CATALOG

T0 = datetime(2026, 11, 1, 8, 0, 0)


def at(minute: int) -> datetime:
    return T0.replace(minute=minute)


DMS = pa.schema(
    [("Op", pa.string()), ("id", pa.int64()), ("name", pa.string()), ("last_update_time", pa.timestamp("us"))]
)
FULL = pa.schema([("id", pa.int64()), ("name", pa.string()), ("last_update_time", pa.timestamp("us"))])


def change(op: str, id_: int, name: str | None, minute: int) -> dict:
    return {"Op": op, "id": id_, "name": name, "last_update_time": at(minute)}


def load(spark, table, raw, run_id: str = "run"):
    files = list_inputs(str(raw.root), table.source.prefix)
    return apply_batch(spark, table, files, catalog=CATALOG, run_id=run_id)


def rows(spark, table, columns: str = "id, name") -> list[tuple]:
    name = f"{CATALOG}.{table.target.database}.{table.target.table}"
    return [tuple(r) for r in spark.sql(f"SELECT {columns} FROM {name} ORDER BY 1, 2").collect()]


def snapshots(spark, table) -> int:
    name = f"{CATALOG}.{table.target.database}.{table.target.table}"
    return spark.sql(f"SELECT * FROM {name}.snapshots").count()


def unchanged_since(spark, table, before: int) -> bool:
    """The table's snapshots since `before` (a `snapshots` count) changed no file. Where Spark counts a
    MERGE itself (Spark 4.1+, merge.counts_in_commit) no probe finds a batch that changes nothing before
    its MERGE: that batch commits one empty snapshot; elsewhere it commits none."""
    name = f"{CATALOG}.{table.target.database}.{table.target.table}"
    added = spark.sql(f"SELECT summary FROM {name}.snapshots ORDER BY committed_at").collect()[before:]
    files = ("added-data-files", "added-delete-files", "deleted-data-files", "removed-delete-files")
    empty = all(int(s.summary.get(f, 0)) == 0 for s in added for f in files)
    return empty and len(added) == int(merge.counts_in_commit(spark))


# DMS with the AR_H_CHANGE_SEQ header column: a zero-padded change number, monotonic at the source.
DMS_SEQ = DMS.append(pa.field("AR_H_CHANGE_SEQ", pa.string()))


def seq_change(op: str, id_: int, name: str | None, minute: int, change_no: int | None) -> dict:
    number = None if change_no is None else f"2026110108000000{change_no:019d}"
    return {**change(op, id_, name, minute), "AR_H_CHANGE_SEQ": number}
