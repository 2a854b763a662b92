"""Reading a batch's files as plain rows (CSV, JSON, Parquet): what every format starts from.

Each row is tagged with its file's position in the batch (FILE_POS) and its position in the file
(ROW_POS), the last tie-breakers of the order of changes.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakeloader.formats.reading import Check
from lakeloader.spark import type_changes
from lakeloader.spark.columns import FILE_POS, INVALID, ROW_POS, find_column
from lakeloader.spark.errors import BadInputError
from lakeloader.spark.inputs import InputFile
from lakeloader.spark.session import java_class
from lakeloader.spark.sql import quote

if TYPE_CHECKING:
    from lakeloader.formats.reading import FormatTable, PlainFormat

# Footers' schemas kept per file version (footer_schemas): enough for a run's batches.
FOOTERS_KEPT = 20_000
_FOOTERS: dict[str, T.StructType] = {}


def lenient_cast(column: str, data_type: T.DataType) -> Column:
    """`column` cast to `data_type`, NULL where a value does not fit, whatever `spark.sql.ansi.enabled`
    says (Spark 4 turns it on, and a strict cast would fail the whole batch naming no file): the
    check that `replace_checked` adds then reports the value with its file and column."""
    return F.expr(f"try_cast({quote(column)} AS {data_type.simpleString()})")


def replace_checked(
    df: DataFrame, actual: str, value: Column, message: str, column: str, checks: list[Check]
) -> DataFrame:
    """Column `actual` replaced by `value` (a cast or a decoding); a non-NULL raw value that becomes
    NULL is bad input, reported with `message` (the raw value at `{}`) and `column`."""
    invalid = f"{INVALID}{len(checks)}"  # the raw value where it does not fit, kept past the cast
    df = df.withColumn(invalid, F.when(F.col(actual).isNotNull() & value.isNull(), F.col(actual)))
    checks.append(Check(F.col(invalid).isNotNull(), F.col(invalid), message, column))
    return df.withColumn(actual, value)


def require_sequence(table: FormatTable, fmt: PlainFormat, columns: list[str], file: str) -> None:
    """A change file (one with the format's operation column) must carry the first sequence column:
    without it every change would read as the oldest, and late or replayed files would overwrite newer
    rows (README "The order of changes"). A full load without it is safe: it never overwrites a
    change that has a sequence."""
    first = table.sequence_column
    if first is None or find_column(columns, first) is not None:
        return
    if not any(find_column(columns, c) for c in fmt.op_columns):
        return
    hint = fmt.sequence_setting or "name the column that orders changes with sequence_by"
    raise BadInputError(
        table.id,
        f"the change file lacks the sequence column that orders its changes; {hint}; or set "
        "sequence_by: none to accept arrival order (file, then row)",
        file=file,
        column=first,
    )


def _read_csv(spark: SparkSession, table: FormatTable, file: InputFile, fmt: PlainFormat) -> DataFrame:
    options = table.source.csv_options
    reader = (
        spark.read.option("header", str(options.header).lower())
        .option("sep", options.delimiter)
        .option("quote", options.quote)
        .option("escape", fmt.csv_escape if options.escape is None else options.escape)
        .option("nullValue", options.null_value)
        .option("mode", "FAILFAST")
        .option("inferSchema", "false")
    )
    df = reader.csv(file.uri)
    if options.header:
        return df
    names = fmt.headerless_columns(list(options.columns or []), len(df.columns))
    if len(df.columns) != len(names):
        raise BadInputError(
            table.id,
            f"has {len(df.columns)} columns but csv.columns names {len(names)}",
            file=file.name,
        )
    return df.toDF(*names)


def read_rows(
    spark: SparkSession,
    table: FormatTable,
    files: list[InputFile],
    fmt: PlainFormat,
    *,
    corrupt_column: str | None = None,
) -> DataFrame:
    """One DataFrame over all files, each row tagged with its file's position in the batch.

    JSON fails on the first malformed line, unless `corrupt_column` is given: then such a line's text
    is kept there (PERMISSIVE) and the caller decides (Debezium: the text `null` is a Kafka tombstone).
    """
    position = {f.uri: i for i, f in enumerate(files)}
    source_format = table.source.format
    if source_format == "csv":
        frames = []
        for file in files:
            frame = _read_csv(spark, table, file, fmt)
            require_sequence(table, fmt, frame.columns, file.name)
            frame = frame.withColumn(FILE_POS, F.lit(position[file.uri]))
            frames.append(frame.withColumn(ROW_POS, F.monotonically_increasing_id()))
        df = frames[0]
        for frame in frames[1:]:
            df = df.unionByName(frame, allowMissingColumns=True)
        return df
    uris = [f.uri for f in files]
    if source_format == "parquet":
        schemas = footer_schemas(spark, files)
        for file, schema in zip(files, schemas, strict=True):
            require_sequence(table, fmt, schema.fieldNames(), file.name)
        df = _read_parquet(spark, files, schemas, list(table.source.schema_ or {}))
    elif corrupt_column:
        df = (
            spark.read.option("mode", "PERMISSIVE")
            .option("columnNameOfCorruptRecord", corrupt_column)
            .json(uris)
        )
        if corrupt_column not in df.columns:
            df = df.withColumn(corrupt_column, F.lit(None).cast("string"))
    else:
        df = spark.read.option("mode", "FAILFAST").json(uris)
    # input_file_name() spells paths as URIs; match them back to our files by suffix, in ONE flat
    # CASE (a CASE nested per file overflows the JVM stack at about a thousand files).
    path_of = F.input_file_name()
    cases: Column | None = None
    for uri, pos in position.items():
        matches = path_of.endswith(uri.split("://")[-1])
        cases = F.when(matches, F.lit(pos)) if cases is None else cases.when(matches, F.lit(pos))
    file_pos = cases.otherwise(F.lit(None).cast("int")) if cases is not None else F.lit(None).cast("int")
    return df.withColumn(FILE_POS, file_pos).withColumn(ROW_POS, F.monotonically_increasing_id())


def footer_schemas(spark: SparkSession, files: list[InputFile]) -> list[T.StructType]:
    """Each file's schema, read from its footer on the driver (Spark's own inference starts a Spark job
    even for one file), once per file version in this process: a batch's files are checked
    (lakeloader.engine.file_conflicts) and then read by their footers' schemas."""
    missing = [f for f in files if f.identity not in _FOOTERS]
    for file, schema in zip(missing, parquet_schemas(spark, [f.uri for f in missing]), strict=True):
        if len(_FOOTERS) >= FOOTERS_KEPT:
            _FOOTERS.pop(next(iter(_FOOTERS)))
        _FOOTERS[file.identity] = schema
    return [_FOOTERS[f.identity] for f in files]


def parquet_schemas(spark: SparkSession, uris: list[str]) -> list[T.StructType]:
    """Each file's schema, read from its footer on the driver."""
    if not uris:
        return []
    session_state = spark._jsparkSession.sessionState()
    hadoop_conf = session_state.newHadoopConf()
    parquet = "org.apache.spark.sql.execution.datasources.parquet"
    converter = java_class(spark, f"{parquet}.ParquetToSparkSchemaConverter")(session_state.conf())
    read_schema = java_class(spark, f"{parquet}.ParquetFileFormat").readSchemaFromFooter
    path_class = java_class(spark, "org.apache.hadoop.fs.Path")
    footer_class = java_class(spark, "org.apache.parquet.hadoop.Footer")
    read_footer = java_class(spark, "org.apache.parquet.hadoop.ParquetFileReader").readFooter
    no_filter = java_class(spark, "org.apache.parquet.format.converter.ParquetMetadataConverter").NO_FILTER

    def footer_schema(uri: str) -> T.StructType:
        path = path_class(uri)
        schema = read_schema(footer_class(path, read_footer(hadoop_conf, path, no_filter)), converter)
        return T.StructType.fromJson(json.loads(schema.json()))

    if len(uris) == 1:  # a thread of its own would open a py4j connection of its own
        return [footer_schema(uris[0])]
    with ThreadPoolExecutor(max_workers=8) as pool:  # object stores: one round trip per footer
        return list(pool.map(footer_schema, uris))


def _read_parquet(
    spark: SparkSession, files: list[InputFile], schemas: list[T.StructType], declared: Collection[str]
) -> DataFrame:
    """The files read as one DataFrame under their merged schema. Spark merges only equal types; files
    whose types differ where one widens the other (int and bigint; the batch's checks let no other
    difference through, lakeloader.engine.file_conflicts) are read per schema, each cast to the wider
    type, and a column with a declared type (source.schema) that the files type differently is read
    as its text, which the declared type's cast then checks."""
    uris = [f.uri for f in files]
    try:
        return spark.read.schema(merge_schemas(spark, schemas)).parquet(*uris)
    except Exception:  # py4j's error for Spark's CANNOT_MERGE_INCOMPATIBLE_DATA_TYPE and kin
        merged = functools.reduce(type_changes.wider, schemas)
        assert isinstance(merged, T.StructType)
        lowered = {c.lower() for c in declared}
        if any(
            verdict == "incompatible" and path[0].lower() not in lowered
            for schema in schemas
            for path, verdict, _, _ in type_changes.differences((), merged, schema)
        ):
            raise  # never cast one type into another the table does not widen to
    wide = T.StructType(
        [
            T.StructField(f.name, T.StringType(), True)
            if f.name.lower() in lowered and len({_type_of(s, f.name) for s in schemas} - {None}) > 1
            else f
            for f in merged.fields
        ]
    )
    groups: dict[str, list[int]] = {}
    for i, schema in enumerate(schemas):
        groups.setdefault(schema.json(), []).append(i)
    frames = []
    for members in groups.values():
        schema = schemas[members[0]]
        frame = spark.read.schema(schema).parquet(*[uris[i] for i in members])
        columns = [
            type_changes.aligned(F.col(quote(own.name)), own.dataType, fld.dataType).alias(fld.name)
            if (own := _field(schema, fld.name)) is not None
            else F.lit(None).cast(fld.dataType).alias(fld.name)
            for fld in wide.fields
        ]
        frames.append(frame.select(*columns))
    return functools.reduce(lambda left, right: left.unionByName(right), frames)


def _field(schema: T.StructType, name: str) -> T.StructField | None:
    return next((f for f in schema.fields if f.name.lower() == name.lower()), None)


def _type_of(schema: T.StructType, name: str) -> str | None:
    own = _field(schema, name)
    return None if own is None else own.dataType.json()


def merge_schemas(spark: SparkSession, schemas: list[T.StructType]) -> T.StructType:
    """The files' merged schema, as Spark's `mergeSchema` infers it."""
    case_sensitive = spark._jsparkSession.sessionState().conf().caseSensitiveAnalysis()
    parse = java_class(spark, "org.apache.spark.sql.types.DataType").fromJson
    merged = parse(schemas[0].json())
    for other in schemas[1:]:
        merged = merged.merge(parse(other.json()), case_sensitive)
    return T.StructType.fromJson(json.loads(merged.json()))
