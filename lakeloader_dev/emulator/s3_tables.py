"""Amazon S3 Tables on the emulator: what moto 5.2.5's `s3tables` backend lacks for lakeloader.

moto serves the table bucket, namespace and table APIs (CreateTable, GetTable,
GetTableMetadataLocation, UpdateTableMetadataLocation, DeleteTable, ...), each table's storage an S3
bucket of its own, so Spark's S3FileIO reads and writes the table's files there; the Iceberg REST
endpoint the jobs' catalog calls translates to them (s3_tables_rest). Added here:

* the maintenance configuration APIs (Get/PutTableMaintenanceConfiguration,
  Get/PutTableBucketMaintenanceConfiguration): recorded, as moto records other settings it does
  not act on; S3 Tables' maintenance itself (compaction, expiry, file removal) does not run here;
* CloudFormation types `AWS::S3Tables::TableBucket` (created in the backend; its
  UnreferencedFileRemoval becomes the bucket's maintenance configuration; Ref and TableBucketARN
  give its ARN), `AWS::S3Tables::Namespace` and `AWS::S3Tables::TableBucketPolicy` (recorded only);
* error bodies every AWS SDK can read: moto answers a missing table with the exception's name in
  `__type`, the AWS SDK for Java reads it from the `x-amzn-errortype` header of this REST-JSON
  service (without it a Java client sees an unreadable response where S3 Tables says NotFound).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote

from lakeloader_dev.emulator.cfn_models import ACCEPTED, _Model

UNREFERENCED = "icebergUnreferencedFileRemoval"

# table ARN -> {type: value}; bucket ARN -> {type: value}
TABLE_MAINTENANCE: dict[str, dict[str, Any]] = {}
BUCKET_MAINTENANCE: dict[str, dict[str, Any]] = {}


def _backend(account_id: str, region_name: str) -> Any:
    from moto.s3tables.models import s3tables_backends

    return s3tables_backends[account_id][region_name]


def _split_table_path(raw_path: str) -> tuple[str, str, str, str | None]:
    """`/tables/<bucket ARN>/<namespace>/<name>/maintenance[/<type>]` (the ARN's '/' encoded or not)."""
    path = unquote(raw_path).lstrip("/").removeprefix("tables/")
    head, _, kind = path.partition("/maintenance")
    arn_and_names = head.split("/")
    bucket_arn = "/".join(arn_and_names[:-2])
    return bucket_arn, arn_and_names[-2], arn_and_names[-1], kind.strip("/") or None


def _split_bucket_path(raw_path: str) -> tuple[str, str | None]:
    path = unquote(raw_path).lstrip("/").removeprefix("buckets/")
    bucket_arn, _, kind = path.partition("/maintenance")
    return bucket_arn, kind.strip("/") or None


def _put_table_maintenance_configuration(self: Any) -> Any:
    bucket_arn, namespace, name, kind = _split_table_path(self.raw_path)
    table = self.s3tables_backend.get_table(table_bucket_arn=bucket_arn, namespace=namespace, name=name)
    TABLE_MAINTENANCE.setdefault(table.arn, {})[kind] = json.loads(self.body)["value"]
    return 204, self.default_response_headers, ""


def _get_table_maintenance_configuration(self: Any) -> Any:
    bucket_arn, namespace, name, _ = _split_table_path(self.raw_path)
    table = self.s3tables_backend.get_table(table_bucket_arn=bucket_arn, namespace=namespace, name=name)
    body = {"tableARN": table.arn, "configuration": TABLE_MAINTENANCE.get(table.arn, {})}
    return 200, self.default_response_headers, json.dumps(body)


def _put_table_bucket_maintenance_configuration(self: Any) -> Any:
    bucket_arn, kind = _split_bucket_path(self.raw_path)
    self.s3tables_backend.get_table_bucket(bucket_arn)
    BUCKET_MAINTENANCE.setdefault(bucket_arn, {})[kind] = json.loads(self.body)["value"]
    return 204, self.default_response_headers, ""


def _get_table_bucket_maintenance_configuration(self: Any) -> Any:
    bucket_arn, _ = _split_bucket_path(self.raw_path)
    self.s3tables_backend.get_table_bucket(bucket_arn)
    body = {"tableBucketARN": bucket_arn, "configuration": BUCKET_MAINTENANCE.get(bucket_arn, {})}
    return 200, self.default_response_headers, json.dumps(body)


def unreferenced_file_removal(properties: dict[str, Any]) -> dict[str, Any]:
    """A TableBucket's UnreferencedFileRemoval as the maintenance configuration S3 Tables reports."""
    removal = properties.get("UnreferencedFileRemoval") or {}
    return {
        "status": str(removal.get("Status", "Enabled")).lower(),
        "settings": {
            UNREFERENCED: {
                "unreferencedDays": int(removal.get("UnreferencedDays", 3)),
                "nonCurrentDays": int(removal.get("NoncurrentDays", 10)),
            }
        },
    }


class S3TablesTableBucket(_Model):
    def __init__(self, physical_id: str, properties: dict[str, Any], arn: str) -> None:
        super().__init__(physical_id, properties)
        self.arn = arn

    @property
    def physical_resource_id(self) -> str:
        return self.arn  # Ref of AWS::S3Tables::TableBucket is its ARN

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::S3Tables::TableBucket"

    def get_cfn_attribute(self, attribute_name: str) -> Any:
        return self.arn

    @classmethod
    def create_from_cloudformation_json(  # type: ignore[misc]
        cls,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kwargs: Any,
    ) -> S3TablesTableBucket:
        props = cloudformation_json["Properties"]
        backend = _backend(account_id, region_name)
        name = props.get("TableBucketName") or resource_name.lower()
        existing = [b for b in backend.table_buckets.values() if b.name == name]
        bucket = existing[0] if existing else backend.create_table_bucket(name=name)
        BUCKET_MAINTENANCE.setdefault(bucket.arn, {})[UNREFERENCED] = unreferenced_file_removal(props)
        ACCEPTED.setdefault(cls.cloudformation_type(), []).append((name, props))
        return cls(name, props, bucket.arn)

    @classmethod
    def delete_from_cloudformation_json(  # type: ignore[misc]
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str
    ) -> None:
        backend = _backend(account_id, region_name)
        bucket = backend.table_buckets.get(resource_name)
        if bucket is not None and bucket.namespaces:  # S3 Tables deletes an empty table bucket only
            raise ValueError(
                f"table bucket {resource_name} is not empty: namespaces {sorted(bucket.namespaces)}"
            )
        backend.table_buckets.pop(resource_name, None)


class S3TablesNamespace(_Model):
    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::S3Tables::Namespace"

    @classmethod
    def create_from_cloudformation_json(  # type: ignore[misc]
        cls,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kwargs: Any,
    ) -> S3TablesNamespace:
        props = cloudformation_json["Properties"]
        backend = _backend(account_id, region_name)
        arn, namespace = props["TableBucketARN"], props["Namespace"]
        if namespace not in backend.get_table_bucket(arn).namespaces:
            backend.create_namespace(table_bucket_arn=arn, namespace=namespace)
        return cls(f"{arn}|{namespace}", props)

    @classmethod
    def delete_from_cloudformation_json(  # type: ignore[misc]
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str
    ) -> None:
        """As S3 Tables: a namespace that holds a table is not deleted; one already gone is no error."""
        arn, _, namespace = resource_name.partition("|")
        bucket = _backend(account_id, region_name).table_buckets.get(arn)
        if bucket is None or namespace not in bucket.namespaces:
            return
        if bucket.namespaces[namespace].tables:
            raise ValueError(f"namespace {namespace} of {arn} is not empty")
        bucket.namespaces.pop(namespace)


class S3TablesTableBucketPolicy(_Model):
    """Recorded only: moto enforces no resource policy (docs/local_loop.md)."""

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::S3Tables::TableBucketPolicy"

    @classmethod
    def create_from_cloudformation_json(  # type: ignore[misc]
        cls,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kwargs: Any,
    ) -> S3TablesTableBucketPolicy:
        props = cloudformation_json.get("Properties") or {}
        ACCEPTED.setdefault(cls.cloudformation_type(), []).append((resource_name, props))
        return cls(resource_name, props)


MODELS = [S3TablesTableBucket, S3TablesNamespace, S3TablesTableBucketPolicy]


def patch() -> None:
    """Add the maintenance APIs and their routes to moto's s3tables service, and typed errors."""
    from moto.s3tables import urls
    from moto.s3tables.exceptions import NotFoundException
    from moto.s3tables.responses import S3TablesResponse

    S3TablesResponse.put_table_maintenance_configuration = _put_table_maintenance_configuration
    S3TablesResponse.get_table_maintenance_configuration = _get_table_maintenance_configuration
    S3TablesResponse.put_table_bucket_maintenance_configuration = _put_table_bucket_maintenance_configuration
    S3TablesResponse.get_table_bucket_maintenance_configuration = _get_table_bucket_maintenance_configuration
    dispatch = S3TablesResponse.dispatch
    urls.url_paths.setdefault("{0}/tables/(?P<maintained>.+)/maintenance$", dispatch)
    urls.url_paths.setdefault("{0}/tables/(?P<maintained>.+)/maintenance/(?P<type>[^/]+)$", dispatch)
    urls.url_paths.setdefault("{0}/buckets/(?P<maintained>.+)/maintenance/(?P<type>[^/]+)$", dispatch)

    original_init = NotFoundException.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        self.headers = {**(getattr(self, "headers", None) or {}), "x-amzn-errortype": "NotFoundException"}

    NotFoundException.__init__ = init
