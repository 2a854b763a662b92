"""Read a table's raw files and normalise their change records.

Whatever the flavour, the result has the source's data columns plus:

* ``_ll_op``   -- ``I`` (insert/upsert), ``U`` (update) or ``D`` (delete)
* ``_ll_seq``, ``_ll_seq_1``, ... -- the values of the sequence columns, the change's place in
  the order (``TableConfig.sequence_columns``; NULL where the file lacks the column: oldest)
* ``_ll_file`` -- the raw file's name, for error messages and tie-breaking
* ``_ll_file_pos``, ``_ll_row_pos`` -- file position in the batch, row position in the
  file: the last resort when two changes to a key share the whole sequence tuple.

DMS writes ``Op`` (I/U/D) in CDC files and no ``Op`` in full-load files.
Debezium sinks write ``__op`` (c/r/u/d), ``__source_ts_ms`` and ``__deleted``.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakeloader.config import TableConfig
from lakeloader.errors import BadInputError
from lakeloader.inputs import InputFile, batch_order

OP, SEQ, FILE, FILE_POS, ROW_POS = "_ll_op", "_ll_seq", "_ll_file", "_ll_file_pos", "_ll_row_pos"
META_COLUMNS = (OP, SEQ, FILE, FILE_POS, ROW_POS)
CDC_COLUMNS = {"dms": ("Op",), "debezium": ("__op", "__deleted"), "none": ()}
VALID_OPS = ("I", "U", "D")


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
        df = spark.read.option("mergeSchema", "true").parquet(*uris)
    else:
        df = spark.read.option("mode", "FAILFAST").json(uris)
    # input_file_name() spells paths as URIs; match them back to our files by suffix.
    path_of = F.input_file_name()
    file_pos: Column = F.lit(None).cast("int")
    for uri, pos in position.items():
        file_pos = F.when(path_of.endswith(uri.split("://")[-1]), F.lit(pos)).otherwise(file_pos)
    return df.withColumn(FILE_POS, file_pos).withColumn(ROW_POS, F.monotonically_increasing_id())


def _apply_declared_schema(df: DataFrame, table: TableConfig, names: dict[int, str]) -> DataFrame:
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
        bad = df.filter(F.col(actual).isNotNull() & casted.isNull()).select(actual, FILE_POS).first()
        if bad is not None:
            raise BadInputError(
                table.id,
                f"value {bad[0]!r} is not a valid {type_name}",
                file=names.get(bad[1]),
                column=column,
            )
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


def read_changes(spark: SparkSession, table: TableConfig, files: list[InputFile]) -> DataFrame:
    """All change records of `files`, validated and normalised (every change, not yet deduplicated)."""
    files = batch_order(files)
    names = {i: f.name for i, f in enumerate(files)}
    df = _read_files(spark, table, files)
    df = _apply_declared_schema(df, table, names)
    df = _normalise_ops(df, table)

    for key in table.keys:
        actual = find_column(df.columns, key)
        if actual is None:
            raise BadInputError(table.id, "key column is missing from the input", file=names[0], column=key)
        bad = df.filter(F.col(actual).isNull()).select(FILE_POS).first()
        if bad is not None:
            raise BadInputError(table.id, "key column is NULL", file=names.get(bad[0]), column=key)

    bad_op = df.filter(~F.col(OP).isin(*VALID_OPS)).select(OP, FILE_POS).first()
    if bad_op is not None:
        raise BadInputError(
            table.id,
            f"unknown change operation {bad_op[0]!r} (expected I, U or D)",
            file=names.get(bad_op[1]),
            column="Op" if table.source.cdc == "dms" else "__op",
        )

    # The sequence tuple; a column the batch lacks is NULL, the oldest (README: How a batch is merged).
    sequence = table.sequence_columns
    for meta, name in zip(seq_columns(len(sequence) or 1), sequence or [""], strict=True):
        actual = find_column(df.columns, name) if name else None
        df = df.withColumn(meta, F.col(actual) if actual else F.lit(None))
    df = df.withColumn(FILE, F.element_at(F.array(*[F.lit(n) for n in names.values()]), F.col(FILE_POS) + 1))
    flavour_columns = {c.lower() for c in CDC_COLUMNS[table.source.cdc]}
    return df.drop(*[c for c in df.columns if c.lower() in flavour_columns])


def newest_first(df: DataFrame) -> list[Column]:
    """Sort terms, newest change first: the sequence tuple (NULL oldest), then file, then row."""
    terms = [F.col(c).desc_nulls_last() for c in seq_columns_of(df)]
    return [*terms, F.col(FILE_POS).desc(), F.col(ROW_POS).desc()]


def latest_per_key(changes: DataFrame, keys: list[str]) -> DataFrame:
    """The last change of each key: highest sequence tuple, then latest file, then latest row."""
    order = Window.partitionBy(*[F.col(k) for k in keys]).orderBy(*newest_first(changes))
    return changes.withColumn("_ll_n", F.row_number().over(order)).filter(F.col("_ll_n") == 1).drop("_ll_n")
