"""A batch's files checked one by one from their own schemas (lakeloader.engine.file_conflicts): which
file is named, for which column and types, and what the message says resolves it."""

from __future__ import annotations

from pyspark.sql import types as T

from lakeloader.config import TableConfig
from lakeloader.engine.file_conflicts import conflicts
from lakeloader.spark.inputs import InputFile

LOAD, CDC1, CDC2, CDC3 = (
    "s/LOAD00000001.parquet",
    "s/20261101-0900.parquet",
    "s/20261101-1000.parquet",
    ("s/20261101-1100.parquet"),
)


def table(**overrides) -> TableConfig:
    spec = {
        "id": "shop.orders",
        "source": {"prefix": "s/", "cdc": "dms"},
        "target": {"database": "shop", "table": "orders"},
        "keys": ["id"],
        **overrides,
    }
    return TableConfig.model_validate(spec)


def files(*names: str) -> list[InputFile]:
    return [InputFile(name, f"file:///raw/{name}", 1, "v") for name in names]


def schema(**columns: T.DataType) -> T.StructType:
    return T.StructType([T.StructField(name, dtype) for name, dtype in columns.items()])


ID = T.LongType()


def test_in_one_batch_the_file_that_differs_from_the_earlier_ones_is_named_with_column_and_types():
    found = conflicts(
        table(),
        files(LOAD, CDC1, CDC2, CDC3),
        [
            schema(id=ID, amount=T.DoubleType()),
            schema(Op=T.StringType(), id=ID, amount=T.DoubleType()),
            schema(Op=T.StringType(), id=ID, amount=T.StringType()),
            schema(Op=T.StringType(), id=ID, amount=T.DoubleType()),
        ],
        None,
    )
    assert list(found) == [CDC2]
    assert found[CDC2].startswith(
        f"table 'shop.orders', file '{CDC2}', column 'amount': string where the batch's earlier file "
        f"'{LOAD}' has double; the two cannot be combined: declare amount: double in source.schema"
    )


def test_against_the_table_every_file_that_it_cannot_hold_is_named():
    target = schema(id=ID, amount=T.DoubleType())
    found = conflicts(
        table(),
        files(CDC1, CDC2),
        [schema(Op=T.StringType(), id=ID, amount=T.StringType())] * 2,
        target,
    )
    assert list(found) == [CDC1, CDC2]
    assert (
        "column 'amount': string where the table has double; string cannot be written to double"
        in (found[CDC1])
    )


def test_allowed_widenings_are_no_conflict_under_evolve_in_a_batch_and_against_the_table():
    narrow = schema(id=T.IntegerType(), qty=T.IntegerType(), price=T.FloatType(), total=T.DecimalType(9, 2))
    wide = schema(id=ID, qty=T.LongType(), price=T.DoubleType(), total=T.DecimalType(12, 2))
    assert conflicts(table(), files(LOAD, CDC1), [narrow, wide], None) == {}
    assert conflicts(table(), files(CDC1), [wide], narrow) == {}


def test_a_widening_the_policy_forbids_names_the_policy_that_allows_it():
    narrow = schema(id=ID, qty=T.IntegerType())
    found = conflicts(
        table(schema_evolution="freeze"), files(CDC1), [schema(id=ID, qty=T.LongType())], narrow
    )
    assert found[CDC1] == (
        f"table 'shop.orders', file '{CDC1}', column 'qty': bigint where the table has int; bigint cannot be "
        "written to int: widening it needs schema_evolution: evolve (this table has freeze), or declare "
        "qty: int in source.schema to cast its values"
    )


def test_declared_and_left_out_columns_never_conflict_and_nested_ones_are_named_by_path():
    target = schema(id=ID, amount=T.DoubleType(), note=T.IntegerType(), addr=schema(zip=T.IntegerType()))
    given = schema(id=ID, amount=T.StringType(), note=T.StringType(), addr=schema(zip=T.StringType()))
    declared = table(
        source={"prefix": "s/", "cdc": "dms", "schema": {"amount": "double"}}, columns={"exclude": ["note"]}
    )
    found = conflicts(declared, files(CDC1), [given], target)
    assert "'amount'" not in found[CDC1] and "'note'" not in found[CDC1]
    assert "column 'addr.zip': string where the table has int" in found[CDC1]
    assert "declare addr: struct<zip:int> in source.schema (the whole column)" in found[CDC1]


def test_a_conflicting_file_does_not_set_the_batchs_types():
    found = conflicts(
        table(),
        files(CDC1, CDC2, CDC3),
        [
            schema(id=ID, amount=T.StringType()),
            schema(id=ID, amount=T.DoubleType()),
            schema(id=ID, amount=T.DoubleType()),
        ],
        None,
    )
    assert list(found) == [CDC2, CDC3]  # the earliest file decides; later ones that disagree are named
