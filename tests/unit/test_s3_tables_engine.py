"""target.storage: s3_tables in the jobs (issue 42), the parts that need no JVM: which catalog holds a
table, the maintenance S3 Tables is given, when an erasure's files are gone, the local session's
S3 Tables catalog against an emulator, and the stage's database prefix."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from lakeloader.config import parse_config
from lakeloader.control import contract
from lakeloader.iceberg import s3_tables
from lakeloader.jobs import with_database_prefix
from lakeloader.jobs.maintenance import _plan
from lakeloader.spark.errors import LakeloaderError
from lakeloader.spark.session import S3_TABLES_ENV, SparkSettings, local_conf
from lakeloader_dev.emulator.glue_runner import s3_tables_warehouse
from tests.unit.spark_conf import Session

BUCKET = "arn:aws:s3tables:us-east-1:123456789012:bucket/lakeloader-dev-tables"


def table(storage="s3_tables", **maintenance):
    spec = {
        "id": "crm.customers",
        "source": {"prefix": "crm/customers/", "format": "parquet", "cdc": "dms"},
        "target": {"database": "crm", "table": "customers", "storage": storage},
        "keys": ["customer_id"],
    }
    if maintenance:
        spec["maintenance"] = maintenance
    return parse_config({"tables": [spec]}).tables[0]


def test_an_s3_tables_table_is_addressed_through_the_s3_tables_catalog():
    spark = Session(**{s3_tables.WAREHOUSE_CONF: BUCKET})
    assert s3_tables.target_name(spark, contract.GLUE_CATALOG, table()) == "`s3tables`.`crm`.`customers`"
    assert (
        s3_tables.target_name(spark, contract.GLUE_CATALOG, table("glue"))
        == "`glue_catalog`.`crm`.`customers`"
    )


def test_a_laptop_run_keeps_an_s3_tables_table_in_its_local_warehouse():
    assert s3_tables.target_catalog(Session(), contract.LOCAL_CATALOG, table()) == contract.LOCAL_CATALOG


def test_a_job_without_the_s3_tables_catalog_refuses_the_table():
    with pytest.raises(LakeloaderError) as err:
        s3_tables.target_catalog(Session(), contract.GLUE_CATALOG, table())
    assert str(err.value) == (
        "table 'crm.customers' has target.storage s3_tables, but this session has no 's3tables' catalog "
        "(spark.sql.catalog.s3tables.warehouse is not set): the stage's job settings name it when the "
        "config has an s3_tables table (redeploy the stack)"
    )


def test_maintenance_configuration_follows_the_table_retention_settings():
    """PutTableMaintenanceConfiguration's two table types (S3 Tables API reference): compaction's
    target file size, and snapshot management's minimum snapshots and maximum age in hours."""
    configurations = s3_tables.maintenance_configurations(
        table(
            compaction={"target_file_size_mb": 256},
            snapshots={"older_than_days": 2.5, "retain_last": 7},
        )
    )
    assert configurations == {
        "icebergCompaction": {
            "status": "enabled",
            "settings": {"icebergCompaction": {"targetFileSizeMB": 256}},
        },
        "icebergSnapshotManagement": {
            "status": "enabled",
            "settings": {"icebergSnapshotManagement": {"minSnapshotsToKeep": 7, "maxSnapshotAgeHours": 60}},
        },
    }
    off = s3_tables.maintenance_configurations(
        table(compaction={"enabled": False}, snapshots={"enabled": False})
    )
    assert off["icebergCompaction"]["status"] == off["icebergSnapshotManagement"]["status"] == "disabled"


def planned(session, stored) -> list[str]:
    """The steps `lakeloader maintain` plans for the table (none run: a plan names them only)."""
    return _plan(session, stored)


LEFT_TO_S3_TABLES = {"rewrite_data_files", "expire_snapshots", "remove_orphan_files"}


def test_maintain_leaves_compaction_snapshot_expiry_and_orphan_removal_to_s3_tables():
    """In a table bucket S3 Tables compacts, expires snapshots and removes unreferenced files itself:
    `maintain` sets its maintenance configuration instead and runs none of the three (they are
    enabled by default). What S3 Tables does not do -- delete files, manifests, tombstones, audit
    branches -- `maintain` still does; a table in the Glue catalog, or on a laptop, gets all of its own."""
    stored = table(rewrite_delete_files=True, rewrite_manifests=True)
    managed = planned(Session(**{s3_tables.WAREHOUSE_CONF: BUCKET}), stored)
    assert not LEFT_TO_S3_TABLES & set(managed)
    assert {"s3_tables_maintenance", "rewrite_position_delete_files", "rewrite_manifests"} <= set(managed)
    assert {"drop_stale_audit_branches", "purge_tombstones"} <= set(managed)
    for own in (planned(Session(), stored), planned(Session(), table("glue", rewrite_manifests=True))):
        assert set(own) >= LEFT_TO_S3_TABLES and "s3_tables_maintenance" not in own


def test_files_are_physically_gone_after_both_removal_windows():
    erased = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
    assert s3_tables.physically_gone_by(erased, (3, 10)) == datetime(2026, 12, 11, 12, 0, tzinfo=UTC)


def test_an_emulated_session_gets_the_s3_tables_catalog_on_the_emulator(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:5000")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv(S3_TABLES_ENV, BUCKET)
    conf = local_conf(SparkSettings(runtime="glue", warehouse="s3://curated/warehouse/", extra_conf={}))
    prefix = "spark.sql.catalog.s3tables"
    # the deployed jobs' REST catalog (contract.s3_tables_catalog_conf), at the emulator's endpoint
    assert conf[f"{prefix}.type"] == "rest"
    assert conf[f"{prefix}.uri"] == "http://127.0.0.1:5000/iceberg"
    assert conf[f"{prefix}.warehouse"] == BUCKET
    assert conf[f"{prefix}.rest.signing-name"] == "s3tables"
    assert conf[f"{prefix}.rest.signing-region"] == conf[f"{prefix}.client.region"] == BUCKET.split(":")[3]
    assert conf[f"{prefix}.s3.endpoint"] == "http://127.0.0.1:5000"
    assert not any(key.endswith("catalog-impl") for key in conf if key.startswith(prefix))
    monkeypatch.delenv(S3_TABLES_ENV)
    conf = local_conf(SparkSettings(runtime="glue", warehouse="s3://curated/warehouse/", extra_conf={}))
    assert not any(key.startswith(prefix) for key in conf)


def test_the_emulator_takes_the_table_bucket_from_the_glue_job_conf():
    conf = (
        "spark.sql.extensions=x --conf spark.sql.catalog.glue_catalog.warehouse=s3://c/w/ "
        f"--conf spark.sql.catalog.s3tables.warehouse={BUCKET} --conf spark.x=y"
    )
    assert s3_tables_warehouse(conf) == BUCKET
    assert s3_tables_warehouse("spark.sql.catalog.glue_catalog.warehouse=s3://c/w/") is None


def test_the_stage_database_prefix_leaves_s3_tables_namespaces_alone():
    glue, tables = table("glue"), table()
    prefixed = with_database_prefix([glue, tables], "lakeloader_dev_")
    assert [t.target.database for t in prefixed] == ["lakeloader_dev_crm", "crm"]
