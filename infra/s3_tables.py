"""The stage's Amazon S3 Tables table bucket, for the tables with `target.storage: s3_tables` (issue 42).

One table bucket per stage (`<project>-<stage>-tables`; table bucket names are unique per account
and region, not globally), encrypted with the stage's key (SSE-KMS, "Specifying server-side
encryption with AWS KMS keys for table buckets"), its unreferenced file removal set from the stage's
`s3_tables` settings, one namespace per config database of such tables, and a table bucket policy
naming who may write its tables: the stage's job roles.

The jobs create the tables themselves (their schema comes from the first file), so CloudFormation
holds no `AWS::S3Tables::Table`: a table's own maintenance (compaction, snapshot management) is set
through the S3 Tables API when the job creates the table and whenever `maintain` runs
(lakeloader.engine.s3_tables). Unreferenced file removal is a bucket setting in S3 Tables.
"""

from __future__ import annotations

from aws_cdk import Aws
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3tables as s3tables
from constructs import Construct

from infra.settings_names import Retention, StageNames
from infra.settings_s3_tables import S3TablesSettings
from infra.storage import LakeStorage, removal_policy
from lakeloader.config import LakeConfig

# S3 Tables' maintenance (compaction, snapshot management, unreferenced file removal) reads and
# writes a table's files as this service principal; with SSE-KMS the key must let it ("Permission
# requirements for S3 Tables SSE-KMS encryption", S3 User Guide).
MAINTENANCE_PRINCIPAL = "maintenance.s3tables.amazonaws.com"

# What the jobs call on S3 Tables through its Iceberg REST endpoint (contract.s3_tables_catalog_conf),
# which translates each Iceberg REST operation into these S3 Tables operations, and for a table's own
# maintenance; and the data actions S3FileIO reads and writes the table's files with, under the job
# role's own credentials ("Access management for S3 Tables": s3tables:GetTableData / PutTableData
# authorize the S3 object calls on a table's storage).
# CloudFormation owns the bucket and its namespaces, so no job creates or changes either.
JOB_TABLE_BUCKET_ACTIONS = [
    "s3tables:GetTableBucket",
    "s3tables:GetNamespace",
    "s3tables:ListNamespaces",
    "s3tables:ListTables",
]
JOB_TABLE_ACTIONS = [
    "s3tables:CreateTable",
    "s3tables:GetTable",
    "s3tables:GetTableMetadataLocation",
    "s3tables:UpdateTableMetadataLocation",
    "s3tables:DeleteTable",
    "s3tables:RenameTable",
    "s3tables:GetTableData",
    "s3tables:PutTableData",
    "s3tables:GetTableMaintenanceConfiguration",
    "s3tables:PutTableMaintenanceConfiguration",
]


def s3_tables_namespaces(lake: LakeConfig) -> list[str]:
    """The namespaces the stage's table bucket holds: the config databases of s3_tables tables."""
    return sorted({t.target.database for t in lake.tables if t.target.storage == "s3_tables"})


class TableBucket(Construct):
    """The table bucket, its namespaces and its policy (only built when a table uses S3 Tables)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        names: StageNames,
        retention: Retention,
        settings: S3TablesSettings,
        lake: LakeConfig,
        storage: LakeStorage,
    ) -> None:
        super().__init__(scope, construct_id)
        key = storage.key
        self.name = names.resource_name("tables")
        self.bucket = s3tables.CfnTableBucket(
            self,
            "TableBucket",
            table_bucket_name=self.name,
            encryption_configuration=s3tables.CfnTableBucket.EncryptionConfigurationProperty(
                sse_algorithm="aws:kms", kms_key_arn=key.key_arn
            ),
            unreferenced_file_removal=s3tables.CfnTableBucket.UnreferencedFileRemovalProperty(
                status="Enabled",
                unreferenced_days=settings.unreferenced_days,
                noncurrent_days=settings.noncurrent_days,
            ),
        )
        self.bucket.apply_removal_policy(removal_policy(retention))
        self.arn = self.bucket.attr_table_bucket_arn
        self.namespaces = {
            namespace: s3tables.CfnNamespace(
                self, f"Namespace-{namespace}", namespace=namespace, table_bucket_arn=self.arn
            )
            for namespace in s3_tables_namespaces(lake)
        }
        self._writers: list[iam.IRole] = []
        bucket_arn = f"arn:{Aws.PARTITION}:s3tables:{Aws.REGION}:{Aws.ACCOUNT_ID}:bucket/{self.name}"
        storage.allow_on_key(
            iam.PolicyStatement(
                sid="AllowS3TablesMaintenance",
                principals=[iam.ServicePrincipal(MAINTENANCE_PRINCIPAL)],
                actions=["kms:GenerateDataKey", "kms:Decrypt"],
                resources=["*"],
                conditions={"StringLike": {"kms:EncryptionContext:aws:s3:arn": f"{bucket_arn}/*"}},
            )
        )

    @property
    def tables_arn(self) -> str:
        """Every table of the bucket: `<bucket ARN>/table/*`."""
        return f"{self.arn}/table/*"

    def grant_jobs(self, role: iam.Role) -> None:
        """What a job role may do in the table bucket; nothing in any other table bucket."""
        role.add_to_policy(
            iam.PolicyStatement(sid="S3TablesBucket", actions=JOB_TABLE_BUCKET_ACTIONS, resources=[self.arn])
        )
        role.add_to_policy(
            iam.PolicyStatement(sid="S3TablesTables", actions=JOB_TABLE_ACTIONS, resources=[self.tables_arn])
        )
        self._writers.append(role)

    def add_policy(self) -> s3tables.CfnTableBucketPolicy:
        """The table bucket policy: the job roles given to grant_jobs, by name, on the bucket's tables.

        Allow only: a Deny for everyone else would also stop the operators `lakeloader erase` runs as
        (infra.erasure) and whoever repairs a table by hand; their identity policies decide for them."""
        writers = [iam.ArnPrincipal(role.role_arn) for role in self._writers]
        document = iam.PolicyDocument(
            statements=[
                iam.PolicyStatement(
                    sid="JobsReadBucket",
                    principals=writers,
                    actions=JOB_TABLE_BUCKET_ACTIONS,
                    resources=[self.arn],
                ),
                iam.PolicyStatement(
                    sid="JobsWriteTables",
                    principals=writers,
                    actions=JOB_TABLE_ACTIONS,
                    resources=[self.tables_arn],
                ),
            ]
        )
        return s3tables.CfnTableBucketPolicy(
            self, "Policy", table_bucket_arn=self.arn, resource_policy=document.to_json()
        )
