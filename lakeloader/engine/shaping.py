"""Table-level shaping of a batch at read: column selection (``columns:``) and soft deletes
(``delete_when:``). Both run inside ``cdc.read_changes``: selection right after the files are read
(before the declared schema, schema evolution or the table's creation ever see a column), soft deletes
right after the operations are normalised.
"""

from __future__ import annotations

from pyspark.errors import AnalysisException, ParseException
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakeloader.config import TableConfig
from lakeloader.spark.columns import OP
from lakeloader.spark.errors import BadInputError
from lakeloader.spark.sql import quote


def select_columns(df: DataFrame, table: TableConfig) -> DataFrame:
    """The columns the table keeps (`kept_columns`)."""
    if table.columns is None:
        return df
    return df.select(*[F.col(quote(c)) for c in kept_columns(df.columns, table)])


def kept_columns(names: list[str], table: TableConfig) -> list[str]:
    """Of a file's column names, the ones the table keeps. Meta columns (``_ll_*``), the format's
    operation columns, the keys, the sequence and the partition columns always stay (the config refuses
    excluding them)."""
    selection = table.columns
    if selection is None:
        return list(names)
    if selection.exclude is not None:
        dropped = {c.lower() for c in selection.exclude}
        return [c for c in names if c.lower() not in dropped]
    from lakeloader.formats import source_format

    always = [*table.keys, *table.sequence_columns, *table.target.partition_columns]
    kept = {
        c.lower() for c in [*(selection.include or []), *always, *source_format(table.source.cdc).op_columns]
    }
    return [c for c in names if c.lower() in kept or c.startswith("_ll_")]


def soft_deletes(df: DataFrame, table: TableConfig) -> DataFrame:
    """Rows matching ``delete_when`` become deletes (their operation is set to D); a truncate stays."""
    predicate = table.delete_when
    if predicate is None:
        return df
    try:
        matches = F.coalesce(F.expr(predicate).cast("boolean"), F.lit(False))
        return df.withColumn(OP, F.when(matches & (F.col(OP) != "T"), F.lit("D")).otherwise(F.col(OP)))
    except (AnalysisException, ParseException) as exc:
        reason = str(exc).strip().splitlines()[0]
        raise BadInputError(table.id, f"delete_when {predicate!r} cannot be evaluated: {reason}") from None
