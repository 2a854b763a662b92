"""SCD type 2 (`mode: scd2`) on real Iceberg tables: version chains, no-ops, deletes, late changes."""

from __future__ import annotations

import json
from datetime import datetime

import pyarrow as pa
import pytest
import yaml

from lakeloader import cli
from lakeloader.engine import apply_batch
from lakeloader.spark.errors import BadInputError
from lakeloader.spark.inputs import list_inputs
from lakeloader.spark.session import CATALOG

pytestmark = pytest.mark.spark

T0 = datetime(2026, 11, 1, 8, 0, 0)


def at(minute: int) -> datetime:
    return T0.replace(minute=minute)


DMS = pa.schema(
    [
        ("Op", pa.string()),
        ("id", pa.int64()),
        ("name", pa.string()),
        ("city", pa.string()),
        ("last_update_time", pa.timestamp("us")),
    ]
)


def change(op: str, id_: int, name: str | None, minute: int, city: str = "x") -> dict:
    return {"Op": op, "id": id_, "name": name, "city": city, "last_update_time": at(minute)}


def scd2_table(make_table, **overrides):
    return make_table(mode="scd2", **overrides)


def load(spark, table, raw, run_id: str = "run"):
    files = list_inputs(str(raw.root), table.source.prefix)
    return apply_batch(spark, table, files, catalog=CATALOG, run_id=run_id)


def target(table) -> str:
    return f"{CATALOG}.{table.target.database}.{table.target.table}"


def versions(spark, table, columns: str = "id, name, valid_from, valid_to, is_current") -> list[tuple]:
    query = f"SELECT {columns} FROM {target(table)} ORDER BY id, valid_from"
    return [tuple(r) for r in spark.sql(query).collect()]


def snapshots(spark, table) -> int:
    return spark.sql(f"SELECT * FROM {target(table)}.snapshots").count()


@pytest.mark.slow
def test_update_noop_and_delete_across_batches(spark, raw, make_table):
    table = scd2_table(make_table)
    raw.write_parquet(
        "src/20261101-0800.parquet",
        [change("I", 1, "a", 0), change("I", 2, "b", 0), change("I", 3, "c", 0)],
        DMS,
    )
    first = load(spark, table, raw)
    assert (first.inserted, first.updated, first.deleted) == (3, 0, 0)

    raw.write_parquet(
        "src/20261101-0900.parquet",
        # 1 changes; 2 is re-sent unchanged (only its timestamp moves); 3 is deleted
        [change("U", 1, "a2", 10), change("U", 2, "b", 10), change("D", 3, "c", 20)],
        DMS,
    )
    before = snapshots(spark, table)
    second = load(spark, table, raw)
    assert (second.inserted, second.updated, second.deleted) == (1, 1, 1)
    assert snapshots(spark, table) == before + 1  # one atomic commit
    assert any("1 change(s) left the tracked columns unchanged" in n for n in second.notes)
    assert versions(spark, table) == [
        (1, "a", at(0), at(10), False),
        (1, "a2", at(10), None, True),
        (2, "b", at(0), None, True),
        (3, "c", at(0), at(20), False),
    ]
    # the deleted key has no current version; a later insert opens a new one
    raw.write_parquet("src/20261101-1000.parquet", [change("I", 3, "c2", 30)], DMS)
    third = load(spark, table, raw)
    assert (third.inserted, third.updated, third.deleted) == (1, 0, 0)
    assert versions(spark, table)[-2:] == [(3, "c", at(0), at(20), False), (3, "c2", at(30), None, True)]
    current = spark.sql(f"SELECT id, count(*) FROM {target(table)} WHERE is_current GROUP BY id").collect()
    assert sorted(tuple(r) for r in current) == [(1, 1), (2, 1), (3, 1)]


@pytest.mark.slow
def test_several_changes_to_one_key_in_one_batch_make_a_chain(spark, raw, make_table):
    table = scd2_table(make_table)
    # rows out of order, split over two files: the sequence column decides
    raw.write_parquet(
        "src/20261101-0900.parquet",
        [change("U", 1, "c", 4), change("I", 1, "a", 1), change("U", 1, "b", 3), change("I", 2, "z", 1)],
        DMS,
    )
    raw.write_parquet(
        "src/20261101-0901.parquet",
        [change("I", 1, "d", 6), change("U", 1, "b", 2), change("D", 1, None, 5), change("D", 2, None, 7)],
        DMS,
    )
    result = load(spark, table, raw)
    # opened a, b, c, d (b@3 repeats b@2: no-op) and z; closed a->b, b->c; deleted c and z
    assert (result.inserted, result.updated, result.deleted) == (5, 2, 2)
    assert versions(spark, table) == [
        (1, "a", at(1), at(2), False),
        (1, "b", at(2), at(4), False),
        (1, "c", at(4), at(5), False),
        (1, "d", at(6), None, True),
        (2, "z", at(1), at(7), False),
    ]
    assert snapshots(spark, table) == 1

    raw.write_parquet("src/20261101-1000.parquet", [change("U", 1, "e", 8), change("U", 1, "f", 9)], DMS)
    result = load(spark, table, raw)
    assert (result.inserted, result.updated, result.deleted) == (2, 2, 0)
    assert versions(spark, table)[3:6] == [
        (1, "d", at(6), at(8), False),
        (1, "e", at(8), at(9), False),
        (1, "f", at(9), None, True),
    ]


@pytest.mark.slow
def test_late_changes_are_ignored_and_counted(spark, raw, make_table):
    table = scd2_table(make_table)
    raw.write_parquet(
        "src/20261101-1000.parquet", [change("I", 1, "new", 30), change("I", 2, "gone", 10)], DMS
    )
    raw.write_parquet("src/20261101-1001.parquet", [change("D", 2, None, 40)], DMS)
    load(spark, table, raw)
    before = versions(spark, table)
    # arrives later, older than the key's latest point in time: would rewrite history
    raw.write_parquet(
        "src/20261101-0900.parquet",
        [change("U", 1, "old", 20), change("U", 1, "same-time", 30), change("U", 2, "old", 35)],
        DMS,
    )
    result = load(spark, table, raw)
    assert (result.inserted, result.updated, result.deleted) == (0, 0, 0)
    assert any("3 late change(s)" in n for n in result.notes)
    assert versions(spark, table) == before
    # a late change mixed with a newer one: the newer one still applies
    raw.write_parquet(
        "src/20261101-1100.parquet", [change("U", 1, "older", 25), change("U", 1, "v2", 50)], DMS
    )
    result = load(spark, table, raw)
    assert (result.inserted, result.updated) == (1, 1)
    assert versions(spark, table)[:2] == [(1, "new", at(30), at(50), False), (1, "v2", at(50), None, True)]


@pytest.mark.slow
def test_point_in_time_lookup_in_sql_and_through_lakeloader_sql(spark, raw, make_table, tmp_path, capsys):
    table = scd2_table(make_table)
    raw.write_parquet("src/a.parquet", [change("I", 1, "a", 0), change("I", 2, "b", 0)], DMS)
    raw.write_parquet("src/b.parquet", [change("U", 1, "a2", 10), change("D", 2, None, 20)], DMS)
    load(spark, table, raw)

    def as_of(moment: str) -> list[tuple]:
        query = (
            f"SELECT id, name FROM {target(table)} WHERE valid_from <= TIMESTAMP '{moment}' "
            f"AND (valid_to > TIMESTAMP '{moment}' OR valid_to IS NULL) ORDER BY id"
        )
        return [tuple(r) for r in spark.sql(query).collect()]

    assert as_of("2026-11-01 07:59:00") == []
    assert as_of("2026-11-01 08:05:00") == [(1, "a"), (2, "b")]
    assert as_of("2026-11-01 08:10:00") == [(1, "a2"), (2, "b")]  # valid_to is exclusive
    assert as_of("2026-11-01 08:30:00") == [(1, "a2")]

    config = tmp_path / "tables.yaml"
    warehouse = spark.conf.get(f"spark.sql.catalog.{CATALOG}.warehouse")
    config.write_text(
        yaml.safe_dump(
            {
                "raw_root": str(raw.root),
                "warehouse": warehouse,
                "tables": [table.model_dump(mode="json", by_alias=True, exclude_none=True)],
            }
        )
    )
    db, name = table.target.database, table.target.table
    query = (
        f"SELECT id, name FROM {db}.{name} WHERE valid_from <= TIMESTAMP '2026-11-01 08:15:00' "
        "AND (valid_to > TIMESTAMP '2026-11-01 08:15:00' OR valid_to IS NULL) ORDER BY id"
    )
    capsys.readouterr()
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    try:
        assert cli.main(["sql", "--config", str(config), query]) == 0  # reuses this test session's Spark
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", partitions)
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines == [{"id": 1, "name": "a2"}, {"id": 2, "name": "b"}]


@pytest.mark.slow
def test_custom_columns_tracked_subset_and_surrogate_keys(spark, raw, make_table):
    table = scd2_table(
        make_table,
        keys=["id", "city"],
        scd2={
            "valid_from": "eff_from",
            "valid_to": "eff_to",
            "is_current": "current_flag",
            "surrogate_key": "sk",
            "hash": "h",
            "track": ["name"],
        },
    )
    raw.write_parquet(
        "src/a.parquet", [change("I", 1, "a", 0, city="p"), change("I", 1, "a", 0, city="q")], DMS
    )
    load(spark, table, raw)
    raw.write_parquet(
        "src/b.parquet",
        [change("U", 1, "a2", 5, city="p")],
        DMS,
    )
    result = load(spark, table, raw)
    assert (result.inserted, result.updated) == (1, 1)
    columns = spark.table(target(table)).columns
    assert columns[-5:] == ["eff_from", "eff_to", "current_flag", "sk", "h"]
    got = spark.sql(
        f"SELECT city, name, eff_from, eff_to, current_flag FROM {target(table)} ORDER BY city, eff_from"
    ).collect()
    assert [tuple(r) for r in got] == [
        ("p", "a", at(0), at(5), False),
        ("p", "a2", at(5), None, True),
        ("q", "a", at(0), None, True),
    ]
    keys = spark.sql(f"SELECT sk, h FROM {target(table)}").collect()
    assert len({r.sk for r in keys}) == 3 and all(len(r.sk) == 64 for r in keys)

    # untracked columns (and the sequence column) changing open nothing
    untracked = scd2_table(make_table, source={"prefix": "other/"}, scd2={"ignore": ["city"]})
    raw.write_parquet("other/a.parquet", [change("I", 1, "a", 0, city="p")], DMS)
    raw.write_parquet("other/b.parquet", [change("U", 1, "a", 5, city="moved")], DMS)
    result = load(spark, untracked, raw)
    assert (result.inserted, result.updated) == (1, 0)
    assert spark.table(target(untracked)).count() == 1


@pytest.mark.slow
def test_new_source_column_keeps_history_and_hashes(spark, raw, make_table):
    table = scd2_table(make_table)
    raw.write_parquet("src/a.parquet", [change("I", 1, "a", 0), change("I", 2, "b", 0)], DMS)
    load(spark, table, raw)
    wider = DMS.append(pa.field("tier", pa.string()))
    raw.write_parquet(
        "src/b.parquet",
        [{**change("U", 1, "a", 5), "tier": None}, {**change("U", 2, "b", 5), "tier": "gold"}],
        wider,
    )
    result = load(spark, table, raw)
    # a new column that is still NULL is not a change; a value in it is
    assert (result.inserted, result.updated) == (1, 1)
    got = spark.sql(f"SELECT id, tier, is_current FROM {target(table)} ORDER BY id, valid_from").collect()
    assert [tuple(r) for r in got] == [(1, None, True), (2, None, False), (2, "gold", True)]


@pytest.mark.slow
def test_changes_without_a_sequence_value_fail_and_commit_nothing(spark, raw, make_table):
    table = scd2_table(make_table)
    raw.write_parquet("src/a.parquet", [change("I", 1, "a", 0)], DMS)
    load(spark, table, raw)
    before = snapshots(spark, table)
    raw.write_parquet("src/b.parquet", [{**change("U", 1, "b", 0), "last_update_time": None}], DMS)
    with pytest.raises(BadInputError, match="needs a sequence value"):
        load(spark, table, raw)
    assert snapshots(spark, table) == before


@pytest.mark.slow
def test_debezium_epoch_sequence_and_same_sequence_ties(spark, raw, make_table):
    table = scd2_table(make_table, source={"format": "json", "cdc": "debezium"})
    raw.write_json(
        "src/0001.json",
        [
            {"id": 1, "name": "a", "__op": "c", "__source_ts_ms": 1000},
            {"id": 1, "name": "b", "__op": "u", "__source_ts_ms": 1000},  # same instant: the later row wins
        ],
    )
    raw.write_json("src/0002.json", [{"id": 1, "name": "c", "__op": "u", "__source_ts_ms": 2000}])
    result = load(spark, table, raw)
    assert (result.inserted, result.updated) == (2, 1)
    assert versions(spark, table) == [(1, "b", 1000, 2000, False), (1, "c", 2000, None, True)]
    assert spark.table(target(table)).schema["valid_from"].dataType.simpleString() == "bigint"


# DMS with the AR_H_CHANGE_SEQ header column: changes in one transaction share last_update_time.
DMS_SEQ = DMS.append(pa.field("AR_H_CHANGE_SEQ", pa.string()))


def seq_change(op: str, id_: int, name: str | None, minute: int, change_no: int) -> dict:
    return {**change(op, id_, name, minute), "AR_H_CHANGE_SEQ": f"2026110108000000{change_no:019d}"}


@pytest.mark.slow
def test_equal_time_with_a_higher_change_sequence_in_a_later_batch_replaces_that_version(
    spark, raw, make_table
):
    table = scd2_table(make_table)
    raw.write_parquet(
        "src/20261101-0900.parquet", [seq_change("I", 1, "a", 0, 1), seq_change("U", 1, "b", 10, 2)], DMS_SEQ
    )
    load(spark, table, raw)
    # the same transaction's next change to the key lands in the next batch
    raw.write_parquet("src/20261101-0901.parquet", [seq_change("U", 1, "c", 10, 3)], DMS_SEQ)
    result = load(spark, table, raw)
    assert (result.inserted, result.updated, result.deleted) == (1, 1, 0)
    # no zero-length version: the state at 08:10 is c, valid from the same instant
    assert versions(spark, table) == [(1, "a", at(0), at(10), False), (1, "c", at(10), None, True)]
    keys = spark.sql(f"SELECT version_key FROM {target(table)}").collect()
    assert len({r.version_key for r in keys}) == 2


@pytest.mark.slow
def test_exact_replay_and_replayed_earlier_change_with_an_equal_time_are_late(spark, raw, make_table):
    table = scd2_table(make_table)
    raw.write_parquet(
        "src/20261101-0900.parquet", [seq_change("I", 1, "a", 0, 1), seq_change("U", 1, "b", 10, 2)], DMS_SEQ
    )
    raw.write_parquet("src/20261101-0901.parquet", [seq_change("U", 1, "c", 10, 3)], DMS_SEQ)
    load(spark, table, raw)
    before = (versions(spark, table), snapshots(spark, table))
    # the last change again, then an earlier change of the same instant
    for name, replayed in (
        ("0902", seq_change("U", 1, "c", 10, 3)),
        ("0903", seq_change("U", 1, "b", 10, 2)),
    ):
        raw.write_parquet(f"src/20261101-{name}.parquet", [replayed], DMS_SEQ)
        result = load(spark, table, raw)
        assert (result.inserted, result.updated, result.deleted) == (0, 0, 0)
        assert any("1 late change(s)" in n for n in result.notes)
        assert (versions(spark, table), snapshots(spark, table)) == before


def test_within_a_batch_the_tuple_decides_before_file_and_row_order(spark, raw, make_table):
    table = scd2_table(make_table)
    raw.write_parquet(
        "src/20261101-0900.parquet",
        [seq_change("I", 1, "last", 0, 9), seq_change("I", 1, "first", 0, 1)],
        DMS_SEQ,
    )
    raw.write_parquet("src/20261101-0901.parquet", [seq_change("U", 1, "middle", 0, 5)], DMS_SEQ)
    result = load(spark, table, raw)
    assert (result.inserted, result.updated) == (1, 0)
    assert versions(spark, table) == [(1, "last", at(0), None, True)]


@pytest.mark.slow
def test_a_delete_at_the_current_versions_own_instant_closes_it(spark, raw, make_table):
    table = scd2_table(make_table)
    raw.write_parquet("src/20261101-0900.parquet", [seq_change("I", 1, "a", 5, 1)], DMS_SEQ)
    load(spark, table, raw)
    raw.write_parquet("src/20261101-0901.parquet", [seq_change("D", 1, None, 5, 2)], DMS_SEQ)
    assert load(spark, table, raw).deleted == 1
    assert versions(spark, table) == [(1, "a", at(5), at(5), False)]
    # the insert replayed: not newer than the key's end (equal time, the delete's number is not kept)
    raw.write_parquet("src/20261101-0902.parquet", [seq_change("I", 1, "a", 5, 1)], DMS_SEQ)
    assert load(spark, table, raw).inserted == 0
    assert versions(spark, table) == [(1, "a", at(5), at(5), False)]
