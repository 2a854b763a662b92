"""``on_truncate: empty_table``: a truncate becomes a delete of every key, at the truncate's place in
the order of changes.

Every key the table holds (scd2: every current version) and every key the batch changed before the
truncate gets a delete carrying the truncate's sequence tuple, file and row position. The ordinary
path then does the rest in the table's one commit: a change ordered after the truncate is newer and
wins, everything before it loses to the delete, each delete leaves a tombstone (so an older change
delivered later stays deleted), and scd2 closes each current version at the truncate's time.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakeloader.config import TableConfig
from lakeloader.engine import cdc
from lakeloader.engine.sequence import newer_sql
from lakeloader.spark.columns import FILE, FILE_POS, OP, ROW_POS, find_column
from lakeloader.spark.sql import quote

POINT = "_ll_truncate_"  # the last truncate's order columns, beside each row


def as_deletes(spark: SparkSession, name: str, table: TableConfig, changes: DataFrame) -> DataFrame:
    """`changes` with its truncates replaced by deletes of every key (see the module docstring).
    Materialised: the MERGE refuses a source whose plan it cannot re-read."""
    order = [*cdc.seq_columns_of(changes), FILE_POS, ROW_POS]
    data = cdc.data_columns(changes)
    carried = [c for c in (find_column(data, s) for s in table.sequence_columns) if c]
    last = (
        changes.filter(F.col(OP) == "T")
        .orderBy(*cdc.newest_first(changes))
        .limit(1)
        .select(*[F.col(c) for c in (*order, FILE, *carried)])
    )
    point = last.select(*[F.col(c).alias(f"{POINT}{i}") for i, c in enumerate(order)])
    after = F.expr(newer_sql([quote(f"{POINT}{i}") for i in range(len(order))], [quote(c) for c in order]))
    keys = [find_column(data, k) or k for k in table.keys]
    before = changes.crossJoin(F.broadcast(point)).filter(~after & (F.col(OP) != "T"))
    held = spark.table(name)
    if table.mode == "scd2":
        held = held.filter(F.col(quote(table.scd2_options.is_current)))
    held_keys = held.select(*[F.col(quote(find_column(held.columns, k) or k)).alias(k) for k in keys])
    every_key = held_keys.union(before.select(*[F.col(quote(k)) for k in keys])).distinct()
    deletes = every_key.crossJoin(F.broadcast(last)).withColumn(OP, F.lit("D"))
    kept = changes.filter(F.col(OP) != "T")
    return (
        kept.unionByName(deletes, allowMissingColumns=True)
        .select(*changes.columns)
        .localCheckpoint(eager=True)
    )
