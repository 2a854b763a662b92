"""Slowly changing dimension, type 2 (``mode: scd2``): keep every version of every key.

`prepare` turns a batch's changes, in sequence order, into the close and open rows of ONE MERGE
(`merge_sql`) against the keys' current versions. The managed columns, the rules (no-op changes,
chains within a batch, late changes, deletes) and point-in-time queries: docs/schema_and_scd2.md.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakeloader.config import TableConfig
from lakeloader.engine import cdc, commit_check, partial, reconciliation, schema, tombstones
from lakeloader.engine.sequence import newer_sql
from lakeloader.iceberg.commit import Destination
from lakeloader.spark.columns import FILE, FILE_POS, OP, ROW_POS, SEQ, find_column
from lakeloader.spark.errors import BadInputError, LakeloaderError
from lakeloader.spark.progress import Progress
from lakeloader.spark.session import release
from lakeloader.spark.sql import quote

if TYPE_CHECKING:
    from lakeloader.engine.batch_result import BatchResult

KIND, CLOSE_AT = "_ll_kind", "_ll_close_at"
HASH, STATE, PREV, LATE, EFFECTIVE, NEXT, FIRST = (
    "_ll_hash",
    "_ll_state",
    "_ll_prev",
    "_ll_late",
    "_ll_effective",
    "_ll_next",
    "_ll_first",
)
T_LAST, T_HASH, T_CURRENT, T_FROM = "_ll_t_last", "_ll_t_hash", "_ll_t_current", "_ll_t_from"
TOMBSTONE = "_ll_tombstone"
# Stable JSON for hashing: UTC timestamps, NULL fields left out (so a column added
# later, NULL in old rows, does not change their hash).
JSON_OPTIONS = {"timeZone": "UTC", "ignoreNullFields": "true"}


def _held(i: int) -> str:
    """The current version's value of the i-th partial_updates column."""
    return f"_ll_t_cur_{i}"


def merge_key(i: int) -> str:
    return f"_ll_mk_{i}"


def managed_columns(table: TableConfig) -> list[str]:
    """Target columns lakeloader maintains itself (none unless the table is SCD2)."""
    return table.scd2_options.columns if table.mode == "scd2" else []


def with_scd2_columns(table: TableConfig, data: DataFrame) -> DataFrame:
    """`data` plus the managed columns, typed as the table should be created."""
    options = table.scd2_options
    seq = find_column(data.columns, table.sequence_column or "")
    if seq is None:
        raise BadInputError(
            table.id,
            "the sequence column is missing from the input (valid_from comes from it)",
            column=table.sequence_column,
        )
    seq_type = data.schema[seq].dataType
    return data.select(
        *[F.col(c) for c in data.columns],
        F.lit(None).cast(seq_type).alias(options.valid_from),
        F.lit(None).cast(seq_type).alias(options.valid_to),
        F.lit(None).cast("boolean").alias(options.is_current),
        F.lit(None).cast("string").alias(options.surrogate_key),
        F.lit(None).cast("string").alias(options.hash),
    )


def _hash(columns: list[str]) -> Column:
    ordered = sorted(columns, key=str.lower)
    return F.sha2(F.to_json(F.struct(*[F.col(c).alias(c.lower()) for c in ordered]), JSON_OPTIONS), 256)


def tracked_columns(table: TableConfig, data_columns: list[str]) -> list[str]:
    """The columns whose change opens a new version, spelled as in the table."""
    options = table.scd2_options
    if options.track is not None:
        tracked = []
        for name in options.track:
            actual = find_column(data_columns, name)
            if actual is None:
                raise LakeloaderError(
                    f"table {table.id!r}: scd2.track names column {name!r}, which the table does not have"
                )
            tracked.append(actual)
        return tracked
    skip = {k.lower() for k in table.keys} | {c.lower() for c in options.ignore}
    skip.update(c.lower() for c in table.sequence_columns)  # they move with every change
    return [c for c in data_columns if c.lower() not in skip]


@dataclass
class Scd2Batch:
    """The MERGE source of one batch (materialised) and what it will do."""

    source: DataFrame
    checkpoint: DataFrame  # the materialised per-change frame `source` reads; released when done
    opened: int
    superseded: int
    deleted: int
    late: int
    unchanged: int
    tombstones: int
    closed: int = 0  # the table's current versions the MERGE closes (updates)
    dropped: int = 0  # and those it deletes: replaced by a new version at their own valid_from

    def asked(self) -> reconciliation.Asked:
        """What the batch asks of the table (lakeloader.engine.reconciliation): the versions it opens, closes
        and drops; the changes applied, unchanged (superseded: no tracked column changed) and late."""
        return reconciliation.Asked(
            mode="scd2",
            upserts=self.opened,
            deletes=self.deleted,
            superseded=self.unchanged,
            late=self.late,
            expected=(self.opened, self.closed, self.dropped),
        )

    @property
    def empty(self) -> bool:
        return not (self.opened or self.deleted)


def prepare(
    spark: SparkSession, name: str, table: TableConfig, changes: DataFrame, target_schema: T.StructType
) -> Scd2Batch:
    """Turn a batch of changes into close/open rows against the table's current versions."""
    options = table.scd2_options
    names = target_schema.fieldNames()
    vf, vt, cur, sk, hs = (find_column(names, c) or c for c in options.columns)
    managed = {c.lower() for c in options.columns}
    data_schema = T.StructType([f for f in target_schema.fields if f.name.lower() not in managed])
    data_names = data_schema.fieldNames()
    keys = [find_column(data_names, k) or k for k in table.keys]
    seq_type = target_schema[vf].dataType

    missing_seq = changes.filter(F.col(SEQ).isNull()).select(FILE).first()
    if missing_seq is not None:
        raise BadInputError(
            table.id,
            "mode scd2 needs a sequence value on every change (valid_from comes from it)",
            file=missing_seq[0],
            column=table.sequence_column,
        )

    seq_meta = cdc.seq_columns_of(changes)
    events = schema.align(changes, data_schema, extra=[OP, *seq_meta, FILE_POS, ROW_POS])
    events = events.withColumn(SEQ, F.col(SEQ).cast(seq_type))

    # The key's latest known point in time and its current version, for the batch's keys only.
    versions = spark.table(name).join(events.select(*keys), on=keys, how="left_semi")
    # The tie-breakers the versions hold (data columns of the change that opened each version).
    breakers = [c for c in (find_column(data_names, n) for n in table.sequence_columns[1:]) if c]
    held = [f"_ll_t_tb_{i}" for i in range(len(breakers))]
    # Columns an update may leave out (partial_updates): the current version's values stand in.
    partial_names = partial.columns(table, data_names)
    state = versions.groupBy(*[F.col(k) for k in keys]).agg(
        F.max(F.coalesce(F.col(vt), F.col(vf))).alias(T_LAST),
        F.max(F.when(F.col(cur), F.col(hs))).alias(T_HASH),
        F.coalesce(F.max(F.col(cur)), F.lit(False)).alias(T_CURRENT),
        F.max(F.when(F.col(cur), F.col(vf))).alias(T_FROM),
        *[F.max(F.when(F.col(cur), F.col(b))).alias(h) for b, h in zip(breakers, held, strict=True)],
        *[
            F.first(F.when(F.col(cur), F.col(c)), ignorenulls=True).alias(_held(i))
            for i, c in enumerate(partial_names)
        ],
    )
    events = events.join(state, on=keys, how="left")
    # The sequence columns as the table holds them, which a tombstone (lakeloader.engine.tombstones) records.
    seq_names = [c for c in (find_column(data_names, n) for n in table.sequence_columns) if c]
    seq_types = [data_schema[c].dataType for c in seq_names]
    tomb = tombstones.lookup(spark, table, name, keys, seq_names, seq_types, events.select(*keys))
    if tomb is not None:
        events = events.join(tomb, on=keys, how="left")
    buried = tombstones.buried(events.columns, [quote(c) for c in seq_names])
    # Newer than the current version: the whole tuple; than a deleted key's end: its time only.
    newer_than_current = newer_sql([quote(c) for c in (T_FROM, *held)], [quote(c) for c in (SEQ, *breakers)])
    # A key without a current version: late if not after its history's end, or (an insert or update)
    # not newer than its tombstone -- a delete the history does not record.
    events = events.withColumn(
        LATE,
        F.when(F.col(T_CURRENT), ~F.expr(newer_than_current))
        .when(F.col(T_LAST).isNotNull() & (F.col(SEQ) <= F.col(T_LAST)), F.lit(True))
        .otherwise((F.col(OP) != "D") & buried),
    )
    # Left-out values: from the key's earlier (not late) changes in the batch, else its current version.
    events, filled = partial.fill(events, table, partition=(LATE,), names=partial_names)
    for column, i in ((c, filled[c.lower()]) for c in partial_names):
        stand_in = F.when(F.col(T_CURRENT), F.col(_held(i)))
        events = events.withColumn(column, F.when(F.col(partial.keep(i)), stand_in).otherwise(F.col(column)))
    events = events.withColumn(HASH, _hash(tracked_columns(table, data_names)))

    # Same key and valid_from: the last change (sequence tuple, then file, then row) wins.
    tie = Window.partitionBy(*[F.col(k) for k in keys], F.col(LATE), F.col(SEQ)).orderBy(
        *cdc.newest_first(events)
    )
    events = events.withColumn("_ll_tie", F.row_number().over(tie)).filter(F.col("_ll_tie") == 1)

    # A change is effective when it moves the key to a different state (a live hash, or NULL = none).
    in_order = Window.partitionBy(*[F.col(k) for k in keys], F.col(LATE)).orderBy(F.col(SEQ))
    events = events.withColumn(
        STATE, F.when(F.col(OP) == "D", F.lit(None).cast("string")).otherwise(F.col(HASH))
    )
    events = events.withColumn(
        PREV,
        F.when(F.row_number().over(in_order) == 1, F.when(F.col(T_CURRENT), F.col(T_HASH))).otherwise(
            F.lag(F.col(STATE)).over(in_order)
        ),
    )
    events = events.withColumn(EFFECTIVE, ~F.col(LATE) & ~F.col(STATE).eqNullSafe(F.col(PREV)))
    # A delete that closes nothing (the key is absent then) leaves a tombstone, unless an insert or
    # update of the key precedes it in the batch: so a re-run after a crash between the tombstone's
    # append and the MERGE never buries one of its own changes.
    only_deletes_before = F.max((F.col(OP) != "D").cast("int")).over(
        in_order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    events = events.withColumn(
        TOMBSTONE,
        (F.col(OP) == "D")
        & ~F.col(LATE)
        & ~F.col(EFFECTIVE)
        & (only_deletes_before == 0)
        & F.lit(tombstones.enabled(table, seq_names)),
    )

    # Among effective changes: the next one ends a version; the first one closes the table's current.
    chain = Window.partitionBy(*[F.col(k) for k in keys], F.col(EFFECTIVE)).orderBy(F.col(SEQ))
    events = events.withColumn(NEXT, F.lead(F.col(SEQ)).over(chain)).withColumn(
        FIRST, F.row_number().over(chain) == 1
    )
    events = events.localCheckpoint(eager=True)

    is_open = F.col(EFFECTIVE) & (F.col(OP) != "D")
    # The table's current versions the MERGE closes, and those it drops (a new version at the current
    # one's own valid_from replaces it): what the commit is reconciled with (engine.commit_check).
    closing = F.col(EFFECTIVE) & F.col(FIRST) & F.coalesce(F.col(T_CURRENT), F.lit(False))
    replacing = (F.col(SEQ) == F.col(T_FROM)) & (F.col(OP) != "D")
    counts = events.agg(
        F.sum(F.col(LATE).cast("int")).alias("late"),
        F.sum((~F.col(LATE) & ~F.col(EFFECTIVE)).cast("int")).alias("unchanged"),
        F.sum(is_open.cast("int")).alias("opened"),
        F.sum((is_open & F.col(PREV).isNotNull()).cast("int")).alias("superseded"),
        F.sum((F.col(EFFECTIVE) & (F.col(OP) == "D")).cast("int")).alias("deleted"),
        F.sum(F.col(TOMBSTONE).cast("int")).alias("tombstones"),
        F.sum((closing & ~replacing).cast("int")).alias("closed"),
        F.sum((closing & replacing).cast("int")).alias("dropped"),
    ).first()
    if counts["tombstones"]:  # before the MERGE: see lakeloader.engine.tombstones
        tombstones.record(spark, table, name, events.filter(F.col(TOMBSTONE)), keys, seq_names)

    key_types = {k: data_schema[k].dataType for k in keys}
    surrogate = F.sha2(
        F.to_json(
            F.struct(*[F.col(k).alias(k.lower()) for k in keys], F.col(SEQ).alias("valid_from")),
            JSON_OPTIONS,
        ),
        256,
    )
    managed_values = {
        vf: F.col(SEQ),
        vt: F.col(NEXT),
        cur: F.col(NEXT).isNull(),
        sk: surrogate,
        hs: F.col(HASH),
    }
    opens = events.filter(is_open).select(
        *[
            (managed_values.get(f.name, F.col(f.name))).cast(f.dataType).alias(f.name)
            for f in target_schema.fields
        ],
        F.lit("open").alias(KIND),
        *[F.lit(None).cast(key_types[k]).alias(merge_key(i)) for i, k in enumerate(keys)],
        F.lit(None).cast(seq_type).alias(CLOSE_AT),
    )
    # A new version at the current one's own valid_from replaces it (a zero-length version would be
    # invisible and would repeat its surrogate key); a delete at that instant closes it as usual.
    replaces = (F.col(SEQ) == F.col(T_FROM)) & (F.col(OP) != "D")
    closes = events.filter(F.col(EFFECTIVE) & F.col(FIRST) & F.col(T_CURRENT)).select(
        *[F.lit(None).cast(f.dataType).alias(f.name) for f in target_schema.fields],
        F.when(replaces, F.lit("drop")).otherwise(F.lit("close")).alias(KIND),
        *[F.col(k).alias(merge_key(i)) for i, k in enumerate(keys)],
        F.col(SEQ).alias(CLOSE_AT),
    )
    return Scd2Batch(
        source=opens.unionByName(closes),
        checkpoint=events,
        opened=counts["opened"] or 0,
        superseded=counts["superseded"] or 0,
        deleted=counts["deleted"] or 0,
        late=counts["late"] or 0,
        unchanged=counts["unchanged"] or 0,
        tombstones=counts["tombstones"] or 0,
        closed=counts["closed"] or 0,
        dropped=counts["dropped"] or 0,
    )


def merge_sql(name: str, view: str, table: TableConfig, target_schema: T.StructType) -> str:
    """One MERGE: close rows end the current version (drop rows remove one replaced at its own
    valid_from), open rows (NULL merge key) are inserted."""
    names = target_schema.fieldNames()
    options = table.scd2_options
    vt, cur = (find_column(names, c) or c for c in (options.valid_to, options.is_current))
    keys = [find_column(names, k) or k for k in table.keys]
    on = " AND ".join(f"t.{quote(k)} = s.{quote(merge_key(i))}" for i, k in enumerate(keys))
    cols = ", ".join(quote(c) for c in names)
    values = ", ".join(f"s.{quote(c)}" for c in names)
    return (
        f"MERGE INTO {name} t USING {quote(view)} s ON {on} AND t.{quote(cur)} = TRUE "
        f"WHEN MATCHED AND s.{quote(KIND)} = 'drop' THEN DELETE "
        f"WHEN MATCHED AND s.{quote(KIND)} = 'close' "
        f"THEN UPDATE SET t.{quote(vt)} = s.{quote(CLOSE_AT)}, t.{quote(cur)} = FALSE "
        f"WHEN NOT MATCHED AND s.{quote(KIND)} = 'open' THEN INSERT ({cols}) VALUES ({values})"
    )


def notes(batch: Scd2Batch) -> list[str]:
    lines = []
    if batch.late:
        lines.append(
            f"scd2: {batch.late:,} late change(s) not newer than their key's latest version or delete "
            "ignored (history is never rewritten)"
        )
    if batch.unchanged:
        lines.append(
            f"scd2: {batch.unchanged:,} change(s) left the tracked columns unchanged; no new version"
        )
    return lines


def write(
    spark: SparkSession,
    target: Destination,
    table: TableConfig,
    changes: DataFrame,
    target_schema: T.StructType,
    result: BatchResult,
    progress: Progress,
) -> None:
    """Close and open versions in one MERGE."""
    batch = prepare(spark, target.name, table, changes, target_schema)
    try:
        result.inserted, result.updated, result.deleted = batch.opened, batch.superseded, batch.deleted
        result.notes.extend(notes(batch))
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
            statement = merge_sql(target.name, view, table, target_schema)
            with target.committing():
                spark.sql(statement)
        finally:
            spark.catalog.dropTempView(view)
        commit_check.check_commit(spark, target, table, batch.asked(), result, progress)
    finally:
        release(batch.checkpoint)
