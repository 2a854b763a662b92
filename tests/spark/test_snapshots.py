"""`cdc: snapshot`: consecutive full snapshots become inserts, updates and deletes, in merge and scd2
modes; an incomplete folder waits, an older or re-delivered snapshot changes nothing."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakeloader.spark.session import CATALOG
from tests.spark.merge_batches import load, rows, snapshots

pytestmark = pytest.mark.spark

ROWS = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string()), pa.field("city", pa.string())])


def deliver(raw, day: str, people: dict[int, tuple[str, str]], *, done: bool = True, part: int = 0) -> None:
    rows_ = [{"id": k, "name": n, "city": c} for k, (n, c) in sorted(people.items())]
    raw.write_parquet(f"src/{day}/part-{part}.parquet", rows_, ROWS)
    if done:
        raw.write_text(f"src/{day}/_SUCCESS", "")


def snapshot_table(make_table, source: dict | None = None, **overrides):
    return make_table(source={"cdc": "snapshot", "format": "parquet", **(source or {})}, **overrides)


DAY1 = {1: ("ann", "oslo"), 2: ("bob", "rome"), 3: ("cy", "lima")}
DAY2 = {1: ("ann", "oslo"), 2: ("bob", "paris"), 4: ("dee", "kiev")}  # 2 changed, 3 gone, 4 new
DAY3 = {1: ("ann", "oslo"), 2: ("bob", "paris"), 3: ("cy", "lima"), 4: ("dee", "kiev")}  # 3 back


@pytest.mark.slow
def test_snapshots_become_inserts_updates_and_deletes(spark, raw, make_table):
    table = snapshot_table(make_table)
    deliver(raw, "2026-11-25", DAY1)
    first = load(spark, table, raw)
    assert (first.inserted, first.updated, first.deleted) == (3, 0, 0)

    deliver(raw, "2026-11-26", DAY2)
    second = load(spark, table, raw)

    assert (second.inserted, second.updated, second.deleted) == (1, 1, 1)
    assert rows(spark, table, "id, name, city") == [
        (1, "ann", "oslo"),
        (2, "bob", "paris"),
        (4, "dee", "kiev"),
    ]
    name = f"{CATALOG}.{table.target.database}.{table.target.table}"
    stamped = spark.sql(f"SELECT id, CAST(lakeloader_snapshot AS DATE) FROM {name} ORDER BY id").collect()
    # an unchanged row keeps the snapshot that last wrote it
    assert [(r[0], str(r[1])) for r in stamped] == [(1, "2026-11-25"), (2, "2026-11-26"), (4, "2026-11-26")]

    deliver(raw, "2026-11-27", DAY3)
    third = load(spark, table, raw)
    assert (third.inserted, third.updated, third.deleted) == (1, 0, 0)  # a deleted key comes back
    assert [r[0] for r in rows(spark, table)] == [1, 2, 3, 4]


@pytest.mark.slow
def test_an_older_or_redelivered_snapshot_changes_nothing(spark, raw, make_table):
    table = snapshot_table(make_table)
    deliver(raw, "2026-11-25", DAY1)
    deliver(raw, "2026-11-27", DAY3)
    load(spark, table, raw)
    before, held = snapshots(spark, table), rows(spark, table, "id, name, city")

    deliver(raw, "2026-11-26", DAY2)  # late: older than the last applied
    late = load(spark, table, raw)
    deliver(raw, "2026-11-27", {9: ("zed", "nowhere")}, part=1)  # a new file in an applied folder
    again = load(spark, table, raw)

    assert snapshots(spark, table) == before
    assert rows(spark, table, "id, name, city") == held
    assert late.files == 1 and any("not newer than the last one applied" in n for n in late.notes)
    # without a ledger or an input log (run's log_consumed), the late folder is offered again too
    assert again.files == 2 and sum("not newer than the last one applied" in n for n in again.notes) == 2


@pytest.mark.slow
def test_an_incomplete_snapshot_waits_for_its_success_file(spark, raw, make_table):
    table = snapshot_table(make_table)
    deliver(raw, "2026-11-25", DAY1)
    load(spark, table, raw)
    deliver(raw, "2026-11-26", DAY2, done=False)

    waiting = load(spark, table, raw)

    assert waiting.waiting == ["src/2026-11-26/part-0.parquet"] and waiting.files == 0
    assert [r[0] for r in rows(spark, table)] == [1, 2, 3]
    raw.write_text("src/2026-11-26/_SUCCESS", "")
    applied = load(spark, table, raw)
    assert applied.waiting == [] and [r[0] for r in rows(spark, table)] == [1, 2, 4]


def test_next_snapshot_completes_the_one_before(spark, raw, make_table):
    table = snapshot_table(make_table, source={"complete_when": "next_snapshot"})
    deliver(raw, "2026-11-25", DAY1, done=False)
    assert load(spark, table, raw).waiting == ["src/2026-11-25/part-0.parquet"]

    deliver(raw, "2026-11-26", DAY2, done=False)
    result = load(spark, table, raw)

    assert result.waiting == ["src/2026-11-26/part-0.parquet"]
    assert [r[0] for r in rows(spark, table)] == [1, 2, 3]


@pytest.mark.slow
def test_deletes_ignore_and_compare_columns(spark, raw, make_table):
    table = snapshot_table(make_table, source={"deletes": "ignore", "compare_columns": ["name"]})
    deliver(raw, "2026-11-25", DAY1)
    load(spark, table, raw)
    deliver(raw, "2026-11-26", {1: ("ann", "bergen"), 2: ("rob", "rome")})  # city alone is not compared

    result = load(spark, table, raw)

    assert (result.inserted, result.updated, result.deleted) == (0, 1, 0)
    assert rows(spark, table, "id, name, city") == [(1, "ann", "oslo"), (2, "rob", "rome"), (3, "cy", "lima")]


@pytest.mark.slow
def test_scd2_history_closes_at_the_snapshot_time(spark, raw, make_table):
    table = snapshot_table(make_table, mode="scd2")
    deliver(raw, "2026-11-25", DAY1)
    load(spark, table, raw)
    deliver(raw, "2026-11-26", DAY2)
    load(spark, table, raw)

    name = f"{CATALOG}.{table.target.database}.{table.target.table}"
    history = spark.sql(
        f"SELECT id, city, CAST(valid_from AS DATE) f, CAST(valid_to AS DATE) t, is_current FROM {name} "
        "ORDER BY id, valid_from"
    ).collect()
    assert [(r.id, r.city, str(r.f), str(r.t), r.is_current) for r in history] == [
        (1, "oslo", "2026-11-25", "None", True),
        (2, "rome", "2026-11-25", "2026-11-26", False),
        (2, "paris", "2026-11-26", "None", True),
        (3, "lima", "2026-11-25", "2026-11-26", False),
        (4, "kiev", "2026-11-26", "None", True),
    ]


@pytest.mark.slow
def test_a_snapshot_passes_the_quality_gate_and_its_deletes_are_not_rows_to_check(spark, raw, make_table):
    """The gate checks what the snapshot writes: a NULL name fails `not_null`, a key the snapshot drops
    (a delete, which carries no name) does not."""
    table = snapshot_table(make_table, quality={"rules": [{"not_null": ["name"]}], "on_failure": "fail"})
    deliver(raw, "2026-11-25", DAY1)
    load(spark, table, raw)
    deliver(raw, "2026-11-26", {1: ("ann", "oslo"), 2: ("bob", "rome")})  # 3 gone

    assert load(spark, table, raw).deleted == 1
    deliver(raw, "2026-11-27", {1: (None, "oslo"), 2: ("bob", "rome")})  # type: ignore[dict-item]
    with pytest.raises(Exception, match="not_null"):
        load(spark, table, raw)
    assert [r[0] for r in rows(spark, table)] == [1, 2]


@pytest.mark.slow
def test_an_empty_snapshot_deletes_every_key_and_a_marker_alone_changes_nothing(spark, raw, make_table):
    table = snapshot_table(make_table)
    deliver(raw, "2026-11-25", DAY1)
    load(spark, table, raw)
    raw.write_text("src/2026-11-26/_SUCCESS", "")  # no data file: nothing to compare with

    assert load(spark, table, raw).deleted == 0 and len(rows(spark, table)) == 3
    deliver(raw, "2026-11-27", {})  # an empty part file: the source table is empty
    assert load(spark, table, raw).deleted == 3 and rows(spark, table) == []
