"""The erasure's S3 version purge on a versioned bucket in moto, checked with boto3 directly:
after deletes, rewrites and delete markers, none of the table's old versions or markers remain."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import boto3
import pytest

sys.path.append(str(Path(__file__).resolve().parents[1]))  # tests/ -> aws_fixtures
import aws_fixtures  # noqa: E402
from aws_fixtures import unique_name  # noqa: E402

from lakeloader.jobs.object_versions import (  # noqa: E402
    on_s3,
    purge_noncurrent_versions,
    remaining_versions,
)

moto_server = aws_fixtures.moto_server
aws_endpoint = aws_fixtures.aws_endpoint


@pytest.fixture
def s3(aws_endpoint):
    client = boto3.client("s3")
    bucket = unique_name("warehouse")
    client.create_bucket(Bucket=bucket)
    client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    return client, bucket


def listed(client, bucket: str, prefix: str) -> tuple[list[tuple], list[tuple], list[str]]:
    """(noncurrent versions, delete markers, current keys) under the prefix, read with boto3 alone."""
    old, markers, current = [], [], []
    for page in client.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=prefix):
        for v in page.get("Versions", []):
            (current.append(v["Key"]) if v["IsLatest"] else old.append((v["Key"], v["VersionId"])))
        markers += [(m["Key"], m["VersionId"]) for m in page.get("DeleteMarkers", [])]
    return old, markers, sorted(current)


def write_history(client, bucket: str, prefix: str) -> None:
    """What an Iceberg table's life leaves: rewritten metadata, files deleted by compaction and
    expiry (delete markers over their versions), a subject's row in an old data file."""
    for n in range(3):  # metadata rewritten at every commit: noncurrent versions
        client.put_object(Bucket=bucket, Key=f"{prefix}metadata/version-hint.text", Body=str(n).encode())
    client.put_object(Bucket=bucket, Key=f"{prefix}data/subject-42.parquet", Body=b"row of subject 42")
    client.put_object(Bucket=bucket, Key=f"{prefix}data/subject-42.parquet", Body=b"rewritten, still 42")
    client.delete_object(Bucket=bucket, Key=f"{prefix}data/subject-42.parquet")  # a marker on top
    client.put_object(Bucket=bucket, Key=f"{prefix}data/compacted.parquet", Body=b"live rows")
    client.put_object(Bucket=bucket, Key=f"{prefix}data/gone.parquet", Body=b"x")
    client.delete_object(Bucket=bucket, Key=f"{prefix}data/gone.parquet")
    client.delete_object(Bucket=bucket, Key=f"{prefix}data/gone.parquet")  # two markers, no version left


def test_purge_removes_every_old_version_and_marker_and_keeps_the_current_files(s3):
    client, bucket = s3
    prefix = "warehouse/crm.db/customers/"
    write_history(client, bucket, prefix)
    old, markers, _ = listed(client, bucket, prefix)
    assert len(old) == 5 and len(markers) == 3  # the history is really there before
    assert remaining_versions(f"s3://{bucket}/{prefix}") == 8

    purged = purge_noncurrent_versions(f"s3://{bucket}/{prefix.rstrip('/')}")

    old, markers, current = listed(client, bucket, prefix)
    assert (old, markers) == ([], [])
    assert current == [f"{prefix}data/compacted.parquet", f"{prefix}metadata/version-hint.text"]
    assert purged == 8
    body = client.get_object(Bucket=bucket, Key=f"{prefix}data/compacted.parquet")["Body"].read()
    assert body == b"live rows"  # current data untouched
    assert remaining_versions(f"s3://{bucket}/{prefix}") == 0


def test_purge_stays_under_its_prefix(s3):
    """The tombstone side table and the target are purged each under its own location."""
    client, bucket = s3
    target, side = "warehouse/crm.db/customers/", "warehouse/crm.db/customers__tombstones/"
    write_history(client, bucket, target)
    write_history(client, bucket, side)

    purge_noncurrent_versions(f"s3a://{bucket}/{target.rstrip('/')}")

    assert listed(client, bucket, target)[:2] == ([], [])
    old, markers, _ = listed(client, bucket, side)
    assert len(old) == 5 and len(markers) == 3  # `customers` is a prefix of `customers__tombstones`
    purge_noncurrent_versions(f"s3a://{bucket}/{side}")
    assert listed(client, bucket, side)[:2] == ([], [])


class DeleteRequests:
    """The moto client, recording what each DeleteObjects request asks (a spy: every call goes through)."""

    def __init__(self, client):
        self.client, self.requests = client, []

    def delete_objects(self, **kwargs):
        self.requests.append((len(kwargs["Delete"]["Objects"]), kwargs["Delete"]["Quiet"]))
        return self.client.delete_objects(**kwargs)

    def __getattr__(self, name):
        return getattr(self.client, name)


@pytest.mark.slow
def test_many_versions_are_deleted_in_batches_of_a_thousand(s3):
    """At size: S3 takes at most 1,000 keys a DeleteObjects request (moto takes more), and a quiet
    request answers with the errors alone rather than every key deleted."""
    client, bucket = s3
    prefix = "warehouse/big.db/t/"
    for n in range(1_005):
        client.put_object(Bucket=bucket, Key=f"{prefix}metadata/v.json", Body=str(n).encode())
    spy = DeleteRequests(client)
    assert purge_noncurrent_versions(f"s3://{bucket}/{prefix}", spy) == 1_004
    assert spy.requests == [(1_000, True), (4, True)]
    assert listed(client, bucket, prefix)[:2] == ([], [])


def test_a_version_s3_refuses_to_delete_fails_naming_it_and_the_permissions(aws_endpoint):
    """A noncurrent version under legal hold (Object Lock): S3 answers DeleteObjects with an error
    per key; the purge fails with one line naming the object, S3's code and the permissions."""
    from lakeloader.jobs.object_versions import ObjectVersionError

    client = boto3.client("s3")
    bucket = unique_name("locked")
    client.create_bucket(Bucket=bucket, ObjectLockEnabledForBucket=True)
    key = "warehouse/crm.db/customers/data/subject-42.parquet"
    held = client.put_object(Bucket=bucket, Key=key, Body=b"row of subject 42")["VersionId"]
    client.put_object(Bucket=bucket, Key=key, Body=b"rewritten")
    client.put_object_legal_hold(Bucket=bucket, Key=key, VersionId=held, LegalHold={"Status": "ON"})

    with pytest.raises(ObjectVersionError) as error:
        purge_noncurrent_versions(f"s3://{bucket}/warehouse/crm.db/customers")

    # The whole line; AWS names the version in each error, moto leaves it out ("version None"), and
    # S3's own message is S3's.
    pattern = (
        rf"could not delete 1 object version\(s\) under s3://{bucket}/warehouse/crm\.db/customers: "
        rf"first s3://{bucket}/{re.escape(key)} version \S+: AccessDenied .+ \(erase needs "
        r"s3:ListBucketVersions and s3:DeleteObjectVersion on the warehouse prefix\)"
    )
    assert re.fullmatch(pattern, str(error.value)), str(error.value)


def test_a_purge_cut_short_after_the_versions_removes_the_markers_left_on_the_next_run(s3):
    """Versions go first, then markers: a run that died between the two leaves delete markers alone
    under the prefix, which S3 lists with no `Versions` at all. The next run removes them."""
    client, bucket = s3
    prefix = "warehouse/crm.db/customers/"
    for key in ("data/gone.parquet", "data/also-gone.parquet"):
        version = client.put_object(Bucket=bucket, Key=prefix + key, Body=b"x")["VersionId"]
        client.delete_object(Bucket=bucket, Key=prefix + key)  # a marker over the version
        client.delete_object(Bucket=bucket, Key=prefix + key, VersionId=version)  # the first half's work
    pages = list(client.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=prefix))
    assert (
        not any(page.get("Versions") for page in pages) and remaining_versions(f"s3://{bucket}/{prefix}") == 2
    )

    assert purge_noncurrent_versions(f"s3://{bucket}/{prefix}") == 2
    assert listed(client, bucket, prefix) == ([], [], [])


def test_only_an_s3_location_has_versions_to_purge():
    """Hadoop's three S3 schemes are S3; a local warehouse (a path or file://) and another store are not."""
    locations = ["s3://b/w/t", "s3a://b/w/t", "s3n://b/w/t", "file:///tmp/w/t", "/tmp/w/t", "gs://b/w/t"]
    assert [on_s3(location) for location in locations] == [True, True, True, False, False, False]
