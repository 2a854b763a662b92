"""One batch of raw files applied to one Iceberg table in one atomic commit: skip what an earlier
commit consumed, read and normalise (cdc), evolve the schema first (schema), plan the write, then
the quality gate (gate) has the table's mode write it (modes: merge, scd2, append, overwrite). Each
step is a function here that returns to `apply_files`; nothing is passed down to be called back.
Nothing in the engine calls back up: it returns what the batch did (`BatchResult`), and the job
records the run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from lakeloader import iceberg
from lakeloader.config import TableConfig
from lakeloader.engine import (
    cdc,
    file_conflicts,
    full_copy,
    gate,
    modes,
    scd2,
    schema,
    table_settings,
    truncate,
    unreadable,
)
from lakeloader.engine.batch_result import BatchResult
from lakeloader.formats import full_copy as folders
from lakeloader.iceberg import commit, s3_tables
from lakeloader.spark.columns import find_column
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

    Its steps, in the order they run: skip consumed files, check settings and files, read and validate,
    order (cdc: snapshot), schema, plan the write, then the gate has the mode write it (classify or
    count, tombstones, MERGE, check: engine.merge) and commit. `before_publish`: the caller's last check
    before `main` moves (iceberg.commit); `log_consumed`: log the consumed files (runs without a ledger).
    """
    batch = _open(spark, table, catalog=catalog, run_id=run_id, progress=progress, log_consumed=log_consumed)
    files = _unconsumed(batch, files)
    result = BatchResult(files=len(files), read=[f.name for f in files])
    folder, order = _snapshot_order(table, files)
    if not files or _snapshot_applied(table, folder, order, batch.state, result, progress):
        return _consumed(batch, files, result)
    _check_before_read(batch, files, result)
    read = _read(spark, table, files, progress)
    changes, result.changes = read.rows, read.count
    progress(f"read {read.count:,} change(s)")
    try:
        if folder is not None and order is None:
            order = full_copy.sequence_of(changes)
            if _snapshot_applied(table, folder, order, batch.state, result, progress):
                return _consumed(batch, files, result)
        data = changes.select(*cdc.data_columns(changes))
        plan = _plan_write(batch, read, data, _evolve_schema(batch, data, result), result)
        unchanged = False  # a snapshot equal to the table: nothing to commit
        if folder is not None:
            changes, unchanged = _snapshot_as_changes(batch, folder, changes, read.count, plan)
        if read.truncates and table.on_truncate == "empty_table":
            changes = _truncates_as_deletes(batch, read.truncates, changes, plan)
        crash_point("after_read")
        _commit(
            batch,
            files,
            changes,
            plan,
            snapshot_order=(folder, order),
            unchanged=unchanged,
            before_publish=before_publish,
        )
    finally:
        release(changes)
    crash_point("after_commit")  # committed; neither the input log nor the ledger knows yet
    progress("applied")
    _log_consumed(batch, files)
    # The commit left the session's table at its own snapshot: no catalog call (a Glue GetTable), and a
    # writer committing right after it is not reported as this batch's.
    result.snapshot_id = iceberg.current_snapshot_id(spark, batch.name, refresh=False)
    return result


@dataclass(frozen=True)
class _Batch:
    """What every step of one batch reads: the session, the table, the run, and its target as the batch
    found it (`state`: TableState; empty when the table does not exist yet)."""

    spark: SparkSession
    table: TableConfig
    catalog: str
    run_id: str
    progress: Progress
    log_consumed: bool
    name: str
    exists: bool
    state: iceberg.TableState


def _open(
    spark: SparkSession,
    table: TableConfig,
    *,
    catalog: str,
    run_id: str,
    progress: Progress,
    log_consumed: bool,
) -> _Batch:
    """The batch's target as the batch finds it: read once, before any step writes to it."""
    name = s3_tables.target_name(spark, catalog, table)
    exists = table_exists(spark, name)
    state = iceberg.read_state(spark, name) if exists else iceberg.TableState()
    return _Batch(spark, table, catalog, run_id, progress, log_consumed, name, exists, state)


def _unconsumed(batch: _Batch, files: list[InputFile]) -> list[InputFile]:
    """The files no earlier commit consumed (nor, with `log_consumed`, the input log holds); those a
    commit consumed that a killed run did not log are logged now."""
    if not batch.exists:
        return files
    spark, table, log_consumed = batch.spark, batch.table, batch.log_consumed
    logged = commit.logged_file_ids(spark, batch.catalog, table.id) if log_consumed else set()
    consumed = batch.state.committed_file_ids | logged
    skipped = [f for f in files if commit.file_id(f) in consumed]
    if skipped:
        batch.progress(f"{len(skipped)} file(s) already committed, skipped")
    unlogged = [f for f in skipped if commit.file_id(f) not in logged]
    if log_consumed and unlogged:  # committed by a run that was killed before it logged them
        commit.log_inputs(spark, batch.catalog, table.id, unlogged, batch.run_id)
    return [f for f in files if commit.file_id(f) not in consumed]


def _snapshot_order(table: TableConfig, files: list[InputFile]) -> tuple[str | None, str | None]:
    """cdc: snapshot: the batch's one snapshot folder (jobs.load), and its order: the folder's name
    unless `snapshot_by` orders it by a column (then None until the rows are read)."""
    if not files or table.source.cdc != "snapshot":
        return None, None
    folder = folders.snapshot_folder(table, files[0].name)
    return folder, (folder if folder is not None and not table.source.snapshot_by else None)


def _consumed(batch: _Batch, files: list[InputFile], result: BatchResult) -> BatchResult:
    """A batch with nothing to apply (no new file, or an old snapshot): its files are consumed."""
    result.snapshot_id = batch.state.snapshot_id
    if files:
        _log_consumed(batch, files)
    return result


def _log_consumed(batch: _Batch, files: list[InputFile]) -> None:
    """Runs without a ledger keep the consumed files in the input log (commit.log_inputs)."""
    if batch.log_consumed:
        commit.log_inputs(batch.spark, batch.catalog, batch.table.id, files, batch.run_id)


def _check_before_read(batch: _Batch, files: list[InputFile], result: BatchResult) -> None:
    """Keys/mode changes refused before anything is read, properties and partitioning applied; files
    whose columns conflict with each other or the table refused."""
    spark, table, name, progress = batch.spark, batch.table, batch.name, batch.progress
    if batch.exists:
        result.notes += table_settings.apply_table_settings(spark, name, table, batch.state, progress)
    file_conflicts.check_files(
        spark, table, files, spark.table(name).schema if batch.exists else None, progress
    )
    progress(f"reading {len(files)} file(s), {sum(f.size for f in files):,} bytes")


def _evolve_schema(batch: _Batch, data: DataFrame, result: BatchResult) -> StructType:
    """Create the table from the batch, or evolve its schema by the table's policy: the whole plan is
    checked (raising on anything not allowed) before one schema commit. The target's schema after."""
    spark, table, name, progress = batch.spark, batch.table, batch.name, batch.progress
    if not batch.exists:
        progress(f"creating table {table.qualified_target}")
        typed = schema.typed_columns(data)  # an all-NULL column has no type yet: added once it has one
        schema.create_table(
            spark, name, table, scd2.with_scd2_columns(table, typed) if table.mode == "scd2" else typed
        )
        bucket = s3_tables.table_bucket_arn(spark) if s3_tables.in_s3_tables(table) else None
        if bucket:  # S3 Tables maintains the table from now on, as its maintenance settings say
            s3_tables.configure_maintenance(bucket, table)
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
    return spark.table(name).schema


def _plan_write(
    batch: _Batch, read: cdc.Changes, data: DataFrame, target_schema: StructType, result: BatchResult
) -> modes.WritePlan:
    """What the mode writes the batch with: the sequence columns, the key values and the tombstone
    bounds that narrow its probes of the table, the rows it probes with and the deletes."""
    table, held_columns = batch.table, target_schema.fieldNames()
    # Only the sequence columns the table holds order against it (one the schema policy kept out
    # reads NULL on both sides); the batch's own order uses every one it carries.
    held = [find_column(held_columns, c) for c in table.sequence_columns]
    # A small batch's key values (cdc.Changes), spelled as the table spells its key columns: a
    # short list always, a long one only when the table is large enough to repay its planning.
    spelled = {k: find_column(held_columns, k) for k in read.key_values}
    listed = max((len(v) for v in read.key_values.values()), default=0)
    worth = listed <= SHORT_KEY_LIST or batch.state.records >= LISTED_KEYS_MIN_RATIO * listed
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
        if (spelled := find_column(held_columns, k))
        and target_schema[spelled].dataType == data.schema[k].dataType
    }
    return modes.WritePlan(
        batch.spark,
        table,
        target_schema,
        [c for c in held if c is not None],
        result,
        batch.progress,
        keyed,
        bounds,
        target_rows=batch.state.records,
        key_rows=read.count,  # the rows of the batch's keys that classification probes the table with
        deletes=read.deletes,
    )


def _snapshot_as_changes(
    batch: _Batch, folder: str, rows: DataFrame, read_rows: int, plan: modes.WritePlan
) -> tuple[DataFrame, bool]:
    """cdc: snapshot: the snapshot becomes its changes against the table, and whether it changed
    nothing; its deletes reach keys it does not hold, so no key list or bound narrows the write."""
    table, result = batch.table, plan.result
    own = None if table.source.snapshot_by else folders.folder_value(folder)
    diff = full_copy.as_changes(batch.spark, batch.name, table, rows, plan.target_schema, sequence=own)
    plan.key_values, plan.bounds = {}, {}
    result.changes, plan.key_rows, plan.deletes = diff.count, diff.count, diff.deletes
    gone = "gone" if table.source.deletes == "delete" else "gone, kept (deletes: ignore)"
    result.notes.append(
        f"snapshot {folder}: {read_rows:,} row(s); {diff.inserts:,} new, {diff.updates:,} changed, "
        f"{diff.deletes:,} {gone}"
    )
    batch.progress(result.notes[-1])
    return diff.rows, diff.count == 0


def _truncates_as_deletes(
    batch: _Batch, truncates: int, changes: DataFrame, plan: modes.WritePlan
) -> DataFrame:
    """on_truncate: empty_table: every key the table holds is deleted as of the last truncate; those
    deletes reach keys the batch does not hold, so no key list or bound narrows the write."""
    batch.progress(f"{truncates} truncate(s): every key is deleted as of the last one")
    truncated = truncate.as_deletes(batch.spark, batch.name, batch.table, changes)
    release(changes)
    plan.key_values, plan.bounds = {}, {}
    plan.key_rows += batch.state.records
    plan.deletes += batch.state.records
    return truncated


def _commit(
    batch: _Batch,
    files: list[InputFile],
    changes: DataFrame,
    plan: modes.WritePlan,
    *,
    snapshot_order: tuple[str | None, str | None],
    unchanged: bool,
    before_publish: Callable[[], None],
) -> None:
    """One commit whose snapshot summary names the run, the files and (cdc: snapshot) the snapshot,
    through the quality gate, which has the table's mode write it (`plan`); a snapshot equal to the
    table commits nothing, and the table property records it (TableState)."""
    summary = commit.batch_summary(batch.run_id, batch.table.id, files)
    folder, order = snapshot_order
    if folder is not None and order is not None:
        summary |= commit.snapshot_summary(folder, order)
    if unchanged and order is not None:
        before_publish()
        commit.record_snapshot_sequence(batch.spark, batch.name, order)
        return
    main = commit.Destination(batch.spark, batch.name, summary, publishes=True, before_publish=before_publish)
    result = plan.result
    result.quality = gate.commit_batch(main, changes, plan, run_id=batch.run_id)
    if result.quality is not None:
        result.notes.append(result.quality.describe())


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
