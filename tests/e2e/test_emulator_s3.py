"""The emulator's S3 versioning, over real HTTP without Spark: `lakeloader erase` purges every
noncurrent version under a table's location."""

from __future__ import annotations

import boto3
import pytest

from lakeloader_dev.emulator import Emulator

pytestmark = pytest.mark.e2e


def test_erase_purges_every_noncurrent_version_under_the_table_location(emulator: Emulator) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from lakeloader.jobs.erase import purge_noncurrent_versions, remaining_versions

    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="curated")
    s3.put_bucket_versioning(Bucket="curated", VersioningConfiguration={"Status": "Enabled"})
    table, neighbour = "warehouse/crm.db/customers/", "warehouse/crm.db/customers_v2/"
    # files deleted by maintenance: more than a page of ListObjectVersions and a DeleteObjects batch
    old = [f"{table}data/{n:05}.parquet" for n in range(1100)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda key: s3.put_object(Bucket="curated", Key=key, Body=b"the subject"), old))
    for start in (0, 1000):  # a delete marker hides each one; its version stays readable
        batch = [{"Key": key} for key in old[start : start + 1000]]
        s3.delete_objects(Bucket="curated", Delete={"Objects": batch})
    for body in (b"v1", b"v2"):  # a rewritten object: v1 noncurrent
        s3.put_object(Bucket="curated", Key=f"{table}metadata/version-hint.text", Body=body)
    s3.put_object(Bucket="curated", Key=f"{table}data/current.parquet", Body=b"kept")
    for body in (b"a", b"b"):
        s3.put_object(Bucket="curated", Key=f"{neighbour}data/x.parquet", Body=body)

    assert remaining_versions(f"s3://curated/{table}") == 1100 + 1100 + 1
    assert purge_noncurrent_versions("s3://curated/warehouse/crm.db/customers") == 2201

    listed = s3.list_object_versions(Bucket="curated", Prefix=table)
    assert "DeleteMarkers" not in listed
    assert sorted((v["Key"], v["IsLatest"]) for v in listed["Versions"]) == [
        (f"{table}data/current.parquet", True),
        (f"{table}metadata/version-hint.text", True),
    ]
    current = s3.get_object(Bucket="curated", Key=f"{table}metadata/version-hint.text")["Body"].read()
    assert current == b"v2"
    assert remaining_versions(f"s3://curated/{table}") == 0
    # the prefix ends at the table's folder: another table whose name starts the same is untouched
    assert len(s3.list_object_versions(Bucket="curated", Prefix=neighbour)["Versions"]) == 2
