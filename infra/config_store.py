"""Config store: the DynamoDB tables (config, object ledger, run history) and the config sync.

`config/tables.yaml` is validated at synth (by the stack) and its tables become the config
table's items on deploy. The items travel as a file asset (JSON, uploaded with the stack's other
assets), not in the template: a property holding them grew about 1.5 KiB a table, past
CloudFormation's 1 MB template at about 600 tables (docs/scale.md). The custom resource names the
asset's S3 object, whose key is its content hash, so every config change still changes the template
and CloudFormation sends an Update; the sync Lambda reads the object, puts every item in batches of
25 (BatchWriteItem) and deletes items whose table left the config.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from aws_cdk import CustomResource, Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from infra.functions import PythonFunction, lambda_source
from infra.network import StageNetwork
from infra.packaging import publish
from infra.settings_names import Retention, StageNames
from infra.storage import removal_policy
from lakeloader.config import LakeConfig
from lakeloader.config.items import config_items
from lakeloader.control import contract
from lakeloader.control.config_store import ITEMS_FILE, items_json

RUNS_TTL_ATTRIBUTE = "expires_at"
# What the S3-arrival Lambda and the jobs do with the tables: read the config; record, claim and
# finish objects in the ledger and runs (and locks) in the run history.
CONFIG_READ_ACTIONS = ["dynamodb:GetItem", "dynamodb:Query", "dynamodb:Scan"]
LEDGER_WRITE_ACTIONS = [
    "dynamodb:GetItem",
    "dynamodb:Query",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:ConditionCheckItem",
]


class ConfigStore(Construct):
    """Config, ledger and run-history tables (on demand, PITR, KMS) and the config sync."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        names: StageNames,
        retention: Retention,
        lake: LakeConfig,
        key: kms.IKey,
        network: StageNetwork | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.names, self.retention, self.key = names, retention, key
        self.config_table = self._table("ConfigTable", "config", None)
        self.ledger_table = self._table("LedgerTable", "ledger", "object_id")
        self.runs_table = self._table("RunsTable", "runs", "run_id", ttl=RUNS_TTL_ATTRIBUTE)

        self.items = config_items(lake)
        self.items_asset = s3_assets.Asset(
            self, "Items", path=str(items_file(names.resource_name("config-items"), items_json(self.items)))
        )
        self.sync_function = PythonFunction(
            self,
            "SyncFunction",
            names=names,
            retention=retention,
            name="config-sync",
            description="Writes config/tables.yaml into the config table (CloudFormation custom resource)",
            source_dir=lambda_source("config_sync"),
            key=key,
            environment={contract.ENV_LOG_LEVEL: "INFO"},
            timeout=Duration.minutes(5),
            network=network,
        )
        self._grant_sync()
        self.sync = self._sync()

    def _table(
        self, construct_id: str, name: str, sort_key: str | None, ttl: str | None = None
    ) -> dynamodb.Table:
        return dynamodb.Table(
            self,
            construct_id,
            table_name=self.names.resource_name(name),
            partition_key=dynamodb.Attribute(name="table_id", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name=sort_key, type=dynamodb.AttributeType.STRING)
            if sort_key
            else None,
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=dynamodb.TableEncryption.CUSTOMER_MANAGED,
            encryption_key=self.key,
            time_to_live_attribute=ttl,
            deletion_protection=self.retention.retain,
            removal_policy=removal_policy(self.retention),
        )

    def _grant_sync(self) -> None:
        """The sync function writes the config table with the stage's key, from this deploy's items."""
        self.config_table.grant(
            self.sync_function.role,
            "dynamodb:Scan",
            "dynamodb:BatchWriteItem",
            "dynamodb:PutItem",
            "dynamodb:DeleteItem",
        )
        self.key.grant(
            self.sync_function.role, "kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey"
        )
        self.sync_function.role.add_to_policy(
            iam.PolicyStatement(
                sid="ReadConfigItems",  # this deploy's items only: the asset's key is its content hash
                actions=["s3:GetObject"],
                resources=[self.items_asset.bucket.arn_for_objects(self.items_asset.s3_object_key)],
            )
        )

    def _sync(self) -> CustomResource:
        sync = CustomResource(
            self,
            "Sync",
            service_token=self.sync_function.function.function_arn,
            resource_type="Custom::LakeloaderConfigSync",
            properties={
                "TableName": self.config_table.table_name,
                "ItemsBucket": self.items_asset.s3_bucket_name,
                "ItemsKey": self.items_asset.s3_object_key,
                # dev may drop its items with the stack; prod never deletes on Delete.
                "PruneOnDelete": "false" if self.retention.retain else "true",
            },
            service_timeout=Duration.minutes(10),
        )
        sync.node.add_dependency(self.sync_function.role)
        return sync

    def grant_config_read(self, role: iam.IRole, *, describe: bool = False) -> None:
        """Let `role` read the config table's items; `describe`: and describe the table (the job roles)."""
        describe_actions = ["dynamodb:DescribeTable"] if describe else []
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ReadConfigTable",
                actions=[*CONFIG_READ_ACTIONS, *describe_actions],
                resources=[self.config_table.table_arn],
            )
        )

    def grant_found_tables_write(self, role: iam.IRole) -> None:
        """Let the S3-arrival Lambda record the tables a `sources:` entry finds (one conditional PutItem
        per new or released table: lakeloader.control.trigger.found)."""
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="RecordFoundTables",
                actions=["dynamodb:PutItem"],
                resources=[self.config_table.table_arn],
            )
        )

    def grant_ledger_write(self, role: iam.IRole, *, batches: bool = False) -> None:
        """Let `role` record, claim and finish objects and runs; `batches`: also write in batches and
        describe the tables (the job roles' statement, named WriteLedgerAndRuns where the Lambda's is
        LedgerAndRuns: the Sids deployed stacks carry)."""
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="WriteLedgerAndRuns" if batches else "LedgerAndRuns",
                actions=LEDGER_WRITE_ACTIONS
                + (["dynamodb:BatchWriteItem", "dynamodb:DescribeTable"] if batches else []),
                resources=[self.ledger_table.table_arn, self.runs_table.table_arn],
            )
        )


def items_file(name: str, text: str) -> Path:
    """The items' JSON as a file of its own (`build/cdk-assets/<name>-<hash>/`), for the file asset."""
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return publish(name, digest, lambda out: (out / ITEMS_FILE).write_text(text)) / ITEMS_FILE
