"""lakeloader.config.types against the runtime's own Spark: every case gets the same verdict from the
config's grammar (no Spark) as from the session's SQL parser, so a type the config accepts is one the
run can read, and one it refuses would have failed the run."""

from __future__ import annotations

import pytest

from lakeloader.config.types import TypeSyntaxError, check_type
from lakeloader.control import runtimes

CASES = [
    "int",
    "INTEGER",
    "integr",
    "bigint",
    "long",
    "byte",
    "short",
    "real",
    "boolean",
    "double",
    "string",
    "binary",
    "date",
    "timestamp",
    "timestamp_ntz",
    "timestamp_ltz",
    "void",
    "decimal",
    "decimal(10)",
    "decimal(10,2)",
    "DECIMAL( 38 , 38 )",
    "decimal(39,2)",
    "decimal(0)",
    "decimal(5,6)",
    "decimal(10,2,1)",
    "numeric(12,4)",
    "dec(4,1)",
    "char(3)",
    "char",
    "varchar(20)",
    "varchar",
    "character(2)",
    "int(3)",
    "string(10)",
    "array<int>",
    "array<array<decimal(10,2)>>",
    "array<>",
    "array",
    "array<int",
    "map<string,int>",
    "map<string, array<struct<a:int>>>",
    "map<string>",
    "struct<a:int,b:string>",
    "struct<a int, b string>",
    "struct<>",
    "struct<`a b`:int>",
    "struct<a:int not null comment 'x'>",
    "struct<a:int,>",
    "struct<a:integr>",
    "interval year to month",
    "interval day to second",
    "interval hour",
    "interval month to year",
    "interval",
    "int,",
    "a int",
    "variant",
    "string collate UTF8_LCASE",
    "string collate unicode_ci",
    "string collate no_such_collation",
    "string collate UTF8_LCASE_RTRIM",
    "string collate UTF8_LCASE_CI",
    "string collate en_USA",
    "string collate en_US",
    "string collate sr_Cyrl_SRB_CI_AI",
    "string collate system.builtin.UTF8_LCASE",
    "string collate builtin.UTF8_LCASE",
    "time",
    "time(6)",
    "time(7)",
    "time(3) without time zone",
    "timestamp without time zone",
    "timestamp with time zone",
    "array<time>",
    "geometry(4326)",
    "geometry(ANY)",
    "geography(ANY)",
    "geography",
    'struct<a:int comment "x">',
    "",
    "  int  ",
    "int;",
]


def spark_accepts(spark, text: str) -> bool:
    parser = spark._jsparkSession.sessionState().sqlParser()
    try:
        parser.parseDataType(text)
    except Exception:  # py4j's error for Spark's ParseException/AnalysisException
        return False
    return True


def grammar_accepts(text: str) -> bool:
    try:
        check_type(text, runtimes.local())
    except TypeSyntaxError:
        return False
    return True


@pytest.mark.parametrize("text", CASES)
def test_the_config_grammar_agrees_with_the_runtimes_parser(spark, text):
    assert grammar_accepts(text) == spark_accepts(spark, text), (runtimes.local().name, text)
