"""Tables with `target.storage: s3_tables`: where the engine finds them, and what S3 Tables maintains.

Such a table lives in the stage's S3 Tables table bucket, which the jobs reach as the Spark catalog
`contract.S3_TABLES_CATALOG` (Iceberg's REST catalog on S3 Tables' Iceberg REST endpoint, its
warehouse the bucket's ARN; infra.processing sets it). The namespace is the config's database,
unprefixed: the bucket is the stage's own. Side tables (tombstones, quarantine) follow the table's
catalog: they live beside it.

A laptop run (`lakeloader run`, catalog contract.LOCAL_CATALOG) has no table bucket: there the
table stays in the local warehouse. On Glue, EMR and the emulator the session must have the catalog.

S3 Tables maintains its tables itself: compaction and snapshot management per table (set here from
the table's `maintenance:` through PutTableMaintenanceConfiguration, when the job creates the table
and on every `maintain`), unreferenced file removal per bucket (infra.s3_tables, the stage's
`s3_tables` settings). `maintain` leaves those to it.

No PySpark import at module level: the config and infra import the pure parts.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from lakeloader.control.contract import LOCAL_CATALOG, S3_TABLES_CATALOG
from lakeloader.spark.errors import LakeloaderError
from lakeloader.spark.session import java_class
from lakeloader.spark.sql import qualified

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakeloader.config import TableConfig

WAREHOUSE_CONF = f"spark.sql.catalog.{S3_TABLES_CATALOG}.warehouse"
# What `maintain` leaves to S3 Tables on such a table (its own compaction, snapshot management and
# unreferenced file removal); remove_orphan_files could not list a table bucket's storage anyway.
MANAGED_STEPS = ("rewrite_data_files", "expire_snapshots", "remove_orphan_files")


def in_s3_tables(table: TableConfig) -> bool:
    return table.target.storage == "s3_tables"


def table_bucket_arn(spark: SparkSession) -> str | None:
    """The table bucket the session's S3 Tables catalog writes to, if it has one."""
    return spark.conf.get(WAREHOUSE_CONF, None) or None


def target_catalog(spark: SparkSession, catalog: str, table: TableConfig) -> str:
    """The Spark catalog holding `table`: the session's S3 Tables catalog for an s3_tables table,
    `catalog` otherwise (and for an s3_tables table on a laptop, which has no table bucket)."""
    if not in_s3_tables(table):
        return catalog
    if table_bucket_arn(spark):
        return S3_TABLES_CATALOG
    if catalog == LOCAL_CATALOG:
        return catalog
    raise LakeloaderError(
        f"table {table.id!r} has target.storage s3_tables, but this session has no "
        f"{S3_TABLES_CATALOG!r} catalog ({WAREHOUSE_CONF} is not set): the stage's job settings "
        "name it when the config has an s3_tables table (redeploy the stack)"
    )


def target_name(spark: SparkSession, catalog: str, table: TableConfig) -> str:
    """`catalog`.`database`.`table` of the table's target, in the catalog that holds it."""
    return qualified(target_catalog(spark, catalog, table), table.target.database, table.target.table)


def drop_table(spark: SparkSession, name: str) -> None:
    """`DROP TABLE IF EXISTS name PURGE`, in the S3 Tables catalog too. There Spark's DROP ... PURGE
    reaches Iceberg's SparkCatalog.purgeTable, which drops without purge and then deletes the files
    itself through S3FileIO, object by object; S3 Tables' DeleteTable removes a table's files itself.
    So such a table is dropped through the catalog's own dropTable(purge=true): the REST catalog's
    DELETE with purgeRequested=true, which S3 Tables' endpoint serves as DeleteTable."""
    parts = [part.strip("`").replace("``", "`") for part in name.split(".")]
    if parts[0] != S3_TABLES_CATALOG:
        spark.sql(f"DROP TABLE IF EXISTS {name} PURGE")
        return
    # S3 Tables names are lower-case letters, digits and '_': namespace.table parses unambiguously
    tables = spark._jsparkSession.sessionState().catalogManager().catalog(S3_TABLES_CATALOG)  # noqa: SLF001
    identifier = java_class(spark, "org.apache.iceberg.catalog.TableIdentifier").parse(".".join(parts[1:]))
    tables.icebergCatalog().dropTable(identifier, True)  # False when it does not exist: IF EXISTS


def maintenance_configurations(table: TableConfig) -> dict[str, dict[str, Any]]:
    """The table's maintenance for S3 Tables' PutTableMaintenanceConfiguration, by type: compaction
    from `maintenance.compaction`, snapshot management from `maintenance.snapshots` (a snapshot is
    kept `older_than_days`, at least `retain_last` of them)."""
    settings = table.maintenance
    compaction = settings.compaction
    snapshots = settings.snapshots
    return {
        "icebergCompaction": {
            "status": "enabled" if compaction.enabled else "disabled",
            "settings": {"icebergCompaction": {"targetFileSizeMB": compaction.target_file_size_mb}},
        },
        "icebergSnapshotManagement": {
            "status": "enabled" if snapshots.enabled else "disabled",
            "settings": {
                "icebergSnapshotManagement": {
                    "minSnapshotsToKeep": snapshots.retain_last,
                    "maxSnapshotAgeHours": max(1, round(snapshots.older_than_days * 24)),
                }
            },
        },
    }


def configure_maintenance(bucket_arn: str, table: TableConfig, *, client: Any = None) -> dict[str, int]:
    """Set the table's compaction and snapshot management in S3 Tables (idempotent); counts for the
    maintenance summary."""
    client = client or _client()
    configurations = maintenance_configurations(table)
    for kind, value in configurations.items():
        client.put_table_maintenance_configuration(
            tableBucketARN=bucket_arn,
            namespace=table.target.database,
            name=table.target.table,
            type=kind,
            value=value,
        )
    return {"s3_tables_configurations_set": len(configurations)}


def removal_windows(bucket_arn: str, *, client: Any = None) -> tuple[int, int]:
    """(unreferenced days, noncurrent days) of the table bucket's unreferenced file removal."""
    client = client or _client()
    response = client.get_table_bucket_maintenance_configuration(tableBucketARN=bucket_arn)
    entry = response["configuration"].get("icebergUnreferencedFileRemoval", {})  # absent: never set
    if entry.get("status") != "enabled":
        raise LakeloaderError(
            f"table bucket {bucket_arn}: unreferenced file removal is not enabled, so S3 Tables never "
            "deletes the files an erasure unreferences (enable it: the stage's s3_tables settings)"
        )
    settings = entry["settings"]["icebergUnreferencedFileRemoval"]
    return int(settings["unreferencedDays"]), int(settings["nonCurrentDays"])


def physically_gone_by(unreferenced_from: datetime, windows: tuple[int, int]) -> datetime:
    """When S3 Tables has deleted a file no snapshot references since `unreferenced_from`: marked
    noncurrent after the unreferenced window, deleted after the noncurrent window (S3 Tables runs
    the removal about daily, so up to a day later in practice)."""
    unreferenced_days, noncurrent_days = windows
    return unreferenced_from + timedelta(days=unreferenced_days + noncurrent_days)


def _client() -> Any:
    import boto3

    return boto3.client("s3tables")
