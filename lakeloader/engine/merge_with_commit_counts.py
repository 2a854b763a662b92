"""`mode: merge` where Spark's MERGE reports its own row counts (Spark 4.1 with Iceberg 1.11, glue-6.0):
the latest change per key goes to the MERGE with its guards alone, and the batch's counts are read
from the snapshot it committed. No classification pass (merge_without_commit_counts): only the tombstones are
read beyond the batch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakeloader.config import TableConfig
from lakeloader.engine import commit_check, tombstones
from lakeloader.engine.merge_statement import merge_sql, run_merge
from lakeloader.engine.reconciliation import MERGE_COUNT_KEYS
from lakeloader.iceberg import committed_summary
from lakeloader.iceberg.commit import Destination
from lakeloader.spark.columns import OP, find_column
from lakeloader.spark.errors import LakeloaderError
from lakeloader.spark.progress import Progress
from lakeloader.spark.session import Metrics, release
from lakeloader.spark.sql import quote

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from lakeloader.engine.batch_result import BatchResult

LATE = "_ll_late"  # an insert or update that a tombstone buried


def write(
    spark: SparkSession,
    target: Destination,
    table: TableConfig,
    aligned: DataFrame,
    deleted: DataFrame,
    probe_keys: DataFrame,
    target_schema: StructType,
    seq: list[str],
    filled: dict[str, int],
    result: BatchResult,
    progress: Progress,
    key_values: dict[str, list[str]],
    bounds: dict[str, tuple] | None,
    *,
    small: bool,
    deletes: int,
) -> None:
    """`merge.write` where the MERGE counts its own rows (`merge.counts_in_commit`): no classification
    pass.

    The MERGE's guards decide every change on their own (`merge_sql(classified=False)`), and its
    commit's summary says how many rows it inserted, updated and deleted, so the table is never
    probed for them first: that probe is classification's whole cost on a large table
    (benchmarks/RESULTS.md). What still reads beyond the batch is the tombstones' side table, for
    the inserts and updates an earlier delete buried (late): the MERGE cannot see those. Every
    delete of the batch's latest changes records its tombstone before the MERGE, as
    merge_without_commit_counts does; without the probe, one older than the row the table holds is
    recorded too, and it buries only changes older than that row, which the guard skips anyway.
    """
    name = target.name
    keys = [find_column(target_schema.fieldNames(), k) for k in table.keys]
    source, late = aligned, 0
    checkpointed = False
    asked_observed: dict | None = None  # what the latest changes asked (reconciliation), observed
    if tombstones.enabled(table, seq):
        tomb = tombstones.lookup(
            spark,
            table,
            name,
            keys,
            seq,
            [aligned.schema[c].dataType for c in seq],
            probe_keys,
            key_values=key_values,
            bounds=bounds,
            small=small,
        )
        if deletes:
            progress("recording the batch's tombstones")
            tombstones.record(spark, table, name, deleted, keys, seq)
        if tomb is not None:
            joined = aligned.join(tomb.hint("merge") if small else tomb, on=keys, how="left")
            is_late = (F.col(OP) != "D") & tombstones.buried(joined.columns, [quote(c) for c in seq])
            observation = Metrics("late")
            flagged = observation.on(
                joined.withColumn(LATE, is_late),
                {"late": f"sum(CAST({quote(LATE)} AS BIGINT))"} | commit_check.asked_metrics(),
            )
            source = flagged.filter(~F.col(LATE)).select(*[F.col(quote(c)) for c in aligned.columns])
            source = source.localCheckpoint(eager=True)
            asked_observed = observation.values
            checkpointed, late = True, asked_observed["late"] or 0
    merge_observation = None
    if asked_observed is None:  # counted as the MERGE reads its source: no pass of its own
        merge_observation = Metrics("asked")
        source = merge_observation.on(source, commit_check.asked_metrics())
    columns = target_schema.fieldNames()
    try:
        run_merge(
            spark,
            target,
            source,
            progress,
            lambda v: merge_sql(name, v, columns, keys, seq, filled, key_values, classified=False),
        )
    finally:
        if checkpointed:
            release(source)
    summary = committed_summary(spark, name)
    if (
        any(summary.get(k) != v for k, v in target.summary.items())
        or not set(MERGE_COUNT_KEYS.values()) <= summary.keys()
    ):
        raise LakeloaderError(
            f"{name}: the snapshot this MERGE committed is not there with its row counts "
            f"(spark.merge-into.*), which Spark {spark.version} records"
        )
    result.inserted, result.updated, result.deleted = (
        int(summary[MERGE_COUNT_KEYS[a]]) for a in ("inserted", "updated", "deleted")
    )
    progress(
        f"{result.changes:,} change(s): {result.inserted:,} inserted, {result.updated:,} updated, "
        f"{result.deleted:,} deleted"
    )
    if late:
        result.notes.append(f"{late:,} late change(s) older than their key's delete ignored")
    if not (result.inserted or result.updated or result.deleted):
        result.notes.append("nothing newer than the table; the commit changed no row")
    if merge_observation is not None:
        asked_observed = commit_check.observed(merge_observation)
    asked = commit_check.asked_merge(asked_observed, changes=result.changes, late=late)
    commit_check.check_commit(spark, target, table, asked, result, progress, summary=summary)
