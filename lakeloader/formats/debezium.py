"""``cdc: debezium``: Debezium change events flattened by the ExtractNewRecordState SMT.

Each row is the after-image with ``__op`` (c, r, u, d, t) and, with ``delete.handling.mode=rewrite``,
``__deleted``; ``add.fields=source.ts_ms,...`` adds the ``__source_*`` columns the order of changes
reads. With the JSON converter's ``schemas.enable=true`` each record sits under ``payload`` beside a
``schema`` that names the connector's encodings; they are decoded from it (else from the table's
``source.schema``): ``Decimal`` base64 bytes, ``MicroTimestamp`` (µs), ``Timestamp`` (ms), ``Date``
(days) and ``ZonedTimestamp`` (ISO text).
"""

from __future__ import annotations

import functools
import json
import operator
from typing import TYPE_CHECKING, Any

from lakeloader.formats.base import SourceFormat, ascii_lower, ascii_upper
from lakeloader.formats.reading import Check
from lakeloader.spark.columns import FILE_POS, ROW_POS, find_column
from lakeloader.spark.sql import quote

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType

    from lakeloader.formats.reading import FormatTable
    from lakeloader.spark.inputs import InputFile

# The source position, in the order it breaks ties: PostgreSQL lsn; MySQL binlog file, position,
# row; SQL Server commit and change LSN, event serial number.
POSITION = ("lsn", "file", "pos", "row", "commit_lsn", "change_lsn", "event_serial_no")
CORRUPT = "_ll_invalid_json"  # a JSON line that does not parse (Kafka tombstones are the text null)
BASE64 = "^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
DECIMAL = "org.apache.kafka.connect.data.Decimal"
# Connect logical type -> (SQL of the decoded value of `{v}`, the Spark type it yields)
TIME_TYPES = {
    "io.debezium.time.MicroTimestamp": ("timestamp_micros({v})", "timestamp"),
    "io.debezium.time.Timestamp": ("timestamp_millis({v})", "timestamp"),
    "org.apache.kafka.connect.data.Timestamp": ("timestamp_millis({v})", "timestamp"),
    "io.debezium.time.Date": ("date_from_unix_date({v})", "date"),
    "org.apache.kafka.connect.data.Date": ("date_from_unix_date({v})", "date"),
    "io.debezium.time.ZonedTimestamp": ("CAST({v} AS TIMESTAMP)", "timestamp"),
}


def decimal_sql(v: str, precision: int, scale: int) -> str:
    """SQL decoding Kafka Connect's Decimal in `v` (quoted): the unscaled value as big-endian
    two's-complement bytes, base64 text. NULL where the text is not such bytes."""
    h = f"hex(unbase64({v}))"
    negative = f"(CAST(conv(substr({h}, 1, 2), 16, 10) AS INT) >= 128)"
    byte = f"CAST(conv(substr({h}, 2 * _ll_i + 1, 2), 16, 10) AS INT)"
    magnitude = (
        f"aggregate(sequence(0, length({h}) DIV 2 - 1), CAST(0 AS DECIMAL(38,0)), (_ll_a, _ll_i) -> "
        f"CAST(_ll_a * 256 + IF({negative}, 255 - {byte}, {byte}) AS DECIMAL(38,0)))"
    )
    unscaled = f"IF({negative}, -({magnitude} + 1), {magnitude})"
    return (
        f"CASE WHEN length({v}) > 0 AND {v} RLIKE '{BASE64}' THEN "
        f"CAST(CONCAT(CAST({unscaled} AS STRING), 'E-{scale}') AS DECIMAL({precision},{scale})) END"
    )


def logical_types(schemas: list[dict[str, Any]]) -> dict[str, tuple[str, dict[str, str]]]:
    """{column: (Connect logical type name, parameters)} from the JSON converter's `schema` objects:
    the envelope's before/after fields, or a flattened record's own fields."""
    found: dict[str, tuple[str, dict[str, str]]] = {}
    for schema in schemas:
        fields = schema.get("fields") or []
        images = [f for f in fields if f.get("field") in ("before", "after") and f.get("fields")]
        for image in images or [schema]:
            for field in image.get("fields") or []:
                if field.get("name") and field.get("field"):
                    found[field["field"]] = (field["name"], field.get("parameters") or {})
    return found


def decoded(column: str, logical: str, parameters: dict[str, str]) -> tuple[str, str] | None:
    """(SQL, type) decoding `column` of Connect logical type `logical`; None: read it as it is."""
    if logical == DECIMAL:
        scale = int(parameters.get("scale", 0))
        precision = int(parameters.get("connect.decimal.precision", 38))
        return decimal_sql(quote(column), precision, scale), f"decimal({precision},{scale})"
    if logical in TIME_TYPES:
        sql, type_name = TIME_TYPES[logical]
        return sql.format(v=quote(column)), type_name
    return None


class Debezium(SourceFormat):
    name = "debezium"
    op_columns = ("__op", "__deleted")
    op_column_label = "__op"
    default_sequence = "__source_ts_ms"
    tie_breakers = tuple(f"__source_{p}" for p in POSITION)
    placeholder = "__debezium_unavailable_value"  # an unchanged TOASTed column
    sequence_setting = (
        "add source.ts_ms to the ExtractNewRecordState SMT's add.fields (docs/sources.md), or name the "
        "column with sequence_by"
    )

    def read_checked(
        self, spark: SparkSession, table: FormatTable, files: list[InputFile], checks: list[Check]
    ) -> DataFrame:
        from pyspark.sql import functions as F

        from lakeloader.formats import files as plain

        if table.source.format == "json":
            df = plain.read_rows(spark, table, files, self, corrupt_column=CORRUPT)
            bad_json = F.col(CORRUPT).isNotNull() & (F.trim(F.col(CORRUPT)) != "null")
            checks.append(Check(bad_json, F.col(CORRUPT), "malformed JSON record {}", None))
            df = df.filter(F.col(CORRUPT).isNull() | bad_json)
        else:
            df = plain.read_rows(spark, table, files, self)
        # A Kafka tombstone (the record `null`, kept when the sink writes null values) reads as a row
        # with every field NULL, or as the unparsed text `null` when another line is malformed too.
        fields = [F.col(quote(c)).isNull() for c in df.columns if not c.startswith("_ll_")]
        if fields:
            tombstone = functools.reduce(operator.and_, fields)
            df = df.filter(~tombstone | F.col(CORRUPT).isNotNull() if CORRUPT in df.columns else ~tombstone)
        df, types = self._unwrap(df)
        df = self.reshape(df)
        for column, (logical, parameters) in types.items():
            actual = find_column(df.columns, column)
            how = decoded(actual, logical, parameters) if actual else None
            if how is None or df.schema[actual].dataType.simpleString() == how[1]:
                continue
            message = f"value {{}} does not decode as {logical}"
            df = plain.replace_checked(df, actual, F.expr(how[0]), message, column, checks)
        return df

    def _unwrap(self, df: DataFrame) -> tuple[DataFrame, dict[str, tuple[str, dict[str, str]]]]:
        """The records under `payload` and the logical types their `schema` names (JSON converter
        with schemas.enable=true); the frame as it is without that wrapper."""
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        payload, schema = find_column(df.columns, "payload"), find_column(df.columns, "schema")
        if payload is None or not isinstance(df.schema[payload].dataType, T.StructType):
            return df, {}
        types: dict[str, tuple[str, dict[str, str]]] = {}
        if schema is not None:
            distinct = df.select(F.to_json(F.col(schema)).alias("s")).distinct().collect()
            types = logical_types([json.loads(row["s"]) for row in distinct if row["s"]])
        kept = [c for c in (CORRUPT, FILE_POS, ROW_POS) if c in df.columns]
        keep = F.col(payload).isNotNull()  # a null payload is a Kafka tombstone
        if CORRUPT in df.columns:
            keep = keep | F.col(CORRUPT).isNotNull()
        return df.filter(keep).select(f"{payload}.*", *kept), types

    def reshape(self, df: DataFrame) -> DataFrame:
        """Records as the flattened (SMT) layout has them; they already are."""
        return df

    def operation(self, df: DataFrame) -> Column:
        from pyspark.sql import functions as F

        op_col, deleted_col = find_column(df.columns, "__op"), find_column(df.columns, "__deleted")
        raw = ascii_lower(F.trim(F.col(op_col))) if op_col else F.lit(None)
        op = (
            F.when(raw.isNull() | raw.isin("c", "r"), F.lit("I"))
            .when(raw == "u", F.lit("U"))
            .when(raw == "d", F.lit("D"))
            .when(raw == "t", F.lit("T"))
            .otherwise(ascii_upper(raw))
        )
        if deleted_col:
            op = F.when(ascii_lower(F.col(deleted_col).cast("string")) == "true", F.lit("D")).otherwise(op)
        return op

    def decode(self, column: str, source_type: DataType, target_type: DataType) -> Column | None:
        """The connector's default encodings, where the declared type says what a column holds:
        base64 bytes for a decimal (decimal.handling.mode=precise), epoch microseconds for a
        timestamp (MicroTimestamp), days since the epoch for a date."""
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        integral = isinstance(source_type, T.IntegralType)
        if isinstance(target_type, T.DecimalType) and isinstance(source_type, T.StringType):
            precision = {
                "scale": str(target_type.scale),
                "connect.decimal.precision": str(target_type.precision),
            }
            how = decoded(column, DECIMAL, precision)
        elif isinstance(target_type, T.TimestampType) and integral:
            how = decoded(column, "io.debezium.time.MicroTimestamp", {})
        elif isinstance(target_type, T.DateType) and integral:
            how = decoded(column, "io.debezium.time.Date", {})
        else:
            return None
        return F.expr(how[0]) if how else None
