"""A deployed stage, found from its CloudFormation stack's outputs: what the operator verbs
(`lakeloader status|requeue|skip|backfill`) and the e2e drivers act on. boto3 only, no Spark.

The stack of stage NAME is `<project>-<NAME>` (infra.settings.Stage.prefix); AWS_ENDPOINT_URL
points boto3 at an emulator instead of an account.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import boto3

from lakeloader.control.contract import DEFAULT_PROJECT
from lakeloader.control.ledger import Ledger

if TYPE_CHECKING:
    from lakeloader.config import TableConfig
    from lakeloader.control.discovery import FoundTable


class StageNotFoundError(LookupError):
    """No deployed stack of that name (or it lacks lakeloader's outputs)."""


def stack_name(stage: str, project: str = DEFAULT_PROJECT) -> str:
    return f"{project}-{stage}"


@dataclass(frozen=True)
class DeployedStage:
    """The outputs the operator verbs and drivers need (from ``describe_stacks`` or a deployment)."""

    raw_bucket: str
    warehouse: str
    config_table: str
    ledger_table: str
    runs_table: str
    ingest_job: str
    arrival_function: str
    emr_application: str = ""
    database_prefix: str = ""  # the stage's Glue database prefix (infra.catalog)

    @classmethod
    def from_outputs(cls, outputs: dict[str, str]) -> DeployedStage:
        return cls(
            raw_bucket=outputs["RawBucketName"],
            warehouse=outputs["Warehouse"],
            config_table=outputs["ConfigTableName"],
            ledger_table=outputs["LedgerTableName"],
            runs_table=outputs["RunsTableName"],
            ingest_job=outputs["IngestJobName"],
            arrival_function=outputs["ArrivalFunctionName"],
            emr_application=outputs.get("EmrApplicationId", ""),
            database_prefix=outputs.get("GlueDatabasePrefix", ""),
        )

    @classmethod
    def from_stack(cls, name: str) -> DeployedStage:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            stacks = boto3.client("cloudformation").describe_stacks(StackName=name)["Stacks"]
        except ClientError as exc:
            raise StageNotFoundError(f"stack {name!r}: {exc.response['Error'].get('Message', exc)}") from None
        except BotoCoreError as exc:  # no region, no credentials, no endpoint: say so in one line
            raise StageNotFoundError(f"stack {name!r}: AWS: {exc}") from None
        outputs = {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}
        try:
            return cls.from_outputs(outputs)
        except KeyError as exc:
            raise StageNotFoundError(
                f"stack {name!r} has no output {exc.args[0]}: is it a lakeloader stage?"
            ) from None

    def glue_database(self, database: str) -> str:
        """The Glue database the stack made for a config database (`crm` -> `lakeloader_dev_crm`)."""
        return f"{self.database_prefix}{database}"

    def ledger(self) -> Ledger:
        return Ledger(boto3.client("dynamodb"), self.ledger_table, self.runs_table)

    def held_tables(self) -> list[FoundTable]:
        """Tables a source found that wait for their key columns (lakeloader.control.trigger.found)."""
        from lakeloader.control.config_store import FOUND_BY, HELD, scan_items
        from lakeloader.control.discovery import FoundTable

        attributes = ("table_id", "prefix", FOUND_BY, HELD, "held_needs_keys")
        items = scan_items(self.config_table, client=boto3.client("dynamodb"), attributes=attributes)
        return [FoundTable.from_item(item) for item in items if item.get(HELD)]

    def tables(self) -> list[TableConfig]:
        """The table config as deployed (the config table), not as the local file may say."""
        from lakeloader.config.items import load_tables_from_dynamodb

        return load_tables_from_dynamodb(self.config_table, client=boto3.client("dynamodb"))
