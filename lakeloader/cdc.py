"""Read a table's raw files and normalise their change records (DMS `Op`, Debezium `__op`/`__deleted`).

The result has the source's data columns plus the meta columns below: the operation, the sequence
tuple and the change's file and row position, which `latest_per_key` and the merge read.
"""

from __future__ import annotations

import json
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame, Observation, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakeloader.config import TableConfig
from lakeloader.errors import BadInputError
from lakeloader.inputs import InputFile, batch_order

# OP: I (insert/upsert), U (update) or D (delete). SEQ, SEQ_1, ...: the sequence columns' values
# (TableConfig.sequence_columns; NULL, the oldest, where a file lacks one). FILE: the raw file's name,
# for error messages. FILE_POS, ROW_POS: file position in the batch and row position in the file,
# the last resort when two changes to a key share the whole sequence tuple.
OP, SEQ, FILE, FILE_POS, ROW_POS = "_ll_op", "_ll_seq", "_ll_file", "_ll_file_pos", "_ll_row_pos"
META_COLUMNS = (OP, SEQ, FILE, FILE_POS, ROW_POS)
CDC_COLUMNS = {"dms": ("Op",), "debezium": ("__op", "__deleted"), "none": ()}
VALID_OPS = ("I", "U", "D")
INVALID = "_ll_invalid_"
SMALL_BATCH_BYTES = 32 * 1024 * 1024  # raw input up to this size is one partition (see read_changes)
MAX_LISTED_KEYS = 20_000  # up to this many distinct values, a key column's values are collected
LISTABLE = (T.StringType, T.ByteType, T.ShortType, T.IntegerType, T.LongType)  # key types written as literals


def find_column(columns: list[str], name: str) -> str | None:
    """The actual spelling of `name` among `columns` (Spark resolves names case-insensitively)."""
    lowered = name.lower()
    return next((c for c in columns if c.lower() == lowered), None)


def seq_columns(n: int) -> list[str]:
    """The meta columns holding a change's sequence tuple of `n` elements (the first is SEQ)."""
    return [SEQ, *[f"{SEQ}_{i}" for i in range(1, n)]]


def seq_columns_of(df: DataFrame) -> list[str]:
    """The sequence meta columns `df` carries, in tuple order."""
    n = 1
    while f"{SEQ}_{n}" in df.columns:
        n += 1
    return seq_columns(n) if SEQ in df.columns else []


def data_columns(df: DataFrame) -> list[str]:
    meta = set(META_COLUMNS) | set(seq_columns_of(df))
    return [c for c in df.columns if c not in meta]


def _read_csv(spark: SparkSession, table: TableConfig, file: InputFile) -> DataFrame:
    options = table.source.csv_options
    reader = (
        spark.read.option("header", str(options.header).lower())
        .option("sep", options.delimiter)
        .option("quote", options.quote)
        .option("escape", options.escape)
        .option("nullValue", options.null_value)
        .option("mode", "FAILFAST")
        .option("inferSchema", "false")
    )
    df = reader.csv(file.uri)
    if options.header:
        return df
    names = list(options.columns or [])
    # DMS CDC files carry a leading Op column that its full-load files lack.
    if table.source.cdc == "dms" and len(df.columns) == len(names) + 1:
        names = ["Op", *names]
    if len(df.columns) != len(names):
        raise BadInputError(
            table.id,
            f"has {len(df.columns)} columns but csv.columns names {len(names)}",
            file=file.name,
        )
    return df.toDF(*names)


def _read_files(spark: SparkSession, table: TableConfig, files: list[InputFile]) -> DataFrame:
    """One DataFrame over all files, each row tagged with its file's position in the batch."""
    position = {f.uri: i for i, f in enumerate(files)}
    fmt = table.source.format
    if fmt == "csv":
        frames = []
        for file in files:
            frame = _read_csv(spark, table, file).withColumn(FILE_POS, F.lit(position[file.uri]))
            frames.append(frame.withColumn(ROW_POS, F.monotonically_increasing_id()))
        df = frames[0]
        for frame in frames[1:]:
            df = df.unionByName(frame, allowMissingColumns=True)
        return df
    uris = [f.uri for f in files]
    if fmt == "parquet":
        df = spark.read.schema(parquet_schema(spark, uris)).parquet(*uris)
    else:
        df = spark.read.option("mode", "FAILFAST").json(uris)
    # input_file_name() spells paths as URIs; match them back to our files by suffix.
    path_of = F.input_file_name()
    file_pos: Column = F.lit(None).cast("int")
    for uri, pos in position.items():
        file_pos = F.when(path_of.endswith(uri.split("://")[-1]), F.lit(pos)).otherwise(file_pos)
    return df.withColumn(FILE_POS, file_pos).withColumn(ROW_POS, F.monotonically_increasing_id())


@dataclass
class Check:
    """A rule every change row must pass; `message` gets the offending value (repr) at `{}`."""

    bad: Column
    value: Column
    message: str
    column: str | None


def parquet_schema(spark: SparkSession, uris: list[str]) -> T.StructType:
    """The files' merged schema (as Spark's `mergeSchema` infers it), read from their footers on the
    driver: Spark's own inference starts a Spark job even for one file."""
    jvm = spark.sparkContext._jvm
    parquet = jvm.org.apache.spark.sql.execution.datasources.parquet
    session_state = spark._jsparkSession.sessionState()
    hadoop_conf = session_state.newHadoopConf()
    converter = parquet.ParquetToSparkSchemaConverter(session_state.conf())

    def footer_schema(uri: str):
        path = jvm.org.apache.hadoop.fs.Path(uri)
        metadata = jvm.org.apache.parquet.hadoop.ParquetFileReader.readFooter(
            hadoop_conf, path, jvm.org.apache.parquet.format.converter.ParquetMetadataConverter.NO_FILTER
        )
        return parquet.ParquetFileFormat.readSchemaFromFooter(
            jvm.org.apache.parquet.hadoop.Footer(path, metadata), converter
        )

    with ThreadPoolExecutor(max_workers=8) as pool:  # object stores: one round trip per footer
        schemas = list(pool.map(footer_schema, uris))
    merged = schemas[0]
    for other in schemas[1:]:
        merged = merged.merge(other, session_state.conf().caseSensitiveAnalysis())
    return T.StructType.fromJson(json.loads(merged.json()))


def _apply_declared_schema(df: DataFrame, table: TableConfig, checks: list[Check]) -> DataFrame:
    """Cast columns to the types the config declares; a value that does not fit is bad input."""
    declared = table.source.schema_ or {}
    for column, type_name in declared.items():
        actual = find_column(df.columns, column)
        if actual is None:
            continue
        target_type = T._parse_datatype_string(type_name)
        if df.schema[actual].dataType == target_type:
            continue
        casted = F.col(actual).cast(target_type)
        invalid = f"{INVALID}{len(checks)}"  # the raw value where it does not fit, kept past the cast
        df = df.withColumn(invalid, F.when(F.col(actual).isNotNull() & casted.isNull(), F.col(actual)))
        message = f"value {{}} is not a valid {type_name}"
        checks.append(Check(F.col(invalid).isNotNull(), F.col(invalid), message, column))
        df = df.withColumn(actual, casted)
    return df


def _normalise_ops(df: DataFrame, table: TableConfig) -> DataFrame:
    cdc = table.source.cdc
    if cdc == "dms":
        op_col = find_column(df.columns, "Op")
        op = F.upper(F.trim(F.col(op_col))) if op_col else F.lit(None)
        return df.withColumn(OP, F.coalesce(op, F.lit("I")))
    if cdc == "debezium":
        op_col = find_column(df.columns, "__op")
        deleted_col = find_column(df.columns, "__deleted")
        raw = F.lower(F.trim(F.col(op_col))) if op_col else F.lit(None)
        op = (
            F.when(raw.isNull() | raw.isin("c", "r"), F.lit("I"))
            .when(raw == "u", F.lit("U"))
            .when(raw == "d", F.lit("D"))
            .otherwise(F.upper(raw))
        )
        if deleted_col:
            op = F.when(F.lower(F.col(deleted_col).cast("string")) == "true", F.lit("D")).otherwise(op)
        return df.withColumn(OP, op)
    return df.withColumn(OP, F.lit("I"))


@dataclass
class Changes:
    """A batch as read_changes returns it."""

    rows: DataFrame  # every change record, normalised and checkpointed
    count: int
    # A small batch with few keys: every value each key column (source spelling) takes; else empty.
    key_values: dict[str, list] = field(default_factory=dict)


def read_changes(spark: SparkSession, table: TableConfig, files: list[InputFile]) -> Changes:
    """All change records of `files`, validated, normalised and materialised, and how many there are.

    One Spark job: the rows are checkpointed (later steps see a fixed batch; MERGE refuses sources
    whose plan holds row positions), and the validation and the count ride along as observed
    metrics of that same scan. A failed check raises BadInputError naming a file holding a bad row.
    A small batch is kept in one partition (`is_small`), and its key values are observed too.
    """
    files = batch_order(files)
    names = {i: f.name for i, f in enumerate(files)}
    checks: list[Check] = []
    df = _read_files(spark, table, files)
    df = _apply_declared_schema(df, table, checks)
    df = _normalise_ops(df, table)

    for key in table.keys:
        actual = find_column(df.columns, key)
        if actual is None:
            raise BadInputError(table.id, "key column is missing from the input", file=names[0], column=key)
        checks.append(Check(F.col(actual).isNull(), F.lit(None), "key column is NULL", key))
    flavour = "Op" if table.source.cdc == "dms" else "__op"
    unknown = "unknown change operation {} (expected I, U or D)"
    checks.append(Check(~F.col(OP).isin(*VALID_OPS), F.col(OP), unknown, flavour))

    # The sequence tuple; a column the batch lacks is NULL, the oldest (README: How a batch is merged).
    sequence = table.sequence_columns
    for meta, name in zip(seq_columns(len(sequence) or 1), sequence or [""], strict=True):
        actual = find_column(df.columns, name) if name else None
        df = df.withColumn(meta, F.col(actual) if actual else F.lit(None))
    df = df.withColumn(FILE, F.element_at(F.array(*[F.lit(n) for n in names.values()]), F.col(FILE_POS) + 1))
    flavour_columns = {c.lower() for c in CDC_COLUMNS[table.source.cdc]}
    df = df.drop(*[c for c in df.columns if c.lower() in flavour_columns])

    observation = Observation(f"lakeloader_read_{uuid.uuid4().hex[:12]}")
    metrics = [F.count(F.lit(1)).alias("rows")]
    for i, check in enumerate(checks):  # the first bad row of each check, by file position
        bad_row = F.struct(F.col(FILE_POS).alias("file"), check.value.cast("string").alias("value"))
        first_bad = F.min(F.when(check.bad, bad_row))
        metrics.append(F.to_json(first_bad).alias(f"bad{i}"))
    listed: list[str] = []
    if sum(f.size for f in files) <= SMALL_BATCH_BYTES:
        df = df.coalesce(1)  # one partition: deduplication and joins on the key need no shuffle
        keys = [find_column(df.columns, k) for k in table.keys]
        listed = [k for k in keys if isinstance(df.schema[k].dataType, LISTABLE)]
        at_most = F.lit(MAX_LISTED_KEYS + 1)
        metrics += [F.to_json(F.slice(F.collect_set(k), 1, at_most)).alias(f"keys{k}") for k in listed]
    df = df.observe(observation, *metrics).localCheckpoint(eager=True)
    df = df.drop(*[c for c in df.columns if c.startswith(INVALID)])
    observed = observation.get
    for i, check in enumerate(checks):
        if observed[f"bad{i}"] is not None:
            df.unpersist()
            bad = json.loads(observed[f"bad{i}"])  # to_json leaves NULL fields out
            raise BadInputError(
                table.id,
                check.message.format(repr(bad.get("value"))),
                file=names.get(bad.get("file")),
                column=check.column,
            )
    values = {k: json.loads(observed[f"keys{k}"]) for k in listed}
    return Changes(df, observed["rows"], {k: v for k, v in values.items() if len(v) <= MAX_LISTED_KEYS})


def is_small(df: DataFrame) -> bool:
    """A batch read_changes kept in one partition: later steps broadcast it rather than shuffle."""
    return df.rdd.getNumPartitions() == 1


def newest_first(df: DataFrame) -> list[Column]:
    """Sort terms, newest change first: the sequence tuple (NULL oldest), then file, then row."""
    terms = [F.col(c).desc_nulls_last() for c in seq_columns_of(df)]
    return [*terms, F.col(FILE_POS).desc(), F.col(ROW_POS).desc()]


def latest_per_key(changes: DataFrame, keys: list[str]) -> DataFrame:
    """The last change of each key: highest sequence tuple, then latest file, then latest row."""
    order = Window.partitionBy(*[F.col(k) for k in keys]).orderBy(*newest_first(changes))
    return changes.withColumn("_ll_n", F.row_number().over(order)).filter(F.col("_ll_n") == 1).drop("_ll_n")
