"""`mode: merge`: the latest change per key, classified against the rows the table holds, in one
MERGE INTO. The rules:

* the latest change per key wins (the sequence tuple, then file, then row order);
* a change is applied only when its sequence tuple is newer than the row the table
  holds (lakeloader.engine.sequence: NULL is the oldest, an equal tuple is the same change):
  late and replayed files change nothing;
* a delete leaves a tombstone (lakeloader.engine.tombstones; unless the table turns them off), also
  for a key the table does not hold; an insert or update not newer than the key's tombstone is late
  and ignored;
* an update that leaves columns out keeps their values (lakeloader.engine.partial);
* a re-delivered full-load row updates.

Skipping the files an earlier commit consumed, the schema and the commit are every mode's:
lakeloader.engine.batch.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from lakeloader.columns import OP, find_column
from lakeloader.config import TableConfig
from lakeloader.engine import cdc, commit_check, latest, partial, tombstones
from lakeloader.engine.sequence import newer_sql
from lakeloader.errors import LakeloaderError
from lakeloader.iceberg import MERGE_COUNT_KEYS, committed_summary
from lakeloader.iceberg.commit import Destination
from lakeloader.progress import Progress
from lakeloader.spark import release
from lakeloader.sql import in_lists, quote

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from lakeloader.engine.batch_result import BatchResult

ACTION = "_ll_action"
ACTIONS = ("insert", "update", "delete", "tombstone", "late")  # what classify tags, less "skip"
LATE = "_ll_late"  # write_counted: an insert or update that a tombstone buried
# Up to this many rows, a small batch's matches in the table are read in classification's own task,
# not broadcast by a job of their own. 1k changes into 4M rows took 1.43 s that way against 1.58 s;
# into 16M rows 2.32 s against 2.17 s, the one task's scan costing more than the job saves
# (benchmarks/RESULTS.md).
ONE_TASK_TARGET_ROWS = 4_000_000
# Up to this many key rows, the batch's keys are broadcast to the probe of the table. AQE would
# otherwise turn it into a shuffle of every row of the table once the key set outgrows its 10 MiB
# estimate (1M changes into 16M rows: benchmarks/RESULTS.md). A long key is 8 bytes a row.
BROADCAST_KEYS_MAX = 4_000_000

# Test seam: called with (spark, target table) after classification, right before the MERGE
# statement runs, so a test can commit a concurrent change there. None (always, outside tests)
# does nothing.
before_merge: Callable[[SparkSession, str], None] | None = None


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
    # up to BROADCAST_KEYS_MAX, streams the scan. Only the few matches are joined back onto the batch.
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


def merge_sql(
    name: str,
    view: str,
    columns: list[str],
    keys: list[str],
    seq: list[str],
    filled: dict[str, int] | None = None,
    key_values: dict[str, list[str]] | None = None,
    *,
    classified: bool = True,
) -> str:
    """The one MERGE statement. It repeats the newer-than guard over the whole sequence tuple, so a
    commit landing between classification and MERGE is never undone. `filled`: lakeloader.engine.partial.

    `key_values`: SQL literals of every value a key column takes in the source. The redundant
    `t.key IN (...)` it adds changes no outcome, but lets Spark drop the target rows the batch does
    not touch before the join's shuffle instead of shuffling the whole table (benchmarks/RESULTS.md).
    `classified`: the source's ACTION column says what each change does; else (`write_counted`) its
    operation does, and the guard alone keeps an older change from touching a newer row.
    """
    on = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in keys)
    if key_values:
        on += " AND " + in_lists(key_values, qualifier="t.")
    newer = newer_sql([f"t.{quote(c)}" for c in seq], [f"s.{quote(c)}" for c in seq]) if seq else ""
    guard = f" AND {newer}" if seq else ""
    set_terms, value_terms = partial.merge_values(columns, filled or {}, seq)
    sets, values = ", ".join(set_terms), ", ".join(value_terms)
    cols = ", ".join(quote(c) for c in columns)
    if classified:
        delete, update, insert = (f"s.{quote(ACTION)} = '{a}'" for a in ("delete", "update", "insert"))
    else:
        delete, update = f"s.{quote(OP)} = 'D'", f"s.{quote(OP)} <> 'D'"
        insert = update
    return (
        f"MERGE INTO {name} t USING {quote(view)} s ON {on} "
        f"WHEN MATCHED AND {delete}{guard} THEN DELETE "
        f"WHEN MATCHED AND {update}{guard} THEN UPDATE SET {sets} "
        f"WHEN NOT MATCHED AND {insert} THEN INSERT ({cols}) VALUES ({values})"
    )


def counts_in_commit(spark: SparkSession) -> bool:
    """Whether this session's MERGE records its own row counts in its commit (Spark 4.1 and later,
    with Iceberg 1.11: lakeloader.runtimes.Runtime.merge_reports_counts)."""
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
    """Classify the latest change per key, record the tombstones, then the one MERGE (`merge_sql`).
    `target_rows`: how many rows the table holds (its snapshot summary); `key_rows`: how many rows
    `changes` holds (more than the batch read when a truncate made deletes of the table's keys);
    `deletes`: how many of them are deletes."""
    name = target.name
    small = cdc.is_small(changes)
    aligned, filled = latest.aligned(changes, table, target_schema, seq)
    probe_keys = changes.select(*[find_column(changes.columns, k) for k in table.keys])
    keys = [find_column(target_schema.fieldNames(), k) for k in table.keys]
    records = tombstones.enabled(table, seq)
    if counts_in_commit(spark):
        apart = not small and deletes <= BROADCAST_KEYS_MAX  # a small batch's latest changes cost little
        deleted = latest.deletes(changes, aligned, table, target_schema, seq, from_deleted_keys=apart)
        write_counted(
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
        return
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
            broadcast_keys=key_rows <= BROADCAST_KEYS_MAX,
            ahead=ahead,
        )
        # The counts per action, and what the batch's latest changes asked (reconciliation), are
        # observed while the checkpoint is written: no extra Spark job.
        observation = Observation(f"lakeloader_classified_{uuid.uuid4().hex[:12]}")
        tally = [F.sum((F.col(ACTION) == a).cast("long")).alias(a) for a in ACTIONS]
        tally += commit_check.asked_metrics()
        classified = classified.observe(observation, *tally)
        classified = classified.filter(F.col(ACTION) != "skip").localCheckpoint(eager=True)
    except BaseException:
        if ahead is not None:
            ahead.wait()  # never left running; an error of its own chains onto this one
        raise
    try:
        observed = observation.get
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


def run_merge(
    spark: SparkSession,
    target: Destination,
    source: DataFrame,
    progress: Progress,
    statement: Callable[[str], str],
) -> None:
    """The batch's one MERGE: `source` as a view, `statement(view)` run in the commit that records the
    batch (`before_merge` first, the test seam)."""
    view = f"lakeloader_batch_{uuid.uuid4().hex[:12]}"
    source.createOrReplaceTempView(view)
    try:
        sql = statement(view)
        if before_merge is not None:
            before_merge(spark, target.name)
        progress(f"merging into {target.name}")
        with target.committing():
            spark.sql(sql)
    finally:
        spark.catalog.dropTempView(view)


def write_counted(
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
    """`write` where the MERGE counts its own rows (`counts_in_commit`): no classification pass.

    The MERGE's guards decide every change on their own (`merge_sql(classified=False)`), and its
    commit's summary says how many rows it inserted, updated and deleted, so the table is never
    probed for them first: that probe is classification's whole cost on a large table
    (benchmarks/RESULTS.md). What still reads beyond the batch is the tombstones' side table, for
    the inserts and updates an earlier delete buried (late): the MERGE cannot see those. Every
    delete of the batch's latest changes records its tombstone before the MERGE, as `write` does;
    without the probe, one older than the row the table holds is recorded too, and it buries only
    changes older than that row, which the guard skips anyway.
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
            observation = Observation(f"lakeloader_late_{uuid.uuid4().hex[:12]}")
            flagged = joined.withColumn(LATE, is_late).observe(
                observation, F.sum(F.col(LATE).cast("long")).alias("late"), *commit_check.asked_metrics()
            )
            source = flagged.filter(~F.col(LATE)).select(*[F.col(quote(c)) for c in aligned.columns])
            source = source.localCheckpoint(eager=True)
            asked_observed = observation.get
            checkpointed, late = True, asked_observed["late"] or 0
    merge_observation = None
    if asked_observed is None:  # counted as the MERGE reads its source: no pass of its own
        merge_observation = Observation(f"lakeloader_asked_{uuid.uuid4().hex[:12]}")
        source = source.observe(merge_observation, *commit_check.asked_metrics())
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
