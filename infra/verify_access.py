"""What `lakeloader verify` needs of whoever runs it (lakeloader.cli.verify, canary_cleanup), as one
managed policy `<project>-<stage>-verify`, attached to the stage setting `verify_role_arn` when given
(else there for you to attach), and in Lake Formation mode that role's grants on the canary tables.

Per hop: read the stack's outputs; land and remove the canary file (every version) under the canary
prefix of the raw bucket, with the stage's key; read the config and the ledger, and delete the
canary's items; see the ingest job's runs (and the EMR application's); read the canary tables through
the Glue catalog and drop them, with their files under the warehouse; read the arrival Lambda's log
and the Glue jobs' logs; read and delete the canary's message in the dead-letter queue; publish to the
alarm topic; and, with readers that query through Athena, query through their workgroups.

Lake Formation mode: a data lake administrator has no implicit SELECT, and may not drop a table it did
not create ("Implicit Lake Formation permissions"); the job role creates the canary tables. So the
role gets DESCRIBE on the canary database and SELECT, DESCRIBE and DROP on its tables (a table wildcard,
which needs no table yet), and `lakeformation:GetDataAccess` for the reads Lake Formation vends.
"""

from __future__ import annotations

from aws_cdk import Aws, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lakeformation as lakeformation
from aws_cdk import aws_lambda as lambda_
from constructs import Construct, IConstruct

from infra.catalog import Catalog, glue_arns
from infra.config_store import ConfigStore
from infra.lake_formation import grant
from infra.nag import acknowledge_wildcards, arn_ref
from infra.processing import Processing
from infra.readers import Readers
from infra.settings_names import StageNames
from infra.storage import WAREHOUSE_PREFIX, LakeStorage
from lakeloader.config import canary

CANARY_TABLE_PERMISSIONS = ["SELECT", "DESCRIBE", "DROP"]
ARN = "arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>"  # as cdk-nag writes a logs ARN


class VerifyAccess(Construct):
    """The verify policy, attached to `verify_role_arn`, and its Lake Formation grants."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        names: StageNames,
        lake_formation: bool,
        verify_role_arn: str | None,
        storage: LakeStorage,
        store: ConfigStore,
        catalog: Catalog,
        processing: Processing,
        dead_letter_queue_arn: str,
        arrival: lambda_.Function,
        topic_arn: str,
        readers: Readers | None,
    ) -> None:
        super().__init__(scope, construct_id)
        database = f"{catalog.database_prefix}{canary.CANARY_DATABASE}"  # a string: the nag finding names it
        canary_files = f"{WAREHOUSE_PREFIX}{database}"
        statements = self._statements(
            storage, store, processing, database, canary_files, arrival, dead_letter_queue_arn, topic_arn
        )
        if readers is not None and readers.results is not None:  # None: no reader queries through Athena
            statements += self._reader_statements(readers)
        if lake_formation:
            statements.append(
                iam.PolicyStatement(
                    sid="LakeFormationData", actions=["lakeformation:GetDataAccess"], resources=["*"]
                )
            )
        self.policy = iam.ManagedPolicy(
            self,
            "Policy",
            managed_policy_name=names.resource_name("verify"),
            description=f"{names.prefix}: what `lakeloader verify` needs (docs/deploy.md#verify)",
            statements=statements,
            roles=[iam.Role.from_role_arn(self, "Role", verify_role_arn)] if verify_role_arn else None,
        )
        self._acknowledge_wildcards(storage, database, canary_files, arrival, readers)
        if lake_formation and verify_role_arn:
            self._lake_formation_grants(verify_role_arn, database, catalog.databases[canary.CANARY_DATABASE])

    def _statements(
        self,
        storage: LakeStorage,
        store: ConfigStore,
        processing: Processing,
        database: str,
        canary_files: str,
        arrival: lambda_.Function,
        dead_letter_queue_arn: str,
        topic_arn: str,
    ) -> list[iam.PolicyStatement]:
        """The canary's files, ledger entries, runs, tables and logs; the stack, the DLQ and the topic."""
        stack = Stack.of(self)
        raw, curated = storage.raw, storage.curated
        arrival_log_group = f"/aws/lambda/{arrival.function_name}"
        return [
            iam.PolicyStatement(
                sid="ReadStack",
                actions=["cloudformation:DescribeStacks"],
                resources=[
                    stack.format_arn(
                        service="cloudformation", resource="stack", resource_name=f"{stack.stack_name}/*"
                    )
                ],
            ),
            iam.PolicyStatement(
                sid="CanaryFiles",
                actions=["s3:PutObject", "s3:DeleteObject", "s3:DeleteObjectVersion"],
                resources=[raw.arn_for_objects(f"{canary.CANARY_PREFIX}*")],
            ),
            iam.PolicyStatement(
                sid="ListCanaryVersions",
                actions=["s3:ListBucketVersions"],
                resources=[raw.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{canary.CANARY_PREFIX}*"]}},
            ),
            iam.PolicyStatement(
                sid="ReadConfig", actions=["dynamodb:Scan"], resources=[store.config_table.table_arn]
            ),
            iam.PolicyStatement(
                sid="LedgerOfTheCanary",
                actions=["dynamodb:Query", "dynamodb:GetItem", "dynamodb:DeleteItem"],
                resources=[store.ledger_table.table_arn, store.runs_table.table_arn],
                conditions={
                    "ForAllValues:StringEquals": {
                        "dynamodb:LeadingKeys": [canary.canary_id(e) for e in canary.CANARY_ENGINES]
                    }
                },
            ),
            iam.PolicyStatement(
                sid="JobRuns",
                actions=["glue:GetJob", "glue:GetJobRuns"],
                resources=[processing.ingest_job.job_arn],
            ),
            iam.PolicyStatement(
                sid="EmrJobRuns",
                actions=["emr-serverless:ListJobRuns"],
                resources=[
                    stack.format_arn(
                        service="emr-serverless",
                        resource="/applications",
                        resource_name=processing.emr.application.attr_application_id,
                    )
                ],
            ),
            iam.PolicyStatement(
                sid="CanaryTables",
                actions=["glue:GetDatabase", "glue:GetTable", "glue:DeleteTable"],
                resources=glue_arns(self, [database]),
            ),
            iam.PolicyStatement(
                sid="CanaryTableFiles",
                actions=["s3:GetObject", "s3:DeleteObject"],
                resources=[curated.arn_for_objects(f"{canary_files}*")],
            ),
            iam.PolicyStatement(
                sid="ListCanaryTableFiles",
                actions=["s3:ListBucket"],
                resources=[curated.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{canary_files}*"]}},
            ),
            iam.PolicyStatement(
                sid="StageKey",
                actions=["kms:GenerateDataKey", "kms:Decrypt"],
                resources=[storage.key.key_arn],
            ),
            iam.PolicyStatement(
                sid="Logs",
                actions=["logs:FilterLogEvents"],
                resources=[
                    f"arn:{Aws.PARTITION}:logs:{Aws.REGION}:{Aws.ACCOUNT_ID}:log-group:{group}{suffix}"
                    for group in (arrival_log_group, "/aws-glue/jobs/*")
                    for suffix in ("", ":*")
                ],
            ),
            iam.PolicyStatement(
                sid="DeadLetters",
                actions=["sqs:ReceiveMessage", "sqs:DeleteMessage"],
                resources=[dead_letter_queue_arn],
            ),
            iam.PolicyStatement(sid="AlarmTopic", actions=["sns:Publish"], resources=[topic_arn]),
        ]

    def _reader_statements(self, readers: Readers) -> list[iam.PolicyStatement]:
        """verify queries through the readers' workgroups (its Athena checks)."""
        stack = Stack.of(self)
        return [
            iam.PolicyStatement(
                sid="ReadersWorkgroups",
                actions=[
                    "athena:StartQueryExecution",
                    "athena:GetQueryExecution",
                    "athena:GetQueryResults",
                ],
                resources=[
                    stack.format_arn(service="athena", resource="workgroup", resource_name=wg.name)
                    for wg in readers.workgroups.values()
                ],
            ),
            iam.PolicyStatement(
                sid="ReadersResults",
                actions=["s3:GetObject", "s3:PutObject"],
                resources=[readers.results.arn_for_objects("*")],
            ),
            iam.PolicyStatement(
                sid="ReadersResultsBucket",
                actions=["s3:GetBucketLocation", "s3:ListBucket"],
                resources=[readers.results.bucket_arn],
            ),
        ]

    def _acknowledge_wildcards(
        self,
        storage: LakeStorage,
        database: str,
        canary_files: str,
        arrival: lambda_.Function,
        readers: Readers | None,
    ) -> None:
        stack = Stack.of(self)
        raw, curated = storage.raw, storage.curated
        results = readers.results if readers is not None else None
        acknowledge_wildcards(
            self.policy,
            [
                f"Resource::arn:<AWS::Partition>:cloudformation:<AWS::Region>:<AWS::AccountId>:stack/{stack.stack_name}/*",
                *(f"Resource::{ARN}:log-group:/aws-glue/jobs/*{suffix}" for suffix in ("", ":*")),
                f"Resource::{ARN}:log-group:/aws/lambda/<{stack.get_logical_id(arrival.node.default_child)}>:*",
                *([f"Resource::{arn_ref(results)}/*"] if results is not None else []),
                f"Resource::{arn_ref(raw)}/{canary.CANARY_PREFIX}*",
                f"Resource::{arn_ref(curated)}/{canary_files}*",
                f"Resource::arn:<AWS::Partition>:glue:<AWS::Region>:<AWS::AccountId>:table/{database}/*",
                "Resource::*",
            ],
            reason=(
                "verify names its canary files, tables and their Iceberg files at run time, under the "
                "canary prefix and database only; it reads its stack (by id), the arrival Lambda's and "
                "Glue's logs, and the readers' query results of its own Athena queries; Lake Formation's "
                "GetDataAccess has no resource-level permissions."
            ),
        )

    def _lake_formation_grants(self, role_arn: str, database: str, canary_db: IConstruct) -> None:
        """Lake Formation mode: the verify role may describe the canary database and drop its tables."""
        principal = lakeformation.CfnPrincipalPermissions.DataLakePrincipalProperty(
            data_lake_principal_identifier=role_arn
        )
        for grant_id, resource, permissions in (
            (
                "CanaryDatabase",
                {"database": {"catalogId": Aws.ACCOUNT_ID, "name": database}},
                ["DESCRIBE"],
            ),
            (
                "CanaryTables",
                {"table": {"catalogId": Aws.ACCOUNT_ID, "databaseName": database, "tableWildcard": {}}},
                CANARY_TABLE_PERMISSIONS,
            ),
        ):
            grant(self, grant_id, principal, resource, permissions, depends=[canary_db])
