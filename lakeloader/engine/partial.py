"""Partial updates (``partial_updates:``): an update that leaves a column out keeps its current value.

Debezium writes ``__debezium_unavailable_value`` for an unchanged TOASTed column, DMS can write NULL
for an unchanged LOB column. Such a value in an update (op U) means "unchanged"; inserts and deletes
always carry real values (a delete's are NULL: the key is gone). The value an update leaves out is:

1. the last real value of that column among the key's earlier changes in the batch, in sequence
   order (sequence tuple, then file, then row; a delete or an insert resets it), else
2. the table's current value (merge: inside the MERGE itself, so it costs no extra read; scd2: the
   key's current version), else NULL (the table does not hold the key).

In ``merge`` mode a value taken from the batch is used only when the change that carried it is
newer than the row the table holds: otherwise the table's (newer) value stands.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakeloader.config import TableConfig
from lakeloader.engine import cdc
from lakeloader.engine.sequence import newer_sql
from lakeloader.spark.columns import FILE_POS, OP, ROW_POS, find_column
from lakeloader.spark.sql import quote


def keep(i: int) -> str:
    """Flag column: column i was left out and nothing in the batch supplies it (use the table's)."""
    return f"_ll_keep_{i}"


def source(i: int) -> str:
    """Struct column: the sequence tuple of the change column i's value comes from (merge)."""
    return f"_ll_from_{i}"


def columns(table: TableConfig, data: list[str]) -> list[str]:
    """The batch's columns an update may leave out, spelled as in `data`."""
    partial = table.partial_updates
    if partial is None:
        return []
    if partial.columns == "all":
        fixed = {k.lower() for k in table.keys} | {c.lower() for c in table.sequence_columns}
        return [c for c in data if c.lower() not in fixed]
    return [c for c in (find_column(data, n) for n in partial.columns) if c is not None]


def _unchanged(table: TableConfig, column: str, data_type: T.DataType) -> Column:
    partial = table.partial_updates
    assert partial is not None
    value, marks = F.col(quote(column)), []
    placeholder = table.unchanged_placeholder
    if placeholder is not None and isinstance(data_type, T.StringType | T.BinaryType):
        marks.append(F.coalesce(value.cast("string") == F.lit(placeholder), F.lit(False)))
    if partial.ignore_nulls:
        marks.append(value.isNull())
    unchanged = marks[0] if marks else F.lit(False)
    for mark in marks[1:]:
        unchanged = unchanged | mark
    return (F.col(OP) == "U") & unchanged


def fill(
    changes: DataFrame,
    table: TableConfig,
    *,
    seq: list[str] | None = None,
    partition: tuple[str, ...] = (),
    names: list[str] | None = None,
) -> tuple[DataFrame, dict[str, int]]:
    """Resolve left-out values from the key's earlier changes in the batch (rule 1).

    Returns the changes and {column (lower case): i}. Where nothing in the batch supplies a value,
    the column reads NULL and `keep(i)` is true. With `seq` (merge: the sequence columns the table
    holds), `source(i)` holds the tuple of the change the value came from. `partition`: more columns
    splitting a key's changes into chains; `names`: the columns (default: `columns` of the batch).
    """
    names = columns(table, cdc.data_columns(changes)) if names is None else names
    if not names:
        return changes, {}
    keys = [find_column(changes.columns, k) or k for k in table.keys]
    ascending = [F.col(c).asc_nulls_first() for c in cdc.seq_columns_of(changes)]
    order = (
        Window.partitionBy(*[F.col(quote(k)) for k in keys], *[F.col(p) for p in partition])
        .orderBy(*ascending, F.col(FILE_POS).asc(), F.col(ROW_POS).asc())
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    held = [find_column(changes.columns, s) for s in seq or []]
    tuple_ = F.struct(*[(F.col(quote(h)) if h else F.lit(None)).alias(f"s{j}") for j, h in enumerate(held)])
    is_delete = F.col(OP) == "D"
    for i, name in enumerate(names):
        data_type = changes.schema[name].dataType
        left_out = _unchanged(table, name, data_type)
        real = F.when(is_delete, F.lit(None).cast(data_type)).otherwise(F.col(quote(name)))
        supplied = F.when(~left_out, F.struct(real.alias("v"), *([tuple_.alias("s")] if seq else [])))
        latest = F.last(supplied, ignorenulls=True).over(order)
        changes = changes.withColumn(keep(i), left_out & latest.isNull())
        if seq:
            changes = changes.withColumn(source(i), F.when(left_out, latest["s"]).otherwise(tuple_))
        changes = changes.withColumn(name, F.when(left_out, latest["v"]).otherwise(F.col(quote(name))))
    return changes, {n.lower(): i for i, n in enumerate(names)}


def extra_columns(filled: dict[str, int], *, with_source: bool) -> list[str]:
    """The bookkeeping columns `fill` added, to carry along."""
    out = [keep(i) for i in filled.values()]
    return out + ([source(i) for i in filled.values()] if with_source else [])


def merge_values(columns: list[str], filled: dict[str, int], seq: list[str]) -> tuple[list[str], list[str]]:
    """(UPDATE SET terms, INSERT values) of the merge MERGE: a left-out column keeps the table's value,
    and so does one whose batch value comes from a change not newer than the row held."""
    sets, values = [], []
    for c in columns:
        i = filled.get(c.lower())
        if i is None:
            sets.append(f"t.{quote(c)} = s.{quote(c)}")
            values.append(f"s.{quote(c)}")
            continue
        stale = [f"s.{quote(keep(i))}"]
        if seq:
            incoming = [f"s.{quote(source(i))}.{quote(f's{j}')}" for j in range(len(seq))]
            stale.append(f"NOT {newer_sql([f't.{quote(h)}' for h in seq], incoming)}")
        sets.append(f"t.{quote(c)} = CASE WHEN {' OR '.join(stale)} THEN t.{quote(c)} ELSE s.{quote(c)} END")
        values.append(f"CASE WHEN s.{quote(keep(i))} THEN NULL ELSE s.{quote(c)} END")
    return sets, values
