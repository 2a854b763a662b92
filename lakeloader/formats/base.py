"""What every source format is: its plain facts (config reads them without a JVM) and how its files
become change rows (the job calls these; PySpark is imported inside them, never at import time, so
``lakeloader.config`` and ``cdk synth`` can import this package without PySpark).

A format's ``read_checked`` returns one DataFrame over all files of a batch: the source's data
columns, the columns the format consumes (``op_columns``), and FILE_POS / ROW_POS. ``operation``
maps the consumed columns to the engine's operations: I (insert/upsert), U (update), D (delete),
T (truncate); anything else is reported as bad input.
"""

from __future__ import annotations

import string
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType

    from lakeloader.formats.reading import Check, FormatTable
    from lakeloader.spark.inputs import InputFile


def ascii_upper(column: Column) -> Column:
    """`upper` for the ASCII letters alone, which is all an operation code or a flag holds. Spark 4's
    `upper` and `lower` map case through ICU, whose classes take about a second to load in every new
    JVM: each Glue 6.0 job run (measured on 2026-11-30, benchmarks/RESULTS.md)."""
    from pyspark.sql import functions as F

    return F.translate(column, string.ascii_lowercase, string.ascii_uppercase)


def ascii_lower(column: Column) -> Column:
    """`lower` for the ASCII letters alone (`ascii_upper` says why)."""
    from pyspark.sql import functions as F

    return F.translate(column, string.ascii_uppercase, string.ascii_lowercase)


class SourceFormat:
    """One source format (``source.cdc``). Subclasses override the facts and, where their files
    differ from plain CSV/JSON/Parquet rows, ``read_checked``, ``operation`` and ``decode``."""

    name: ClassVar[str]
    op_columns: ClassVar[tuple[str, ...]] = ()  # consumed: dropped once the operation is known
    op_column_label: ClassVar[str] = "op"  # how error messages name the operation column
    default_sequence: ClassVar[str | None] = None  # the first sequence column when sequence_by is unset
    # Appended to a one-column sequence_by (or the default), monotonic at the source; a column a file
    # lacks compares as NULL (the oldest).
    tie_breakers: ClassVar[tuple[str, ...]] = ()
    placeholder: ClassVar[str | None] = None  # the value meaning "unchanged" (partial_updates)
    csv_escape: ClassVar[str] = "\\"  # the escape character of the format's CSV files
    # What makes the source write the first sequence column: said when a CDC file lacks it.
    sequence_setting: ClassVar[str] = ""

    @property
    def is_cdc(self) -> bool:
        return bool(self.op_columns)

    def read_checked(
        self, spark: SparkSession, table: FormatTable, files: list[InputFile], checks: list[Check]
    ) -> DataFrame:
        """The batch's rows with FILE_POS and ROW_POS. A format whose files need reshaping or
        decoding overrides this, appending to `checks` a value that does not decode."""
        from lakeloader.formats import files as plain

        return plain.read_rows(spark, table, files, self)

    def operation(self, df: DataFrame) -> Column:
        """The engine operation of each row (I, U, D, T or the source's unknown value, upper case)."""
        from pyspark.sql import functions as F

        return F.lit("I")

    def decode(self, column: str, source_type: DataType, target_type: DataType) -> Column | None:
        """A source encoding of a declared (``source.schema``) type the plain cast does not read, e.g.
        Debezium's base64 decimals; None: cast as usual."""
        return None

    def headerless_columns(self, names: list[str], found: int) -> list[str]:
        """The names of a headerless CSV file's columns, given csv.columns and how many it has."""
        return names
