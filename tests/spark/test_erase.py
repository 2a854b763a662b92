"""GDPR erasure on real Iceberg tables: gone from the table, from time travel and from the files."""

from __future__ import annotations

import hashlib
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakeloader.engine import apply_batch
from lakeloader.jobs.erase import ErasureError, erase, parse_keys
from lakeloader.spark.inputs import list_inputs
from lakeloader.spark.session import CATALOG

# slow (make check leaves it out): erasures verified through expiry, orphan removal and time travel
pytestmark = [pytest.mark.spark, pytest.mark.slow]

T0 = datetime(2026, 11, 1, 8, 0, 0)
DMS = pa.schema(
    [
        ("Op", pa.string()),
        ("id", pa.int64()),
        ("email", pa.string()),
        ("last_update_time", pa.timestamp("us")),
    ]
)
MOR = {
    "write.merge.mode": "merge-on-read",
    "write.delete.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
}


def change(op: str, id_: int, email: str, minute: int) -> dict:
    return {"Op": op, "id": id_, "email": email, "last_update_time": T0.replace(minute=minute)}


def name_of(table) -> str:
    return f"{CATALOG}.{table.target.database}.{table.target.table}"


def load_batches(spark, table, raw, batches):
    for n, batch in enumerate(batches):
        raw.write_parquet(f"src/2026110{n}-0900.parquet", batch, DMS)
        files = list_inputs(str(raw.root), table.source.prefix)
        apply_batch(spark, table, files, catalog=CATALOG, run_id=f"r{n}")


def table_dir(spark, table) -> Path:
    location = spark.sql(f"DESCRIBE TABLE EXTENDED {name_of(table)}").where("col_name = 'Location'").first()
    return Path(location.data_type.removeprefix("file:"))


def emails_on_disk(spark, table) -> set[str]:
    """Every email value in every parquet data file under the table's folder (deletes ignored)."""
    found = set()
    for path in (table_dir(spark, table) / "data").rglob("*.parquet"):
        columns = pq.read_table(path).column_names
        if "email" in columns:
            found.update(v for v in pq.read_table(path, columns=["email"]).column("email").to_pylist() if v)
    return found


def test_erasure_is_verified_against_time_travel_and_files(spark, raw, make_table):
    table = make_table(target={"properties": MOR})
    load_batches(
        spark,
        table,
        raw,
        [
            [change("I", 1, "ann@x", 1), change("I", 2, "bob@x", 1), change("I", 3, "cy@x", 1)],
            [change("U", 2, "bob2@x", 2), change("U", 1, "ann2@x", 2)],
            [change("D", 3, "cy@x", 3)],  # already deleted by CDC, but still in history
        ],
    )
    name = name_of(table)
    old_snapshots = [r.snapshot_id for r in spark.sql(f"SELECT snapshot_id FROM {name}.snapshots").collect()]
    assert len(old_snapshots) >= 3
    assert {"bob@x", "bob2@x", "cy@x"} <= emails_on_disk(spark, table)
    subjects_at = "SELECT * FROM {} VERSION AS OF {} WHERE id IN (2, 3)"
    holding = [s for s in old_snapshots if spark.sql(subjects_at.format(name, s)).count()]  # before erasure
    assert len(holding) >= 3

    result = erase(spark, table, catalog=CATALOG, keys=["2", "id=3"], who="tester")

    assert result.verified and result.rows_erased == 1 and result.subjects == 2
    assert result.snapshots_expired >= 2
    assert [tuple(r) for r in spark.sql(f"SELECT id, email FROM {name}").collect()] == [(1, "ann2@x")]
    # independent check: no snapshot reachable by time travel returns the subjects
    remaining = [r.snapshot_id for r in spark.sql(f"SELECT snapshot_id FROM {name}.snapshots").collect()]
    assert remaining and set(remaining).isdisjoint(holding), "a snapshot holding the subjects survived"
    for snapshot in remaining:
        assert spark.sql(f"SELECT * FROM {name} VERSION AS OF {snapshot} WHERE id IN (2, 3)").count() == 0
    for snapshot in set(old_snapshots) - set(remaining):
        with pytest.raises(Exception, match="(?i)snapshot"):
            spark.sql(f"SELECT * FROM {name} VERSION AS OF {snapshot}").collect()
    # and no file on disk still holds their values (merge-on-read left them masked, not gone)
    on_disk = emails_on_disk(spark, table)
    assert on_disk.isdisjoint({"bob@x", "bob2@x", "cy@x"}) and "ann2@x" in on_disk
    # the audit record names the table and a hash, never the values
    audit = spark.sql(
        f"SELECT * FROM {CATALOG}.lakeloader_audit.erasures WHERE table_id = '{table.id}'"
    ).collect()
    assert len(audit) == 1
    record = audit[0].asDict()
    assert record["who"] == "tester" and record["rows_erased"] == 1 and record["verified"] is True
    assert record["predicate_sha256"] == result.predicate_sha256 and len(result.predicate_sha256) == 64
    assert not any("bob" in str(v) for v in record.values())
    assert "erased 1 current row(s)" in result.describe()


def test_where_erasure_and_a_tag_that_keeps_the_rows_fails_verification(spark, raw, make_table):
    table = make_table()
    load_batches(spark, table, raw, [[change("I", 1, "ann@x", 1), change("I", 2, "bob@x", 1)]])
    name = name_of(table)
    spark.sql(f"ALTER TABLE {name} CREATE TAG `legal_hold`")
    with pytest.raises(ErasureError, match=r"NOT verified[\s\S]*legal_hold"):
        erase(spark, table, catalog=CATALOG, where="email = 'bob@x'", who="tester")
    record = spark.sql(
        f"SELECT verified FROM {CATALOG}.lakeloader_audit.erasures WHERE table_id = '{table.id}'"
    ).first()
    assert record.verified is False
    spark.sql(f"ALTER TABLE {name} DROP TAG `legal_hold`")
    result = erase(spark, table, catalog=CATALOG, where="email = 'bob@x'", who="tester")
    assert result.verified and result.rows_erased == 0  # already deleted; history now purged too
    assert result.predicate_sha256 == hashlib.sha256(f"{table.id}\nemail = 'bob@x'".encode()).hexdigest()


def test_an_older_audit_table_gains_the_purge_count_and_a_local_warehouse_purges_nothing(
    spark, raw, make_table
):
    from lakeloader.jobs.erase import AUDIT_COLUMNS

    audit = f"{CATALOG}.lakeloader_audit.erasures"
    old_columns = AUDIT_COLUMNS.replace(", object_versions_purged BIGINT", "")
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.lakeloader_audit")
    spark.sql(f"DROP TABLE IF EXISTS {audit}")
    spark.sql(f"CREATE TABLE {audit} ({old_columns}) USING iceberg")  # as lakeloader wrote it before
    table = make_table()
    load_batches(spark, table, raw, [[change("I", 1, "ann@x", 1), change("I", 2, "bob@x", 1)]])

    result = erase(spark, table, catalog=CATALOG, keys=["2"], who="tester")

    assert result.verified and result.versioned_locations == [] and result.object_versions_purged == 0
    assert "purged no object versions (the warehouse is not on S3)" in result.describe()
    record = spark.sql(f"SELECT object_versions_purged FROM {audit} WHERE table_id = '{table.id}'").first()
    assert record.object_versions_purged == 0


def test_composite_key_syntax(make_table):
    table = make_table(keys=["order_id", "line_no"])
    assert parse_keys(table, ["order_id=1,line_no=2", "LINE_NO=3, order_id=4"]) == [
        {"order_id": "1", "line_no": "2"},
        {"line_no": "3", "order_id": "4"},
    ]
    with pytest.raises(ErasureError, match="composite key"):
        parse_keys(table, ["1"])
    with pytest.raises(ErasureError, match="missing key column"):
        parse_keys(table, ["order_id=1"])
    with pytest.raises(ErasureError, match="not a key column"):
        parse_keys(table, ["order_id=1,sku=2"])


def test_maintain_drops_a_killed_runs_audit_branch_after_the_lock_lease_and_erase_then_succeeds(
    spark, raw, make_table
):
    """A quality-gated run killed before it published leaves its audit branch, holding the subject's
    row: erasure cannot be verified. `maintain` keeps such a branch while its run could still hold
    the table lock, and discards it (and its unpublished snapshot) once the lease is over."""
    from datetime import UTC, timedelta

    from lakeloader.jobs.maintenance import maintain_table

    table = make_table(
        quality={"rules": [{"not_null": ["email"]}]}, maintenance={"compaction": {"enabled": False}}
    )
    load_batches(spark, table, raw, [[change("I", 1, "ann@x", 1)]])
    name = name_of(table)
    branch = "audit_20261101T090000000Z_dead01_0badc0de"  # as commit.audit_branch_name names it
    spark.sql(f"ALTER TABLE {name} CREATE BRANCH `{branch}`")
    spark.sql(f"INSERT INTO {name}.branch_{branch} VALUES (2, 'bob@x', TIMESTAMP '2026-11-01 08:02:00')")
    written = (
        spark.sql(f"SELECT max(committed_at) AS at FROM {name}.snapshots").first().at.replace(tzinfo=UTC)
    )
    with pytest.raises(ErasureError, match=branch):
        erase(spark, table, catalog=CATALOG, keys=["2"], who="tester")

    def branches() -> list[str]:
        return [r.name for r in spark.sql(f"SELECT name FROM {name}.refs").collect()]

    young = maintain_table(
        spark, table, catalog=CATALOG, now=written + timedelta(hours=2) - timedelta(minutes=1)
    )
    assert branch in branches()  # its run could still publish
    step = next(s for s in young.steps if s.step == "drop_stale_audit_branches")
    assert step.counts == {"stale_audit_branches_dropped": 0}

    old = maintain_table(spark, table, catalog=CATALOG, now=written + timedelta(hours=2, minutes=1))
    step = next(s for s in old.steps if s.step == "drop_stale_audit_branches")
    assert step.counts == {"stale_audit_branches_dropped": 1} and branches() == ["main"]
    result = erase(spark, table, catalog=CATALOG, keys=["2"], who="tester")
    assert result.verified
