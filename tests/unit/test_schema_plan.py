"""The schema planner alone: which drift each policy allows, and the messages. No JVM needed."""

from __future__ import annotations

import re

import pytest
from pyspark.sql import types as T

from lakeloader.engine.schema import plan_schema
from lakeloader.spark.errors import SchemaChangeError


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


MAPPED = struct(id=T.LongType(), attrs=T.MapType(T.LongType(), T.IntegerType()))


def with_attrs(key: T.DataType, value: T.DataType | None = None) -> T.StructType:
    return struct(id=T.LongType(), attrs=T.MapType(key, value or T.IntegerType()))


@pytest.mark.parametrize("key", [T.LongType(), T.IntegerType(), T.ShortType(), T.NullType()])
def test_a_maps_keys_may_arrive_narrower_but_never_wider(key):
    """Iceberg cannot change a map's key type: a key that casts losslessly into it is written as is."""
    assert not plan_schema("t", MAPPED, with_attrs(key), policy="evolve", keys=["id"]).changes_table


@pytest.mark.parametrize(
    ("target_key", "source_key"),
    [
        (T.TimestampType(), T.TimestampNTZType()),
        (T.TimestampType(), T.DateType()),
        (T.TimestampNTZType(), T.DateType()),
        (T.DoubleType(), T.FloatType()),
        (T.DoubleType(), T.IntegerType()),
        (T.FloatType(), T.ShortType()),
        (T.DecimalType(10, 2), T.DecimalType(8, 2)),
    ],
)
def test_every_lossless_cast_is_accepted_for_a_maps_keys(target_key, source_key):
    """The same rules as a column's, where "fits" is the only way a different type is accepted."""
    target = struct(id=T.LongType(), attrs=T.MapType(target_key, T.IntegerType()))
    assert not plan_schema("t", target, with_attrs(source_key), policy="evolve", keys=["id"]).problems


@pytest.mark.parametrize(
    ("source_key", "message"),
    [
        (T.DecimalType(20, 0), "map key decimal(20,0) cannot be written to bigint (map keys cannot change)"),
        (T.StringType(), "map key string cannot be written to bigint (map keys cannot change)"),
    ],
)
def test_a_maps_key_that_would_widen_or_change_fails(source_key, message):
    with pytest.raises(SchemaChangeError) as err:
        plan_schema("t", MAPPED, with_attrs(source_key), policy="evolve", keys=["id"])
    assert err.value.problems == [f"column attrs: {message}"]


def test_a_maps_values_widen_and_their_path_says_so():
    result = plan_schema("t", MAPPED, with_attrs(T.LongType(), T.LongType()), policy="evolve", keys=["id"])
    assert [(path, old, new) for path, old, new in result.widen] == [
        (("attrs", "value"), T.IntegerType(), T.LongType())
    ]
    assert result.notes == ["schema: widened attrs.value int -> bigint"]
    assert result.describe_drift() == ["column attrs.value widened int -> bigint"]


@pytest.mark.parametrize(
    ("target", "source"),
    [
        (T.ArrayType(T.StringType()), T.StringType()),
        (T.StringType(), T.ArrayType(T.StringType())),
        (T.StringType(), T.MapType(T.StringType(), T.StringType())),
        (T.MapType(T.StringType(), T.StringType()), T.StringType()),
        (T.TimestampType(), T.StringType()),
        (T.TimestampType(), T.LongType()),
        (T.StringType(), T.DateType()),
        (T.StringType(), T.TimestampNTZType()),
        (T.DateType(), T.TimestampType()),
    ],
)
def test_a_value_of_another_kind_fails(target, source):
    """A list or map written as a scalar or the other way round, a time as text or a number, text as a
    time: only a date into either timestamp, and a timestamp without time zone into one with, fit. DMS
    writing a timestamp column as text must fail the batch, not be cast by Spark."""
    with pytest.raises(SchemaChangeError) as err:
        plan_schema(
            "t",
            struct(id=T.LongType(), v=target),
            struct(id=T.LongType(), v=source),
            policy="evolve",
            keys=["id"],
        )
    written = f"{source.simpleString()} cannot be written to {target.simpleString()}"
    assert err.value.problems == [f"column v: {written} (incompatible type change)"]


@pytest.mark.parametrize(
    "untyped",
    [
        struct(city=T.NullType()),
        T.ArrayType(T.NullType()),
        T.MapType(T.StringType(), T.NullType()),
        T.ArrayType(struct(k=T.StringType(), v=T.NullType())),
        T.MapType(T.NullType(), T.StringType()),
    ],
)
def test_a_new_column_with_no_type_anywhere_inside_waits_for_one(untyped):
    """Iceberg has no NULL type: a new struct, list or map with a NULL-typed part anywhere is not added
    until a batch gives it a type (typed_columns leaves it out of the rows written meanwhile)."""
    source = struct(id=T.LongType(), extra=untyped)
    result = plan_schema("t", struct(id=T.LongType()), source, policy="evolve", keys=["id"])
    assert (result.add, result.untyped) == ([], ["extra"])


def test_a_new_nested_fields_path_is_reported_dotted():
    source = struct(id=T.LongType(), addr=struct(city=T.StringType(), zip=T.StringType()))
    target = struct(id=T.LongType(), addr=struct(city=T.StringType()))
    result = plan_schema("t", target, source, policy="evolve", keys=["id"])
    assert result.notes == ["schema: added column addr.zip string"]
    assert result.describe_drift() == ["new column addr.zip string"]


def test_a_case_clash_inside_a_struct_names_the_struct():
    source = struct(id=T.LongType(), addr=struct(city=T.StringType(), City=T.StringType()))
    with pytest.raises(SchemaChangeError) as err:
        plan(source)
    assert "source columns city/City in addr differ only in case" in err.value.problems


def test_every_source_column_after_a_new_one_is_still_compared():
    """A new column first in the source, a widened and a new nested field after it."""
    source = struct(
        extra=T.StringType(),
        id=T.LongType(),
        qty=T.LongType(),
        addr=struct(city=T.StringType(), zip=T.IntegerType()),
    )
    result = plan(source)
    assert [".".join(p) for p, _ in result.add] == ["extra", "addr.zip"]
    assert [".".join(p) for p, _, _ in result.widen] == ["qty"]


def test_a_schema_change_error_names_the_table_and_an_unknown_policy_names_itself():
    with pytest.raises(SchemaChangeError) as err:
        plan_schema("crm.customers", TARGET, struct(id=T.StringType()), policy="evolve", keys=["id"])
    assert err.value.table_id == "crm.customers"
    assert str(err.value).startswith(
        "table 'crm.customers': schema change not allowed:\n  - column id: string"
    )
    with pytest.raises(ValueError, match="^unknown schema_evolution policy 'grow'$"):
        plan_schema("t", TARGET, TARGET, policy="grow", keys=["id"])


def test_a_managed_column_sent_by_the_source_is_that_one_problem_and_no_drift():
    """Under `fail`, the source's Valid_From is reported once, as a managed column, not also as new."""
    target = T.StructType([*TARGET.fields, T.StructField("valid_from", T.TimestampType())])
    source = T.StructType([*TARGET.fields, T.StructField("Valid_From", T.StringType())])
    with pytest.raises(SchemaChangeError) as err:
        plan_schema("t", target, source, policy="fail", keys=["id"], managed=["valid_from"])
    assert err.value.problems == [
        "source column Valid_From has the name of a column lakeloader manages on this table"
    ]
