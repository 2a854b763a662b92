"""What `backfill` tells its user when the S3 trigger has already recorded what it finds (as on a stage
whose files all landed after the stack): it found them, recorded none, and says why -- never "N to
record" followed by 0 recorded. moto's S3 and DynamoDB over HTTP; the listing and the ledger are real."""

from __future__ import annotations

import sys
from pathlib import Path

import boto3

sys.path.append(str(Path(__file__).resolve().parents[1]))  # tests/ -> aws_fixtures
import aws_fixtures  # noqa: E402
from aws_fixtures import create_dynamodb_table, unique_name  # noqa: E402

from lakeloader.cli import operate  # noqa: E402
from lakeloader.cli.stage import DeployedStage  # noqa: E402
from lakeloader.config import parse_config  # noqa: E402
from lakeloader.control.ledger import ObjectRef  # noqa: E402

moto_server, aws_endpoint = aws_fixtures.moto_server, aws_fixtures.aws_endpoint

TABLES = parse_config(
    {
        "tables": [
            {
                "id": "crm.customers",
                "source": {"prefix": "crm/customers/"},
                "target": {"database": "crm", "table": "customers"},
                "keys": ["id"],
            }
        ]
    }
).tables


def test_files_the_trigger_recorded_are_reported_found_not_to_record(aws_endpoint: str) -> None:
    s3 = boto3.client("s3")
    raw = unique_name("raw")
    s3.create_bucket(Bucket=raw)
    s3.put_bucket_versioning(Bucket=raw, VersioningConfiguration={"Status": "Enabled"})
    ledger_table = create_dynamodb_table(
        boto3.client("dynamodb"), unique_name("ledger"), "table_id", "object_id"
    )
    stage = DeployedStage(raw, "s3://curated/warehouse/", "config", ledger_table, "runs", "ingest", "arrival")
    keys = [f"crm/customers/LOAD{n:03d}.parquet" for n in range(3)]
    for key in keys:  # landed while the stack existed: the trigger recorded each (by ETag, as moto's events)
        etag = s3.put_object(Bucket=raw, Key=key, Body=key.encode())["ETag"]
        assert stage.ledger().record_object(
            "crm.customers", ObjectRef(raw, key, etag=etag), correlation_id="s3"
        )

    said: list[str] = []
    result = operate.backfill(
        stage, TABLES, ["crm.customers"], correlation_id="backfill-1", progress=said.append
    )

    assert (result.recorded, result.already_known) == ({}, {"crm.customers": 3})
    assert said == ["backfill: 3 object(s) under the prefixes of 1 table(s)"], said
    report = result.describe()
    assert "crm.customers: 0 recorded as pending, 3 already in the ledger" in report
    assert "nothing new: the ledger has every object found" in report, report

    s3.put_object(
        Bucket=raw, Key="crm/customers/LOAD100.parquet", Body=b"never seen"
    )  # one the trigger missed
    again = operate.backfill(stage, TABLES, ["crm.customers"], correlation_id="backfill-2")
    assert (again.recorded, again.already_known) == ({"crm.customers": 1}, {"crm.customers": 3})
    assert "nothing new" not in again.describe()
