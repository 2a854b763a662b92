"""`lakeloader maintain` without a JVM: which steps a table's plan runs and in what order (what it leaves
to S3 Tables in a table bucket), what S3 Tables is told to do, the compaction's arguments, the sort order
it resolves, the cut-offs' clock and the summary it prints. The steps themselves run on Spark
(tests/spark/test_maintenance.py)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from moto import mock_aws

from lakeloader.control import contract
from lakeloader.iceberg import s3_tables
from lakeloader.jobs import retention
from lakeloader.jobs.maintenance import (
    STEPS,
    MaintenanceResult,
    StepResult,
    _cutoffs,
    _plan,
    _s3_tables_maintenance,
    _Target,
    left_to_s3_tables,
    rewrite_data_arguments,
    sort_order_sql,
    summary_table,
)
from lakeloader.spark.errors import LakeloaderError
from lakeloader_dev.emulator import s3_tables as emulated_s3_tables
from tests.aws_fixtures import AWS_TEST_ENV
from tests.unit.spark_conf import Session
from tests.unit.test_s3_tables_engine import BUCKET, table

# Every step, in the order `maintain` runs them.
EVERY_STEP = [
    "commit_retry_properties",
    "s3_tables_maintenance",
    "drop_stale_audit_branches",
    "rewrite_data_files",
    "rewrite_position_delete_files",
    "rewrite_manifests",
    "expire_snapshots",
    "remove_orphan_files",
    "purge_tombstones",
]
ALL_ON = {"rewrite_delete_files": True, "rewrite_manifests": True}
IN_A_TABLE_BUCKET = Session(**{s3_tables.WAREHOUSE_CONF: BUCKET})


def test_a_glue_table_runs_every_enabled_step_of_its_own_in_order():
    assert _plan(IN_A_TABLE_BUCKET, table("glue", **ALL_ON)) == [
        s for s in EVERY_STEP if s != "s3_tables_maintenance"
    ]


def test_a_table_in_a_table_bucket_leaves_compaction_snapshot_expiry_and_orphan_removal_to_s3_tables():
    """S3 Tables compacts, expires snapshots and removes unreferenced files itself: in their place the
    plan sets the table's maintenance in S3 Tables, right after the commit retry properties."""
    stored = table(**ALL_ON)
    assert left_to_s3_tables(IN_A_TABLE_BUCKET, stored)
    assert _plan(IN_A_TABLE_BUCKET, stored) == [
        "commit_retry_properties",
        "s3_tables_maintenance",
        "drop_stale_audit_branches",
        "rewrite_position_delete_files",
        "rewrite_manifests",
        "purge_tombstones",
    ]
    assert set(s3_tables.MANAGED_STEPS).isdisjoint(_plan(IN_A_TABLE_BUCKET, stored))


@pytest.mark.parametrize("session", [Session(), Session(**{s3_tables.WAREHOUSE_CONF: ""})])
def test_an_s3_tables_table_without_a_table_bucket_maintains_itself(session):
    """On a laptop (no table bucket: no warehouse, or an empty one) the table lives in the local
    warehouse, and nothing else would compact it."""
    assert not left_to_s3_tables(session, table(**ALL_ON))
    assert _plan(session, table(**ALL_ON)) == [s for s in EVERY_STEP if s != "s3_tables_maintenance"]


@pytest.mark.parametrize(
    "maintenance, left_out",
    [
        ({"compaction": {"enabled": False}}, "rewrite_data_files"),
        ({"rewrite_delete_files": False}, "rewrite_position_delete_files"),
        ({"rewrite_manifests": False}, "rewrite_manifests"),
        ({"snapshots": {"enabled": False}}, "expire_snapshots"),
        ({"orphan_files": {"enabled": False}}, "remove_orphan_files"),
    ],
)
def test_a_disabled_step_is_left_out_and_only_it(maintenance, left_out):
    planned = _plan(Session(), table("glue", **{**ALL_ON, **maintenance}))
    assert planned == [s for s in EVERY_STEP if s not in ("s3_tables_maintenance", left_out)]


def test_every_step_a_plan_names_has_its_work():
    assert list(STEPS) == EVERY_STEP


@pytest.fixture
def s3tables(monkeypatch):
    """moto's S3 Tables in process, with the maintenance APIs the emulator adds to it."""
    for name, value in AWS_TEST_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    emulated_s3_tables.patch()
    with mock_aws():  # a fresh backend, and fresh maintenance records beside it
        emulated_s3_tables.TABLE_MAINTENANCE.clear()
        emulated_s3_tables.BUCKET_MAINTENANCE.clear()
        yield boto3.client("s3tables")


def test_the_s3_tables_step_sets_the_tables_maintenance_in_the_sessions_table_bucket(s3tables):
    """PutTableMaintenanceConfiguration for the table, in the bucket the session's catalog writes to:
    compaction and snapshot management from the table's own `maintenance:`."""
    bucket = s3tables.create_table_bucket(name="lakeloader-dev-tables")["arn"]
    s3tables.create_namespace(tableBucketARN=bucket, namespace=["crm"])
    s3tables.create_table(tableBucketARN=bucket, namespace="crm", name="customers", format="ICEBERG")
    stored = table(
        compaction={"target_file_size_mb": 256}, snapshots={"older_than_days": 2, "retain_last": 3}
    )
    spark = Session(**{s3_tables.WAREHOUSE_CONF: bucket})
    target = _Target(spark, stored, contract.GLUE_CATALOG, "`s3tables`.`crm`.`customers`", None, ())
    assert _s3_tables_maintenance(target) == {"s3_tables_configurations_set": 2}
    configured = s3tables.get_table_maintenance_configuration(
        tableBucketARN=bucket, namespace="crm", name="customers"
    )["configuration"]
    assert configured == {
        "icebergCompaction": {
            "status": "enabled",
            "settings": {"icebergCompaction": {"targetFileSizeMB": 256}},
        },
        "icebergSnapshotManagement": {
            "status": "enabled",
            "settings": {"icebergSnapshotManagement": {"minSnapshotsToKeep": 3, "maxSnapshotAgeHours": 48}},
        },
    }


@pytest.mark.parametrize("days, hours", [(0.01, 1), (0.99, 24), (1.99, 48), (7, 168)])
def test_s3_tables_keeps_snapshots_the_configured_days_in_whole_hours_at_least_one(days, hours):
    """maxSnapshotAgeHours is an integer of at least 1: the days in hours, rounded to the nearest."""
    configured = s3_tables.maintenance_configurations(table(snapshots={"older_than_days": days}))
    assert (
        configured["icebergSnapshotManagement"]["settings"]["icebergSnapshotManagement"][
            "maxSnapshotAgeHours"
        ]
        == hours
    )


def test_the_removal_windows_are_read_from_the_table_bucket(s3tables):
    bucket = s3tables.create_table_bucket(name="lakeloader-dev-tables")["arn"]
    with pytest.raises(LakeloaderError) as err:  # nothing configured: S3 Tables would never delete
        s3_tables.removal_windows(bucket)
    assert str(err.value) == (
        f"table bucket {bucket}: unreferenced file removal is not enabled, so S3 Tables never deletes the "
        "files an erasure unreferences (enable it: the stage's s3_tables settings)"
    )
    windows = {"unreferencedDays": 4, "nonCurrentDays": 12}
    for status, read in (("disabled", None), ("enabled", (4, 12))):
        s3tables.put_table_bucket_maintenance_configuration(
            tableBucketARN=bucket,
            type="icebergUnreferencedFileRemoval",
            value={"status": status, "settings": {"icebergUnreferencedFileRemoval": windows}},
        )
        if read is None:
            with pytest.raises(LakeloaderError, match="unreferenced file removal is not enabled"):
                s3_tables.removal_windows(bucket)
        else:
            assert s3_tables.removal_windows(bucket) == read


def test_compaction_bin_packs_with_the_configured_file_size_and_thresholds():
    compaction = table(
        "glue", compaction={"target_file_size_mb": 3, "min_input_files": 4}
    ).maintenance.compaction
    assert rewrite_data_arguments(compaction, ["id"]) == [
        "strategy => 'binpack'",
        "options => map('target-file-size-bytes', '3145728', 'min-input-files', '4', "
        "'delete-file-threshold', '1')",
    ]


def test_compaction_sorts_by_the_resolved_order_where_asked():
    compaction = table(
        "glue",
        compaction={"sort_order": "Name desc", "where": "region = 'EU'", "delete_file_threshold": 2},
    ).maintenance.compaction
    assert rewrite_data_arguments(compaction, ["id", "name"]) == [
        "strategy => 'sort'",
        "sort_order => '`name` DESC'",
        "where => 'region = \\'EU\\''",  # a SQL string literal, its quotes escaped
        "options => map('target-file-size-bytes', '536870912', 'min-input-files', '5', "
        "'delete-file-threshold', '2')",
    ]


@pytest.mark.parametrize(
    "order, resolved",
    [
        ("ID desc nulls last, zorder(a, Name)", "`id` DESC NULLS LAST, zorder(`a`, `name`)"),
        ("  id  ,name asc NULLS first ", "`id`, `name` ASC NULLS FIRST"),
        ("zorder( a ,we`ird )", "zorder(`a`, `we``ird`)"),
    ],
)
def test_a_sort_order_is_resolved_against_the_tables_columns_and_quoted(order, resolved):
    assert sort_order_sql(order, ["id", "a", "name", "we`ird"]) == resolved


@pytest.mark.parametrize(
    "order, message",
    [
        ("id, nme desc", "maintenance.compaction.sort_order names unknown column 'nme'"),
        ("zorder(a, b)", "maintenance.compaction.sort_order names unknown column 'b'"),
        ("id desc first", "maintenance.compaction.sort_order: cannot read 'id desc first'"),
        ("id, 1id", "maintenance.compaction.sort_order: cannot read '1id'"),
    ],
)
def test_a_sort_order_that_cannot_be_resolved_says_what(order, message):
    with pytest.raises(LakeloaderError) as err:
        sort_order_sql(order, ["id", "a"])
    assert str(err.value) == message


def test_the_cut_offs_are_taken_when_a_step_runs_unless_the_run_was_given_its_clock():
    stored = table("glue")
    given = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
    target = _Target(Session(), stored, contract.GLUE_CATALOG, "t", given, ())
    assert _cutoffs(target) == retention.cutoffs(stored, given)
    before = datetime.now(UTC)
    taken = _cutoffs(_Target(Session(), stored, contract.GLUE_CATALOG, "t", None, ())).snapshots
    assert before - timedelta(days=7) <= taken <= datetime.now(UTC) - timedelta(days=7)


def cells(text: str) -> list[dict[str, str]]:
    """summary_table's rows as {column: value}, the columns cut where its rule of dashes breaks."""
    header, rule, *rows = text.splitlines()
    spans = [m.span() for m in re.finditer(r"-+", rule)]
    row = lambda line: [line[a : b + 1 if b < len(rule) else None].strip() for a, b in spans]  # noqa: E731
    names = row(header)
    return [dict(zip(names, row(line), strict=True)) for line in rows]


def test_the_summary_has_one_line_per_table_and_one_per_error():
    done = MaintenanceResult(
        "crm.customers",
        seconds=12.34,
        steps=[
            StepResult(
                "rewrite_data_files", counts={"rewritten_data_files_count": 9, "added_data_files_count": 2}
            ),
            StepResult("rewrite_position_delete_files", counts={"rewritten_delete_files_count": 4}),
            StepResult("rewrite_manifests", attempts=3, counts={"added_manifests_count": 1}),
            StepResult(
                "expire_snapshots",
                attempts=2,
                counts={"deleted_data_files_count": 5, "deleted_manifest_files_count": 1, "kept": 7},
            ),
            StepResult("remove_orphan_files", attempts=1, counts={"orphan_files_removed": 6}),
            StepResult("purge_tombstones", counts={"tombstones_purged": 8}),
        ],
    )
    failed = MaintenanceResult(
        "sales.lines",
        status="failed",
        error="expire_snapshots: boom",
        steps=[
            StepResult("expire_snapshots", status="failed", error="boom"),
            StepResult("remove_orphan_files", counts={}),  # ran, found nothing: 0, not "-"
            StepResult("purge_tombstones", counts={}),  # no side table: no delete was ever loaded
        ],
    )
    missing = MaintenanceResult("erp.items", status="skipped", error="table erp.items does not exist yet")
    text = summary_table([done, failed, missing])
    assert cells(text.split("\n! ")[0]) == [
        {
            "table": "crm.customers",
            "status": "ok",
            "data files": "9->2",
            "delete files": "4->0",
            "manifests": "0->1",
            "expired files": "6",
            "orphans": "6",
            "tombstones purged": "8",
            "retries": "3",
            "seconds": "12.3",
        },
        {
            "table": "sales.lines",
            "status": "failed",
            "data files": "-",
            "delete files": "-",
            "manifests": "-",
            "expired files": "0",
            "orphans": "0",
            "tombstones purged": "0",
            "retries": "0",
            "seconds": "0.0",
        },
        {
            "table": "erp.items",
            "status": "skipped",
            "data files": "-",
            "delete files": "-",
            "manifests": "-",
            "expired files": "-",
            "orphans": "-",
            "tombstones purged": "-",
            "retries": "0",
            "seconds": "0.0",
        },
    ]
    assert text.splitlines()[-2:] == [
        "! sales.lines expire_snapshots: boom",
        "! erp.items: table erp.items does not exist yet",
    ]
