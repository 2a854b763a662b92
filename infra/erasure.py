"""Erasure: the managed policy an operator needs to run `lakeloader erase` against this stage.

`lakeloader erase` (lakeloader/jobs/erase.py) runs on an operator's machine, as whoever attaches
this policy, and calls exactly:

* the Glue catalog through Iceberg's GlueCatalog: GetDatabase, GetTable, UpdateTable on the
  stage's databases and their tables (load, DELETE, rewrite, expire: each a commit), and on
  the audit database `lakeloader_audit` also CreateDatabase/CreateTable (CREATE ... IF NOT
  EXISTS of the audit table on first use);
* the warehouse prefix of the curated bucket through S3FileIO: GetObject, PutObject,
  DeleteObject, AbortMultipartUpload, and ListBucket for the orphan-file listing;
* the purge of old object versions (the bucket is versioned): ListBucketVersions and
  DeleteObjectVersion, prefix-scoped like the rest;
* the stage's KMS key, which encrypts the curated bucket (and the table bucket);
* with a `target.storage: s3_tables` table, the stage's table bucket through the S3 Tables catalog for
  Iceberg (the operator's session names it: LAKELOADER_S3_TABLES_WAREHOUSE = the stack's
  TableBucketArn output): GetTableMetadataLocation (load, refresh, the commit's version check) and
  UpdateTableMetadataLocation (the commits) on the bucket's tables, GetTableData / PutTableData for
  the files S3FileIO and erase's verification read and write in a table's storage (they authorize
  GetObject, HeadObject and PutObject and the multipart calls there), and on the bucket
  GetTableBucketMaintenanceConfiguration for the unreferenced file removal windows the audit record
  states. Nothing that creates, renames or deletes a table, namespace or bucket, or changes a
  maintenance setting: erase does none of these, and S3 Tables itself deletes the files it unreferences.
"""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.catalog import Catalog, glue_arns
from infra.nag import acknowledge_wildcards, arn_ref
from infra.s3_tables import TableBucket
from infra.settings_names import StageNames
from infra.storage import WAREHOUSE_PREFIX, LakeStorage
from lakeloader.control.contract import AUDIT_DATABASE

TABLE_ACTIONS = ["glue:GetDatabase", "glue:GetTable", "glue:UpdateTable"]
AUDIT_ACTIONS = [*TABLE_ACTIONS, "glue:CreateDatabase", "glue:CreateTable"]
WAREHOUSE_OBJECT_ACTIONS = [
    "s3:GetObject",
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:AbortMultipartUpload",
    "s3:DeleteObjectVersion",
]
WAREHOUSE_LIST_ACTIONS = ["s3:ListBucket", "s3:ListBucketVersions"]
# target.storage: s3_tables ("Actions, resources, and condition keys for Amazon S3 Tables",
# https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3tables.html)
S3_TABLES_BUCKET_ACTIONS = ["s3tables:GetTableBucketMaintenanceConfiguration"]
S3_TABLES_TABLE_ACTIONS = [
    "s3tables:GetTableMetadataLocation",
    "s3tables:UpdateTableMetadataLocation",
    "s3tables:GetTableData",
    "s3tables:PutTableData",
]


class ErasurePolicy(Construct):
    """`<project>-<stage>-erase`: attach it to the role or group of the people who run erasures."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        names: StageNames,
        storage: LakeStorage,
        catalog: Catalog,
        table_bucket: TableBucket | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.policy = iam.ManagedPolicy(
            self,
            "Policy",
            managed_policy_name=names.resource_name("erase"),
            description=f"{names.prefix}: what `lakeloader erase` calls (GDPR erasure, old object versions)",
            statements=self._statements(storage, catalog, table_bucket),
        )
        self._acknowledge_wildcards(storage, catalog, table_bucket)

    def _statements(
        self, storage: LakeStorage, catalog: Catalog, table_bucket: TableBucket | None
    ) -> list[iam.PolicyStatement]:
        stack = Stack.of(self)
        audit = [
            stack.format_arn(service="glue", resource="database", resource_name=AUDIT_DATABASE),
            stack.format_arn(service="glue", resource="table", resource_name=f"{AUDIT_DATABASE}/*"),
        ]
        s3_tables = []  # the stage's table bucket, when a table is in S3 Tables
        if table_bucket is not None:
            s3_tables = [
                iam.PolicyStatement(
                    sid="ErasureTableBucket", actions=S3_TABLES_BUCKET_ACTIONS, resources=[table_bucket.arn]
                ),
                iam.PolicyStatement(
                    sid="ErasureS3Tables",
                    actions=S3_TABLES_TABLE_ACTIONS,
                    resources=[table_bucket.tables_arn],
                ),
            ]
        return [
            iam.PolicyStatement(
                sid="ErasureTables",
                actions=TABLE_ACTIONS,
                resources=glue_arns(self, [*catalog.database_names, *catalog.found_databases]),
            ),
            iam.PolicyStatement(sid="ErasureAudit", actions=AUDIT_ACTIONS, resources=audit),
            iam.PolicyStatement(
                sid="ErasureWarehouseObjects",
                actions=WAREHOUSE_OBJECT_ACTIONS,
                resources=[storage.curated.arn_for_objects(f"{WAREHOUSE_PREFIX}*")],
            ),
            iam.PolicyStatement(
                sid="ErasureWarehouseList",
                actions=WAREHOUSE_LIST_ACTIONS,
                resources=[storage.curated.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [WAREHOUSE_PREFIX, f"{WAREHOUSE_PREFIX}*"]}},
            ),
            iam.PolicyStatement(
                sid="ErasureKey",
                actions=["kms:Decrypt", "kms:GenerateDataKey"],
                resources=[storage.key.key_arn],
            ),
            *s3_tables,
        ]

    def _acknowledge_wildcards(
        self, storage: LakeStorage, catalog: Catalog, table_bucket: TableBucket | None
    ) -> None:
        acknowledge_wildcards(
            self.policy,
            [f"Resource::{arn_ref(storage.curated)}/{WAREHOUSE_PREFIX}*"]
            + [
                f"Resource::arn:<AWS::Partition>:glue:<AWS::Region>:<AWS::AccountId>:table/{database}/*"
                for database in [*catalog.database_names, *catalog.found_databases, AUDIT_DATABASE]
            ]
            + [
                f"Resource::arn:<AWS::Partition>:glue:<AWS::Region>:<AWS::AccountId>:database/{database}"
                for database in catalog.found_databases
            ],
            reason=(
                "Erasure rewrites and deletes Iceberg files it cannot name in advance (data, delete and "
                "metadata files, old object versions) under the warehouse prefix only, and commits to the "
                "tables of the stage's own databases (declared, and those its sources' tables land in, "
                "under the stage's prefix) and its audit database only."
            ),
        )
        if table_bucket is not None:
            acknowledge_wildcards(
                self.policy,
                [f"Resource::{arn_ref(table_bucket.bucket, 'TableBucketARN')}/table/*"],
                reason=(
                    "Erasure reads, writes and commits to the S3 Tables tables it erases from and their "
                    "tombstones, whose table ids S3 Tables assigns: the stage's own table bucket only."
                ),
            )
