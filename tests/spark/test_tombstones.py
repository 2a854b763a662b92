"""Tombstones: a delete stays deleted against older changes that arrive later (merge and scd2)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from lakeloader import iceberg
from lakeloader.engine import tombstones
from lakeloader.jobs.maintenance import maintain_table
from lakeloader.spark.inputs import list_inputs
from lakeloader.spark.session import CATALOG
from tests.spark.test_job_count import jobs_of
from tests.spark.tombstone_world import DMS, T0, change, current, held_tombstones, load, rows, target

pytestmark = pytest.mark.spark


@pytest.fixture(params=["merge", "scd2"])
def mode(request) -> str:
    return request.param


@pytest.mark.slow
def test_late_update_after_a_delete_stays_deleted_across_batches(spark, raw, make_table, mode):
    table = make_table(mode=mode)
    raw.write_parquet("src/20261101-0800.parquet", [change("I", 5, "a", 0), change("I", 6, "b", 0)], DMS)
    load(spark, table, raw)
    raw.write_parquet("src/20261101-1000.parquet", [change("D", 5, "a", 120)], DMS)
    load(spark, table, raw)
    # delivered later, stamped 09:00: older than the delete
    late = [change("U", 5, "zombie", 60), change("U", 6, "b2", 60)]
    raw.write_parquet("src/20261101-1001.parquet", late, DMS)
    result = load(spark, table, raw)
    live = rows if mode == "merge" else current
    assert live(spark, table) == [(6, "b2")]
    assert any("late change(s)" in note for note in result.notes)


@pytest.mark.slow
def test_late_insert_after_deleting_a_key_the_table_never_held(spark, raw, make_table, mode):
    table = make_table(mode=mode)
    raw.write_parquet("src/20261101-0800.parquet", [change("I", 1, "a", 0)], DMS)
    load(spark, table, raw)
    raw.write_parquet("src/20261101-1000.parquet", [change("D", 5, None, 120)], DMS)
    load(spark, table, raw)
    assert held_tombstones(spark, table) == [(5, T0 + timedelta(minutes=120))]
    raw.write_parquet("src/20261101-1001.parquet", [change("I", 5, "zombie", 60)], DMS)
    result = load(spark, table, raw)
    live = rows if mode == "merge" else current
    assert live(spark, table) == [(1, "a")]
    assert result.inserted == 0


@pytest.mark.slow
@pytest.mark.parametrize("delete_first", [True, False], ids=["delete-file-first", "insert-file-first"])
def test_within_one_batch_in_either_file_order(spark, raw, make_table, mode, delete_first):
    table = make_table(mode=mode)
    raw.write_parquet("src/20261101-0800.parquet", [change("I", 1, "a", 0)], DMS)
    load(spark, table, raw)
    files = [("D", 5, None, 120), ("I", 5, "zombie", 60)]
    if not delete_first:
        files.reverse()
    for n, (op, id_, name, minute) in enumerate(files):
        raw.write_parquet(f"src/20261101-09{n:02d}.parquet", [change(op, id_, name, minute)], DMS)
    raw.write_parquet("src/20261101-0959.parquet", [change("U", 1, "a2", 61)], DMS)  # so the batch commits
    load(spark, table, raw)
    live = rows if mode == "merge" else current
    assert live(spark, table) == [(1, "a2")]
    # and the delete still guards the key afterwards
    raw.write_parquet("src/20261101-1100.parquet", [change("U", 5, "zombie2", 90)], DMS)
    load(spark, table, raw)
    assert live(spark, table) == [(1, "a2")]


@pytest.mark.slow
def test_a_newer_change_brings_the_key_back(spark, raw, make_table, mode):
    table = make_table(mode=mode)
    raw.write_parquet("src/20261101-0800.parquet", [change("I", 5, "a", 0)], DMS)
    load(spark, table, raw)
    raw.write_parquet("src/20261101-1000.parquet", [change("D", 5, "a", 120)], DMS)
    load(spark, table, raw)
    raw.write_parquet("src/20261101-1100.parquet", [change("I", 5, "back", 180)], DMS)
    result = load(spark, table, raw)
    live = rows if mode == "merge" else current
    assert live(spark, table) == [(5, "back")] and result.inserted == 1


@pytest.mark.slow
def test_a_replayed_delete_and_a_replayed_older_insert_change_nothing(spark, raw, make_table, mode):
    table = make_table(mode=mode)
    raw.write_parquet("src/20261101-0800.parquet", [change("D", 5, None, 120)], DMS)
    load(spark, table, raw)
    # the same delete (same stamp) and an insert stamped exactly at the delete: a replay, not newer
    raw.write_parquet("src/20261101-0801.parquet", [change("D", 5, None, 120)], DMS)
    raw.write_parquet("src/20261101-0802.parquet", [change("I", 6, "x", 120)], DMS)
    load(spark, table, raw)
    raw.write_parquet("src/20261101-0803.parquet", [change("I", 5, "same-instant", 120)], DMS)
    result = load(spark, table, raw)
    live = rows if mode == "merge" else current
    assert live(spark, table) == [(6, "x")]
    assert result.inserted == 0


@pytest.mark.slow
def test_maintain_purges_only_expired_tombstones(spark, raw, make_table):
    table = make_table(tombstones={"retain_days": 7})
    raw.write_parquet("src/20261101-0800.parquet", [change("I", 1, "a", 0), change("I", 2, "b", 0)], DMS)
    load(spark, table, raw)
    raw.write_parquet("src/20261101-0900.parquet", [change("D", 1, None, 60)], DMS)
    load(spark, table, raw)
    side = f"{target(table)}{tombstones.SUFFIX}"
    spark.sql(f"UPDATE {side} SET {tombstones.RECORDED_AT} = {tombstones.RECORDED_AT} - INTERVAL 8 DAYS")
    raw.write_parquet("src/20261101-0901.parquet", [change("D", 2, None, 60)], DMS)
    load(spark, table, raw)
    merge_at = "commit.manifest.min-count-to-merge"
    spark.sql(f"ALTER TABLE {side} UNSET TBLPROPERTIES ('{merge_at}')")  # as a side table made before it
    result = maintain_table(spark, table, catalog=CATALOG, now=datetime.now(UTC))
    step = next(s for s in result.steps if s.step == "purge_tombstones")
    assert (step.status, step.counts["tombstones_purged"], step.counts["tombstones_kept"]) == ("ok", 1, 1)
    assert held_tombstones(spark, table) == [(2, T0 + timedelta(minutes=60))]
    assert iceberg.table_properties(spark, side)[merge_at] == tombstones.PROPERTIES[merge_at]


@pytest.mark.slow
def test_the_side_table_merges_its_manifests_so_the_skip_check_stays_cheap(spark, raw, make_table):
    """Each append leaves a manifest; the side table merges them before there are more than 8."""
    table = make_table()
    raw.write_parquet("src/20261101-0800.parquet", [change("D", 1, None, 0)], DMS)
    load(spark, table, raw)
    side = f"{target(table)}{tombstones.SUFFIX}"
    for n in range(12):
        deletes = spark.createDataFrame([(100 + n, T0)], "id long, last_update_time timestamp")
        tombstones.record(spark, table, target(table), deletes, ["id"], ["last_update_time"])
    assert spark.table(side).count() == 13
    assert spark.sql(f"SELECT count(*) FROM {side}.manifests").first()[0] <= 8


@pytest.mark.slow
def test_with_tombstones_off_a_delete_leaves_none(spark, raw, make_table, mode):
    """`tombstones: {enabled: false}`: no side table, so nothing to purge, erase or pay for."""
    table = make_table(mode=mode, tombstones={"enabled": False})
    raw.write_parquet("src/20261101-0800.parquet", [change("I", 5, "a", 0), change("I", 6, "b", 0)], DMS)
    load(spark, table, raw)
    raw.write_parquet("src/20261101-1000.parquet", [change("D", 5, "a", 120), change("D", 7, None, 120)], DMS)
    result = load(spark, table, raw)
    live = rows if mode == "merge" else current
    assert live(spark, table) == [(6, "b")] and result.deleted == 1
    assert not spark.catalog.tableExists(f"{target(table)}{tombstones.SUFFIX}")


def not_probed(spark, raw, table, twin) -> tuple:
    """Apply the new files to `table` and to its `twin` with tombstones off; both results. The skip ran
    as many Spark jobs as no tombstones at all (in a large batch's plan the probe has jobs of its own)."""
    skipped, skipped_jobs = jobs_of(spark, table, raw, f"skip-{table.id}")
    without, jobs_without = jobs_of(spark, twin, raw, f"skip-{twin.id}")
    assert skipped_jobs == jobs_without
    return skipped, without


@pytest.mark.slow
def test_a_batch_whose_keys_cannot_have_a_tombstone_does_not_probe_them(spark, raw, make_table, monkeypatch):
    """The tombstones hold keys 50 and 51: a batch of keys 1..10 cannot meet one, so it runs no probe --
    as many Spark jobs as with tombstones off. One that reaches key 50 is probed: its late change stays
    buried."""
    from lakeloader.engine import cdc

    monkeypatch.setattr(
        cdc, "SMALL_BATCH_BYTES", 0
    )  # a large batch's plan: there the probe has jobs of its own
    table, twin = make_table(), make_table(tombstones={"enabled": False})  # both read the same files
    base = [change("I", i, "a", 0) for i in (*range(1, 11), 50, 51)]
    raw.write_parquet("src/20261101-0800.parquet", base, DMS)
    raw.write_parquet(
        "src/20261101-1000.parquet", [change("D", 50, None, 120), change("D", 51, None, 120)], DMS
    )
    for each in (table, twin):
        load(spark, each, raw)
    raw.write_parquet("src/20261101-1001.parquet", [change("U", i, "b", 130) for i in range(1, 11)], DMS)
    skipped, without = not_probed(spark, raw, table, twin)
    assert skipped.updated == without.updated == 10
    late = [change("U", i, "c", 140) for i in range(1, 10)] + [change("U", 50, "zombie", 60)]
    raw.write_parquet("src/20261101-1002.parquet", late, DMS)
    probed = load(spark, table, raw)
    assert (probed.updated, probed.inserted) == (9, 0) and any("1 late change(s)" in n for n in probed.notes)
    assert rows(spark, table) == [*[(i, "c") for i in range(1, 10)], (10, "b")]


@pytest.mark.slow
def test_composite_string_keys_are_buried_whichever_column_tells_them_apart(spark, raw, make_table):
    """Keys (region, id): a batch whose regions lie outside the tombstones' skips the probe; one that
    reaches a tombstoned (region, id) is probed, whichever column's range alone would look disjoint."""
    schema = pa.schema([("region", pa.string()), *[(f.name, f.type) for f in DMS]])
    table = make_table(keys=["region", "id"])

    def at(op: str, region: str, id_: int, name: str | None, minute: int) -> dict:
        return {"region": region, **change(op, id_, name, minute)}

    raw.write_parquet(
        "src/20261101-0800.parquet", [at("I", "eu", 1, "a", 0), at("I", "us", 7, "b", 0)], schema
    )
    load(spark, table, raw)
    raw.write_parquet("src/20261101-1000.parquet", [at("D", "us", 7, None, 120)], schema)
    load(spark, table, raw)  # a tombstone for (us, 7)
    raw.write_parquet("src/20261101-1001.parquet", [at("I", "eu", 7, "new", 130)], schema)  # region eu: none
    load(spark, table, raw)
    raw.write_parquet(
        "src/20261101-1002.parquet", [at("U", "us", 7, "zombie", 60), at("U", "eu", 1, "a2", 140)], schema
    )
    result = load(spark, table, raw)
    query = f"SELECT region, id, name FROM {target(table)} ORDER BY 1, 2"
    assert [tuple(r) for r in spark.sql(query).collect()] == [("eu", 1, "a2"), ("eu", 7, "new")]
    assert result.updated == 1 and any("1 late change(s)" in note for note in result.notes)


def test_only_a_file_whose_bounds_meet_every_key_range_may_hold_a_key(spark):
    """lakeloader.iceberg.may_hold, which decides the skip: per data file, from its lower and upper bounds."""
    from lakeloader import iceberg

    name = f"{CATALOG}.bounds_probe.t"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.bounds_probe")
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.sql(f"CREATE TABLE {name} (region string, id bigint) USING iceberg")
    assert not iceberg.may_hold(spark, name, {})  # no file at all
    for rows_of_file in ([("eu", 1), ("eu", 10)], [("us", 100), ("us", 110)]):  # one file each
        spark.createDataFrame(rows_of_file, "region string, id bigint").coalesce(1).writeTo(name).append()
    assert iceberg.may_hold(spark, name, {})
    assert iceberg.may_hold(spark, name, {"id": (5, 5)})
    assert not iceberg.may_hold(spark, name, {"id": (50, 60)})  # between the files, within their union
    assert not iceberg.may_hold(
        spark, name, {"region": ("eu", "eu"), "id": (100, 110)}
    )  # two files, one each
    assert iceberg.may_hold(spark, name, {"region": ("a", "f"), "id": (0, 1)})
    assert not iceberg.may_hold(
        spark, name, {"REGION": ("zz", "zzz")}
    )  # names as the table spells them or not
    assert iceberg.may_hold(spark, name, {"missing": (1, 1)})  # a column the table lacks rules nothing out
    assert iceberg.may_hold(spark, name, {"id": (110, None)}) and iceberg.may_hold(
        spark, name, {"id": (None, 1)}
    )
    assert not iceberg.may_hold(spark, name, {"id": (111, None)})  # a None end: no limit that side
    spark.sql(f"DELETE FROM {name} WHERE region = 'us'")
    assert not iceberg.may_hold(spark, name, {"id": (100, 110)})


def test_the_skip_check_plans_a_pinned_snapshot_without_asking_the_catalog_again(spark):
    """tombstones.Ahead has just read the side table's snapshot; may_hold plans that snapshot from the
    table as the session holds it (on AWS, a Glue GetTable fewer per batch). Shown with the catalog
    unreadable in between: the table's current metadata file is moved away, so a refresh fails, and a
    failure answers True. The current snapshot (none pinned) is still read afresh."""
    from lakeloader import iceberg

    name = f"{CATALOG}.bounds_probe.pinned"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.bounds_probe")
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.sql(f"CREATE TABLE {name} (id bigint) USING iceberg")
    spark.createDataFrame([(1,), (10,)], "id bigint").coalesce(1).writeTo(name).append()
    snapshot = iceberg.current_snapshot_id(spark, name)  # as Ahead reads it: refreshed
    location = iceberg.iceberg_table(spark, name).operations().current().metadataFileLocation()
    metadata = Path(location.removeprefix("file:"))
    moved = metadata.with_name(metadata.name + ".away")
    metadata.rename(moved)
    try:
        assert not iceberg.may_hold(spark, name, {"id": (50, None)}, snapshot)
        assert iceberg.may_hold(spark, name, {"id": (50, None)})  # refreshed: fails, so True
    finally:
        moved.rename(metadata)


def test_a_batch_reports_key_ranges_only_where_every_order_agrees(spark, raw, make_table):
    """The ranges the skip compares with the tombstones' file bounds: integer keys, and string keys whose
    two ends are ASCII (a non-ASCII end could sort differently in Spark, Python and Iceberg)."""
    from lakeloader.engine import cdc

    schema = pa.schema([("code", pa.string()), *[(f.name, f.type) for f in DMS]])
    raw.write_parquet(
        "src/a.parquet", [{"code": c, **change("I", i, "x", 0)} for i, c in ((3, "b"), (9, "a"))], schema
    )
    raw.write_parquet("src/b.parquet", [{"code": "é", **change("I", 5, "x", 0)}], schema)
    ascii_only = cdc.read_changes(
        spark,
        make_table(keys=["code", "id"]),
        [f for f in list_inputs(str(raw.root), "src/") if f.name.endswith("a.parquet")],
    )
    assert ascii_only.key_ranges == {"code": ("a", "b"), "id": (3, 9)}
    mixed = cdc.read_changes(spark, make_table(keys=["code", "id"]), list_inputs(str(raw.root), "src/"))
    assert mixed.key_ranges == {"id": (3, 9)}


@pytest.mark.slow
def test_a_batch_newer_than_every_tombstone_does_not_probe_them(spark, raw, make_table, monkeypatch):
    """Tombstones of keys 1..10 at minute 120: re-inserting the same keys at minute 130 cannot be buried,
    so it runs no probe, as many Spark jobs as with tombstones off. One change older than the tombstones,
    or one with no sequence value (NULL is the oldest), is probed and stays buried."""
    from lakeloader.engine import cdc

    monkeypatch.setattr(cdc, "SMALL_BATCH_BYTES", 0)  # a large batch's plan: there the probe has jobs
    table, twin = make_table(), make_table(tombstones={"enabled": False})  # both read the same files
    raw.write_parquet("src/20261101-0800.parquet", [change("I", i, "a", 0) for i in range(1, 12)], DMS)
    raw.write_parquet("src/20261101-1000.parquet", [change("D", i, None, 120) for i in range(1, 11)], DMS)
    for each in (table, twin):
        load(spark, each, raw)
    raw.write_parquet("src/20261101-1001.parquet", [change("I", i, "b", 130) for i in range(1, 6)], DMS)
    skipped, without = not_probed(spark, raw, table, twin)
    assert skipped.inserted == without.inserted == 5
    raw.write_parquet(
        "src/20261101-1002.parquet", [change("I", 6, "zombie", 60), change("U", 11, "c", 140)], DMS
    )
    late = load(spark, table, raw)
    assert (late.updated, late.inserted) == (1, 0) and any("1 late change(s)" in n for n in late.notes)
    no_sequence = change("I", 7, "ghost", 0) | {"last_update_time": None}
    raw.write_parquet("src/20261101-1003.parquet", [no_sequence, change("U", 11, "d", 150)], DMS)
    unordered = load(spark, table, raw)
    assert unordered.inserted == 0 and any("1 late change(s)" in n for n in unordered.notes)
    assert rows(spark, table) == [*[(i, "b") for i in range(1, 6)], (11, "d")]


@pytest.mark.parametrize(
    ("arrow_type", "values", "low"),
    [
        (pa.int64(), [7, 3, 1], 3),
        (pa.string(), ["b", "a", "0"], "a"),
        (pa.string(), ["é", "é", "0"], None),  # a non-ASCII lowest value: orders may disagree
        (pa.timestamp("us"), [T0 + timedelta(hours=1), T0, datetime(2000, 1, 1)], 1_793_520_000_000_000),
        (
            pa.timestamp("us", tz="UTC"),
            [T0 + timedelta(hours=1), T0, datetime(2000, 1, 1)],
            1_793_520_000_000_000,
        ),
        (pa.int64(), [7, None, 1], None),  # an update with no sequence value: NULL is the oldest
    ],
    ids=["int", "ascii", "non-ascii", "timestamp-ntz", "timestamp-utc", "null"],
)
def test_a_batch_reports_its_lowest_sequence_among_the_changes_a_tombstone_could_bury(
    spark, raw, make_table, arrow_type, values, low
):
    """The skip's sequence floor, as Iceberg's bounds order it; a delete's value (the third row) is
    left out, since no tombstone buries a delete."""
    from lakeloader.engine import cdc

    schema = pa.schema([("Op", pa.string()), ("id", pa.int64()), ("seq", arrow_type)])
    changes = [{"Op": op, "id": i, "seq": v} for i, (op, v) in enumerate(zip("IUD", values, strict=True))]
    raw.write_parquet("src/a.parquet", changes, schema)
    read = cdc.read_changes(spark, make_table(sequence_by="seq"), list_inputs(str(raw.root), "src/"))
    assert read.sequence_low == low


@pytest.mark.slow
@pytest.mark.parametrize("small", [True, False], ids=["appended-while-classifying", "appended-after"])
def test_a_failed_tombstone_append_commits_nothing_to_the_table(spark, raw, make_table, monkeypatch, small):
    """The tombstones are committed before the table is, whether a small batch appends them while it is
    classified or a large one after: if the append fails, the table is untouched and a re-run applies
    the batch and records them."""
    from lakeloader.engine import cdc

    if not small:
        monkeypatch.setattr(cdc, "SMALL_BATCH_BYTES", 0)
    table = make_table()
    raw.write_parquet("src/20261101-0800.parquet", [change("I", 1, "a", 0), change("I", 2, "b", 0)], DMS)
    load(spark, table, raw)
    raw.write_parquet("src/20261101-0900.parquet", [change("D", 1, None, 60), change("U", 2, "c", 60)], DMS)

    def unavailable(*args: object) -> None:
        raise RuntimeError("side table unavailable")

    with monkeypatch.context() as patched:
        patched.setattr(tombstones, "record", unavailable)
        with pytest.raises(RuntimeError, match="side table unavailable"):
            load(spark, table, raw)
    assert rows(spark, table) == [(1, "a"), (2, "b")]
    result = load(spark, table, raw)
    assert (result.deleted, result.updated) == (1, 1) and rows(spark, table) == [(2, "c")]
    assert held_tombstones(spark, table) == [(1, T0 + timedelta(minutes=60))]
