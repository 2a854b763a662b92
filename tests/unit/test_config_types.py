"""Declared types (`source.schema`) are checked against Spark SQL's type grammar of the runtime the
config is validated for, without Spark (tests/spark/test_declared_types.py holds the same verdicts
against the runtime's own parser)."""

from __future__ import annotations

import re

import pytest

from lakeloader.config import ConfigError, parse_config
from lakeloader.config.types import TypeSyntaxError, check_type
from lakeloader.control.runtimes import RUNTIMES

SPARK_3 = RUNTIMES["glue-5.1"]
SPARK_4 = RUNTIMES["glue-6.0"]


def config(schema: dict[str, str]) -> dict:
    return {
        "tables": [
            {
                "id": "hr.staff",
                "source": {"prefix": "hr/staff/", "schema": schema},
                "target": {"database": "hr", "table": "staff"},
                "keys": ["staff_id"],
            }
        ]
    }


@pytest.mark.parametrize(
    "text",
    [
        "int",
        "BIGINT",
        "decimal",
        "decimal(12)",
        "decimal(38, 38)",
        "numeric(12,2)",
        "char(3)",
        "varchar(200)",
        "timestamp_ntz",
        "interval day to second",
        "array<decimal(10,2)>",
        "map<string, array<struct<qty:int,price:decimal(9,2)>>>",
        "struct<a:int, b string not null comment 'the b', `c d`:map<int,string>>",
        "struct<>",
    ],
)
def test_nested_and_parameterised_types_parse_on_both_runtimes(text):
    for runtime in (SPARK_3, SPARK_4):
        check_type(text, runtime)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("integr", "'integr' is not a Spark SQL type"),
        ("decimal(39,2)", "decimal precision 39 is above 38"),
        ("decimal(5,6)", "decimal scale 6 is larger than its precision 5"),
        ("decimal(10,2,1)", "expected ')' after decimal(p,s"),
        ("varchar", "varchar (it needs a length: varchar(n))"),
        ("int(3)", "int takes no parameters"),
        ("array<int", "expected '>' after array<T, found the end"),
        ("map<string>", "expected ',' after map<K"),
        ("struct<a:int,>", "expected a field name"),
        ("array<struct<a:integr>>", "'integr' is not a Spark SQL type"),
        ("interval month to year", "interval month to year is not an interval"),
        ("int string", "unexpected 'string' after a complete type"),
        ("", "expected a type"),
    ],
)
def test_a_bad_type_says_why(text, why):
    with pytest.raises(TypeSyntaxError, match=re.escape(why)):
        check_type(text, SPARK_4)


def test_spark_4_adds_variant_collations_time_and_spatial_types():
    for text in (
        "variant",
        "string collate UTF8_LCASE",
        "array<string collate unicode_ci>",
        "string collate system.builtin.UTF8_LCASE_RTRIM",
        "time(3)",
        "timestamp without time zone",
        "geometry(4326)",
    ):
        check_type(text, SPARK_4)
        with pytest.raises(TypeSyntaxError, match="needs Spark 4; glue-5.1 runs Spark 3.5.6"):
            check_type(text, SPARK_3)
    for text in ("string collate no_such_collation", "string collate en_US", "string collate UTF8_LCASE_CI"):
        with pytest.raises(TypeSyntaxError, match="is not a collation"):
            check_type(text, SPARK_4)
    with pytest.raises(TypeSyntaxError, match="time's precision is 0..6"):
        check_type("time(7)", SPARK_4)


def test_a_typo_fails_the_config_in_one_line_naming_file_table_field_and_the_valid_forms():
    with pytest.raises(ConfigError) as caught:
        parse_config(config({"salary": "integr"}), origin="tables.yaml", runtime=SPARK_3)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(
        "tables.yaml: table 'hr.staff' -> source.schema: column salary: 'integr': 'integr' is not a "
        "Spark SQL type; valid forms: boolean, tinyint, smallint, int, bigint"
    )
    assert "decimal(p,s)" in message and "struct<name:T,...>" in message and "glue-5.1" in message


def test_the_runtime_the_config_is_validated_for_decides():
    parse_config(config({"doc": "variant"}), runtime=SPARK_4)
    with pytest.raises(ConfigError, match="column doc: 'variant': variant needs Spark 4"):
        parse_config(config({"doc": "variant"}), runtime=SPARK_3)


def test_without_a_runtime_the_processs_own_decides(monkeypatch):
    monkeypatch.setenv("LAKELOADER_RUNTIME", "glue-6.0")
    parse_config(config({"doc": "variant"}))
    monkeypatch.setenv("LAKELOADER_RUNTIME", "glue-5.1")
    with pytest.raises(ConfigError, match="variant needs Spark 4"):
        parse_config(config({"doc": "variant"}))
