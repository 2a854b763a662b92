"""The table's mode writes a batch to a destination: merge (lakeloader.engine.merge), scd2
(lakeloader.engine.scd2), or append and overwrite here.

What a mode needs is fixed before the first attempt (`WritePlan`), so the quality gate calls the
mode itself, once per attempt and again for a batch less its quarantined rows, and no closure of
the batch's is passed down to be called back."""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from lakeloader.config import TableConfig
from lakeloader.engine import cdc, merge, scd2, schema
from lakeloader.engine.batch_result import BatchResult
from lakeloader.iceberg.commit import Destination
from lakeloader.spark.columns import OP
from lakeloader.spark.progress import Progress


@dataclass
class WritePlan:
    """What the table's mode writes a batch with, besides the batch and its destination.

    `key_values`: SQL literals of the batch's key values (target spelling), listed when worth it;
    `bounds`: where a tombstone must lie to bury a change of the batch (engine.tombstones);
    `target_rows`: the rows the table holds; `key_rows`: the rows of the batch's keys that
    classification probes the table with; `deletes`: how many of the batch's changes are deletes.
    `result` receives the counts."""

    spark: SparkSession
    table: TableConfig
    target_schema: StructType
    seq: list[str]  # the sequence columns the table holds, in tuple order
    result: BatchResult
    progress: Progress
    key_values: dict[str, list[str]] = field(default_factory=dict)
    bounds: dict[str, tuple] = field(default_factory=dict)
    target_rows: int = 0
    key_rows: int = 0
    deletes: int = 0


def write(target: Destination, batch: DataFrame, plan: WritePlan) -> None:
    """Write `batch` (the normalised change rows) to `target` as the table's mode says, inside
    `target.committing()`."""
    spark, table, result, progress = plan.spark, plan.table, plan.result, plan.progress
    if table.mode == "merge":
        merge.write(
            spark,
            target,
            table,
            batch,
            plan.target_schema,
            plan.seq,
            result,
            progress,
            plan.key_values,
            plan.bounds,
            target_rows=plan.target_rows,
            key_rows=plan.key_rows,
            deletes=plan.deletes,
        )
    elif table.mode == "scd2":
        scd2.write(spark, target, table, batch, plan.target_schema, result, progress)
    else:
        _append_or_overwrite(target, table, batch, plan.target_schema, result)


def _append_or_overwrite(
    target: Destination,
    table: TableConfig,
    changes: DataFrame,
    target_schema: StructType,
    result: BatchResult,
) -> None:
    """`append` adds every change row; `overwrite` replaces the table with the batch's latest rows."""
    rows = changes
    if table.mode == "overwrite":
        if table.keys:
            rows = cdc.latest_per_key(rows, table.keys)
        rows = rows.filter(F.col(OP) != "D")
    aligned = schema.align(rows, target_schema, extra=[])
    if table.mode == "append":
        with target.committing():
            aligned.writeTo(target.name).append()
        result.inserted = result.changes
    else:
        with target.committing():
            aligned.writeTo(target.name).overwrite(F.lit(True))
        result.inserted = aligned.count()
