"""What `lakeloader verify` leaves behind, removed: the canary files, the canary tables' ledger and
run items, and the canary tables. Only canary resources (lakeloader.config.canary); boto3 only, so it runs
from the CLI against a stage or an emulator like the rest of verify.

Each removal is a step of its own: one AWS refuses (no permission to drop a table Lake Formation
guards, a bucket policy) is reported with its error, and the others still run. The caller reports
them beside verify's own result, which a cleanup never replaces."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from lakeloader.cli.stage import DeployedStage
from lakeloader.config import canary

ACCESS_DENIED = "AccessDeniedException"
# Lake Formation denies a data lake administrator the drop of a table another principal created
# ("Implicit Lake Formation permissions"); the job role creates the canary tables (infra.verify_access)
DROP_DENIED = (
    "in Lake Formation mode the role you run verify as needs DROP on the canary tables: set the stage "
    "setting verify_role_arn to it and deploy (docs/deploy.md#verify)"
)


@dataclass
class CanaryRemoval:
    """What a cleanup removed, and each removal that failed with the error AWS answered."""

    removed: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def step(self, what: str, remove: Callable[[], str | None], if_denied: str = "") -> None:
        """`remove()`: its line for `removed` (None: nothing there); an AWS error is kept in `errors`,
        with `if_denied` when AWS answered AccessDeniedException."""
        try:
            done = remove()
        except (BotoCoreError, ClientError) as exc:
            error = f"{what}: {type(exc).__name__}: {exc}"
            denied = (
                isinstance(exc, ClientError) and exc.response.get("Error", {}).get("Code") == ACCESS_DENIED
            )
            self.errors.append(f"{error} ({if_denied})" if denied and if_denied else error)
            return
        if done:
            self.removed.append(done)


def remove_canary(stage: DeployedStage) -> CanaryRemoval:
    """Remove what verifies left: every version of every file under the canary prefix (this verify's,
    and what an earlier one kept with --keep or could not remove), the canary tables' ledger and run
    items (their locks too: a run that never started must not hold the next verify back), and the
    canary tables with their files. Only canary resources."""
    s3, dynamodb, glue = boto3.client("s3"), boto3.client("dynamodb"), boto3.client("glue")
    result = CanaryRemoval()
    files: dict[str, list[str]] = {}  # key -> its version ids

    def list_files() -> None:
        pages = s3.get_paginator("list_object_versions").paginate(
            Bucket=stage.raw_bucket, Prefix=canary.CANARY_PREFIX
        )
        for page in pages:
            for version in [*page.get("Versions", []), *page.get("DeleteMarkers", [])]:
                files.setdefault(version["Key"], []).append(version["VersionId"])

    def raw_file(key: str) -> str:
        for version_id in files[key]:
            s3.delete_object(Bucket=stage.raw_bucket, Key=key, VersionId=version_id)
        return f"s3://{stage.raw_bucket}/{key}"

    def items(table_name: str, engine: str) -> str | None:
        sort_key = "object_id" if table_name == stage.ledger_table else "run_id"
        pages = dynamodb.get_paginator("query").paginate(
            TableName=table_name,
            KeyConditionExpression="table_id = :t",
            ExpressionAttributeValues={":t": {"S": canary.canary_id(engine)}},
            ProjectionExpression="table_id, #s",
            ExpressionAttributeNames={"#s": sort_key},
        )
        found = [item for page in pages for item in page.get("Items", [])]
        for item in found:
            dynamodb.delete_item(TableName=table_name, Key=item)
        return f"{len(found)} item(s) of {canary.canary_id(engine)} in {table_name}" if found else None

    database = stage.glue_database(canary.CANARY_DATABASE)

    def table(engine: str) -> str | None:
        try:
            location = glue.get_table(DatabaseName=database, Name=engine)["Table"]["StorageDescriptor"]
        except glue.exceptions.EntityNotFoundException:
            return None
        glue.delete_table(DatabaseName=database, Name=engine)
        bucket, _, prefix = location.get("Location", "").removeprefix("s3://").partition("/")
        if bucket and prefix:
            for page in s3.get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=prefix.rstrip("/") + "/"
            ):
                for obj in page.get("Contents", []):
                    s3.delete_object(Bucket=bucket, Key=obj["Key"])
        return f"Glue table {database}.{engine} and its files"

    result.step(f"canary files under s3://{stage.raw_bucket}/{canary.CANARY_PREFIX}", list_files)
    for key in sorted(files):
        result.step(f"canary file s3://{stage.raw_bucket}/{key}", lambda key=key: raw_file(key))
    for table_name in (stage.ledger_table, stage.runs_table):
        for engine in canary.CANARY_ENGINES:
            result.step(
                f"items of {canary.canary_id(engine)} in {table_name}",
                lambda table_name=table_name, engine=engine: items(table_name, engine),
            )
    for engine in canary.CANARY_ENGINES:
        result.step(f"Glue table {database}.{engine}", lambda engine=engine: table(engine), DROP_DENIED)
    return result
