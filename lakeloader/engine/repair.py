"""A table compared with a full copy of its source, and the difference written back (`lakeloader
reconcile`, lakeloader.jobs.reconcile): the snapshot is read as the table's own files are, compared by
the diff `cdc: snapshot` applies (lakeloader.engine.full_copy.as_changes), and repaired through the
batch's write path (merge or SCD2, tombstones, the quality gate) in one commit.

The repair sequence. Every change of a repair carries, in the first sequence column, the value just
after the highest the table knows (its rows, SCD2's valid_from and valid_to, its tombstones) or the
snapshot holds, and NULL tie-breakers (the oldest):
- it is newer than every row and tombstone of the table, so each repair change applies: an update is
  not skipped as late, an insert is not buried by an older tombstone of its key;
- a repaired delete leaves a tombstone at that value: a change older than it delivered later (a
  replayed or stuck file) is ignored, as after any delete;
- it is the smallest such value (one microsecond, one unit, one day later; a string followed by NUL),
  so every change the source makes after the table's newest one still applies after the repair, and
  at that very value a source change with a tie-breaker wins (the repair's is NULL).
SCD2 history closes at it. A table that holds no sequence column orders nothing: no value is stamped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from functools import reduce
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakeloader import iceberg
from lakeloader.config import TableConfig
from lakeloader.engine import cdc, gate, scd2, tombstones
from lakeloader.engine import full_copy as diffing
from lakeloader.engine.batch_result import BatchResult
from lakeloader.engine.modes import WritePlan
from lakeloader.iceberg import commit, s3_tables
from lakeloader.spark.columns import OP, SEQ, find_column, seq_columns
from lakeloader.spark.errors import LakeloaderError
from lakeloader.spark.inputs import InputFile
from lakeloader.spark.progress import Progress, no_progress
from lakeloader.spark.session import release, table_exists
from lakeloader.spark.sql import quote

KINDS = {"missing": "I", "extra": "D", "different": "U"}  # what a difference becomes when repaired


@dataclass
class Comparison:
    """A table compared with a snapshot: the difference as change rows (checkpointed; `release`)."""

    name: str  # the table, qualified
    target: T.StructType
    records: int  # rows the table holds (its snapshot summary)
    rows: int  # the snapshot's rows (rows marked deleted left out)
    compared: list[str]  # the compared columns (the snapshot's spelling)
    changes: diffing.FullCopyChanges
    sequence: str | None  # the repair sequence (repairs only; None: the table orders nothing)
    notes: list[str] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        c = self.changes
        return {"missing": c.inserts, "extra": c.deletes, "different": c.updates}

    def samples(self, keys: list[str], n: int) -> dict[str, list[dict[str, Any]]]:
        """Up to `n` keys of each kind (column -> value), lowest first."""
        rows = self.changes.rows
        spelled = [find_column(rows.columns, k) for k in keys]
        counts = self.counts
        return {
            kind: [
                r.asDict()
                for r in rows.filter(F.col(OP) == op).select(*spelled).orderBy(*spelled).limit(n).collect()
            ]
            if n > 0 and counts[kind]
            else []
            for kind, op in KINDS.items()
        }

    def release(self) -> None:
        release(self.changes.rows)


def reading_config(table: TableConfig) -> TableConfig:
    """How the snapshot's files are read: as the table's own files are, but a `cdc: snapshot` table's as
    plain rows (its format takes the snapshot's time from a folder under the table's prefix, and this
    snapshot may lie anywhere: the repair sequence orders its changes)."""
    if table.source.cdc != "snapshot":
        return table
    return table.model_copy(update={"source": table.source.model_copy(update={"cdc": "none"})})


def _read(spark: SparkSession, table: TableConfig, files: list[InputFile], notes: list[str]) -> cdc.Changes:
    """The snapshot's rows as cdc.read_changes reads a batch (a DMS full load: every row an insert).
    Rows the source marks deleted (an Op D, delete_when) are left out: their keys are not in it."""
    read = cdc.read_changes(spark, reading_config(table), files)
    gone = read.deletes + read.truncates
    if gone:
        read.rows = read.rows.filter(F.col(OP).isin("I", "U"))
        read.count -= gone
        notes.append(f"{gone:,} row(s) of the snapshot marked deleted: their keys read as absent")
    return read


def _successor(value: Column, kind: T.DataType, table_id: str, column: str) -> Column:
    """The smallest value of `kind` after `value` (after none: now, or the type's zero)."""
    if isinstance(kind, T.TimestampType | T.TimestampNTZType):
        after, base = value + F.expr("INTERVAL 1 MICROSECOND"), F.current_timestamp()
    elif isinstance(kind, T.DateType):
        after, base = F.date_add(value, 1), F.current_date()
    elif isinstance(kind, T.ByteType | T.ShortType | T.IntegerType | T.LongType):
        after, base = value + F.lit(1), F.lit(0)
    elif isinstance(kind, T.DecimalType):
        after, base = value + F.lit(Decimal(1).scaleb(-kind.scale)), F.lit(0)
    elif isinstance(kind, T.StringType):
        after, base = F.concat(value, F.lit("\u0000")), F.lit("")  # nothing sorts in between
    else:
        raise LakeloaderError(
            f"table {table_id!r}: --repair cannot order its changes after the table's: the sequence column "
            f"{column!r} is {kind.simpleString()} (a time, date, whole number, decimal or string orders them)"
        )
    return F.when(value.isNull(), base.cast(kind)).otherwise(after).cast(kind)


def repair_sequence(
    spark: SparkSession, name: str, table: TableConfig, snapshot: DataFrame, target: T.StructType
) -> str | None:
    """The repair sequence as text (the session's time zone): just after the highest first sequence
    value of the table's rows (SCD2: also valid_from and valid_to), its tombstones and the snapshot.
    None when the table holds no sequence column."""
    first = table.sequence_column
    held = find_column(target.fieldNames(), first) if first else None
    if first is None or held is None:
        return None
    kind = target[held].dataType
    names = target.fieldNames()
    columns = [held]
    if table.mode == "scd2":  # a delete closes a version at its own time, after any valid_from
        columns += [c for c in (find_column(names, n) for n in table.scd2_options.columns[:2]) if c]
    values = [F.col(quote(c)).cast(kind) for c in columns]
    highest = [spark.table(name).select(F.greatest(*values) if len(values) > 1 else values[0])]
    side = tombstones.side_table(name, table)
    if table_exists(spark, side) and (dead := find_column(spark.table(side).columns, first)):
        highest.append(spark.table(side).select(F.col(quote(dead)).cast(kind)))
    highest.append(snapshot.select(F.col(SEQ).cast(kind)))
    top = reduce(DataFrame.unionAll, [h.toDF("v") for h in highest]).agg(F.max("v").alias("v"))
    return top.select(_successor(F.col("v"), kind, table.id, first).cast("string")).first()[0]


def stamped(snapshot: DataFrame, table: TableConfig, target: T.StructType, sequence: str) -> DataFrame:
    """The snapshot's rows carrying the repair sequence: the first sequence column (the table's column
    and SEQ) at `sequence`, the tie-breakers NULL."""
    names = table.sequence_columns
    for i, (meta, column) in enumerate(zip(seq_columns(len(names)), names, strict=True)):
        held = find_column(target.fieldNames(), column)
        kind = target[held].dataType if held else snapshot.schema[meta].dataType
        value = F.lit(sequence if i == 0 else None).cast(kind)
        if held is not None:  # the table compares its own column with later changes
            snapshot = snapshot.withColumn(find_column(snapshot.columns, column) or held, value)
        snapshot = snapshot.withColumn(meta, value)
    return snapshot


def _uncompared(table: TableConfig, rows: DataFrame, target: T.StructType) -> list[str]:
    """Notes naming the columns only one side holds: never compared."""
    fixed = {c.lower() for c in [*table.keys, *table.sequence_columns, *scd2.managed_columns(table)]}
    data = [c for c in cdc.data_columns(rows) if c.lower() not in fixed]
    only_snapshot = [c for c in data if find_column(target.fieldNames(), c) is None]
    only_table = [c for c in target.fieldNames() if c.lower() not in fixed and find_column(data, c) is None]
    notes = []
    if only_snapshot:
        notes.append(f"not compared, only the snapshot holds them: {', '.join(only_snapshot)}")
    if only_table:
        notes.append(f"not compared, only the table holds them: {', '.join(only_table)}")
    return notes


def compare_snapshot(
    spark: SparkSession,
    table: TableConfig,
    files: list[InputFile],
    *,
    catalog: str,
    repair: bool = False,
    progress: Progress = no_progress,
) -> Comparison:
    """`table` compared with the snapshot `files` hold: its missing (I), extra (D) and different (U) keys
    as change rows, every extra key a delete whatever `source.deletes` says. With `repair`, the rows
    carry the repair sequence, ready for `repair_difference`."""
    if not table.keys:
        raise LakeloaderError(f"table {table.id!r} has no keys: reconcile compares rows by key")
    if repair and table.mode not in ("merge", "scd2"):
        raise LakeloaderError(f"table {table.id!r}: --repair needs mode merge or scd2, not {table.mode}")
    name = s3_tables.target_name(spark, catalog, table)
    if not table_exists(spark, name):
        raise LakeloaderError(f"table {table.id!r}: {name} does not exist: nothing to reconcile yet")
    notes: list[str] = []
    progress(f"reading the snapshot: {len(files)} file(s), {sum(f.size for f in files):,} bytes")
    read = _read(spark, table, files, notes)
    records = iceberg.read_state(spark, name).records
    target = spark.table(name).schema
    rows = read.rows
    try:
        compared = diffing.compared_columns(table, rows, target)
        notes += _uncompared(table, rows, target)
        sequence = repair_sequence(spark, name, table, rows, target) if repair else None
        if sequence is not None:
            rows = stamped(rows, table, target, sequence)
        scope = "current versions" if table.mode == "scd2" else "rows"
        live = _live(spark, name, table)
        progress(f"comparing {read.count:,} snapshot row(s) with the table's {scope} ({live:,} held)")
        changes = diffing.as_changes(spark, name, table, rows, target, deletes="delete")
    finally:
        release(read.rows)
    return Comparison(name, target, records, read.count, compared, changes, sequence, notes)


def _live(spark: SparkSession, name: str, table: TableConfig) -> int:
    """The rows a reader sees (an SCD2 table's current versions): the snapshot's total-records also
    counts rows that merge-on-read delete files have deleted."""
    rows = spark.table(name)
    if table.mode == "scd2":
        rows = rows.filter(F.col(quote(table.scd2_options.is_current)))
    return rows.count()


def written_counts(table: TableConfig, counts: dict[str, int]) -> dict[str, int]:
    """The differences a repair writes, by kind (KINDS), from a comparison's counts: every missing and
    different key, and every extra key's delete unless the table keeps what its source deletes
    (`source.deletes: ignore`: extra keys are expected there)."""
    return {
        kind: n for kind, n in counts.items() if not (kind == "extra" and table.source.deletes == "ignore")
    }


def repair_difference(
    spark: SparkSession,
    table: TableConfig,
    comparison: Comparison,
    *,
    run_id: str,
    audit: dict[str, Any],
    progress: Progress = no_progress,
    before_publish: Any = lambda: None,
) -> BatchResult:
    """Write a comparison's difference (with `source.deletes: ignore`, not its deletes) through the
    batch's write path in one commit, whose summary records `audit` (commit.repair_summary)."""
    written = written_counts(table, comparison.counts)
    changes = comparison.changes.rows
    if len(written) < len(KINDS):
        changes = changes.filter(F.col(OP).isin(*[KINDS[kind] for kind in written]))
    deletes = written.get("extra", 0)
    count = sum(written.values())
    target = comparison.target
    result = BatchResult(changes=count)
    seq = [c for c in (find_column(target.fieldNames(), n) for n in table.sequence_columns) if c]

    # the deletes reach keys no list of the batch's keys names: nothing narrows the target
    plan = WritePlan(
        spark,
        table,
        target,
        seq,
        result,
        progress,
        target_rows=comparison.records,
        key_rows=count,
        deletes=deletes,
    )
    summary = commit.repair_summary(run_id, table.id, audit)
    main = commit.Destination(spark, comparison.name, summary, publishes=True, before_publish=before_publish)
    result.quality = gate.commit_batch(main, changes, plan, run_id=run_id)
    if result.quality is not None:
        result.notes.append(result.quality.describe())
    result.snapshot_id = iceberg.current_snapshot_id(spark, comparison.name, refresh=False)
    return result
