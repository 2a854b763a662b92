"""Empty a dev stage's S3 Tables table bucket when its stack is deleted, so that `cdk destroy` succeeds.

S3 Tables deletes a table bucket only once it holds no namespace, and a namespace only once it holds
no table (DeleteTableBucket, DeleteNamespace, S3 Tables API). The jobs create the tables, so
CloudFormation, which created only the bucket and its namespaces, could delete neither. A custom
resource (infra.s3_tables_teardown, dev stages only: a prod stage keeps its bucket) runs this on its
Delete, before CloudFormation deletes the namespaces and the bucket: every table, then every
namespace (CloudFormation's delete of a namespace already gone succeeds). Create and Update do
nothing. Standard library and boto3 only: the Lambda ships it as plain Python.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

log = logging.getLogger(__name__)

PROPERTY_BUCKET = "TableBucketArn"


def empty_table_bucket(s3tables: Any, bucket_arn: str) -> list[str]:
    """Delete every table, then every namespace, of the table bucket; returns what it deleted."""
    deleted = []
    namespaces = [
        n["namespace"][0]
        for page in s3tables.get_paginator("list_namespaces").paginate(tableBucketARN=bucket_arn)
        for n in page["namespaces"]
    ]
    for namespace in namespaces:
        tables = [
            t["name"]
            for page in s3tables.get_paginator("list_tables").paginate(
                tableBucketARN=bucket_arn, namespace=namespace
            )
            for t in page["tables"]
        ]
        for table in tables:
            s3tables.delete_table(tableBucketARN=bucket_arn, namespace=namespace, name=table)
            deleted.append(f"table {namespace}.{table}")
        s3tables.delete_namespace(tableBucketARN=bucket_arn, namespace=namespace)
        deleted.append(f"namespace {namespace}")
    log.info("emptied %s: %s", bucket_arn, ", ".join(deleted) or "nothing to delete")
    return deleted


def handle(event: Mapping[str, Any], *, s3tables: Any) -> dict[str, Any]:
    """One CloudFormation request: Delete empties the bucket; Create and Update do nothing."""
    if event.get("RequestType") != "Delete":
        return {"deleted": []}
    bucket_arn = (event.get("ResourceProperties") or {})[PROPERTY_BUCKET]
    return {"deleted": empty_table_bucket(s3tables, bucket_arn)}
