"""``cdc: snapshot``: one complete snapshot turned into the changes that make the table equal to it.

A key only the snapshot holds is an insert; a key both hold is an update when a compared column
differs (NULL-safe); a key only the table holds (its current version, in SCD2) is a delete, unless
``source.deletes: ignore``. Unchanged keys produce nothing, so the merge that follows rewrites only
the files of the changed rows. The changes carry the snapshot's sequence, so they go through the
normal merge path: tombstones, SCD2 history, the quality gate.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce
from typing import Literal

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakeloader.config import TableConfig
from lakeloader.engine import cdc
from lakeloader.formats.full_copy import order_key
from lakeloader.spark.columns import FILE, FILE_POS, OP, ROW_POS, SEQ, find_column
from lakeloader.spark.errors import BadInputError
from lakeloader.spark.session import Metrics, release
from lakeloader.spark.sql import count_equal

IN_SNAPSHOT, IN_TABLE = "_ll_in_snapshot", "_ll_in_table"
SNAPSHOT_SEQ, SNAPSHOT_FILE = "_ll_snapshot_seq", "_ll_snapshot_file"
# Up to this many changes, a snapshot's changes are one partition, as a small CDC batch is (cdc.is_small)
FEW_CHANGES = 200_000


def _held_key(i: int) -> str:
    return f"_ll_held_key_{i}"


def _held_value(i: int) -> str:
    return f"_ll_held_{i}"


@dataclass
class FullCopyChanges:
    rows: DataFrame  # change rows shaped as cdc.read_changes returns them, checkpointed
    inserts: int
    updates: int
    deletes: int

    @property
    def count(self) -> int:
        return self.inserts + self.updates + self.deletes


def sequence_of(snapshot: DataFrame) -> str:
    """The snapshot's order key: its highest first sequence value (one value when it is the folder)."""
    row = snapshot.agg(F.max(SEQ).alias("v"), F.max(SEQ).cast("string").alias("s")).first()
    if row is None or row["v"] is None:
        raise ValueError("the snapshot's sequence column holds no value")
    return order_key(row["v"] if isinstance(row["v"], int) else row["s"])


def compared_columns(table: TableConfig, snapshot: DataFrame, target: T.StructType) -> list[str]:
    """The snapshot's columns whose change makes an update (source spelling): compare_columns, or every
    data column the table holds but the keys and the sequence columns."""
    data = cdc.data_columns(snapshot)
    if table.source.compare_columns:
        found = []
        for name in table.source.compare_columns:
            actual = find_column(data, name)
            if actual is None:
                raise BadInputError(
                    table.id, "a compare_columns column is missing from the snapshot", column=name
                )
            found.append(actual)
        return found
    fixed = {c.lower() for c in [*table.keys, *table.sequence_columns]}
    return [c for c in data if c.lower() not in fixed and find_column(target.fieldNames(), c)]


def _same(left: Column, right: Column, data_type: T.DataType) -> Column:
    """NULL-safe equality; maps (not comparable in Spark) by their JSON."""
    if isinstance(data_type, T.MapType):
        return F.to_json(left).eqNullSafe(F.to_json(right))
    return left.eqNullSafe(right)


def as_changes(
    spark: SparkSession,
    name: str,
    table: TableConfig,
    snapshot: DataFrame,
    target: T.StructType,
    *,
    deletes: Literal["delete", "ignore"] | None = None,
    sequence: Column | None = None,
) -> FullCopyChanges:
    """The inserts, updates and deletes that make table `name` equal to `snapshot` (cdc.read_changes'
    rows of one snapshot, every row an insert), materialised once: the merge reads them several times,
    and each read of the join would scan the table again.

    `deletes`: whether the keys only the table holds become deletes (default: `source.deletes`);
    `lakeloader reconcile` (lakeloader.jobs.reconcile) counts them whatever the table says.
    `sequence`: the deletes' sequence when the snapshot holds no row to take it from (a folder's own
    value): an empty snapshot deletes every key."""
    keys = [find_column(snapshot.columns, k) for k in table.keys]
    compared = compared_columns(table, snapshot, target)
    current = spark.table(name)
    if table.mode == "scd2":
        current = current.filter(F.col(table.scd2_options.is_current))
    spelled = {c: find_column(target.fieldNames(), c) for c in [*keys, *compared]}
    held = current.select(
        *[F.col(spelled[k]).alias(_held_key(i)) for i, k in enumerate(keys)],
        *[F.col(spelled[c]).alias(_held_value(i)) for i, c in enumerate(compared)],
        F.lit(True).alias(IN_TABLE),
    )
    # A delete takes the snapshot's sequence, and a file name for messages
    highest = F.max(SEQ) if sequence is None else F.coalesce(F.max(SEQ), sequence)
    sequence_row = snapshot.agg(highest.alias(SNAPSHOT_SEQ), F.max(FILE).alias(SNAPSHOT_FILE))
    given = snapshot.withColumn(IN_SNAPSHOT, F.lit(True))
    on = reduce(lambda a, b: a & b, [F.col(k) == F.col(_held_key(i)) for i, k in enumerate(keys)])
    joined = given.join(held, on=on, how="full_outer").crossJoin(F.broadcast(sequence_row))

    differs = reduce(
        lambda a, b: a | b,
        [
            ~_same(F.col(c), F.col(_held_value(i)), snapshot.schema[c].dataType)
            for i, c in enumerate(compared)
        ],
        F.lit(False),
    )
    op = (
        F.when(F.col(IN_SNAPSHOT).isNull(), F.lit("D"))
        .when(F.col(IN_TABLE).isNull(), F.lit("I"))
        .when(differs, F.lit("U"))
    )
    # A delete takes the snapshot's sequence in the first sequence column; its tie-breakers stay NULL
    # (the oldest), as a value of the first one cast to theirs would not order anything
    sequence_columns = set(cdc.seq_columns_of(snapshot))
    sequence_columns |= {find_column(snapshot.columns, c) for c in table.sequence_columns} - {None}
    firsts = {SEQ, find_column(snapshot.columns, table.sequence_column or "")} - {None}
    defaults = {FILE_POS: F.lit(0), ROW_POS: F.lit(0), FILE: F.col(SNAPSHOT_FILE)}

    def column(c: str) -> Column:
        kind = snapshot.schema[c].dataType
        if c == OP:
            return op.alias(OP)
        if c in keys:
            return F.coalesce(F.col(c), F.col(_held_key(keys.index(c))).cast(kind)).alias(c)
        if c in firsts:
            return F.coalesce(F.col(c), F.col(SNAPSHOT_SEQ).cast(kind)).alias(c)
        if c in sequence_columns:
            return F.col(c)
        if c in defaults:
            return F.coalesce(F.col(c), defaults[c]).alias(c)
        return F.col(c)

    changed = joined.select(*[column(c) for c in snapshot.columns]).filter(F.col(OP).isNotNull())
    if (deletes or table.source.deletes) == "ignore":
        changed = changed.filter(F.col(OP) != "D")
    observation = Metrics("snapshot")
    counts = {op: count_equal(OP, op) for op in ("I", "U", "D")}
    rows = observation.on(changed, counts).localCheckpoint(eager=True)
    release(snapshot)
    got = observation.values
    found = FullCopyChanges(rows, got["I"] or 0, got["U"] or 0, got["D"] or 0)
    if found.count <= FEW_CHANGES:  # one partition: the merge broadcasts it (cdc.is_small)
        found.rows = rows.coalesce(1)
    return found
