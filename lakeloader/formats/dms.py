"""``cdc: dms``: AWS DMS S3 target files (CSV or Parquet).

CDC rows carry an ``Op`` column (I, U, D) first; full-load files lack it unless the endpoint sets
``IncludeOpForFullLoad``. The change's time is the column the endpoint's ``TimestampColumnName``
names (the default here: ``last_update_time``); ``AR_H_CHANGE_SEQ``, added by a transformation rule,
breaks ties. DMS writes RFC 4180 CSV: a quote inside a value is doubled (docs/sources.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakeloader.formats.base import SourceFormat, ascii_upper
from lakeloader.spark.columns import find_column

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


class Dms(SourceFormat):
    name = "dms"
    op_columns = ("Op",)
    op_column_label = "Op"
    default_sequence = "last_update_time"
    tie_breakers = ("AR_H_CHANGE_SEQ",)  # zero-padded text; empty in full loads
    csv_escape = '"'
    sequence_setting = (
        "set TimestampColumnName on the DMS S3 target endpoint (docs/sources.md), or name the column "
        "with sequence_by"
    )

    def operation(self, df: DataFrame) -> Column:
        from pyspark.sql import functions as F

        op_col = find_column(df.columns, "Op")
        op = ascii_upper(F.trim(F.col(op_col))) if op_col else F.lit(None)
        return F.coalesce(op, F.lit("I"))  # a full-load row has no Op: it loads

    def headerless_columns(self, names: list[str], found: int) -> list[str]:
        # CDC files carry a leading Op column that full-load files lack.
        return ["Op", *names] if found == len(names) + 1 else names
