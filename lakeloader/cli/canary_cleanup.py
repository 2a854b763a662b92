"""What `lakeloader verify` leaves behind, removed: its canary files, the canary tables' ledger and
run items, and the canary tables. Only canary resources (lakeloader.canary); boto3 only, so it runs
from the CLI against a stage or an emulator like the rest of verify."""

from __future__ import annotations

import boto3

from lakeloader import canary
from lakeloader.cli.stage import DeployedStage


def remove_canary(stage: DeployedStage, keys: list[str]) -> list[str]:
    """Remove what a verify left: its raw files (every version), the canary tables' ledger and run
    items (their locks too: a run that never started must not hold the next verify back), and the
    canary tables with their files. Only canary resources; returns what it removed."""
    s3, dynamodb, glue = boto3.client("s3"), boto3.client("dynamodb"), boto3.client("glue")
    removed = []
    for key in keys:
        versions = s3.list_object_versions(Bucket=stage.raw_bucket, Prefix=key)
        for version in [*versions.get("Versions", []), *versions.get("DeleteMarkers", [])]:
            if version["Key"] == key:
                s3.delete_object(Bucket=stage.raw_bucket, Key=key, VersionId=version["VersionId"])
        removed.append(f"s3://{stage.raw_bucket}/{key}")
    for table_name in (stage.ledger_table, stage.runs_table):
        sort_key = "object_id" if table_name == stage.ledger_table else "run_id"
        for engine in canary.CANARY_ENGINES:
            pages = dynamodb.get_paginator("query").paginate(
                TableName=table_name,
                KeyConditionExpression="table_id = :t",
                ExpressionAttributeValues={":t": {"S": canary.canary_id(engine)}},
                ProjectionExpression="table_id, #s",
                ExpressionAttributeNames={"#s": sort_key},
            )
            items = [item for page in pages for item in page.get("Items", [])]
            for item in items:
                dynamodb.delete_item(TableName=table_name, Key=item)
            if items:
                removed.append(f"{len(items)} item(s) of {canary.canary_id(engine)} in {table_name}")
    database = stage.glue_database(canary.CANARY_DATABASE)
    for engine in canary.CANARY_ENGINES:
        try:
            location = glue.get_table(DatabaseName=database, Name=engine)["Table"]["StorageDescriptor"]
        except glue.exceptions.EntityNotFoundException:
            continue
        glue.delete_table(DatabaseName=database, Name=engine)
        bucket, _, prefix = location.get("Location", "").removeprefix("s3://").partition("/")
        if bucket and prefix:
            for page in s3.get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=prefix.rstrip("/") + "/"
            ):
                for obj in page.get("Contents", []):
                    s3.delete_object(Bucket=bucket, Key=obj["Key"])
        removed.append(f"Glue table {database}.{engine} and its files")
    return removed
