"""`mode: merge`: the latest change per key, applied to the rows the table holds in one MERGE INTO.
The rules:

* the latest change per key wins (the sequence tuple, then file, then row order);
* a change is applied only when its sequence tuple is newer than the row the table
  holds (lakeloader.engine.sequence: NULL is the oldest, an equal tuple is the same change):
  late and replayed files change nothing;
* a delete leaves a tombstone (lakeloader.engine.tombstones; unless the table turns them off), also
  for a key the table does not hold; an insert or update not newer than the key's tombstone is late
  and ignored;
* an update that leaves columns out keeps their values (lakeloader.engine.partial);
* a re-delivered full-load row updates.

How a batch is written depends on whether Spark's MERGE counts its own rows (`counts_in_commit`):
lakeloader.engine.merge_without_commit_counts classifies each change against the table first (Spark 3.5);
lakeloader.engine.merge_with_commit_counts reads the counts from the MERGE's commit (Spark 4.1). Both end in
the one MERGE of lakeloader.engine.merge_statement.

Skipping the files an earlier commit consumed, the schema and the commit are every mode's:
lakeloader.engine.batch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession

from lakeloader.config import TableConfig
from lakeloader.engine import cdc, latest, merge_with_commit_counts, merge_without_commit_counts
from lakeloader.iceberg.commit import Destination
from lakeloader.spark.columns import find_column
from lakeloader.spark.progress import Progress

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from lakeloader.engine.batch_result import BatchResult


def counts_in_commit(spark: SparkSession) -> bool:
    """Whether this session's MERGE records its own row counts in its commit (Spark 4.1 and later,
    with Iceberg 1.11: lakeloader.control.runtimes.Runtime.merge_reports_counts)."""
    major, minor = (int(part) for part in spark.version.split(".")[:2])
    return (major, minor) >= (4, 1)


def write(
    spark: SparkSession,
    target: Destination,
    table: TableConfig,
    changes: DataFrame,
    target_schema: StructType,
    seq: list[str],
    result: BatchResult,
    progress: Progress,
    key_values: dict[str, list[str]],
    bounds: dict[str, tuple] | None = None,
    target_rows: int = 0,
    key_rows: int = 0,
    deletes: int = 0,
) -> None:
    """The batch's latest change per key, its tombstones recorded, then the one MERGE.
    `target_rows`: how many rows the table holds (its snapshot summary); `key_rows`: how many rows
    `changes` holds (more than the batch read when a truncate made deletes of the table's keys);
    `deletes`: how many of them are deletes."""
    small = cdc.is_small(changes)
    aligned, filled = latest.aligned(changes, table, target_schema, seq)
    probe_keys = changes.select(*[find_column(changes.columns, k) for k in table.keys])
    if not counts_in_commit(spark):
        merge_without_commit_counts.write(
            spark,
            target,
            table,
            aligned,
            filled,
            probe_keys,
            target_schema,
            seq,
            result,
            progress,
            key_values,
            bounds,
            small=small,
            target_rows=target_rows,
            key_rows=key_rows,
            deletes=deletes,
        )
        return
    apart = not small and deletes <= cdc.BROADCAST_KEYS_MAX  # a small batch's latest changes cost little
    deleted = latest.deletes(changes, aligned, table, target_schema, seq, from_deleted_keys=apart)
    merge_with_commit_counts.write(
        spark,
        target,
        table,
        aligned,
        deleted,
        probe_keys,
        target_schema,
        seq,
        filled,
        result,
        progress,
        key_values,
        bounds,
        small=small,
        deletes=deletes,
    )
