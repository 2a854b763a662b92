"""The source formats' Spark-free parts: which format a `cdc:` name is, what makes a file a change
file, the names of a headerless CSV's columns, the Connect logical types a JSON converter's `schema`
names and how each is decoded, and the refusal of a change file without its sequence column.

No JVM: these run when a batch is planned and when the config is read. What the formats do to rows
(operation, reshape, decode on a DataFrame) runs in tests/spark/test_formats_*.py.
"""

from __future__ import annotations

import pytest

from lakeloader.config import parse_config
from lakeloader.formats import FORMAT_NAMES, FORMATS, SourceFormat, source_format
from lakeloader.formats.debezium import DECIMAL, decimal_sql, decoded, logical_types
from lakeloader.formats.debezium_envelope import DebeziumEnvelope
from lakeloader.formats.dms import Dms
from lakeloader.formats.files import require_sequence
from lakeloader.formats.full_copy import FullCopy
from lakeloader.formats.plain_rows import PlainRows
from lakeloader.spark.errors import BadInputError

# The JSON converter's `schema` of a Debezium envelope (schemas.enable=true), as a PostgreSQL connector
# writes it: the images' fields name their logical types; the source block has named fields too
# (io.debezium.data.Enum), which are not columns of the table.
ENVELOPE_SCHEMA = {
    "type": "struct",
    "name": "shop.public.orders.Envelope",
    "fields": [
        {
            "type": "struct",
            "field": "before",
            "name": "shop.public.orders.Value",
            "fields": [
                {"type": "int32", "field": "id"},
                {
                    "type": "bytes",
                    "field": "price",
                    "name": DECIMAL,
                    "version": 1,
                    "parameters": {"scale": "2", "connect.decimal.precision": "10"},
                },
            ],
        },
        {
            "type": "struct",
            "field": "after",
            "name": "shop.public.orders.Value",
            "fields": [
                {"type": "int32", "field": "id"},
                {"type": "int64", "field": "placed_at", "name": "io.debezium.time.MicroTimestamp"},
            ],
        },
        {
            "type": "struct",
            "field": "source",
            "name": "io.debezium.connector.postgresql.Source",
            "fields": [
                {"type": "int64", "field": "ts_ms"},
                {"type": "string", "field": "snapshot", "name": "io.debezium.data.Enum"},
            ],
        },
        {"type": "string", "field": "op"},
    ],
}
# A record flattened by ExtractNewRecordState: its own fields name the types.
FLAT_SCHEMA = {
    "type": "struct",
    "name": "shop.public.orders.Value",
    "fields": [
        {"type": "int32", "field": "id"},
        {"type": "int32", "field": "shipped_on", "name": "io.debezium.time.Date"},
        {"type": "string", "name": "io.debezium.time.ZonedTimestamp"},  # no field: not a column
        {"type": "string", "field": "__op"},
    ],
}


def test_each_cdc_name_is_its_format_and_only_change_formats_have_an_operation_column():
    assert FORMAT_NAMES == ("dms", "debezium", "debezium_envelope", "none", "snapshot")
    assert {name: type(source_format(name)) for name in FORMAT_NAMES} == {
        "dms": Dms,
        "debezium": type(FORMATS["debezium"]),
        "debezium_envelope": DebeziumEnvelope,
        "none": PlainRows,
        "snapshot": FullCopy,
    }
    assert {name: source_format(name).is_cdc for name in FORMAT_NAMES} == {
        "dms": True,
        "debezium": True,
        "debezium_envelope": True,
        "none": False,
        "snapshot": False,  # its operations come from comparing snapshots, not from a column
    }
    with pytest.raises(KeyError):
        source_format("maxwell")


def test_a_headerless_dms_file_with_one_column_more_than_named_leads_with_op():
    names = ["id", "name", "last_update_time"]
    assert Dms().headerless_columns(names, found=4) == ["Op", *names]  # a CDC file
    assert Dms().headerless_columns(names, found=3) == names  # a full load: no Op
    assert Dms().headerless_columns(names, found=5) == names  # not DMS's shape: as named
    for fmt in (PlainRows(), FORMATS["debezium"]):
        assert fmt.headerless_columns(names, found=4) == names


def test_logical_types_come_from_the_images_of_an_envelope_and_from_a_flat_records_own_fields():
    assert logical_types([ENVELOPE_SCHEMA]) == {
        "price": (DECIMAL, {"scale": "2", "connect.decimal.precision": "10"}),
        "placed_at": ("io.debezium.time.MicroTimestamp", {}),
    }
    assert logical_types([FLAT_SCHEMA]) == {"shipped_on": ("io.debezium.time.Date", {})}
    # the batch's distinct schemas together (one per file that differs)
    assert logical_types([FLAT_SCHEMA, ENVELOPE_SCHEMA]) == {
        "shipped_on": ("io.debezium.time.Date", {}),
        "price": (DECIMAL, {"scale": "2", "connect.decimal.precision": "10"}),
        "placed_at": ("io.debezium.time.MicroTimestamp", {}),
    }
    # a record's schema without fields (a primitive value), and none at all
    assert logical_types([{"type": "string"}, {"type": "struct", "fields": None}]) == {}
    assert logical_types([]) == {}


def test_each_connect_type_decodes_to_its_sql_and_spark_type():
    assert decoded("price", DECIMAL, {"scale": "2", "connect.decimal.precision": "10"}) == (
        decimal_sql("`price`", 10, 2),
        "decimal(10,2)",
    )
    # Connect's defaults: scale 0 is required by the spec, the precision is optional (38: Spark's most)
    assert decoded("qty", DECIMAL, {}) == (decimal_sql("`qty`", 38, 0), "decimal(38,0)")
    assert decoded("weird`name", "io.debezium.time.MicroTimestamp", {}) == (
        "timestamp_micros(`weird``name`)",
        "timestamp",
    )
    expected = {
        "io.debezium.time.Timestamp": ("timestamp_millis(`c`)", "timestamp"),
        "org.apache.kafka.connect.data.Timestamp": ("timestamp_millis(`c`)", "timestamp"),
        "io.debezium.time.Date": ("date_from_unix_date(`c`)", "date"),
        "org.apache.kafka.connect.data.Date": ("date_from_unix_date(`c`)", "date"),
        "io.debezium.time.ZonedTimestamp": ("CAST(`c` AS TIMESTAMP)", "timestamp"),
    }
    assert {logical: decoded("c", logical, {}) for logical in expected} == expected
    # a type the reader takes as it is (Enum is text, Json is text)
    assert decoded("c", "io.debezium.data.Enum", {}) is None


def table(cdc: str, **overrides):
    spec = {
        "id": "shop.orders",
        "source": {"prefix": "shop/orders/", "cdc": cdc},
        "target": {"database": "shop", "table": "orders"},
        "keys": ["id"],
        **overrides,
    }
    return parse_config({"tables": [spec]}).tables[0]


def refusal(table_config, fmt: SourceFormat, columns: list[str]) -> str:
    with pytest.raises(BadInputError) as raised:
        require_sequence(table_config, fmt, columns, "s3://raw/shop/orders/f.csv")
    return str(raised.value)


def test_a_change_file_without_its_first_sequence_column_is_refused_naming_file_column_and_fix():
    dms = table("dms")
    require_sequence(dms, Dms(), ["Op", "id", "LAST_UPDATE_TIME"], "f")  # found whatever its case
    require_sequence(dms, Dms(), ["id", "name"], "f")  # a full load: safe without it
    message = refusal(dms, Dms(), ["op", "id"])
    assert message == (
        "table 'shop.orders', file 's3://raw/shop/orders/f.csv', column 'last_update_time': the change "
        f"file lacks the sequence column that orders its changes; {Dms.sequence_setting}; or set "
        "sequence_by: none to accept arrival order (file, then row)"
    )

    debezium = table("debezium", sequence_by="updated_at")
    fmt = FORMATS["debezium"]
    for change_columns in (["__op", "id"], ["__deleted", "id"]):  # either operation column makes one
        assert "column 'updated_at'" in refusal(debezium, fmt, change_columns)
    require_sequence(debezium, fmt, ["__op", "id", "updated_at", "__source_ts_ms"], "f")

    # sequence_by: none accepts arrival order: nothing is required
    require_sequence(table("dms", sequence_by="none"), Dms(), ["Op", "id"], "f")


def test_a_new_format_without_a_hint_of_its_own_points_at_sequence_by():
    class Maxwell(SourceFormat):
        name = "maxwell"
        op_columns = ("type",)

    message = refusal(table("none", sequence_by="ts"), Maxwell(), ["type", "id"])
    assert "orders its changes; name the column that orders changes with sequence_by; or set" in message
