"""What the S3 Tables e2e modules share: the stack's table bucket and namespace, an outside Iceberg
reader of its tables, and a Spark scenario run in a subprocess against the stack's endpoint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3

NAMESPACE = "s3t_crm"  # tests/e2e/tables.yaml's S3 Tables database: the stack creates it


def table_bucket_arn() -> str:
    """The stage's table bucket (the stack names it ``<stack>-tables``)."""
    buckets = boto3.client("s3tables").list_table_buckets()["tableBuckets"]
    [arn] = [b["arn"] for b in buckets if b["name"].endswith("-tables")]
    return arn


def s3_tables_names(table_bucket: str) -> set[str]:
    tables = boto3.client("s3tables").list_tables(tableBucketARN=table_bucket, namespace=NAMESPACE)
    return {t["name"] for t in tables["tables"]}


def outside_reader(e2e: Any, table_bucket: str, name: str):
    """pyiceberg on the metadata file S3 Tables points at, over the stack's S3: no Spark, no lakeloader."""
    from pyiceberg.table import StaticTable

    location = boto3.client("s3tables").get_table_metadata_location(
        tableBucketARN=table_bucket, namespace=NAMESPACE, name=name
    )["metadataLocation"]
    properties = {
        "s3.endpoint": e2e.endpoint,
        "s3.region": os.environ.get("AWS_REGION", "us-east-1"),
        "s3.access-key-id": os.environ["AWS_ACCESS_KEY_ID"],
        "s3.secret-access-key": os.environ["AWS_SECRET_ACCESS_KEY"],
        "s3.force-virtual-addressing": "false",
    }
    return StaticTable.from_metadata(location, properties=properties)


def run_scenario(e2e_env: dict[str, str], table_bucket: str, argv: list[str], log: Path) -> dict[str, Any]:
    """A scenario in a Spark subprocess against the emulator (its JVM reads the endpoint); its RESULT."""
    from lakeloader.spark.session import S3_TABLES_ENV
    from lakeloader_dev.jvm import short_jvm_env

    with open(log, "w") as stderr:
        done = subprocess.run(
            [sys.executable, "-c", *argv],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            timeout=1200,
            env={**e2e_env, **short_jvm_env(e2e_env), S3_TABLES_ENV: table_bucket},
            cwd=Path(__file__).resolve().parents[2],
        )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, log.read_text()[-6000:]
    return json.loads(lines[-1].removeprefix("RESULT "))
