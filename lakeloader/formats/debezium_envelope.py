"""``cdc: debezium_envelope``: Debezium change events as the connector writes them, without the
ExtractNewRecordState SMT: ``before``, ``after``, ``source``, ``op`` (c, r, u, d, t) and ``ts_ms``,
optionally under ``payload`` next to the JSON converter's ``schema``.

Reshaped into the flattened layout (lakeloader.formats.debezium) and read from there: the after-image
for c, r and u, the before-image for d (a delete's key), ``op`` as ``__op``, and the source's time and
position as ``__source_ts_ms``, ``__source_lsn``, ``__source_file``, ... A configured format, not a
guess per file: a flattened table may well have columns named ``op``, ``before`` or ``source``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakeloader.formats.base import ascii_lower
from lakeloader.formats.debezium import POSITION, Debezium
from lakeloader.spark.columns import find_column

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

SOURCE_FIELDS = ("ts_ms", *POSITION)  # the source fields the order of changes reads


class DebeziumEnvelope(Debezium):
    name = "debezium_envelope"
    sequence_setting = "every Debezium change event carries source.ts_ms; is this file an envelope?"

    def reshape(self, df: DataFrame) -> DataFrame:
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        def struct_fields(name: str) -> tuple[str | None, list[T.StructField]]:
            actual = find_column(df.columns, name)
            data_type = df.schema[actual].dataType if actual else None
            return actual, list(data_type.fields) if isinstance(data_type, T.StructType) else []

        (after, after_fields), (before, before_fields) = struct_fields("after"), struct_fields("before")
        source, source_fields = struct_fields("source")
        op = find_column(df.columns, "op")
        is_delete = ascii_lower(F.col(op)) == "d" if op else F.lit(False)
        types = {f.name: f.dataType for f in before_fields} | {f.name: f.dataType for f in after_fields}
        after_names, before_names = {f.name for f in after_fields}, {f.name for f in before_fields}
        data = []
        for name, data_type in types.items():  # a delete's values come from its before-image
            new = F.col(after)[name] if name in after_names else F.lit(None)
            old = F.col(before)[name] if name in before_names else F.lit(None)
            data.append(F.when(is_delete, old.cast(data_type)).otherwise(new.cast(data_type)).alias(name))
        present = {f.name for f in source_fields}
        positions = [F.col(source)[f].alias(f"__source_{f}") for f in SOURCE_FIELDS if f in present]
        meta = [c for c in df.columns if c.startswith("_ll_")]  # file/row position, unparsed lines
        operation = F.col(op) if op else F.lit(None).cast("string")
        return df.select(*data, *positions, operation.alias("__op"), *meta)
