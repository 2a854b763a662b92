"""The trigger tests' world: realistic S3/SQS/SNS/EventBridge events, the S3-arrival Lambda handler loaded
from lambda/s3_arrival, and DynamoDB tables plus a Glue job on a real moto server (HTTP).

Test modules take the ``world`` fixture with ``world = trigger_world.world`` (and the moto fixtures the
same way), as pytest finds fixtures by module attribute."""

from __future__ import annotations

import importlib.util
import json
import logging
import sys
import uuid
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import quote_plus

import boto3
import pytest

sys.path.append(str(Path(__file__).resolve().parents[1]))  # tests/ -> aws_fixtures
import aws_fixtures  # noqa: E402
from aws_fixtures import create_dynamodb_table, unique_name  # noqa: E402

from lakeloader.control import trigger as trigger_module  # noqa: E402
from lakeloader.control.ledger import Ledger  # noqa: E402
from lakeloader.control.trigger.events import ObjectEvent, ObjectsArrived  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RAW = "lakeloader-raw-123456789012"

# pytest fixtures from tests/aws_fixtures.py (one moto server per session), for test modules to alias
moto_server = aws_fixtures.moto_server
aws_endpoint = aws_fixtures.aws_endpoint


def load_handler():
    spec = importlib.util.spec_from_file_location(
        "s3_arrival_handler", ROOT / "lambda" / "s3_arrival" / "handler.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.handler


HANDLER = load_handler()


# -- realistic events -----------------------------------------------------------


def s3_record(
    key: str,
    *,
    bucket: str = RAW,
    etag: str = "d41d8cd98f00b204e9800998ecf8427e",
    size: int = 1024,
    event_name: str = "ObjectCreated:Put",
    version_id: str | None = None,
) -> dict:
    """One record shaped like AWS's documented S3 notification (key URL-encoded as S3 does)."""
    obj = {"key": quote_plus(key), "size": size, "eTag": etag, "sequencer": "0055AED6DCD90281E5"}
    if version_id:
        obj["versionId"] = version_id
    return {
        "eventVersion": "2.1",
        "eventSource": "aws:s3",
        "awsRegion": "us-east-1",
        "eventTime": "2024-05-01T12:00:00.000Z",
        "eventName": event_name,
        "userIdentity": {"principalId": "AWS:AIDAJDPLRKLG7UEXAMPLE"},
        "requestParameters": {"sourceIPAddress": "203.0.113.10"},
        "responseElements": {
            "x-amz-request-id": "C3D13FE58DE4C810",
            "x-amz-id-2": "FMyUVURIY8/IgAtTv8xRjskZQpcIZ9KG4V5Wp6S7S/JRWeUWerMUE5JgHvANOjpD",
        },
        "s3": {
            "s3SchemaVersion": "1.0",
            "configurationId": "lakeloader-raw-arrival",
            "bucket": {
                "name": bucket,
                "ownerIdentity": {"principalId": "A3NL1KOZZKExample"},
                "arn": f"arn:aws:s3:::{bucket}",
            },
            "object": obj,
        },
    }


def s3_event(*records: dict) -> dict:
    return {"Records": list(records)}


def eventbridge_event(key: str, *, bucket: str = RAW, etag: str = "b1946ac92492d2347c6235b4d2611184") -> dict:
    return {
        "version": "0",
        "id": "17793124-05d4-b198-2fde-7ededc63b103",
        "detail-type": "Object Created",
        "source": "aws.s3",
        "account": "123456789012",
        "time": "2024-05-01T12:00:00Z",
        "region": "us-east-1",
        "resources": [f"arn:aws:s3:::{bucket}"],
        "detail": {
            "version": "0",
            "bucket": {"name": bucket},
            "object": {"key": quote_plus(key), "size": 5, "etag": etag, "sequencer": "00617F08299329D189"},
            "request-id": "N4N7GDK58NMKJ12R",
            "requester": "123456789012",
            "source-ip-address": "1.2.3.4",
            "reason": "PutObject",
        },
    }


def sqs_event(*bodies: dict) -> dict:
    return {
        "Records": [
            {
                "messageId": str(uuid.uuid4()),
                "receiptHandle": "AQEBwJnKyrHigUMZj6rYigCgxlaS3SLy0a...",
                "body": json.dumps(body),
                "attributes": {"ApproximateReceiveCount": "1"},
                "messageAttributes": {},
                "md5OfBody": "e4e68fb7bd0e697a0ae8f1bb342846b3",
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:lakeloader-arrivals",
                "awsRegion": "us-east-1",
            }
            for body in bodies
        ]
    }


def context(request_id: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(
        aws_request_id=request_id or str(uuid.uuid4()), function_name="lakeloader-s3-arrival"
    )


def objects_and_problems(event: object, **options: bool) -> tuple[list[ObjectEvent], list[str]]:
    """The objects an event names and the records that could not be read (an `ObjectsArrived`'s)."""
    arrived = ObjectsArrived.read(event, correlation_id="test", **options)
    return list(arrived.objects), list(arrived.problems)


# -- the world: tables, jobs, env ---------------------------------------------------


class World:
    def __init__(self, endpoint: str) -> None:
        kwargs = {"endpoint_url": endpoint, "region_name": "us-east-1"}
        self.endpoint = endpoint
        self.dynamodb = boto3.client("dynamodb", **kwargs)
        self.glue = boto3.client("glue", **kwargs)
        self.emr = boto3.client("emr-serverless", **kwargs)
        self.config_table = create_dynamodb_table(self.dynamodb, unique_name("config"), "table_id")
        self.ledger_table = create_dynamodb_table(
            self.dynamodb, unique_name("ledger"), "table_id", "object_id"
        )
        self.runs_table = create_dynamodb_table(
            self.dynamodb, unique_name("runs"), "table_id", "run_id", ttl_attribute="expires_at"
        )
        self.glue_job = self.create_glue_job(max_concurrent_runs=10)
        self.ledger = Ledger(self.dynamodb, self.ledger_table, self.runs_table)

    def create_glue_job(self, max_concurrent_runs: int) -> str:
        name = unique_name("lakeloader-ingest")
        self.glue.create_job(
            Name=name,
            Role="arn:aws:iam::123456789012:role/lakeloader-glue",
            Command={
                "Name": "glueetl",
                "ScriptLocation": "s3://assets/glue_jobs/ingest.py",
                "PythonVersion": "3",
            },
            GlueVersion="5.0",
            ExecutionProperty={"MaxConcurrentRuns": max_concurrent_runs},
        )
        return name

    def add_table(self, table_id: str, prefix: str, *, enabled: bool = True, engine: str = "glue") -> None:
        config = {"id": table_id, "enabled": enabled, "engine": engine, "source": {"prefix": prefix}}
        self.dynamodb.put_item(
            TableName=self.config_table,
            Item={
                "table_id": {"S": table_id},
                "prefix": {"S": prefix},
                "enabled": {"BOOL": enabled},
                "engine": {"S": engine},
                "config": {"S": json.dumps(config)},
            },
        )

    def glue_runs(self, job: str | None = None) -> list[dict]:
        return self.glue.get_job_runs(JobName=job or self.glue_job)["JobRuns"]

    def env(self, **overrides: str) -> dict[str, str]:
        env = {
            "CONFIG_TABLE": self.config_table,
            "LEDGER_TABLE": self.ledger_table,
            "RUNS_TABLE": self.runs_table,
            "GLUE_JOB_NAME": self.glue_job,
            "RAW_BUCKET": RAW,
            "LOG_LEVEL": "INFO",
            "CONFIG_CACHE_SECONDS": "0",
        }
        env.update(overrides)
        return env


@pytest.fixture
def world(aws_endpoint: str, monkeypatch: pytest.MonkeyPatch):
    world = World(aws_endpoint)
    for name, value in world.env().items():
        monkeypatch.setenv(name, value)
    for name in ("EMR_APPLICATION_ID", "EMR_JOB_ROLE_ARN", "EMR_ENTRY_POINT", "EMR_EXTRA_ARGS"):
        monkeypatch.delenv(name, raising=False)
    trigger_module.clear_caches()
    logger = logging.getLogger("lakeloader")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    yield world
    logger.handlers[:], logger.level, logger.propagate = saved[0], saved[1], saved[2]
    trigger_module.clear_caches()


def log_lines(capsys: pytest.CaptureFixture[str]) -> list[dict]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]


CUSTOMERS = "crm/public/customers/"
