"""`lakeloader reconcile`: a table compared with a full copy of its source (missing, extra and different
keys, counted and sampled), and `--repair`, which makes it equal in one commit through the merge path:
tombstones, SCD2 history, an audit record in the commit summary."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pyarrow as pa
import pytest

from lakeloader.jobs.reconcile import reconcile
from lakeloader.spark.session import CATALOG
from tests.spark.merge_batches import load, rows, snapshots

pytestmark = pytest.mark.spark

T0 = datetime(2026, 11, 1, 8, 0, 0)
FULL = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("city", pa.string()),
        ("last_update_time", pa.timestamp("us")),
    ]
)
CDC = pa.schema([("Op", pa.string()), *FULL])
PEOPLE = {1: ("ann", "oslo"), 2: ("bob", "rome"), 3: ("cy", "lima"), 4: ("dee", "kiev"), 5: ("eve", "bern")}


def people(who: dict[int, tuple[str, str]], minute: int = 0) -> list[dict]:
    at = T0 + timedelta(minutes=minute)
    return [{"id": k, "name": n, "city": c, "last_update_time": at} for k, (n, c) in sorted(who.items())]


def change(op: str, id_: int, name: str, city: str, minute: int) -> dict:
    return {
        "Op": op,
        "id": id_,
        "name": name,
        "city": city,
        "last_update_time": T0 + timedelta(minutes=minute),
    }


def export(raw, folder: str, who: dict[int, tuple[str, str]], minute: int = 0) -> str:
    """A DMS full load (no Op column) written outside the raw zone, with the _SUCCESS an export leaves."""
    out = type(raw)(raw.root.parent / "export")
    out.write_parquet(f"{folder}/LOAD00000001.parquet", people(who, minute), FULL)
    out.write_text(f"{folder}/_SUCCESS", "")
    return str(out.root / folder)


def name_of(table) -> str:
    return f"{CATALOG}.{table.target.database}.{table.target.table}"


@pytest.mark.slow
def test_a_table_equal_to_its_snapshot_is_reported_equal(spark, raw, make_table):
    table = make_table()
    gone = {6: ("fay", "riga"), 7: ("gus", "baku")}
    raw.write_parquet("src/LOAD00000001.parquet", people(PEOPLE | gone), FULL)
    load(spark, table, raw)
    # deleted (merge-on-read: their data file still holds them, the snapshot's total-records counts 7)
    raw.write_parquet(
        "src/20261101-0900.parquet", [change("D", k, n, c, 1) for k, (n, c) in gone.items()], CDC
    )
    load(spark, table, raw)
    before = snapshots(spark, table)

    said: list[str] = []

    # another time in the sequence column (last_update_time): not compared
    uri = export(raw, "full", PEOPLE, minute=30)
    result = reconcile(
        spark, table, uri, catalog=CATALOG, repair=True, progress=said.append, tick_seconds=0.1
    )

    assert result.equal and result.counts == {"missing": 0, "extra": 0, "different": 0}
    assert result.rows == 5 and result.files == 1 and result.compared == ["name", "city"]
    assert result.repaired is None and snapshots(spark, table) == before
    assert result.describe().endswith("EQUAL")
    assert "comparing 5 snapshot row(s) with the table's rows (5 held)" in said, said  # the live rows
    assert any(line.startswith("comparing: ") and " s" in line for line in said)  # the ticker


def test_missing_extra_and_different_keys_are_counted_and_sampled(spark, raw, make_table):
    table = make_table()
    raw.write_parquet("src/LOAD00000001.parquet", people(PEOPLE), FULL)
    load(spark, table, raw)
    before = snapshots(spark, table)
    source = {
        1: ("ann", "oslo"),
        2: ("rob", "rome"),  # different: name
        3: ("cy", "quito"),  # different: city
        6: ("fay", "oslo"),  # missing, as are 7 and 8; 4 and 5 are extra
        7: ("gus", "rome"),
        8: ("hal", "lima"),
    }
    uri = export(raw, "full", source)

    result = reconcile(spark, table, uri, catalog=CATALOG, samples=2)

    assert result.counts == {"missing": 3, "extra": 2, "different": 2} and result.differing == 7
    assert result.samples == {
        "missing": [{"id": 6}, {"id": 7}],
        "extra": [{"id": 4}, {"id": 5}],
        "different": [{"id": 2}, {"id": 3}],
    }
    assert not result.equal and result.repaired is None
    assert snapshots(spark, table) == before  # a report changes nothing
    report = result.describe()
    assert "id=6; id=7; ... 1 more" in report and "DIFFERENT: 7 key(s) differ" in report
    as_json = result.as_json()
    assert as_json["missing"]["count"] == 3 and as_json["extra"]["samples"] == [{"id": 4}, {"id": 5}]


@pytest.mark.slow
def test_repair_makes_the_table_equal_in_one_commit_with_its_audit_record(spark, raw, make_table):
    table = make_table()
    raw.write_parquet("src/LOAD00000001.parquet", people(PEOPLE), FULL)
    raw.write_parquet(
        "src/20261101-0900.parquet",
        [change("U", 1, "ann", "bergen", 15), change("D", 5, "eve", "bern", 50)],  # 5's tombstone at :50
        CDC,
    )
    load(spark, table, raw)
    before = snapshots(spark, table)
    # an export older than the table's changes (:05 < :15): the repair must still apply, and insert 5
    # back despite its tombstone
    source = {
        1: ("ann", "oslo"),
        2: ("bob", "rome"),
        3: ("cy", "lima"),
        5: ("eve", "bern"),
        6: ("fay", "oslo"),
    }
    uri = export(raw, "full", source, minute=5)

    result = reconcile(spark, table, uri, catalog=CATALOG, repair=True, run_id="repair-1", who="tester")

    assert result.counts == {"missing": 2, "extra": 1, "different": 1}
    assert result.repaired is not None and result.repaired.sequence == "2026-11-01 08:50:00.000001"
    assert (result.repaired.inserted, result.repaired.updated, result.repaired.deleted) == (2, 1, 1)
    assert snapshots(spark, table) == before + 1
    assert rows(spark, table, "id, name, city") == [(k, n, c) for k, (n, c) in sorted(source.items())]
    newest = spark.sql(f"SELECT summary FROM {name_of(table)}.snapshots ORDER BY committed_at DESC").first()
    assert newest.summary["lakeloader.run-id"] == "repair-1"
    audit = json.loads(newest.summary["lakeloader.repair"])
    assert audit["snapshot"] == uri and audit["by"] == "tester"
    assert (audit["missing"], audit["extra"], audit["different"]) == (2, 1, 1)
    assert "repaired in one commit" in result.describe()

    assert reconcile(spark, table, uri, catalog=CATALOG).equal

    # Late files: 4's change older than its repaired delete stays out; 2's newer change applies.
    raw.write_parquet(
        "src/20261101-1000.parquet",
        [change("U", 4, "dee", "kiev", 30), change("U", 2, "bob", "paris", 51)],
        CDC,
    )
    late = load(spark, table, raw)
    assert (late.inserted, late.updated) == (0, 1)
    assert [r[:2] for r in rows(spark, table, "id, city")] == [
        (1, "oslo"),
        (2, "paris"),
        (3, "lima"),
        (5, "bern"),
        (6, "oslo"),
    ]


@pytest.mark.slow
def test_scd2_repair_closes_history_at_the_repair_sequence(spark, raw, make_table):
    table = make_table(mode="scd2")
    raw.write_parquet("src/LOAD00000001.parquet", people({k: PEOPLE[k] for k in (1, 2, 3)}), FULL)
    raw.write_parquet("src/20261101-0900.parquet", [change("D", 3, "cy", "lima", 30)], CDC)  # closed at :30
    load(spark, table, raw)
    source = {2: ("bob", "paris"), 3: ("cy", "lima"), 4: ("dee", "kiev")}  # 1 gone, 2 moved, 3 back, 4 new
    uri = export(raw, "full", source)
    before = snapshots(spark, table)

    result = reconcile(spark, table, uri, catalog=CATALOG, repair=True)

    assert result.counts == {"missing": 2, "extra": 1, "different": 1}
    assert snapshots(spark, table) == before + 1
    history = spark.sql(
        f"SELECT id, city, CAST(valid_from AS STRING) f, CAST(valid_to AS STRING) t, is_current "
        f"FROM {name_of(table)} ORDER BY id, valid_from"
    ).collect()
    at = "2026-11-01 08:30:00.000001"  # just after the table's newest change: 3's delete
    assert [(r.id, r.city, r.f, r.t, r.is_current) for r in history] == [
        (1, "oslo", "2026-11-01 08:00:00", at, False),
        (2, "rome", "2026-11-01 08:00:00", at, False),
        (2, "paris", at, None, True),
        (3, "lima", "2026-11-01 08:00:00", "2026-11-01 08:30:00", False),
        (3, "lima", at, None, True),
        (4, "kiev", at, None, True),
    ]
    assert reconcile(spark, table, uri, catalog=CATALOG).equal


@pytest.mark.slow
def test_deletes_ignore_keeps_extra_keys_and_reports_them_as_kept(spark, raw, make_table):
    # its own snapshots sit under src/, this one elsewhere: read as plain rows
    table = make_table(source={"cdc": "snapshot", "deletes": "ignore"})
    raw.write_parquet("src/2026-11-25/part-0.parquet", people(PEOPLE), FULL)
    raw.write_text("src/2026-11-25/_SUCCESS", "")
    load(spark, table, raw)
    uri = export(raw, "full", {1: PEOPLE[1], 2: ("bob", "paris"), 3: PEOPLE[3]})
    before = snapshots(spark, table)

    result = reconcile(spark, table, uri, catalog=CATALOG, repair=True)

    assert result.counts == {"missing": 0, "extra": 2, "different": 1} and result.extra_kept
    assert result.differing == 1 and "(kept: deletes: ignore)" in result.describe()
    assert (result.repaired.updated, result.repaired.deleted) == (1, 0)
    assert snapshots(spark, table) == before + 1
    assert rows(spark, table, "id, city") == [
        (1, "oslo"),
        (2, "paris"),
        (3, "lima"),
        (4, "kiev"),
        (5, "bern"),
    ]
    assert reconcile(spark, table, uri, catalog=CATALOG).equal


@pytest.mark.slow
def test_a_repaired_delete_leaves_null_tie_breakers_so_a_source_change_at_its_time_wins(
    spark, raw, make_table
):
    table = make_table()  # cdc: dms orders by (last_update_time, AR_H_CHANGE_SEQ)
    with_seq = pa.schema([*CDC, ("AR_H_CHANGE_SEQ", pa.string())])
    raw.write_parquet(
        "src/20261101-0800.parquet",
        [{**change("I", k, n, c, 0), "AR_H_CHANGE_SEQ": f"{k:035d}"} for k, (n, c) in PEOPLE.items()],
        with_seq,
    )
    load(spark, table, raw)
    uri = export(raw, "full", {k: PEOPLE[k] for k in (1, 2, 3, 4)})

    result = reconcile(spark, table, uri, catalog=CATALOG, repair=True)

    at = result.repaired.sequence
    assert result.repaired.deleted == 1 and at == "2026-11-01 08:00:00.000001"
    tomb = spark.sql(
        f"SELECT id, CAST(last_update_time AS STRING) t, AR_H_CHANGE_SEQ s FROM {name_of(table)}__tombstones"
    ).collect()
    assert [tuple(r) for r in tomb] == [(5, at, None)]
    # the source changed key 5 at that very microsecond: its tie-breaker orders it after the repair
    raw.write_parquet(
        "src/20261101-0900.parquet",
        [
            {
                **change("I", 5, "eve", "bern", 0),
                "last_update_time": datetime.fromisoformat(at),
                "AR_H_CHANGE_SEQ": "1",
            }
        ],
        with_seq,
    )
    load(spark, table, raw)
    assert [r[0] for r in rows(spark, table)] == [1, 2, 3, 4, 5]
