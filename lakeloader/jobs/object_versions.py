"""Noncurrent S3 object versions and delete markers under a table's location: count and purge them.

On a versioned bucket a file Iceberg deletes is only hidden and stays readable by version id until
the lifecycle rule expires it; an erasure must remove those versions too (why all of them, not only
its own: docs/quality_erase_maintain.md). boto3 only, no Spark.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

from lakeloader.spark.errors import LakeloaderError

S3_SCHEMES = ("s3", "s3a", "s3n")


class ObjectVersionError(LakeloaderError):
    """S3 refused to delete some object versions (the message names the first and the permissions)."""


def on_s3(location: str) -> bool:
    return urlparse(location).scheme in S3_SCHEMES


def _s3_prefix(location: str) -> tuple[str, str]:
    parsed = urlparse(location)
    return parsed.netloc, parsed.path.lstrip("/").rstrip("/") + "/"


def _old_versions(s3: Any, bucket: str, prefix: str) -> tuple[list[dict], list[dict]]:
    """(noncurrent versions, delete markers) under the prefix, as DeleteObjects identifiers."""
    versions, markers = [], []
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=prefix):
        for version in page.get("Versions", []):
            if not version["IsLatest"]:
                versions.append({"Key": version["Key"], "VersionId": version["VersionId"]})
        for marker in page.get("DeleteMarkers", []):
            markers.append({"Key": marker["Key"], "VersionId": marker["VersionId"]})
    return versions, markers


def _delete_versions(s3: Any, bucket: str, objects: list[dict], location: str) -> int:
    for start in range(0, len(objects), 1000):  # DeleteObjects takes at most 1,000 keys
        response = s3.delete_objects(
            Bucket=bucket, Delete={"Objects": objects[start : start + 1000], "Quiet": True}
        )
        errors = response.get("Errors") or []
        if errors:
            first = errors[0]
            raise ObjectVersionError(
                f"could not delete {len(errors)} object version(s) under {location}: first "
                f"s3://{bucket}/{first.get('Key')} version {first.get('VersionId')}: {first.get('Code')} "
                f"{first.get('Message', '')} (erase needs s3:ListBucketVersions and s3:DeleteObjectVersion "
                "on the warehouse prefix)"
            )
    return len(objects)


def purge_noncurrent_versions(location: str, s3: Any = None) -> int:
    """Delete every noncurrent version and delete marker under ``location`` (s3://bucket/prefix);
    returns how many were deleted.

    All of them, not only an erasure's own: files earlier maintenance deleted may hold the subject
    too. Versions go first, then the delete markers: a
    marker removed while a version of its key remains would make that version current again.
    """
    import boto3

    s3 = s3 or boto3.client("s3")
    bucket, prefix = _s3_prefix(location)
    versions, _ = _old_versions(s3, bucket, prefix)
    purged = _delete_versions(s3, bucket, versions, location)
    _, markers = _old_versions(s3, bucket, prefix)
    return purged + _delete_versions(s3, bucket, markers, location)


def remaining_versions(location: str, s3: Any = None) -> int:
    """How many noncurrent versions and delete markers are under ``location``."""
    import boto3

    s3 = s3 or boto3.client("s3")
    versions, markers = _old_versions(s3, *_s3_prefix(location))
    return len(versions) + len(markers)
