"""`mode: merge` where Spark's MERGE reports no row counts (Spark 3.5, glue-5.1): each latest change
per key is classified against the rows the table holds and its key's tombstone first. The
classification is what the batch reports (inserted, updated, deleted, late), what records its
tombstones, and what the MERGE is given: only the changes that apply (benchmarks/RESULTS.md: the
probe is this path's largest fixed cost, which merge_with_commit_counts has no need of)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakeloader.config import TableConfig
from lakeloader.engine import cdc, commit_check, tombstones
from lakeloader.engine.merge_statement import ACTION, merge_sql, run_merge
from lakeloader.engine.sequence import newer_sql
from lakeloader.iceberg.commit import Destination
from lakeloader.spark.columns import OP, find_column
from lakeloader.spark.progress import Progress
from lakeloader.spark.session import Metrics, release
from lakeloader.spark.sql import count_equal, in_lists, quote

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from lakeloader.engine.batch_result import BatchResult

ACTIONS = ("insert", "update", "delete", "tombstone", "late")  # what classify tags, less "skip"
# Up to this many rows, a small batch's matches in the table are read in classification's own task,
# not broadcast by a job of their own. 1k changes into 4M rows took 1.43 s that way against 1.58 s;
# into 16M rows 2.32 s against 2.17 s, the one task's scan costing more than the job saves
# (benchmarks/RESULTS.md).
ONE_TASK_TARGET_ROWS = 4_000_000


def classify(
    spark: SparkSession,
    name: str,
    batch: DataFrame,
    table: TableConfig,
    seq: list[str],
    *,
    small: bool = False,
    small_target: bool = False,
    key_values: dict[str, list[str]] | None = None,
    bounds: dict[str, tuple] | None = None,
    probe_keys: DataFrame,
    broadcast_keys: bool = False,
    ahead: tombstones.Ahead | None = None,
) -> DataFrame:
    """Tag each latest change with the action it takes on the target: insert, update, delete or skip.

    `seq`: the sequence columns the table holds, in tuple order (empty: every change is newer).
    `small`: the batch is one partition (cdc.is_small); its matches are broadcast back onto it, or,
    `small_target` (the table holds at most ONE_TASK_TARGET_ROWS rows), read in the same one task.
    `key_values`: SQL literals of every value a key column (target spelling) takes in the batch
    (cdc.Changes), so the target is filtered by them instead of probed with a join (one job less).
    `bounds`: each column's (lowest, highest) value, None for no limit, a tombstone must hold to bury
    a change of the batch, so they are not probed when none can (tombstones.lookup).
    `probe_keys`: the key columns (in table.keys order) of every change, the batch's before it was
    reduced to the latest per key, so the probe does not compute that reduction a second time.
    `broadcast_keys`: broadcast them to the table's scan, whatever Spark estimates.
    `ahead`: the batch's own tombstones are being appended meanwhile (tombstones.Ahead).
    """
    keys = [find_column(batch.columns, k) for k in table.keys]
    target_cols = [F.col(k).alias(f"_ll_t_{i}") for i, k in enumerate(keys)]
    target_cols.append(F.lit(True).alias("_ll_exists"))
    held = [f"_ll_tseq_{i}" for i in range(len(seq))]
    target_cols.extend(F.col(c).alias(h) for c, h in zip(seq, held, strict=True))
    target = spark.table(name).select(*target_cols)
    # Find the batch's keys in the target without shuffling the table (benchmarks/RESULTS.md): a small
    # batch's key values filter the target scan; otherwise a semi-join with the key set, broadcast
    # up to cdc.BROADCAST_KEYS_MAX, streams the scan. Only the few matches are joined back onto the batch.
    listed = {f"_ll_t_{i}": key_values[k] for i, k in enumerate(keys) if k in (key_values or {})}
    probe = probe_keys.toDF(*[f"_ll_k_{i}" for i in range(len(keys))])
    if broadcast_keys:
        probe = F.broadcast(probe)
    if listed:
        # One SQL expression, not Column.isin: that makes one py4j call per value.
        matched = target.filter(in_lists(listed))
    else:
        probe_on = [F.col(f"_ll_t_{i}") == F.col(f"_ll_k_{i}") for i in range(len(keys))]
        matched = target.join(probe, on=probe_on, how="left_semi")
    condition = [F.col(k) == F.col(f"_ll_t_{i}") for i, k in enumerate(keys)]
    if small and small_target:
        # Both one partition: the sort-merge join of the two needs no shuffle and runs inside
        # classification's own job (a broadcast is a job more).
        matched = matched.coalesce(1).hint("merge")
    elif small:
        matched = F.broadcast(matched)
    joined = batch.join(matched, on=condition, how="left")
    # The newest tombstone of each key that has one, probed with the batch's keys (a join of its own;
    # with the same `probe` as the target's, so Spark broadcasts the key set once for both).
    seq_types = [batch.schema[c].dataType for c in seq]
    tomb = tombstones.lookup(
        spark,
        table,
        name,
        keys,
        seq,
        seq_types,
        probe,
        key_values=key_values,
        bounds=bounds,
        small=small,
        ahead=ahead,
    )
    if tomb is not None:
        # A small batch and its few tombstones are one partition each: a sort-merge join of the two
        # needs no shuffle and runs inside classification's own job; a broadcast would be a job more.
        joined = joined.join(tomb.hint("merge") if small else tomb, on=keys, how="left").select(
            *[F.col(quote(c)) for c in joined.columns], F.col(tombstones.TOMB)
        )
    newer = F.expr(newer_sql([quote(h) for h in held], [quote(c) for c in seq])) if seq else F.lit(True)
    exists = F.col("_ll_exists").isNotNull()
    is_delete = F.col(OP) == "D"
    # A delete of a key the table does not hold still leaves a tombstone: its insert may come later.
    absent = "tombstone" if tombstones.enabled(table, seq) else "skip"
    action = (
        F.when(is_delete & exists & newer, "delete")
        .when(is_delete & ~exists, absent)
        .when(is_delete | (exists & ~newer), "skip")
        .when(tombstones.buried(joined.columns, [quote(c) for c in seq]), "late")
        .when(~exists, "insert")
        .otherwise("update")
    )
    return joined.withColumn(ACTION, action).drop(
        *[c for c in joined.columns if c.startswith("_ll_t")], "_ll_exists"
    )


def write(
    spark: SparkSession,
    target: Destination,
    table: TableConfig,
    aligned: DataFrame,
    filled: dict[str, int],
    probe_keys: DataFrame,
    target_schema: StructType,
    seq: list[str],
    result: BatchResult,
    progress: Progress,
    key_values: dict[str, list[str]],
    bounds: dict[str, tuple] | None,
    *,
    small: bool,
    target_rows: int,
    key_rows: int,
    deletes: int,
) -> None:
    """Classify the latest change per key (`aligned`: lakeloader.engine.latest), record the
    tombstones, then the one MERGE of the changes that apply. `target_rows`: how many rows the table
    holds (its snapshot summary); `key_rows`: how many rows the batch's changes hold;
    `deletes`: how many of them are deletes."""
    name = target.name
    keys = [find_column(target_schema.fieldNames(), k) for k in table.keys]
    records = tombstones.enabled(table, seq)
    # A small batch's tombstones are appended while it is classified; a larger one's after, from the
    # classified rows, rather than computing its latest change per key a second time.
    ahead = None
    if records and small and deletes:
        ahead = tombstones.Ahead(spark, table, name, aligned.filter(F.col(OP) == "D"), keys, seq)
    # Checkpointed, not cached: a cache would be recomputed after a commit to the table, and the
    # counts reported must be what this MERGE was given (its own guard handles the rest).
    progress("classifying against the table and its tombstones")
    try:
        classified = classify(
            spark,
            name,
            aligned,
            table,
            seq,
            small=small,
            small_target=target_rows <= ONE_TASK_TARGET_ROWS,
            key_values=key_values,
            bounds=bounds,
            probe_keys=probe_keys,
            broadcast_keys=key_rows <= cdc.BROADCAST_KEYS_MAX,
            ahead=ahead,
        )
        # The counts per action, and what the batch's latest changes asked (reconciliation), are
        # observed while the checkpoint is written: no extra Spark job.
        observation = Metrics("classified")
        tally = {a: count_equal(ACTION, a) for a in ACTIONS} | commit_check.asked_metrics()
        classified = observation.on(classified, tally)
        classified = classified.filter(F.col(ACTION) != "skip").localCheckpoint(eager=True)
    except BaseException:
        if ahead is not None:
            ahead.wait()  # never left running; an error of its own chains onto this one
        raise
    try:
        observed = observation.values
        counts = {action: observed[action] for action in ACTIONS if observed[action]}
        result.inserted, result.updated, result.deleted = (
            counts.get(a, 0) for a in ("insert", "update", "delete")
        )
        progress(
            f"{result.changes:,} change(s): {result.inserted:,} to insert, {result.updated:,} to update, "
            f"{result.deleted:,} to delete"
        )
        # Before the MERGE: see lakeloader.engine.tombstones.
        if ahead is not None:
            progress("recording tombstones: appended while classifying, waiting for their commit")
            ahead.wait()
        elif records and (buried := counts.get("delete", 0) + counts.get("tombstone", 0)):
            progress(f"recording {buried:,} tombstone(s)")
            buried_rows = classified.filter(F.col(ACTION).isin("delete", "tombstone"))
            tombstones.record(spark, table, name, buried_rows, keys, seq)
        if counts.get("late"):
            result.notes.append(f"{counts['late']:,} late change(s) older than their key's delete ignored")
        if not counts.keys() & {"insert", "update", "delete"}:
            result.notes.append("nothing newer than the table; no commit")
            return
        applied = classified.filter(F.col(ACTION).isin("insert", "update", "delete"))
        columns = target_schema.fieldNames()
        run_merge(
            spark,
            target,
            applied,
            progress,
            lambda v: merge_sql(name, v, columns, keys, seq, filled, key_values),
        )
        asked = commit_check.asked_merge(
            observed,
            changes=result.changes,
            late=counts.get("late", 0),
            expected=(result.inserted, result.updated, result.deleted),
        )
        commit_check.check_commit(spark, target, table, asked, result, progress)
    finally:
        release(classified)
