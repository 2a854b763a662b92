"""Debezium envelopes (no ExtractNewRecordState SMT), with and without the JSON converter's
schema/payload wrapper, merged into real Iceberg tables: images, order, encodings, tombstones."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from lakeloader.formats import source_format
from lakeloader.spark.errors import BadInputError
from tests.spark.debezium_events import decimal_bytes, lines, mysql, postgres
from tests.spark.merge_batches import load, rows, snapshots

pytestmark = pytest.mark.spark

ENVELOPE = {"format": "json", "cdc": "debezium_envelope"}


def envelope_table(make_table, **overrides):
    return make_table(**{**overrides, "source": {**ENVELOPE, **overrides.get("source", {})}})


def test_operation_codes_and_the_deleted_flag_in_either_case_are_read(spark):
    """The flattened layout's `__op` (c, r, u, d, t) and `__deleted` flag, whatever their case."""
    events = spark.createDataFrame(
        [("C", None), (" u", "false"), ("D ", None), ("r", None), ("T", None), ("x", None), ("u", "TRUE")],
        "__op string, __deleted string",
    )
    op = source_format("debezium").operation(events)
    assert [row[0] for row in events.select(op).collect()] == ["I", "U", "D", "I", "T", "X", "D"]


@pytest.mark.slow
def test_wrapped_postgres_events_merge_with_their_encodings_decoded(spark, raw, make_table):
    table = envelope_table(make_table)
    raw.write_text(
        "src/0001.json",
        lines(
            [
                postgres("r", 1, "Anne", 1000, 10, balance=decimal_bytes("123.45")),
                postgres("c", 2, "Bob", 1001, 11, balance=decimal_bytes("-0.07")),
                None,  # a Kafka tombstone after a delete: nothing to apply
                postgres("c", 3, "Cid", 1002, 12),
            ]
        ),
    )
    load(spark, table, raw)
    raw.write_text(
        "src/0002.json",
        lines(
            [
                postgres("u", 1, "Annie", 2000, 20, balance=decimal_bytes("99.99")),
                postgres("d", 2, "Bob", 2001, 21),
            ]
        ),
    )
    result = load(spark, table, raw)
    assert (result.updated, result.deleted) == (1, 1)
    name = f"{table.target.database}.{table.target.table}"
    types = dict(spark.table(name).dtypes)
    assert (types["balance"], types["created_at"], types["birth_date"], types["updated_at"]) == (
        "decimal(10,2)",
        "timestamp",
        "date",
        "timestamp",
    )
    assert "__op" not in types and "op" not in types and "__source_lsn" in types
    got = rows(spark, table, "id, first_name, balance, created_at, birth_date, updated_at")
    assert got == [
        (
            1,
            "Annie",
            Decimal("99.99"),
            dt.datetime(2019, 5, 28, 8, 58, 24, 863123),
            dt.date(1989, 3, 2),
            dt.datetime(2019, 5, 28, 8, 58, 24, 863123),
        ),
        (
            3,
            "Cid",
            Decimal("123.45"),
            dt.datetime(2019, 5, 28, 8, 58, 24, 863123),
            dt.date(1989, 3, 2),
            dt.datetime(2019, 5, 28, 8, 58, 24, 863123),
        ),
    ]


@pytest.mark.slow
def test_late_and_tied_postgres_events_are_ordered_by_ts_ms_then_lsn(spark, raw, make_table):
    table = envelope_table(make_table)
    raw.write_text(
        "src/0001.json",
        lines(
            [
                postgres("c", 1, "older", 4000, 800, wrapped=False),
                postgres("u", 1, "newest", 5000, 900, wrapped=False),
            ]
        ),
    )
    # a later file, the same millisecond as the newest change, but earlier in the WAL
    raw.write_text(
        "src/0002.json",
        lines([postgres("u", 1, "same ms, lower lsn", 5000, 850, wrapped=False), None]),  # None: a tombstone
    )
    load(spark, table, raw)
    assert rows(spark, table, "id, first_name") == [(1, "newest")]
    # arriving later, an older change changes nothing
    raw.write_text("src/0003.json", lines([postgres("u", 1, "late", 4500, 870, wrapped=False)]))
    load(spark, table, raw)
    assert rows(spark, table, "id, first_name") == [(1, "newest")]


@pytest.mark.slow
def test_mysql_events_are_ordered_by_binlog_position_and_decoded_from_source_schema(spark, raw, make_table):
    table = envelope_table(
        make_table,
        source={"schema": {"balance": "decimal(10,2)", "created_at": "timestamp"}},
    )
    raw.write_text(
        "src/0001.json",
        lines(
            [
                mysql(
                    "u",
                    1004,
                    "row 1 of the event at pos 700",
                    7000,
                    700,
                    row=1,
                    balance=decimal_bytes("2.50"),
                ),
                mysql("c", 1004, "Anne", 7000, 484),
                mysql("u", 1004, "row 0 of the event at pos 700", 7000, 700, row=0),
            ]
        ),
    )
    load(spark, table, raw)
    got = rows(spark, table, "id, first_name, balance, created_at")
    assert got == [
        (1004, "row 1 of the event at pos 700", Decimal("2.50"), dt.datetime(2016, 6, 9, 16, 56, 51, 815000))
    ]


@pytest.mark.slow
def test_an_undecodable_decimal_names_file_column_and_value_and_commits_nothing(spark, raw, make_table):
    table = envelope_table(make_table)
    raw.write_text("src/0001.json", lines([postgres("c", 1, "Anne", 1000, 10)]))
    load(spark, table, raw)
    before = snapshots(spark, table)
    raw.write_text(
        "src/0002.json",
        lines([postgres("c", 2, "ok", 2000, 20), postgres("c", 3, "bad", 2001, 21, balance="not-base64!")]),
    )
    with pytest.raises(BadInputError) as error:
        load(spark, table, raw)
    message = str(error.value)
    assert "file 'src/0002.json'" in message and "column 'balance'" in message and "'not-base64!'" in message
    assert snapshots(spark, table) == before
    assert rows(spark, table, "id, first_name") == [(1, "Anne")]


@pytest.mark.slow
def test_a_truncate_fails_the_batch_by_default_and_is_dropped_with_ignore(spark, raw, make_table):
    table = envelope_table(make_table)
    raw.write_text(
        "src/0001.json", lines([postgres("c", 1, "Anne", 1000, 10), postgres("t", 0, "", 1001, 11)])
    )
    with pytest.raises(BadInputError, match="truncated; set on_truncate"):
        load(spark, table, raw)
    ignoring = envelope_table(make_table, on_truncate="ignore")
    load(spark, ignoring, raw)
    assert rows(spark, ignoring, "id, first_name") == [(1, "Anne")]


@pytest.mark.slow
def test_flattened_debezium_with_the_schema_wrapper_decodes_too(spark, raw, make_table):
    """ExtractNewRecordState output through the JSON converter with schemas.enable=true."""
    table = make_table(source={"format": "json", "cdc": "debezium"})
    schema = {
        "type": "struct",
        "fields": [
            {"type": "int32", "optional": False, "field": "id"},
            {
                "type": "bytes",
                "optional": True,
                "name": "org.apache.kafka.connect.data.Decimal",
                "version": 1,
                "parameters": {"scale": "3"},
                "field": "amount",
            },
            {"type": "string", "optional": True, "field": "__op"},
            {"type": "int64", "optional": True, "field": "__source_ts_ms"},
        ],
        "optional": False,
        "name": "server.public.payments.Value",
    }
    raw.write_text(
        "src/0001.json",
        lines(
            [
                {
                    "schema": schema,
                    "payload": {
                        "id": 7,
                        "amount": decimal_bytes("-1.5", 3),
                        "__op": "c",
                        "__source_ts_ms": 1,
                    },
                }
            ]
        ),
    )
    load(spark, table, raw)
    assert rows(spark, table, "id, amount") == [(7, Decimal("-1.500"))]


def sqlserver(op: str, id_: int, name: str, commit_lsn: str, change_lsn: str, serial: int = 1) -> dict:
    """A SQL Server connector event (Debezium documentation layout, no schema wrapper)."""
    source = {
        "version": "2.5.4.Final",
        "connector": "sqlserver",
        "name": "server1",
        "ts_ms": 1559729468470,  # one millisecond for all: the LSNs decide
        "snapshot": "false",
        "db": "testDB",
        "schema": "dbo",
        "table": "customers",
        "change_lsn": change_lsn,
        "commit_lsn": commit_lsn,
        "event_serial_no": serial,
    }
    image = {"id": id_, "first_name": name}
    before, after = (image, None) if op == "d" else (None, image)
    return {"before": before, "after": after, "source": source, "op": op, "ts_ms": 1559729471739}


@pytest.mark.slow
def test_sql_server_events_are_ordered_by_commit_lsn_then_change_lsn(spark, raw, make_table):
    table = envelope_table(make_table)
    raw.write_text(
        "src/0001.json",
        lines(
            [
                sqlserver("c", 1, "committed last", "00000027:00000758:0005", "00000027:00000758:0002"),
                sqlserver("c", 2, "second change", "00000027:00000758:0003", "00000027:00000758:0003"),
            ]
        ),
    )
    raw.write_text(
        "src/0002.json",
        lines(
            [
                # a later file, but an earlier transaction
                sqlserver("u", 1, "committed first", "00000027:00000758:0003", "00000027:00000758:0004"),
                # the same transaction, an earlier change in it
                sqlserver("u", 2, "first change", "00000027:00000758:0003", "00000027:00000758:0001"),
            ]
        ),
    )
    load(spark, table, raw)
    assert rows(spark, table, "id, first_name") == [(1, "committed last"), (2, "second change")]


def test_a_malformed_line_among_tombstones_names_its_file_and_commits_nothing(spark, raw, make_table):
    table = envelope_table(make_table)
    text = lines([postgres("c", 1, "Anne", 1000, 10, wrapped=False), None]) + '{"op": "c", "after": {\n'
    raw.write_text("src/0001.json", text)
    with pytest.raises(BadInputError, match="file 'src/0001.json'.*malformed JSON record"):
        load(spark, table, raw)
