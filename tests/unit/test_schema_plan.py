"""The schema planner alone: which drift each policy allows, and the messages. No JVM needed."""

from __future__ import annotations

import re

import pytest
from pyspark.sql import types as T

from lakeloader.engine.schema import plan_schema
from lakeloader.errors import SchemaChangeError


def struct(**fields: T.DataType) -> T.StructType:
    return T.StructType([T.StructField(name, dtype) for name, dtype in fields.items()])


TARGET = struct(
    id=T.LongType(),
    name=T.StringType(),
    qty=T.IntegerType(),
    score=T.FloatType(),
    amount=T.DecimalType(10, 2),
    addr=struct(city=T.StringType()),
    tags=T.ArrayType(struct(k=T.StringType())),
)


def plan(source: T.StructType, policy: str = "evolve", **kwargs):
    return plan_schema("t", TARGET, source, policy=policy, keys=["id"], **kwargs)


def test_identical_schema_is_a_no_op_under_every_policy():
    for policy in ("evolve", "freeze", "fail"):
        result = plan(TARGET, policy)
        assert not result.changes_table and not result.notes


@pytest.mark.parametrize(
    ("column", "source_type", "widened_to"),
    [
        ("qty", T.LongType(), "bigint"),
        ("score", T.DoubleType(), "double"),
        ("amount", T.DecimalType(18, 2), "decimal(18,2)"),
    ],
)
def test_safe_widenings_are_planned(column, source_type, widened_to):
    source = T.StructType(
        [f if f.name != column else T.StructField(column, source_type) for f in TARGET.fields]
    )
    result = plan(source)
    assert [(".".join(p), new.simpleString()) for p, _, new in result.widen] == [(column, widened_to)]


@pytest.mark.parametrize(
    ("column", "source_type"),
    [
        ("qty", T.ShortType()),
        ("score", T.ShortType()),
        ("amount", T.DecimalType(8, 2)),
        ("name", T.NullType()),
    ],
)
def test_narrower_source_types_fit_without_change(column, source_type):
    source = T.StructType(
        [f if f.name != column else T.StructField(column, source_type) for f in TARGET.fields]
    )
    for policy in ("evolve", "freeze", "fail"):
        assert not plan(source, policy).changes_table


@pytest.mark.parametrize(
    ("column", "source_type", "message"),
    [
        ("name", T.IntegerType(), "column name: int cannot be written to string"),
        ("qty", T.StringType(), "column qty: string cannot be written to int"),
        ("qty", T.DoubleType(), "column qty: double cannot be written to int"),
        ("amount", T.DecimalType(12, 3), "column amount: decimal(12,3) cannot be written to decimal(10,2)"),
        ("addr", T.StringType(), "column addr: string cannot be written to struct<city:string>"),
    ],
)
def test_incompatible_changes_fail_under_every_policy(column, source_type, message):
    source = T.StructType(
        [f if f.name != column else T.StructField(column, source_type) for f in TARGET.fields]
    )
    for policy in ("evolve", "freeze", "fail"):
        with pytest.raises(SchemaChangeError, match=re.escape(message)):
            plan(source, policy)


def test_nested_struct_fields_and_array_elements_are_added():
    source = struct(
        id=T.LongType(),
        addr=struct(city=T.StringType(), zip=T.StringType()),
        tags=T.ArrayType(struct(k=T.StringType(), v=T.IntegerType())),
    )
    result = plan(source)
    assert [(".".join(p), d.simpleString()) for p, d in result.add] == [
        ("addr.zip", "string"),
        ("tags.element.v", "int"),
    ]
    assert set(result.missing) == {"name", "qty", "score", "amount"}


def test_case_differences_are_the_same_column():
    source = struct(ID=T.LongType(), Name=T.StringType(), ADDR=struct(City=T.StringType()))
    result = plan(source, "evolve")
    assert not result.add and not result.widen


def test_columns_differing_only_in_case_in_the_source_fail():
    source = struct(id=T.LongType(), email=T.StringType(), Email=T.StringType())
    with pytest.raises(SchemaChangeError, match="source columns email/Email differ only in case"):
        plan(source)


def test_removed_key_fails_every_policy():
    source = struct(name=T.StringType())
    for policy in ("evolve", "freeze", "fail"):
        with pytest.raises(SchemaChangeError, match="key column id was removed from the source"):
            plan(source, policy)


def test_freeze_ignores_new_columns_and_refuses_widening():
    source = T.StructType([*TARGET.fields, T.StructField("extra", T.StringType())])
    result = plan(source, "freeze")
    assert result.ignored == ["extra"] and not result.changes_table
    assert "schema frozen: source column extra is not in the table, ignored" in result.notes
    wider = T.StructType(
        [f if f.name != "qty" else T.StructField("qty", T.LongType()) for f in TARGET.fields]
    )
    with pytest.raises(SchemaChangeError, match="source type bigint does not fit the frozen type int"):
        plan(wider, "freeze")


def test_fail_lists_every_differing_column():
    source = struct(id=T.LongType(), name=T.StringType(), qty=T.LongType(), email=T.StringType())
    with pytest.raises(SchemaChangeError) as err:
        plan(source, "fail")
    problems = err.value.problems
    assert "new column email string" in problems
    assert "column qty widened int -> bigint" in problems
    for missing in ("score", "amount", "addr", "tags"):
        assert f"column {missing} missing from the source" in problems


def test_all_null_new_columns_are_not_added_until_typed():
    source = T.StructType([*TARGET.fields, T.StructField("later", T.NullType())])
    result = plan(source)
    assert not result.add and result.untyped == ["later"]
    assert any("later holds only NULLs" in n for n in result.notes)


def test_managed_columns_are_neither_missing_nor_accepted_from_the_source():
    target = T.StructType([*TARGET.fields, T.StructField("valid_from", T.TimestampType())])
    result = plan_schema("t", target, TARGET, policy="fail", keys=["id"], managed=["valid_from"])
    assert not result.missing
    source = T.StructType([*TARGET.fields, T.StructField("Valid_From", T.StringType())])
    with pytest.raises(
        SchemaChangeError, match="source column Valid_From has the name of a column lakeloader"
    ):
        plan_schema("t", target, source, policy="evolve", keys=["id"], managed=["valid_from"])
