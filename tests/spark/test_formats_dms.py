"""DMS files as its S3 target writes them: RFC 4180 CSV, and the column that orders changes."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakeloader.formats import source_format
from lakeloader.spark.errors import BadInputError
from tests.spark.merge_batches import DMS, FULL, at, change, load, rows, snapshots

pytestmark = pytest.mark.spark

DMS_CSV = {
    "format": "csv",
    "cdc": "dms",
    "csv": {"header": False, "columns": ["id", "name", "last_update_time"]},
}


def test_operation_codes_in_either_case_and_padded_are_read(spark):
    """DMS writes I, U and D; a file made by hand may write them in lower case or padded."""
    changes = spark.createDataFrame([(" i",), ("u ",), ("D",), ("x",), (None,)], "Op string")
    op = source_format("dms").operation(changes)
    assert [row[0] for row in changes.select(op).collect()] == ["I", "U", "D", "X", "I"]


def test_dms_csv_reads_a_doubled_quote_as_one_quote(spark, raw, make_table):
    table = make_table(source=DMS_CSV)
    raw.write_text(
        "src/LOAD00000001.csv",
        '1,"say ""hi""",2026-11-01 08:00:00\n2,"a, b",2026-11-01 08:00:00\n',
    )
    raw.write_text("src/20261101-0900.csv", 'U,1,"she said ""no"", twice",2026-11-01 09:00:00\n')
    load(spark, table, raw)
    assert rows(spark, table) == [("1", 'she said "no", twice'), ("2", "a, b")]


def test_a_change_file_without_the_sequence_column_fails_naming_file_column_and_setting(
    spark, raw, make_table
):
    table = make_table()
    raw.write_parquet("src/20261101-0900.parquet", [change("I", 1, "a", 1)], DMS)
    load(spark, table, raw)
    before = snapshots(spark, table)
    no_time = pa.schema([("Op", pa.string()), ("id", pa.int64()), ("name", pa.string())])
    raw.write_parquet("src/20261101-1000.parquet", [{"Op": "U", "id": 1, "name": "b"}], no_time)
    with pytest.raises(BadInputError) as error:
        load(spark, table, raw)
    message = str(error.value)
    assert "file 'src/20261101-1000.parquet'" in message and "column 'last_update_time'" in message
    assert "TimestampColumnName" in message and "sequence_by: none" in message
    assert snapshots(spark, table) == before


def test_a_headerless_csv_change_file_without_the_sequence_column_fails_too(spark, raw, make_table):
    table = make_table(source={**DMS_CSV, "csv": {"header": False, "columns": ["id", "name"]}})
    raw.write_text("src/20261101-0900.csv", "I,1,a\n")
    with pytest.raises(BadInputError, match="file 'src/20261101-0900.csv', column 'last_update_time'"):
        load(spark, table, raw)


def test_a_full_load_without_the_sequence_column_still_loads(spark, raw, make_table):
    """No Op column: a full load, which never overwrites a change that carries a sequence."""
    table = make_table()
    raw.write_parquet(
        "src/LOAD00000001.parquet",
        [{"id": 1, "name": "a"}],
        pa.schema([("id", pa.int64()), ("name", pa.string())]),
    )
    load(spark, table, raw)
    assert rows(spark, table) == [(1, "a")]


def test_sequence_by_none_accepts_arrival_order(spark, raw, make_table):
    table = make_table(sequence_by="none")
    no_time = pa.schema([("Op", pa.string()), ("id", pa.int64()), ("name", pa.string())])
    raw.write_parquet("src/20261101-0900.parquet", [{"Op": "I", "id": 1, "name": "first"}], no_time)
    raw.write_parquet(
        "src/20261101-1000.parquet",
        [{"Op": "U", "id": 1, "name": "second"}, {"Op": "U", "id": 1, "name": "third"}],
        no_time,
    )
    load(spark, table, raw)
    assert rows(spark, table) == [(1, "third")]


def test_full_load_then_a_change_with_the_timestamp(spark, raw, make_table):
    table = make_table()
    raw.write_parquet("src/LOAD00000001.parquet", [{"id": 1, "name": "a", "last_update_time": at(0)}], FULL)
    raw.write_parquet("src/20261101-0900.parquet", [change("U", 1, "b", 5)], DMS)
    load(spark, table, raw)
    assert rows(spark, table) == [(1, "b")]
