"""Read a table's raw files and normalise their change records, whatever their format
(lakeloader.formats: DMS, Debezium flattened or envelope, plain rows).

The result has the source's data columns plus the meta columns below: the operation, the sequence
tuple and the change's file and row position, which `latest_per_key` and the merge read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakeloader.config import TableConfig
from lakeloader.engine import shaping
from lakeloader.formats import SourceFormat, source_format
from lakeloader.formats.files import lenient_cast, replace_checked, require_sequence
from lakeloader.formats.reading import Check
from lakeloader.spark.columns import (
    FILE,
    FILE_POS,
    INVALID,
    META_COLUMNS,
    OP,
    ROW_POS,
    SEQ,
    find_column,
    seq_columns,
)
from lakeloader.spark.errors import BadInputError
from lakeloader.spark.inputs import InputFile, batch_order
from lakeloader.spark.session import Metrics, release
from lakeloader.spark.sql import count_equal, quote

VALID_OPS = ("I", "U", "D", "T")
SMALL_BATCH_BYTES = 32 * 1024 * 1024  # raw input up to this size is one partition (see read_changes)
CHECK = "_ll_check"  # read_changes: a check's helper columns, observed and dropped before the checkpoint
MAX_LISTED_KEYS = 20_000  # up to this many distinct values, a key column's values are collected
# Up to this many key rows, the batch's keys are broadcast to the probe of the table. AQE would
# otherwise turn it into a shuffle of every row of the table once the key set outgrows its 10 MiB
# estimate (1M changes into 16M rows: benchmarks/RESULTS.md). A long key is 8 bytes a row.
BROADCAST_KEYS_MAX = 4_000_000
LISTABLE = (T.StringType, T.ByteType, T.ShortType, T.IntegerType, T.LongType)  # key types written as literals


def seq_columns_of(df: DataFrame) -> list[str]:
    """The sequence meta columns `df` carries, in tuple order."""
    n = 1
    while f"{SEQ}_{n}" in df.columns:
        n += 1
    return seq_columns(n) if SEQ in df.columns else []


def data_columns(df: DataFrame) -> list[str]:
    meta = set(META_COLUMNS) | set(seq_columns_of(df))
    return [c for c in df.columns if c not in meta]


def _apply_declared_schema(
    df: DataFrame, table: TableConfig, fmt: SourceFormat, checks: list[Check]
) -> DataFrame:
    """Cast columns to the types the config declares (decoding the format's encodings of them, e.g.
    Debezium's base64 decimals); a value that does not fit is bad input."""
    declared = table.source.schema_ or {}
    for column, type_name in declared.items():
        actual = find_column(df.columns, column)
        if actual is None:
            continue
        target_type = T._parse_datatype_string(type_name)
        source_type = df.schema[actual].dataType
        if source_type == target_type:
            continue
        casted = fmt.decode(actual, source_type, target_type)
        casted = lenient_cast(actual, target_type) if casted is None else casted
        df = replace_checked(df, actual, casted, f"value {{}} is not a valid {type_name}", column, checks)
    return df


@dataclass
class Changes:
    """A batch as read_changes returns it."""

    rows: DataFrame  # every change record, normalised and checkpointed
    count: int
    # A small batch with few keys: every value each key column (source spelling) takes; else empty.
    key_values: dict[str, list] = field(default_factory=dict)
    truncates: int = 0  # truncate events kept (on_truncate: empty_table)
    deletes: int = 0  # delete records, soft deletes included
    # Each key column's (lowest, highest) value (source spelling): integer columns, and string columns
    # whose two ends are ASCII (every string order agrees with them). Others are left out.
    key_ranges: dict[str, tuple] = field(default_factory=dict)
    # The lowest value of the first sequence column among the inserts and updates (the changes a
    # tombstone could bury), as Iceberg's file bounds order it: an int (microseconds for timestamps,
    # days for dates) or an ASCII str. None when one of them has no value there, or for other types.
    sequence_low: int | str | None = None


def read_changes(spark: SparkSession, table: TableConfig, files: list[InputFile]) -> Changes:
    """All change records of `files`, validated, normalised and materialised, and how many there are.

    One Spark job: the rows are checkpointed (later steps see a fixed batch; MERGE refuses sources
    whose plan holds row positions), and the validation and the count ride along as observed
    metrics of that same scan. A failed check raises BadInputError naming a file holding a bad row.
    A small batch is kept in one partition (`is_small`), and its key values are observed too.
    """
    files = batch_order(files)
    names = {i: f.name for i, f in enumerate(files)}
    fmt = source_format(table.source.cdc)
    checks: list[Check] = []
    df = fmt.read_checked(spark, table, files, checks)
    require_sequence(table, fmt, df.columns, names[0])  # per file where the format tells files apart
    df = shaping.select_columns(df, table)
    df = _apply_declared_schema(df, table, fmt, checks)
    df = shaping.soft_deletes(df.withColumn(OP, fmt.operation(df)), table)

    not_truncate = F.col(OP) != "T"  # a truncate carries no row
    for key in table.keys:
        actual = find_column(df.columns, key)
        if actual is None:
            raise BadInputError(table.id, "key column is missing from the input", file=names[0], column=key)
        checks.append(Check(F.col(actual).isNull() & not_truncate, F.lit(None), "key column is NULL", key))
    unknown = "unknown change operation {} (expected I, U, D or T)"
    checks.append(Check(~F.col(OP).isin(*VALID_OPS), F.col(OP), unknown, fmt.op_column_label))
    if table.on_truncate == "fail":
        truncated = "the source table was truncated; set on_truncate: empty_table or ignore for this table"
        checks.append(Check(F.col(OP) == "T", F.lit(None), truncated, fmt.op_column_label))
    elif table.on_truncate == "ignore":
        df = df.filter(F.col(OP) != "T")

    # The sequence tuple; a tie-breaker the batch lacks is NULL, the oldest (README: The order of changes).
    sequence = table.sequence_columns
    for meta, name in zip(seq_columns(len(sequence) or 1), sequence or [""], strict=True):
        actual = find_column(df.columns, name) if name else None
        df = df.withColumn(meta, F.col(actual) if actual else F.lit(None))
    df = df.withColumn(FILE, F.element_at(F.array(*[F.lit(n) for n in names.values()]), F.col(FILE_POS) + 1))
    consumed = {c.lower() for c in fmt.op_columns}
    df = df.drop(*[c for c in df.columns if c.lower() in consumed])

    # The metrics are SQL text (Metrics.on); each check's Columns ride along as two helper columns,
    # dropped again before the checkpoint.
    op = quote(OP)
    metrics = {"rows": "count(1)", "truncates": count_equal(OP, "T"), "deletes": count_equal(OP, "D")}
    helpers: dict[str, Column] = {}
    for i, check in enumerate(checks):  # the first bad row of each check, by file position
        bad, value = f"{CHECK}{i}_bad", f"{CHECK}{i}_value"
        helpers |= {bad: check.bad, value: check.value.cast("string")}
        bad_row = f"named_struct('file', {quote(FILE_POS)}, 'value', {quote(value)})"
        metrics[f"bad{i}"] = f"to_json(min(CASE WHEN {quote(bad)} THEN {bad_row} END))"
    listed: list[str] = []
    keys = [find_column(df.columns, k) for k in table.keys]
    ranged = [k for k in keys if isinstance(df.schema[k].dataType, LISTABLE)]
    for k in ranged:  # a truncate carries no key
        metrics[f"low{k}"] = f"min(CASE WHEN {op} <> 'T' THEN {quote(k)} END)"
        metrics[f"high{k}"] = f"max(CASE WHEN {op} <> 'T' THEN {quote(k)} END)"
    seq_type = df.schema[SEQ].dataType
    if (ordered := _as_bounds_order(SEQ, seq_type)) is not None:
        buryable = f"NOT ({op} IN ('D', 'T'))"
        metrics["seqlow"] = f"min(CASE WHEN {buryable} THEN {ordered} END)"
        metrics["seqnulls"] = f"count(CASE WHEN {buryable} AND {quote(SEQ)} IS NULL THEN 1 END)"
    # A snapshot is the whole table, joined with it next (engine.full_copy): its partitions stay, and
    # its keys are never a short list
    if sum(f.size for f in files) <= SMALL_BATCH_BYTES and table.source.cdc != "snapshot":
        df = df.coalesce(1)  # one partition: deduplication and joins on the key need no shuffle
        listed = ranged
        for k in listed:
            metrics[f"keys{k}"] = f"to_json(slice(collect_set({quote(k)}), 1, {MAX_LISTED_KEYS + 1}))"
    observation = Metrics("read")
    df = observation.on(df.withColumns(helpers), metrics).drop(*helpers).localCheckpoint(eager=True)
    df = df.drop(*[c for c in df.columns if c.startswith(INVALID)])
    observed = observation.values
    for i, check in enumerate(checks):
        if observed[f"bad{i}"] is not None:
            release(df)
            bad = json.loads(observed[f"bad{i}"])  # to_json leaves NULL fields out
            raise BadInputError(
                table.id,
                check.message.format(repr(bad.get("value"))),
                file=names.get(bad.get("file")),
                column=check.column,
            )
    values = {k: json.loads(observed[f"keys{k}"]) for k in listed}
    listed_values = {k: v for k, v in values.items() if len(v) <= MAX_LISTED_KEYS}
    ranges = {k: (observed[f"low{k}"], observed[f"high{k}"]) for k in ranged}
    key_ranges = {k: r for k, r in ranges.items() if None not in r and all(map(_comparable, r))}
    sequence_low = None
    if ordered is not None and not observed["seqnulls"] and (low := observed["seqlow"]) is not None:
        sequence_low = low if _comparable(low) else None
    return Changes(
        df,
        observed["rows"],
        listed_values,
        observed["truncates"] or 0,
        observed["deletes"] or 0,
        key_ranges,
        sequence_low,
    )


def _as_bounds_order(name: str, data_type: T.DataType) -> str | None:
    """Column `name` (as SQL) as a value Iceberg binds to its type: integers and strings as they are,
    timestamps as microseconds, dates as days. None: a type left out."""
    column = quote(name)
    if isinstance(data_type, LISTABLE):
        return column
    if isinstance(data_type, T.TimestampNTZType):  # its wall clock, no zone in between
        return f"timestampdiff(MICROSECOND, TIMESTAMP_NTZ'1970-01-01 00:00:00', {column})"
    if isinstance(data_type, T.TimestampType):
        return f"unix_micros({column})"
    if isinstance(data_type, T.DateType):
        return f"unix_date({column})"
    return None


def _comparable(value: object) -> bool:
    """An int, or an ASCII str: ordered the same by Spark, Python and Iceberg's file bounds."""
    return isinstance(value, int) or (isinstance(value, str) and value.isascii())


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
