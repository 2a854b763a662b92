"""One batch of raw files applied to one Iceberg table in one atomic commit: skip what an earlier
commit consumed, read and normalise (cdc), evolve the schema first (schema), then the table's mode
writes it (merge, scd2, or append/overwrite here) through the quality gate (gate). Nothing in the
engine calls back up: it returns what the batch did (`BatchResult`), and the job records the run.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from lakeloader import iceberg
from lakeloader.config import TableConfig
from lakeloader.engine import (
    cdc,
    file_conflicts,
    full_copy,
    gate,
    merge,
    scd2,
    schema,
    table_settings,
    truncate,
    unreadable,
)
from lakeloader.engine.batch_result import BatchResult
from lakeloader.formats import full_copy as folders
from lakeloader.iceberg import commit, s3_tables
from lakeloader.spark.columns import OP, find_column
from lakeloader.spark.errors import LakeloaderError, UnreadableFilesError
from lakeloader.spark.faults import crash_point
from lakeloader.spark.inputs import InputFile
from lakeloader.spark.progress import Progress, no_progress
from lakeloader.spark.session import release, table_exists
from lakeloader.spark.sql import value_literal

# A batch's key values filter the target when they are few, or when the table holds this many times
# more rows than the list: for a table not much larger, planning a long IN list costs more than the
# scan it saves (benchmarks/RESULTS.md: 10k keys into 100k rows, merge-on-read 2.4 s listed, 1.6 s not).
SHORT_KEY_LIST = 1_000
LISTED_KEYS_MIN_RATIO = 50


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
) -> BatchResult:
    """Apply `files` to the table's target in one commit (`apply_files`); a cdc: snapshot table's, one
    commit per complete snapshot, oldest first, leaving the files of incomplete ones waiting."""
    options = {"catalog": catalog, "run_id": run_id, "progress": progress, "log_consumed": log_consumed}
    if table.source.cdc != "snapshot" or not files:
        return apply_files(spark, table, files, **options, before_publish=before_publish)
    plan = folders.plan(table, files, folders.list_table(table, files))
    total = BatchResult(files=len(plan.markers), waiting=[f.name for f in plan.waiting])
    if plan.waiting:
        total.notes.append(folders.describe_waiting(table, plan.waiting))
        progress(total.notes[-1])
    for _folder, folder_files in plan.ready:
        total.add(apply_files(spark, table, folder_files, **options, before_publish=before_publish))
    return total


def apply_files(
    spark: SparkSession,
    table: TableConfig,
    files: list[InputFile],
    *,
    catalog: str,
    run_id: str,
    progress: Progress = no_progress,
    log_consumed: bool = False,
    before_publish: Callable[[], None] = lambda: None,
) -> BatchResult:
    """Apply `files` to the table's target in one commit. Raises on bad input; commits nothing then.

    `before_publish`: the caller's last check right before `main` moves (lakeloader.iceberg.commit);
    `log_consumed` keeps the consumed files in the input log too (for runs without a ledger).
    """
    result = BatchResult()
    name = s3_tables.target_name(spark, catalog, table)
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
    result.files, result.read = len(files), [f.name for f in files]
    # cdc: snapshot: one snapshot folder per batch (jobs.load), ordered by its name unless snapshot_by
    folder = (
        folders.snapshot_folder(table, files[0].name) if files and table.source.cdc == "snapshot" else None
    )
    order = folder if folder is not None and not table.source.snapshot_by else None
    if not files or _snapshot_applied(table, folder, order, state, result, progress):
        result.snapshot_id = state.snapshot_id
        if files and log_consumed:
            commit.log_inputs(spark, catalog, table.id, files, run_id)
        return result

    if exists:  # keys/mode changes refused before anything is read; properties and partitioning applied
        result.notes += table_settings.apply_table_settings(spark, name, table, state, progress)
    file_conflicts.check_files(spark, table, files, spark.table(name).schema if exists else None, progress)
    progress(f"reading {len(files)} file(s), {sum(f.size for f in files):,} bytes")
    # Validated and materialised in one Spark job: later steps see a fixed batch, and MERGE refuses
    # sources whose plan holds non-deterministic expressions (row positions).
    read = _read(spark, table, files, progress)
    changes, result.changes = read.rows, read.count
    progress(f"read {read.count:,} change(s)")
    unchanged = False  # a snapshot equal to the table: nothing to commit
    try:
        if folder is not None and order is None:
            order = full_copy.sequence_of(changes)
            if _snapshot_applied(table, folder, order, state, result, progress):
                result.snapshot_id = state.snapshot_id
                if log_consumed:
                    commit.log_inputs(spark, catalog, table.id, files, run_id)
                return result
        data = changes.select(*cdc.data_columns(changes))
        if not exists:
            progress(f"creating table {table.qualified_target}")
            typed = schema.typed_columns(data)  # an all-NULL column has no type yet: added once it has one
            schema.create_table(
                spark, name, table, scd2.with_scd2_columns(table, typed) if table.mode == "scd2" else typed
            )
            bucket = s3_tables.table_bucket_arn(spark) if s3_tables.in_s3_tables(table) else None
            if bucket:  # S3 Tables maintains the table from now on, as its maintenance settings say
                s3_tables.configure_maintenance(bucket, table)

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
        # Where a tombstone must lie to bury a change of the batch: within each key column's range, and
        # at or above the lowest first sequence value of its inserts and updates; kept for the columns
        # the table types as the batch does. The probe is skipped when none can (engine.tombstones).
        limits = dict(read.key_ranges)
        first = find_column(data.columns, table.sequence_column or "")
        if first and read.sequence_low is not None:
            limits[first] = (read.sequence_low, None)
        bounds = {
            spelled: limit
            for k, limit in limits.items()
            if (spelled := find_column(target_schema.fieldNames(), k))
            and target_schema[spelled].dataType == data.schema[k].dataType
        }
        key_rows = read.count  # the rows of the batch's keys that classification probes the table with
        deletes = read.deletes
        if folder is not None:  # the snapshot becomes its changes; deletes reach keys it does not hold
            own = None if table.source.snapshot_by else folders.folder_value(folder)
            diff = full_copy.as_changes(spark, name, table, changes, target_schema, sequence=own)
            changes, keyed, bounds = diff.rows, {}, {}
            result.changes, key_rows, deletes = diff.count, diff.count, diff.deletes
            gone = "gone" if table.source.deletes == "delete" else "gone, kept (deletes: ignore)"
            result.notes.append(
                f"snapshot {folder}: {read.count:,} row(s); {diff.inserts:,} new, {diff.updates:,} changed, "
                f"{diff.deletes:,} {gone}"
            )
            progress(result.notes[-1])
            unchanged = diff.count == 0
        if read.truncates and table.on_truncate == "empty_table":
            progress(f"{read.truncates} truncate(s): every key is deleted as of the last one")
            truncated = truncate.as_deletes(spark, name, table, changes)
            release(changes)
            changes, keyed, bounds = truncated, {}, {}  # the deletes reach keys the batch does not hold
            key_rows += state.records
            deletes += state.records
        crash_point("after_read")

        def write(target: commit.Destination, batch: DataFrame) -> None:
            if table.mode == "merge":
                merge.write(
                    spark,
                    target,
                    table,
                    batch,
                    target_schema,
                    seq,
                    result,
                    progress,
                    keyed,
                    bounds,
                    target_rows=state.records,
                    key_rows=key_rows,
                    deletes=deletes,
                )
            elif table.mode == "scd2":
                scd2.write(spark, target, table, batch, target_schema, result, progress)
            else:
                _append_or_overwrite(target, table, batch, target_schema, result)

        summary = commit.batch_summary(run_id, table.id, files)
        if folder is not None:
            summary |= commit.snapshot_summary(folder, order)
        if unchanged:  # no commit records the snapshot: the table property does (TableState)
            before_publish()
            commit.record_snapshot_sequence(spark, name, order)
        else:
            main = commit.Destination(spark, name, summary, publishes=True, before_publish=before_publish)
            result.quality = gate.commit_batch(main, table, changes, write, run_id=run_id, progress=progress)
        if result.quality is not None:
            result.notes.append(result.quality.describe())
    finally:
        release(changes)
    crash_point("after_commit")  # committed; neither the input log nor the ledger knows yet
    progress("applied")
    if log_consumed:
        commit.log_inputs(spark, catalog, table.id, files, run_id)
    # The commit left the session's table at its own snapshot: no catalog call (a Glue GetTable), and a
    # writer committing right after it is not reported as this batch's.
    result.snapshot_id = iceberg.current_snapshot_id(spark, name, refresh=False)
    return result


def _snapshot_applied(
    table: TableConfig,
    folder: str | None,
    order: str | None,
    state: iceberg.TableState,
    result: BatchResult,
    progress: Progress,
) -> bool:
    """Whether a snapshot is older than, or the same as, the newest one the table applied: then its
    files are consumed and change nothing (a late or re-delivered snapshot)."""
    if folder is None or order is None or state.snapshot_sequence is None or order > state.snapshot_sequence:
        return False
    result.notes.append(
        f"snapshot {folder} is not newer than the last one applied ({state.snapshot_sequence}): its "
        f"{result.files} file(s) change nothing"
    )
    progress(result.notes[-1])
    return True


def _read(spark: SparkSession, table: TableConfig, files: list[InputFile], progress: Progress) -> cdc.Changes:
    """The batch's changes; a read that fails naming no file is followed by a search for the files that
    cannot be read, which are then named (UnreadableFilesError) so the caller can set them aside."""
    try:
        return cdc.read_changes(spark, table, files)
    except LakeloaderError:
        raise
    except Exception as exc:
        found = unreadable.find_unreadable(spark, table, files, progress)
        if found:
            raise UnreadableFilesError(table.id, found) from exc
        raise


def _append_or_overwrite(
    target: commit.Destination,
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
