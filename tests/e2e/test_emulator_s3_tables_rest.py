"""The emulator's S3 Tables Iceberg REST endpoint, over real HTTP without Spark: an Iceberg REST client
(pyiceberg's, configured as AWS's page "Accessing tables using the Amazon S3 Tables Iceberg REST
endpoint" shows: uri `<endpoint>/iceberg`, warehouse = the table bucket's ARN, SigV4 signing name
`s3tables`) creates, commits, reads and drops tables, and the S3 Tables API sees the same tables.
The jobs' Spark catalog over the same endpoint: test_s3_tables_e2e.py, test_s3_tables_engine_e2e.py."""

from __future__ import annotations

import os
import uuid

import boto3
import pyarrow as pa
import pytest

from lakeloader_dev.emulator import Emulator

pytestmark = pytest.mark.e2e

NAMESPACE = "crm"


@pytest.fixture
def table_bucket(emulator: Emulator) -> str:
    s3tables = boto3.client("s3tables")
    arn = s3tables.create_table_bucket(name=f"rest-tables-{uuid.uuid4().hex[:8]}")["arn"]  # one per test
    s3tables.create_namespace(tableBucketARN=arn, namespace=[NAMESPACE])
    return arn


def rest_catalog(emulator: Emulator, table_bucket: str):
    from pyiceberg.catalog.rest import RestCatalog

    region = os.environ["AWS_REGION"]
    return RestCatalog(
        "s3tables",
        **{
            "uri": f"{emulator.endpoint}/iceberg",
            "warehouse": table_bucket,
            "rest.sigv4-enabled": "true",
            "rest.signing-name": "s3tables",
            "rest.signing-region": region,
            "s3.endpoint": emulator.endpoint,
            "s3.region": region,
            "s3.force-virtual-addressing": "false",
        },
    )


ROWS = pa.table({"id": pa.array([1, 2], pa.int64()), "name": pa.array(["ann", "bob"])})


def test_a_table_the_rest_catalog_creates_and_commits_is_the_s3_tables_apis(emulator, table_bucket):
    catalog = rest_catalog(emulator, table_bucket)
    assert catalog.list_namespaces() == [(NAMESPACE,)]
    table = catalog.create_table((NAMESPACE, "customers"), schema=ROWS.schema)
    table.append(ROWS)  # data files through S3, then a commit the endpoint applies
    s3tables = boto3.client("s3tables")
    entry = s3tables.get_table(tableBucketARN=table_bucket, namespace=NAMESPACE, name="customers")
    assert entry["metadataLocation"].startswith(entry["warehouseLocation"] + "/metadata/00001-")
    assert entry["metadataLocation"] == catalog.load_table((NAMESPACE, "customers")).metadata_location
    assert [t["name"] for t in s3tables.list_tables(tableBucketARN=table_bucket)["tables"]] == ["customers"]
    assert sorted(catalog.load_table((NAMESPACE, "customers")).scan().to_arrow()["id"].to_pylist()) == [1, 2]
    assert catalog.list_tables(NAMESPACE) == [(NAMESPACE, "customers")]


def test_a_commit_on_stale_metadata_is_refused_and_nothing_is_lost(emulator, table_bucket):
    """A commit whose requirement no longer holds (the main branch has moved since the writer read the
    table) is refused with 409 CommitFailedException, as the REST protocol has it; a writer that then
    retries on the new metadata (pyiceberg's append does) loses nothing."""
    from pyiceberg.exceptions import CommitFailedException
    from pyiceberg.table.update import AssertRefSnapshotId, SetPropertiesUpdate

    catalog = rest_catalog(emulator, table_bucket)
    catalog.create_table((NAMESPACE, "orders"), schema=ROWS.schema)
    first, second = (catalog.load_table((NAMESPACE, "orders")) for _ in range(2))
    first.append(ROWS)
    stale = (AssertRefSnapshotId(ref="main", snapshot_id=None),)  # main had no snapshot when read
    with pytest.raises(CommitFailedException):
        catalog.commit_table(second, stale, (SetPropertiesUpdate(updates={"owner": "second"}),))
    assert "owner" not in catalog.load_table((NAMESPACE, "orders")).properties
    second.append(ROWS)  # refused once, retried on the first writer's snapshot
    assert catalog.load_table((NAMESPACE, "orders")).scan().to_arrow().num_rows == 4


def test_a_dropped_table_is_gone_from_s3_tables_with_its_storage(emulator, table_bucket):
    catalog = rest_catalog(emulator, table_bucket)
    table = catalog.create_table((NAMESPACE, "scratch"), schema=ROWS.schema)
    table.append(ROWS)
    storage = table.location().removeprefix("s3://")
    catalog.purge_table((NAMESPACE, "scratch"))
    s3tables = boto3.client("s3tables")
    assert s3tables.list_tables(tableBucketARN=table_bucket)["tables"] == []
    with pytest.raises(s3tables.exceptions.NotFoundException):
        s3tables.get_table(tableBucketARN=table_bucket, namespace=NAMESPACE, name="scratch")
    with pytest.raises(boto3.client("s3").exceptions.NoSuchBucket):
        boto3.client("s3").list_objects_v2(Bucket=storage)
    assert not catalog.table_exists((NAMESPACE, "scratch"))


def test_a_branch_can_be_made_on_a_table_with_no_snapshot(emulator, table_bucket):
    """Iceberg lets `CREATE BRANCH` commit on a new, empty table (a quality-gated table's first batch
    opens its audit branch so): the requirement that the branch does not exist yet holds."""
    from pyiceberg.table.update import AssertRefSnapshotId, SetPropertiesUpdate

    catalog = rest_catalog(emulator, table_bucket)
    empty = catalog.create_table((NAMESPACE, "gated"), schema=ROWS.schema)
    new_branch = (AssertRefSnapshotId(ref="audit_1", snapshot_id=None),)
    catalog.commit_table(empty, new_branch, (SetPropertiesUpdate(updates={"owner": "gate"}),))
    assert catalog.load_table((NAMESPACE, "gated")).properties["owner"] == "gate"
