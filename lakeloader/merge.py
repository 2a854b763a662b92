"""Apply one batch of raw files to one Iceberg table in one atomic commit.

The rules, for `mode: merge`:

* the latest change per key wins (the sequence tuple, then file, then row order);
* a change is applied only when its sequence tuple is newer than the row the table
  holds (lakeloader.sequence: NULL is the oldest, an equal tuple is the same change):
  late and replayed files change nothing;
* a delete leaves a tombstone (lakeloader.tombstones), also for a key the table does not
  hold; an insert or update not newer than the key's tombstone is late and ignored;
* an update that leaves columns out keeps their values (lakeloader.partial);
* a re-delivered full-load row updates;
* the batch's input files are recorded in the snapshot summary, so a retried
  run skips files an earlier commit already consumed.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from lakeloader import cdc, commit, iceberg, partial, scd2, schema, table_settings, tombstones, truncate
from lakeloader.columns import OP, find_column
from lakeloader.config import TableConfig
from lakeloader.faults import crash_point
from lakeloader.inputs import InputFile
from lakeloader.progress import Progress, no_progress
from lakeloader.sequence import newer_sql
from lakeloader.spark import table_exists
from lakeloader.sql import qualified, quote, value_literal

if TYPE_CHECKING:
    from lakeloader.quality import QualityReport

ACTION = "_ll_action"
# A batch's key values filter the target when they are few, or when the table holds this many times
# more rows than the list: for a table not much larger, planning a long IN list costs more than the
# scan it saves (benchmarks/RESULTS.md: 10k keys into 100k rows, merge-on-read 2.4 s listed, 1.6 s not).
SHORT_KEY_LIST = 1_000
LISTED_KEYS_MIN_RATIO = 50
ACTIONS = ("insert", "update", "delete", "tombstone", "late")  # what classify tags, less "skip"

# Test seam: called with (spark, target table) after classification, right before the MERGE
# statement runs, so a test can commit a concurrent change there. None (always, outside tests)
# does nothing.
before_merge: Callable[[SparkSession, str], None] | None = None


@dataclass
class TableResult:
    """What one table's run did; one row of the run summary."""

    table_id: str
    status: str = "skipped"  # ok | skipped | failed
    files: int = 0
    changes: int = 0
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    snapshot_id: int | None = None
    seconds: float = 0.0
    error: str | None = None
    bad_file: str | None = None  # the input file the error names (errors.BadInputError.file)
    notes: list[str] = field(default_factory=list)
    quality: QualityReport | None = None  # rule outcomes when the table has quality rules


def classify(
    spark: SparkSession,
    name: str,
    batch: DataFrame,
    table: TableConfig,
    seq: list[str],
    *,
    small: bool = False,
    key_values: dict[str, list[str]] | None = None,
) -> DataFrame:
    """Tag each latest change with the action it takes on the target: insert, update, delete or skip.

    `seq`: the sequence columns the table holds, in tuple order (empty: every change is newer).
    `small`: the batch is one partition (cdc.is_small); its matches are broadcast back onto it.
    `key_values`: SQL literals of every value a key column (target spelling) takes in the batch
    (cdc.Changes), so the target is filtered by them instead of probed with a join (one job less).
    """
    keys = [find_column(batch.columns, k) for k in table.keys]
    target_cols = [F.col(k).alias(f"_ll_t_{i}") for i, k in enumerate(keys)]
    target_cols.append(F.lit(True).alias("_ll_exists"))
    held = [f"_ll_tseq_{i}" for i in range(len(seq))]
    target_cols.extend(F.col(c).alias(h) for c, h in zip(seq, held, strict=True))
    target = tombstones.probe_side(spark, table, name, spark.table(name).select(*target_cols), keys, seq)
    # Find the batch's keys in the target without shuffling the table (benchmarks/RESULTS.md): a small
    # batch's key values filter the target scan; otherwise an inner join lets Spark broadcast the key
    # set and stream the scan. Only the few matches are then joined back onto the batch.
    listed = [(i, key_values[k]) for i, k in enumerate(keys) if k in (key_values or {})]
    if listed:
        # One SQL expression, not Column.isin: that makes one py4j call per value.
        matched = target.filter(" AND ".join(f"{quote(f'_ll_t_{i}')} IN ({', '.join(v)})" for i, v in listed))
    else:
        probe = batch.select(*[F.col(k).alias(f"_ll_k_{i}") for i, k in enumerate(keys)])
        probe_on = [F.col(f"_ll_t_{i}") == F.col(f"_ll_k_{i}") for i in range(len(keys))]
        matched = target.join(probe, on=probe_on, how="inner").drop(*probe.columns)
    matched = tombstones.one_per_key(matched, len(keys))  # a key's row and its tombstone: one row
    condition = [F.col(k) == F.col(f"_ll_t_{i}") for i, k in enumerate(keys)]
    joined = batch.join(F.broadcast(matched) if small else matched, on=condition, how="left")
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
) -> str:
    """The one MERGE statement. It repeats the newer-than guard over the whole sequence tuple, so a
    commit landing between classification and MERGE is never undone. `filled`: lakeloader.partial.

    `key_values`: SQL literals of every value a key column takes in the source. The redundant
    `t.key IN (...)` it adds changes no outcome, but lets Spark drop the target rows the batch does
    not touch before the join's shuffle instead of shuffling the whole table (benchmarks/RESULTS.md).
    """
    on = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in keys)
    for column, values in (key_values or {}).items():
        on += f" AND t.{quote(column)} IN ({', '.join(values)})"
    newer = newer_sql([f"t.{quote(c)}" for c in seq], [f"s.{quote(c)}" for c in seq]) if seq else ""
    guard = f" AND {newer}" if seq else ""
    set_terms, value_terms = partial.merge_values(columns, filled or {}, seq)
    sets, values = ", ".join(set_terms), ", ".join(value_terms)
    cols = ", ".join(quote(c) for c in columns)
    return (
        f"MERGE INTO {name} t USING {quote(view)} s ON {on} "
        f"WHEN MATCHED AND s.{quote(ACTION)} = 'delete'{guard} THEN DELETE "
        f"WHEN MATCHED AND s.{quote(ACTION)} = 'update'{guard} THEN UPDATE SET {sets} "
        f"WHEN NOT MATCHED AND s.{quote(ACTION)} = 'insert' THEN INSERT ({cols}) VALUES ({values})"
    )


def apply_batch(
    spark: SparkSession,
    table: TableConfig,
    files: list[InputFile],
    *,
    catalog: str,
    run_id: str,
    progress: Progress = no_progress,
    log_consumed: bool = False,
    before_publish: Callable[[], None] = lambda: None,
) -> TableResult:
    """Apply `files` to the table's target in one commit. Raises on bad input; commits nothing then.

    `before_publish`: lakeloader.commit.commit_batch. `log_consumed` keeps the consumed files in the
    input log too (for runs without a ledger).
    """
    started = time.monotonic()
    result = TableResult(table.id)
    name = qualified(catalog, table.target.database, table.target.table)
    exists = table_exists(spark, name)
    state = iceberg.read_state(spark, name) if exists else iceberg.TableState()
    if exists:
        logged = commit.logged_file_ids(spark, catalog, table.id) if log_consumed else set()
        consumed = state.committed_file_ids | logged
        skipped = [f for f in files if commit.file_id(f) in consumed]
        if skipped:
            progress(f"{len(skipped)} file(s) already committed, skipped")
        unlogged = [f for f in skipped if commit.file_id(f) not in logged]
        if log_consumed and unlogged:  # committed by a run that was killed before it logged them
            commit.log_inputs(spark, catalog, table.id, unlogged, run_id)
        files = [f for f in files if commit.file_id(f) not in consumed]
    result.files = len(files)
    if not files:
        result.snapshot_id = state.snapshot_id
        result.seconds = time.monotonic() - started
        return result

    if exists:  # keys/mode changes refused before anything is read; properties and partitioning applied
        result.notes += table_settings.apply_table_settings(spark, name, table, progress)
    progress(f"reading {len(files)} file(s), {sum(f.size for f in files):,} bytes")
    # Validated and materialised in one Spark job: later steps see a fixed batch, and MERGE refuses
    # sources whose plan holds non-deterministic expressions (row positions).
    read = cdc.read_changes(spark, table, files)
    changes, result.changes = read.rows, read.count
    try:
        data = changes.select(*cdc.data_columns(changes))
        if not exists:
            progress(f"creating table {table.qualified_target}")
            typed = schema.typed_columns(data)  # an all-NULL column has no type yet: added once it has one
            schema.create_table(
                spark, name, table, scd2.with_scd2_columns(table, typed) if table.mode == "scd2" else typed
            )

        # The whole plan is checked (raising on anything not allowed) before one schema commit.
        plan = schema.plan_schema(
            table.id,
            spark.table(name).schema,
            data.schema,
            policy=table.schema_evolution,
            keys=table.keys,
            managed=scd2.managed_columns(table),
        )
        if plan.changes_table:
            progress("schema: " + "; ".join(plan.describe_drift()))
            schema.apply_plan(spark, plan, name)
        result.notes.extend(plan.notes)
        target_schema = spark.table(name).schema
        # Only the sequence columns the table holds order against it (one the schema policy kept out
        # reads NULL on both sides); the batch's own order uses every one it carries.
        held = [find_column(target_schema.fieldNames(), c) for c in table.sequence_columns]
        seq = [c for c in held if c is not None]
        # A small batch's key values (cdc.Changes), spelled as the table spells its key columns: a
        # short list always, a long one only when the table is large enough to repay its planning.
        spelled = {k: find_column(target_schema.fieldNames(), k) for k in read.key_values}
        listed = max((len(v) for v in read.key_values.values()), default=0)
        worth = listed <= SHORT_KEY_LIST or state.records >= LISTED_KEYS_MIN_RATIO * listed
        keyed = {
            spelled[k]: [value_literal(x) for x in values]
            for k, values in read.key_values.items()
            if spelled[k] and worth
        }
        if read.truncates and table.on_truncate == "empty_table":
            progress(f"{read.truncates} truncate(s): every key is deleted as of the last one")
            truncated = truncate.as_deletes(spark, name, table, changes)
            changes.unpersist()
            changes, keyed = truncated, {}  # the deletes reach keys the batch does not list
        crash_point("after_read")

        def write(target: commit.Destination, batch: DataFrame) -> None:
            if table.mode == "merge":
                _merge(spark, target, table, batch, target_schema, seq, result, progress, keyed)
            elif table.mode == "scd2":
                _scd2(spark, target, table, batch, target_schema, result, progress)
            else:
                _write(target, table, batch, target_schema, result)

        result.quality = commit.commit_batch(
            spark,
            name,
            table,
            changes,
            write,
            run_id=run_id,
            summary=commit.batch_summary(run_id, table.id, files),
            progress=progress,
            before_publish=before_publish,
        )
        if result.quality is not None:
            result.notes.append(result.quality.describe())
    finally:
        changes.unpersist()
    crash_point("after_commit")  # committed; neither the input log nor the ledger knows yet
    if log_consumed:
        commit.log_inputs(spark, catalog, table.id, files, run_id)
    result.status = "ok"
    result.snapshot_id = iceberg.current_snapshot_id(spark, name)
    result.seconds = time.monotonic() - started
    return result


def _merge(spark, target, table, changes, target_schema, seq, result, progress, key_values) -> None:
    name = target.name
    small = cdc.is_small(changes)
    changes, filled = partial.fill(changes, table, seq=seq)  # updates that leave columns out
    latest = cdc.latest_per_key(changes, table.keys)
    extra = [OP, *partial.extra_columns(filled, with_source=bool(seq))]
    aligned = schema.align(latest, target_schema, extra=extra)
    # Checkpointed, not cached: a cache would be recomputed after a commit to the table, and the
    # counts reported must be what this MERGE was given (its own guard handles the rest).
    classified = classify(spark, name, aligned, table, seq, small=small, key_values=key_values)
    classified = classified.filter(F.col(ACTION) != "skip")
    # The counts per action are observed while the checkpoint is written: no extra Spark job.
    observation = Observation(f"lakeloader_classified_{uuid.uuid4().hex[:12]}")
    tally = [F.sum((F.col(ACTION) == a).cast("long")).alias(a) for a in ACTIONS]
    classified = classified.observe(observation, *tally).localCheckpoint(eager=True)
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
        keys = [find_column(target_schema.fieldNames(), k) for k in table.keys]
        if counts.get("delete") or counts.get("tombstone"):  # before the MERGE: see lakeloader.tombstones
            deletes = classified.filter(F.col(ACTION).isin("delete", "tombstone"))
            tombstones.record(spark, table, name, deletes, keys, seq)
        if counts.get("late"):
            result.notes.append(f"{counts['late']:,} late change(s) older than their key's delete ignored")
        if not counts.keys() & {"insert", "update", "delete"}:
            result.notes.append("nothing newer than the table; no commit")
            return
        view = f"lakeloader_batch_{uuid.uuid4().hex[:12]}"
        classified.filter(F.col(ACTION).isin("insert", "update", "delete")).createOrReplaceTempView(view)
        try:
            statement = merge_sql(name, view, target_schema.fieldNames(), keys, seq, filled, key_values)
            if before_merge is not None:
                before_merge(spark, name)
            target.commit(lambda: spark.sql(statement))
        finally:
            spark.catalog.dropTempView(view)
    finally:
        classified.unpersist()


def _scd2(spark, target, table, changes, target_schema, result, progress) -> None:
    """SCD type 2: close and open versions in one MERGE (see lakeloader.scd2)."""
    batch = scd2.prepare(spark, target.name, table, changes, target_schema)
    try:
        result.inserted, result.updated, result.deleted = batch.opened, batch.superseded, batch.deleted
        result.notes.extend(scd2.notes(batch))
        progress(
            f"{result.changes:,} change(s): {batch.opened:,} version(s) to open, {batch.superseded:,} to "
            f"close, {batch.deleted:,} key(s) to close by delete"
        )
        if batch.empty:
            result.notes.append("nothing newer than the table; no commit")
            return
        view = f"lakeloader_scd2_{uuid.uuid4().hex[:12]}"
        batch.source.createOrReplaceTempView(view)
        try:
            statement = scd2.merge_sql(target.name, view, table, target_schema)
            target.commit(lambda: spark.sql(statement))
        finally:
            spark.catalog.dropTempView(view)
    finally:
        batch.checkpoint.unpersist()


def _write(target, table, changes, target_schema, result) -> None:
    """`append` adds every change row; `overwrite` replaces the table with the batch's latest rows."""
    rows = changes
    if table.mode == "overwrite":
        if table.keys:
            rows = cdc.latest_per_key(rows, table.keys)
        rows = rows.filter(F.col(OP) != "D")
    aligned = schema.align(rows, target_schema, extra=[])
    if table.mode == "append":
        target.commit(lambda: aligned.writeTo(target.name).append())
        result.inserted = result.changes
    else:
        target.commit(lambda: aligned.writeTo(target.name).overwrite(F.lit(True)))
        result.inserted = aligned.count()
