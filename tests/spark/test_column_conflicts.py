"""A file whose column the table (or the batch) cannot hold is named with the column and both types and
set aside while the batch's other files load (lakeloader.engine.file_conflicts); files whose types
only widen (int -> bigint, float -> double, decimal precision up) load together at the wider type."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import pyarrow as pa
import pytest
import yaml

from lakeloader.engine import apply_batch
from lakeloader.spark.errors import ColumnConflictError
from lakeloader.spark.inputs import list_inputs
from lakeloader.spark.session import CATALOG
from tests.spark.test_unreadable_files import Lake, input_log

pytestmark = pytest.mark.spark

LOAD = "src/LOAD00000001.parquet"
CDC = ["src/20261101-0900.parquet", "src/20261101-1000.parquet", "src/20261101-1100.parquet"]


def at(minute: int) -> datetime:
    return datetime(2026, 11, 1, 8, minute)


def orders(amount: pa.DataType, op: bool = True) -> pa.Schema:
    fields = [("id", pa.int64()), ("amount", amount), ("last_update_time", pa.timestamp("us"))]
    return pa.schema(([("Op", pa.string())] if op else []) + fields)


def order(op: str | None, id_: int, amount, minute: int) -> dict:
    return ({"Op": op} if op else {}) | {"id": id_, "amount": amount, "last_update_time": at(minute)}


def amounts(spark, table) -> list[tuple]:
    name = f"{CATALOG}.{table.target.database}.{table.target.table}"
    spark.sql(f"REFRESH TABLE {name}")
    return [tuple(r) for r in spark.sql(f"SELECT id, amount FROM {name} ORDER BY id").collect()]


@pytest.fixture
def lake(spark, cli, raw, make_table, tmp_path):
    table = make_table()
    spec = table.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    return Lake(spark, cli, raw, spec, tmp_path / "tables.yaml"), table


@pytest.mark.slow
def test_a_file_with_amount_string_is_set_aside_the_three_others_load_and_a_declared_cast_loads_it(
    spark, raw, lake
):
    """The issue's acceptance: four DMS Parquet files, the third with `amount` string."""
    lake, table = lake
    raw.write_parquet(LOAD, [order(None, i, float(i), 0) for i in (1, 2, 3)], orders(pa.float64(), op=False))
    raw.write_parquet(CDC[0], [order("U", 2, 20.5, 1)], orders(pa.float64()))
    raw.write_parquet(CDC[1], [order("U", 3, "30.25", 2)], orders(pa.string()))
    raw.write_parquet(CDC[2], [order("I", 4, 40.0, 3)], orders(pa.float64()))

    code, out = lake.run()

    assert code == 1, out
    assert amounts(spark, table) == [(1, 1.0), (2, 20.5), (3, 3.0), (4, 40.0)]
    (named,) = [line for line in out.splitlines() if line.startswith("!")]
    assert named.startswith(f"! {table.id}: 3 file(s) loaded, 1 set aside; a later run retries them"), named
    assert (
        f"file '{CDC[1]}', column 'amount': string where the batch's earlier file '{LOAD}' has double"
        in named
    )
    assert "declare amount: double in source.schema" in named
    for other in (LOAD, CDC[0], CDC[2]):
        assert other not in named.split("earlier file")[0], named
    assert "CANNOT_MERGE" not in out
    assert [(name, status) for name, status, _ in input_log(spark, table)] == [(CDC[1], "set_aside")]

    # What the message says resolves it: the declared type casts the file's text to the table's double.
    config = yaml.safe_load(lake.config.read_text())
    config["tables"][0]["source"]["schema"] = {"amount": "double"}
    lake.config.write_text(yaml.safe_dump(config))
    code, out = lake.run()
    assert code == 0, out
    assert amounts(spark, table) == [(1, 1.0), (2, 20.5), (3, 30.25), (4, 40.0)]


@pytest.mark.slow
def test_a_later_file_the_table_cannot_hold_is_named_and_set_aside_while_the_next_one_loads(
    spark, raw, make_table
):
    table = make_table()
    raw.write_parquet(LOAD, [order(None, 1, 1.0, 0)], orders(pa.float64(), op=False))
    apply_batch(spark, table, list_inputs(str(raw.root), "src/"), catalog=CATALOG, run_id="r1")
    (raw.root / LOAD).unlink()
    raw.write_parquet(CDC[0], [order("U", 1, "bad", 1)], orders(pa.string()))
    raw.write_parquet(CDC[1], [order("I", 2, 2.0, 2)], orders(pa.float64()))

    with pytest.raises(ColumnConflictError) as caught:
        apply_batch(spark, table, list_inputs(str(raw.root), "src/"), catalog=CATALOG, run_id="r2")

    assert list(caught.value.messages) == [CDC[0]]
    assert (
        f"file '{CDC[0]}', column 'amount': string where the table has double; string cannot be written to "
        "double"
    ) in caught.value.messages[CDC[0]]
    good = [f for f in list_inputs(str(raw.root), "src/") if f.name == CDC[1]]
    apply_batch(spark, table, good, catalog=CATALOG, run_id="r3")
    assert amounts(spark, table) == [(1, 1.0), (2, 2.0)]


@pytest.mark.slow
def test_files_whose_types_only_widen_load_together_at_the_wider_types(spark, raw, make_table):
    table = make_table()
    narrow = pa.schema(
        [
            ("id", pa.int32()),
            ("qty", pa.int32()),
            ("price", pa.float32()),
            ("total", pa.decimal128(9, 2)),
            ("last_update_time", pa.timestamp("us")),
        ]
    )
    wide = pa.schema(
        [
            ("Op", pa.string()),
            ("id", pa.int64()),
            ("qty", pa.int64()),
            ("price", pa.float64()),
            ("total", pa.decimal128(12, 2)),
            ("last_update_time", pa.timestamp("us")),
        ]
    )
    row = {"id": 1, "qty": 2, "price": 1.5, "total": Decimal("3.00"), "last_update_time": at(0)}
    raw.write_parquet(LOAD, [row], narrow)
    big = {
        "Op": "I",
        "id": 2,
        "qty": 2**40,
        "price": 1e300,
        "total": Decimal("1234567890.12"),
        "last_update_time": at(1),
    }
    raw.write_parquet(CDC[0], [big], wide)

    apply_batch(spark, table, list_inputs(str(raw.root), "src/"), catalog=CATALOG, run_id="r1")

    name = f"{CATALOG}.{table.target.database}.{table.target.table}"
    types = {f.name: f.dataType.simpleString() for f in spark.table(name).schema.fields[:4]}
    assert types == {
        "id": "bigint",
        "qty": "bigint",
        "price": "double",
        "total": "decimal(12,2)",
    }
    got = [tuple(r) for r in spark.sql(f"SELECT id, qty, price, total FROM {name} ORDER BY id").collect()]
    assert got == [(1, 2, 1.5, Decimal("3.00")), (2, 2**40, 1e300, Decimal("1234567890.12"))]
