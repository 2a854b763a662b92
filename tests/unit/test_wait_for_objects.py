"""wait_for_objects fails fast: a failed object of a watched table raises its error in seconds.

Real: lakeloader_dev.emulator.loop and the Ledger against moto's server over HTTP (DynamoDB, and
Glue for the job-run listing). The failed run is written to the ledger the way drain_table does
(claim, then finish as failed with the error); no Spark.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import boto3
import pytest

sys.path.append(str(Path(__file__).resolve().parents[1]))  # tests/ -> aws_fixtures
import aws_fixtures  # noqa: E402
from aws_fixtures import create_dynamodb_table, unique_name  # noqa: E402

from lakeloader.cli.stage import DeployedStage  # noqa: E402
from lakeloader.control.ledger import ObjectRef  # noqa: E402
from lakeloader_dev.emulator.loop import RunFailed, wait_for_objects  # noqa: E402

moto_server = aws_fixtures.moto_server
aws_endpoint = aws_fixtures.aws_endpoint
GOOD, BAD = "crm/public/customers/LOAD00000001.parquet", "audit/events/LOAD00000001.parquet"


@pytest.fixture
def stack(aws_endpoint) -> DeployedStage:
    dynamodb = boto3.client("dynamodb")
    job = unique_name("ingest")
    boto3.client("glue").create_job(
        Name=job,
        Role="arn:aws:iam::123456789012:role/glue",
        Command={"Name": "glueetl", "ScriptLocation": "s3://a/b.py"},
    )
    return DeployedStage(
        raw_bucket="raw",
        warehouse="s3://curated/warehouse/",
        config_table="unused",
        ledger_table=create_dynamodb_table(dynamodb, unique_name("ledger"), "table_id", "object_id"),
        runs_table=create_dynamodb_table(dynamodb, unique_name("runs"), "table_id", "run_id"),
        ingest_job=job,
        arrival_function="unused",
    )


def settle(stack: DeployedStage, table_id: str, key: str, error: str | None) -> None:
    """What a run does to one object: record, claim, finish done (no error) or failed."""
    ledger = stack.ledger()
    ledger.record_object(table_id, ObjectRef(bucket="raw", key=key, etag="e"), correlation_id="c")
    claimed = ledger.claim(table_id, ledger.pending_objects(table_id), "run-1")
    ledger.finish(table_id, claimed, "run-1", "failed" if error else "done", error=error)


def test_a_failed_object_raises_its_error_at_once(stack):
    settle(stack, "crm.customers", GOOD, "table 'crm.customers', file(s) x: not a Parquet file")
    started = time.monotonic()
    with pytest.raises(
        RunFailed, match=r"crm.customers: .*LOAD00000001.parquet failed: .*not a Parquet file"
    ):
        wait_for_objects(stack, {"crm.customers": [GOOD]}, timeout=120, fail_fast=True)
    assert time.monotonic() - started < 10


def test_an_expected_failure_is_waited_for_like_success(stack):
    settle(stack, "audit.events", BAD, "not a Parquet file")
    settle(stack, "crm.customers", GOOD, None)
    statuses = wait_for_objects(
        stack,
        {"crm.customers": [GOOD], "audit.events": [BAD]},
        timeout=30,
        fail_fast=True,
        expected_failures={"audit.events"},
    )
    assert statuses == {"crm.customers": {GOOD: "done"}, "audit.events": {BAD: "failed"}}
