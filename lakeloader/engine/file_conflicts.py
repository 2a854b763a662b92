"""A batch's files checked one by one, from their own schemas, before they are combined: a file with a
column the table cannot hold (string where the table has double), or one the batch's earlier files
type otherwise, is named with the column, both types and what would resolve it, and set aside like an
unreadable file (ColumnConflictError) while the others load. Combined first, such a batch failed as a
whole with Spark's CANNOT_MERGE_INCOMPATIBLE_DATA_TYPE, naming neither file nor column.

What each file's columns are typed as is read without reading its rows: Parquet's footer. CSV files
are read as strings (their types are declared in source.schema), and a JSON batch's types are
inferred over the whole batch, so neither is checked here. A column with a declared type is cast to
it at read (a value that does not fit is then named), so it never conflicts.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import SparkSession
from pyspark.sql import types as T

from lakeloader.config import TableConfig
from lakeloader.engine.shaping import kept_columns
from lakeloader.formats.files import footer_schemas
from lakeloader.spark.errors import ColumnConflictError
from lakeloader.spark.inputs import InputFile, batch_order
from lakeloader.spark.progress import Progress, no_progress
from lakeloader.spark.type_changes import differences, dotted, wider


def check_files(
    spark: SparkSession,
    table: TableConfig,
    files: list[InputFile],
    target: T.StructType | None,
    progress: Progress = no_progress,
) -> None:
    """Raise ColumnConflictError naming every file of the batch with a conflicting column."""
    if table.source.format != "parquet" or not files:
        return
    ordered = batch_order(files)
    try:
        schemas = footer_schemas(spark, ordered)
    except Exception:  # a footer that cannot be read: the batch's read names the file (engine.unreadable)
        return
    found = conflicts(table, ordered, schemas, target)
    if found:
        progress(f"{len(found)} file(s) with a conflicting column: " + ", ".join(found))
        raise ColumnConflictError(table.id, found)


def conflicts(
    table: TableConfig,
    files: Sequence[InputFile],
    schemas: Sequence[T.StructType],
    target: T.StructType | None,
) -> dict[str, str]:
    """Each file (in batch order) whose columns conflict with the table's, or with the types the
    batch's earlier files gave a column the table does not hold, with its message.

    A type the column may widen to (int -> bigint, float -> double, decimal precision up) conflicts only
    with a table column whose policy (schema_evolution freeze or fail) forbids widening it; between the
    files of a batch it widens (the table is then created, or the column added, at the wider type).
    """
    declared = {c.lower() for c in table.source.schema_ or {}}
    from_table = {f.name.lower(): f for f in target.fields} if target is not None else {}
    from_batch: dict[str, tuple[T.StructField, str]] = {}  # column -> (type so far, the file that set it)
    found: dict[str, str] = {}
    for file, schema in zip(files, schemas, strict=True):
        kept = {c.lower() for c in kept_columns(schema.fieldNames(), table)}
        columns = [f for f in schema.fields if f.name.lower() in kept and f.name.lower() not in declared]
        problems = []
        for column in columns:
            own = from_table.get(column.name.lower())
            earlier = from_batch.get(column.name.lower())
            if own is not None:
                problems += _against_table(table, own, column)
            elif earlier is not None:
                problems += _against_batch(earlier, column)
        if problems:
            found[file.name] = f"table {table.id!r}, file {file.name!r}, " + "; ".join(problems)
            continue
        for column in columns:
            key = column.name.lower()
            if key in from_table:
                continue
            if key in from_batch:
                earlier, first = from_batch[key]
                column = T.StructField(earlier.name, wider(earlier.dataType, column.dataType))
                from_batch[key] = (column, first)
            else:
                from_batch[key] = (column, file.name)
    return found


def _against_table(table: TableConfig, own: T.StructField, column: T.StructField) -> list[str]:
    problems = []
    for path, verdict, want, got in differences((own.name,), own.dataType, column.dataType):
        if verdict == "widen" and table.schema_evolution == "evolve":
            continue
        where = f"column {dotted(path)!r}: {got.simpleString()} where the table has {want.simpleString()}"
        if verdict == "widen":
            fix = (
                f"widening it needs schema_evolution: evolve (this table has {table.schema_evolution}), or "
                f"declare {own.name}: {own.dataType.simpleString()} in source.schema to cast its values"
            )
        else:
            fix = _cast_hint(own, path)
        problems.append(f"{where}; {got.simpleString()} cannot be written to {want.simpleString()}: {fix}")
    return problems


def _against_batch(earlier: tuple[T.StructField, str], column: T.StructField) -> list[str]:
    own, first = earlier
    return [
        f"column {dotted(path)!r}: {got.simpleString()} where the batch's earlier file {first!r} has "
        f"{want.simpleString()}; the two cannot be combined: {_cast_hint(own, path)}"
        for path, verdict, want, got in differences((own.name,), own.dataType, column.dataType)
        if verdict == "incompatible"
    ]


def _cast_hint(own: T.StructField, path: tuple[str, ...]) -> str:
    nested = " (the whole column)" if len(path) > 1 else ""
    return (
        f"declare {own.name}: {own.dataType.simpleString()} in source.schema{nested} to cast its values "
        "(a value that does not fit is named), or fix the file and load it again (requeue; lakeloader run "
        "retries it)"
    )
