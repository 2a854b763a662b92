"""Schema evolution policies (evolve / freeze / fail) on real Iceberg tables."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import pyarrow as pa
import pytest

from lakeloader.engine import apply_batch
from lakeloader.iceberg import iceberg_table
from lakeloader.jobs.load import run_tables
from lakeloader.spark.errors import ColumnConflictError, SchemaChangeError
from lakeloader.spark.inputs import list_inputs
from lakeloader.spark.session import CATALOG

pytestmark = pytest.mark.spark

T0 = datetime(2026, 11, 1, 8, 0, 0)


def at(minute: int) -> datetime:
    return T0.replace(minute=minute)


def load(spark, table, raw, run_id: str = "run"):
    files = list_inputs(str(raw.root), table.source.prefix)
    return apply_batch(spark, table, files, catalog=CATALOG, run_id=run_id)


def target(table) -> str:
    return f"{CATALOG}.{table.target.database}.{table.target.table}"


def types(spark, table) -> dict[str, str]:
    return {f.name: f.dataType.simpleString() for f in spark.table(target(table)).schema.fields}


def snapshots(spark, table) -> int:
    return spark.sql(f"SELECT * FROM {target(table)}.snapshots").count()


def schema_count(spark, table) -> int:
    return iceberg_table(spark, f"{CATALOG}.{table.target.database}.{table.target.table}").schemas().size()


BASE = pa.schema(
    [
        ("Op", pa.string()),
        ("id", pa.int64()),
        ("name", pa.string()),
        ("qty", pa.int32()),
        ("score", pa.float32()),
        ("amount", pa.decimal128(10, 2)),
        ("addr", pa.struct([("city", pa.string())])),
        ("last_update_time", pa.timestamp("us")),
    ]
)


def base_row(op: str, id_: int, minute: int, **values) -> dict:
    row = {
        "Op": op,
        "id": id_,
        "name": f"n{id_}",
        "qty": id_,
        "score": 0.5,
        "amount": Decimal("1.25"),
        "addr": {"city": "Oslo"},
        "last_update_time": at(minute),
    }
    row.update(values)
    return row


@pytest.mark.slow
def test_add_widen_rename_drop_and_case_across_batches(spark, raw, make_table):
    table = make_table()
    raw.write_parquet("src/20261101-0800.parquet", [base_row("I", 1, 0), base_row("I", 2, 0)], BASE)
    load(spark, table, raw)

    # batch 2: a new column, three widenings and a new nested field, all in one schema commit
    wider = pa.schema(
        [
            ("Op", pa.string()),
            ("id", pa.int64()),
            ("name", pa.string()),
            ("qty", pa.int64()),
            ("score", pa.float64()),
            ("amount", pa.decimal128(14, 2)),
            ("addr", pa.struct([("city", pa.string()), ("zip", pa.string())])),
            ("email", pa.string()),
            ("last_update_time", pa.timestamp("us")),
        ]
    )
    raw.write_parquet(
        "src/20261101-0900.parquet",
        [
            {
                **base_row("I", 3, 10, qty=2**40, score=0.1, amount=Decimal("123456789012.34")),
                "addr": {"city": "Rome", "zip": "00100"},
                "email": "c@x",
            }
        ],
        wider,
    )
    schemas = schema_count(spark, table)
    result = load(spark, table, raw)
    assert result.files == 1 and result.inserted == 1
    assert schema_count(spark, table) == schemas + 1  # every change in ONE schema commit
    evolved = types(spark, table)
    evolved.pop("last_update_time")
    assert evolved == {
        "id": "bigint",
        "name": "string",
        "qty": "bigint",
        "score": "double",
        "amount": "decimal(14,2)",
        "addr": "struct<city:string,zip:string>",
        "email": "string",
    }
    assert "schema: added column email string" in result.notes
    assert "schema: added column addr.zip string" in result.notes
    assert "schema: widened qty int -> bigint" in result.notes
    got = spark.sql(f"SELECT id, qty, amount, addr.zip, email FROM {target(table)} ORDER BY id").collect()
    assert [tuple(r) for r in got] == [
        (1, 1, Decimal("1.25"), None, None),  # existing rows read NULL
        (2, 2, Decimal("1.25"), None, None),
        (3, 2**40, Decimal("123456789012.34"), "00100", "c@x"),
    ]

    # batch 3: `name` renamed to `full_name`, `score` dropped: both stay, NULL in the rows written
    renamed = pa.schema(
        [
            ("Op", pa.string()),
            ("id", pa.int64()),
            ("full_name", pa.string()),
            ("qty", pa.int64()),
            ("amount", pa.decimal128(14, 2)),
            ("addr", pa.struct([("city", pa.string()), ("zip", pa.string())])),
            ("email", pa.string()),
            ("last_update_time", pa.timestamp("us")),
        ]
    )
    row = {
        "Op": "U",
        "id": 1,
        "full_name": "Ann One",
        "qty": 7,
        "amount": Decimal("2.00"),
        "addr": {"city": "Oslo", "zip": "0150"},
        "email": "a@x",
        "last_update_time": at(20),
    }
    raw.write_parquet("src/20261101-1000.parquet", [row, {**row, "id": 4, "full_name": "Dan"}], renamed)
    result = load(spark, table, raw)
    assert (result.inserted, result.updated) == (1, 1)
    assert "schema: column name missing from the source, NULL in the rows written" in result.notes
    assert list(spark.table(target(table)).columns) == [
        "id",
        "name",
        "qty",
        "score",
        "amount",
        "addr",
        "last_update_time",
        "email",
        "full_name",
    ]
    got = spark.sql(f"SELECT id, name, full_name, score FROM {target(table)} ORDER BY id").collect()
    assert [tuple(r) for r in got] == [
        (1, None, "Ann One", None),
        (2, "n2", None, 0.5),  # untouched rows keep their values: history is not rewritten
        (3, "n3", None, pytest.approx(0.1)),
        (4, None, "Dan", None),
    ]

    # batch 4: the source now spells columns differently in case: the same columns, no new ones
    cased = pa.schema(
        [
            ("Op", pa.string()),
            ("ID", pa.int64()),
            ("Full_Name", pa.string()),
            ("EMAIL", pa.string()),
            ("Addr", pa.struct([("CITY", pa.string())])),
            ("Last_Update_Time", pa.timestamp("us")),
        ]
    )
    raw.write_parquet(
        "src/20261101-1100.parquet",
        [
            {
                "Op": "U",
                "ID": 2,
                "Full_Name": "Bo",
                "EMAIL": "b@x",
                "Addr": {"CITY": "Bergen"},
                "Last_Update_Time": at(30),
            }
        ],
        cased,
    )
    columns_before = spark.table(target(table)).columns
    result = load(spark, table, raw)
    assert result.updated == 1
    assert spark.table(target(table)).columns == columns_before
    got = spark.sql(f"SELECT full_name, email, addr.city, addr.zip FROM {target(table)} WHERE id = 2").first()
    assert tuple(got) == ("Bo", "b@x", "Bergen", None)


@pytest.mark.slow
def test_freeze_ignores_new_columns_and_reports_them(spark, raw, make_table):
    table = make_table(schema_evolution="freeze")
    raw.write_parquet("src/20261101-0800.parquet", [base_row("I", 1, 0)], BASE)
    load(spark, table, raw)
    before = types(spark, table)
    extra = BASE.append(pa.field("nickname", pa.string())).append(pa.field("tier", pa.int32()))
    raw.write_parquet(
        "src/20261101-0900.parquet", [{**base_row("U", 1, 10, qty=5), "nickname": "x", "tier": 1}], extra
    )
    result = load(spark, table, raw)
    assert (result.files, result.updated) == (1, 1)
    assert types(spark, table) == before
    assert "schema frozen: source column nickname is not in the table, ignored" in result.notes
    assert "schema frozen: source column tier is not in the table, ignored" in result.notes
    assert spark.sql(f"SELECT qty FROM {target(table)}").first()[0] == 5

    # a type that would need the table to widen is not allowed when frozen
    widened = pa.schema([f if f.name != "qty" else pa.field("qty", pa.int64()) for f in BASE])
    raw.write_parquet("src/20261101-1000.parquet", [base_row("U", 1, 20, qty=2**40)], widened)
    # (the file is named and set aside: lakeloader.engine.file_conflicts)
    with pytest.raises(
        ColumnConflictError,
        match=r"column 'qty': bigint where the table has int; .*widening it needs schema_evolution: evolve "
        r"\(this table has freeze\)",
    ):
        load(spark, table, raw)


def test_fail_policy_lists_each_differing_column(spark, raw, make_table):
    table = make_table(schema_evolution="fail")
    raw.write_parquet("src/20261101-0800.parquet", [base_row("I", 1, 0)], BASE)
    load(spark, table, raw)
    before = (snapshots(spark, table), types(spark, table))
    drifted = pa.schema([f for f in BASE if f.name != "score"] + [pa.field("email", pa.string())]).set(
        3, pa.field("qty", pa.int64())
    )
    row = base_row("U", 1, 10, email="a@x")
    row.pop("score")
    raw.write_parquet("src/20261101-0900.parquet", [row], drifted)
    # the widening is found in the file's footer: the file is named and set aside
    with pytest.raises(
        ColumnConflictError, match=r"column 'qty': bigint where the table has int; .*this table has fail"
    ):
        load(spark, table, raw)
    assert (snapshots(spark, table), types(spark, table)) == before
    # the rest of the drift fails the batch as a whole
    row["qty"] = 3
    raw.write_parquet("src/20261101-0900.parquet", [row], drifted.set(3, pa.field("qty", pa.int32())))
    with pytest.raises(SchemaChangeError) as err:
        load(spark, table, raw)
    message = str(err.value)
    assert f"table {table.id!r}: schema change not allowed" in message
    for expected in ("new column email string", "column score missing"):
        assert expected in message
    assert (snapshots(spark, table), types(spark, table)) == before


@pytest.mark.parametrize("policy", ["evolve", "freeze", "fail"])
def test_incompatible_changes_fail_under_every_policy_and_change_nothing(spark, raw, make_table, policy):
    table = make_table(schema_evolution=policy)
    raw.write_parquet("src/20261101-0800.parquet", [base_row("I", 1, 0)], BASE)
    load(spark, table, raw)
    before = (snapshots(spark, table), types(spark, table), schema_count(spark, table))
    bad = pa.schema(
        [
            ("Op", pa.string()),
            ("id", pa.int64()),
            ("name", pa.int64()),  # string -> int
            ("qty", pa.float64()),  # int <- double: would narrow
            ("score", pa.float32()),
            ("amount", pa.decimal128(10, 3)),  # scale change
            ("addr", pa.struct([("city", pa.string())])),
            ("last_update_time", pa.timestamp("us")),
            ("email", pa.string()),  # evolve alone would add this: it must not be added either
        ]
    )
    row = base_row("U", 1, 10, name=5, qty=1.5, amount=Decimal("1.250"), email="e")
    raw.write_parquet("src/20261101-0900.parquet", [row], bad)
    with pytest.raises(ColumnConflictError) as err:  # found in the file's footer: the file is set aside
        load(spark, table, raw)
    message = str(err.value)
    assert "column 'name': bigint where the table has string; bigint cannot be written to string" in message
    assert "column 'qty': double where the table has int" in message
    assert "column 'amount': decimal(10,3) where the table has decimal(10,2)" in message
    # nothing committed: no ALTER, no new schema, no snapshot
    assert (snapshots(spark, table), types(spark, table), schema_count(spark, table)) == before


@pytest.mark.slow
def test_an_incompatible_change_fails_only_its_own_table(spark, raw, make_table):
    good = make_table()
    string_to_int = make_table(source={"prefix": "typed/"})
    key_removed = make_table(source={"prefix": "nokey/"})
    for prefix in ("src", "typed", "nokey"):
        raw.write_parquet(f"{prefix}/20261101-0800.parquet", [base_row("I", 1, 0)], BASE)
    tables = [string_to_int, key_removed, good]
    inputs = {t.id: list_inputs(str(raw.root), t.source.prefix) for t in tables}
    run_tables(spark, tables, inputs, catalog=CATALOG, run_id="r1", progress=lambda m: None)
    before = {t.id: snapshots(spark, t) for t in tables}

    raw.write_parquet(
        "src/20261101-0900.parquet",
        [{**base_row("U", 1, 10), "email": "ok"}],
        BASE.append(pa.field("email", pa.string())),
    )
    raw.write_parquet(
        "typed/20261101-0900.parquet",
        [base_row("U", 1, 10, name=42)],
        BASE.set(2, pa.field("name", pa.int64())),
    )
    no_key = {k: v for k, v in base_row("U", 1, 10).items() if k != "id"}
    raw.write_parquet(
        "nokey/20261101-0900.parquet",
        [{**no_key, "customer_id": 1}],
        BASE.remove(1).append(pa.field("customer_id", pa.int64())),
    )
    inputs = {t.id: list_inputs(str(raw.root), t.source.prefix) for t in tables}
    results = run_tables(spark, tables, inputs, catalog=CATALOG, run_id="r2", progress=lambda m: None)
    assert [r.status for r in results] == ["failed", "failed", "ok"]
    assert "column 'name': bigint where the table has string" in results[0].error
    assert "column 'id': key column is missing" in results[1].error
    assert snapshots(spark, string_to_int) == before[string_to_int.id]
    assert snapshots(spark, key_removed) == before[key_removed.id]
    assert "email" not in spark.table(target(key_removed)).columns
    assert spark.sql(f"SELECT email FROM {target(good)}").first()[0] == "ok"


@pytest.mark.slow
def test_array_elements_gain_struct_fields(spark, raw, make_table):
    table = make_table(source={"format": "json", "cdc": "debezium"})
    raw.write_json(
        "src/0001.json", [{"id": 1, "name": "a", "tags": [{"k": "x"}], "__op": "c", "__source_ts_ms": 1}]
    )
    load(spark, table, raw)
    raw.write_json(
        "src/0002.json", [{"id": 1, "tags": [{"k": "y", "v": 2}], "__op": "u", "__source_ts_ms": 2}]
    )
    result = load(spark, table, raw)
    assert "schema: added column tags.element.v bigint" in result.notes
    got = spark.sql(f"SELECT name, tags FROM {target(table)}").first()
    assert (got.name, [tuple(t) for t in got.tags]) == (None, [("y", 2)])
