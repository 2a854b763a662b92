"""A deployed stage for the operator verbs' tests: its raw bucket, config, ledger and run tables on the
session's moto server (HTTP), and a CloudFormation stack whose outputs name them, so `lakeloader
status|requeue|skip|backfill --stage NAME` find the stage as they do on AWS (DeployedStage.from_stack).

Test modules take the ``stage`` fixture with ``stage = stage_world.stage`` (and the moto fixtures the
same way), as pytest finds fixtures by module attribute."""

from __future__ import annotations

import contextlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import boto3
import pytest

sys.path.append(str(Path(__file__).resolve().parents[1]))  # tests/ -> aws_fixtures
import aws_fixtures  # noqa: E402
from aws_fixtures import create_dynamodb_table, unique_name  # noqa: E402

from lakeloader import cli  # noqa: E402
from lakeloader.cli.stage import DeployedStage  # noqa: E402
from lakeloader.config import LakeConfig, canary, parse_config  # noqa: E402
from lakeloader.config.items import config_items  # noqa: E402
from lakeloader.control.dynamodb import encode_item  # noqa: E402
from lakeloader.control.ledger import Ledger, ObjectRef  # noqa: E402

moto_server = aws_fixtures.moto_server
aws_endpoint = aws_fixtures.aws_endpoint

TABLES = [
    {"id": "crm.customers", "source": {"prefix": "crm/customers/"}, "target": {"database": "crm"}},
    {"id": "crm.vip", "source": {"prefix": "crm/customers/vip/"}, "target": {"database": "crm"}},
    {"id": "sales.orders", "source": {"prefix": "sales/orders/"}, "target": {"database": "sales"}},
    {"id": "old.archive", "enabled": False, "source": {"prefix": "old/"}, "target": {"database": "old"}},
]


@dataclass
class Stage:
    """One deployed stage: its name for `--stage`, what its outputs name, and a ledger on its tables."""

    name: str
    deployed: DeployedStage
    ledger: Ledger

    def cli(self, capsys, verb: str, *args: str) -> tuple[int, str]:
        """`lakeloader VERB --stage NAME ARGS...` as a user types it: the exit code and stdout."""
        capsys.readouterr()
        code = cli.main([verb, "--stage", self.name, *args])
        return code, capsys.readouterr().out

    def record(self, table_id: str, key: str, **ref: object) -> ObjectRef:
        """An object the trigger recorded (pending), as its S3 event described it."""
        obj = ObjectRef(self.deployed.raw_bucket, key, **{"etag": key, **ref})
        assert self.ledger.record_object(table_id, obj, correlation_id="event-1")
        return obj


def config_table(dynamodb, config: LakeConfig) -> str:
    """A config table holding `config`'s tables, as the stage's config sync writes them."""
    table = create_dynamodb_table(dynamodb, unique_name("config"), "table_id")
    for item in config_items(config):
        dynamodb.put_item(TableName=table, Item=encode_item(item))
    return table


def publish(deployed: DeployedStage) -> str:
    """The CloudFormation stack a stage is found by (DeployedStage.from_stack), its outputs naming what
    `deployed` holds; returns the stage's name for `--stage`."""
    outputs = {
        "RawBucketName": deployed.raw_bucket,
        "Warehouse": deployed.warehouse,
        "ConfigTableName": deployed.config_table,
        "LedgerTableName": deployed.ledger_table,
        "RunsTableName": deployed.runs_table,
        "IngestJobName": deployed.ingest_job,
        "ArrivalFunctionName": deployed.arrival_function,
        **({"GlueDatabasePrefix": deployed.database_prefix} if deployed.database_prefix else {}),
    }
    name = unique_name("stage")
    template = {
        "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {key: {"Value": value} for key, value in outputs.items()},
    }
    boto3.client("cloudformation").create_stack(
        StackName=f"lakeloader-{name}", TemplateBody=json.dumps(template)
    )
    return name


@pytest.fixture
def stage(aws_endpoint: str) -> Stage:
    dynamodb, s3 = boto3.client("dynamodb"), boto3.client("s3")
    raw = unique_name("raw")
    s3.create_bucket(Bucket=raw)
    s3.put_bucket_versioning(Bucket=raw, VersioningConfiguration={"Status": "Enabled"})
    tables = [
        {**t, "target": {**t["target"], "table": t["id"].split(".")[1]}, "keys": ["id"]} for t in TABLES
    ]
    deployed = DeployedStage(
        raw_bucket=raw,
        warehouse="s3://curated/warehouse/",
        config_table=config_table(dynamodb, parse_config({"tables": tables})),
        ledger_table=create_dynamodb_table(dynamodb, unique_name("ledger"), "table_id", "object_id"),
        runs_table=create_dynamodb_table(
            dynamodb, unique_name("runs"), "table_id", "run_id", ttl_attribute="expires_at"
        ),
        ingest_job="lakeloader-ingest",
        arrival_function="lakeloader-s3-arrival",
    )
    return Stage(publish(deployed), deployed, deployed.ledger())


def with_canary_tables(stage: Stage, *tables: dict) -> Stage:
    """The canary tables (after the user's `tables`) in the stage's config table, as the stack's config
    sync writes them."""
    dynamodb = boto3.client("dynamodb")
    for item in config_items(canary.with_canaries(parse_config({"tables": list(tables)}))):
        dynamodb.put_item(TableName=stage.deployed.config_table, Item=encode_item(item))
    return stage


def queue_athena_results(endpoint: str, *counts: str | None) -> None:
    """What moto's Athena answers the next queries (it executes no SQL): a header row, then the count
    (None: the header alone)."""
    header = {"Data": [{"VarCharValue": "_col0"}]}
    results = [
        {"rows": [header] + ([{"Data": [{"VarCharValue": c}]}] if c is not None else [])} for c in counts
    ]
    aws_fixtures.moto_api(endpoint, "static/athena/query-results", {"results": results})


def put_log(group: str, lines: list[str], at_ms: int, stream: str | None = None) -> None:
    """`lines` in a new stream of `group` (both made if need be; the stream named `stream` or a fresh
    name), logged from `at_ms` on, a millisecond apart."""
    logs = boto3.client("logs")
    with contextlib.suppress(logs.exceptions.ResourceAlreadyExistsException):
        logs.create_log_group(logGroupName=group)
    stream = stream or unique_name("stream")
    logs.create_log_stream(logGroupName=group, logStreamName=stream)
    events = [{"timestamp": at_ms + n, "message": line} for n, line in enumerate(lines)]
    logs.put_log_events(logGroupName=group, logStreamName=stream, logEvents=events)
