"""Retention at its boundary, with `maintain`'s clock set by the test: a tombstone, a snapshot or an
orphan file just inside its retention is kept, just outside it is removed, in the configured unit
(days for tombstones and snapshots, hours for orphan files) and for a non-default value."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from lakeloader.engine import tombstones
from lakeloader.jobs.maintenance import maintain_table
from lakeloader.spark.session import CATALOG
from lakeloader.spark.sql import timestamp_literal
from tests.spark.merge_batches import DMS, change, load

# slow (make check leaves it out): snapshots expired and files removed by each retention setting
pytestmark = [pytest.mark.spark, pytest.mark.slow]

HOUR = timedelta(hours=1)
ONLY = {"compaction": {"enabled": False}, "rewrite_delete_files": False, "rewrite_manifests": False}


def name_of(table) -> str:
    return f"{CATALOG}.{table.target.database}.{table.target.table}"


def step(result, name: str):
    return next(s for s in result.steps if s.step == name)


@pytest.mark.parametrize("retain_days", [None, 2.5])  # None: the default, 7
def test_tombstones_are_kept_inside_retain_days_and_purged_outside(spark, raw, make_table, retain_days):
    settings = {} if retain_days is None else {"retain_days": retain_days}
    table = make_table(
        tombstones=settings,
        maintenance={**ONLY, "snapshots": {"enabled": False}, "orphan_files": {"enabled": False}},
    )
    days = table.tombstones.retain_days
    raw.write_parquet("src/0001.parquet", [change("I", k, "v", 1) for k in (1, 2)], DMS)
    raw.write_parquet("src/0002.parquet", [change("D", k, None, 2) for k in (1, 2)], DMS)
    load(spark, table, raw)
    now = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
    inside, outside = now - timedelta(days=days) + HOUR, now - timedelta(days=days) - HOUR
    side = name_of(table) + tombstones.SUFFIX
    for key, recorded in ((1, inside), (2, outside)):
        spark.sql(
            f"UPDATE {side} SET {tombstones.RECORDED_AT} = {timestamp_literal(recorded)} WHERE id = {key}"
        )

    result = maintain_table(spark, table, catalog=CATALOG, now=now)

    counts = step(result, "purge_tombstones").counts
    assert (counts["tombstones_purged"], counts["tombstones_kept"]) == (1, 1)
    assert [r.id for r in spark.sql(f"SELECT id FROM {side}").collect()] == [1]


def committed_at(spark, table) -> list[datetime]:
    rows = spark.sql(f"SELECT committed_at FROM {name_of(table)}.snapshots ORDER BY committed_at").collect()
    return [r.committed_at.replace(tzinfo=UTC) for r in rows]


@pytest.mark.parametrize("older_than_days", [None, 3])  # None: the default, 7
def test_snapshots_older_than_days_are_expired_and_younger_kept(spark, raw, make_table, older_than_days):
    snapshots = {"retain_last": 1} | ({} if older_than_days is None else {"older_than_days": older_than_days})
    table = make_table(maintenance={**ONLY, "snapshots": snapshots, "orphan_files": {"enabled": False}})
    days = table.maintenance.snapshots.older_than_days
    for n in range(3):
        raw.write_parquet(f"src/000{n}.parquet", [change("I", n, "v", n)], DMS)
        load(spark, table, raw)
    first, *_, last = committed_at(spark, table)

    kept = maintain_table(spark, table, catalog=CATALOG, now=first + timedelta(days=days) - HOUR)
    assert step(kept, "expire_snapshots").status == "ok" and len(committed_at(spark, table)) == 3

    expired = maintain_table(spark, table, catalog=CATALOG, now=last + timedelta(days=days) + HOUR)
    assert step(expired, "expire_snapshots").status == "ok"
    assert committed_at(spark, table) == [last]  # retain_last: 1


@pytest.mark.parametrize("older_than_hours", [None, 60])  # None: the default
def test_orphan_files_older_than_hours_are_removed_and_younger_kept(spark, raw, make_table, older_than_hours):
    orphans = {} if older_than_hours is None else {"older_than_hours": older_than_hours}
    table = make_table(maintenance={**ONLY, "snapshots": {"enabled": False}, "orphan_files": orphans})
    hours = timedelta(hours=table.maintenance.orphan_files.older_than_hours)
    raw.write_parquet("src/0001.parquet", [change("I", 1, "v", 1)], DMS)
    load(spark, table, raw)
    location = spark.sql(f"DESCRIBE TABLE EXTENDED {name_of(table)}").where("col_name = 'Location'").first()
    orphan = Path(location.data_type.removeprefix("file:")) / "data" / "crashed-writer.parquet"
    orphan.write_bytes(b"never committed")
    # ten days old: Iceberg refuses a cut-off within the last 24 hours of the real clock
    written = datetime.now(UTC) - timedelta(days=10)
    os.utime(orphan, (written.timestamp(), written.timestamp()))

    kept = maintain_table(spark, table, catalog=CATALOG, now=written + hours - HOUR)
    assert step(kept, "remove_orphan_files").status == "ok" and orphan.exists()

    removed = maintain_table(spark, table, catalog=CATALOG, now=written + hours + HOUR)
    assert step(removed, "remove_orphan_files").counts["orphan_files_removed"] == 1 and not orphan.exists()
