"""docs/operate.md's edit-keys-then-rebuild workflow on the deployed stack: load a table, edit its keys
in the config, deploy again (a CloudFormation update that reaches the config table), see the next file
refused with a command to copy, run that command, and find the table rebuilt under the new keys.

Uses `ops.accounts` only (no other test reads it) and leaves the shared stack deployed with the edited
config; the table is checked through its Iceberg metadata on S3, without a Spark of its own.
"""

from __future__ import annotations

import io
import json
import re
import shlex
from datetime import datetime
from typing import Any

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakeloader_dev.emulator.loop import lakeloader, latest_runs, upload, wait_for_objects
from tests.e2e.conftest import E2E_CONFIG, E2E_CONTEXT, ROOT

pytestmark = pytest.mark.e2e

TABLE, PREFIX = "ops.accounts", "ops/public/accounts/"


def parquet(rows: list[dict[str, Any]]) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buffer)
    return buffer.getvalue()


def account(account_id: int, region: str, balance: int, minute: int, op: str | None = None) -> dict[str, Any]:
    row = {"account_id": account_id, "region": region, "balance": balance}
    return ({"Op": op} if op else {}) | row | {"last_update_time": datetime(2026, 11, 3, 9, minute)}


def table_state(e2e) -> tuple[list[str], int]:
    """The table's recorded keys and its current snapshot's row count, from its Iceberg metadata."""
    glue_table = boto3.client("glue").get_table(DatabaseName=e2e.stack.glue_database("ops"), Name="accounts")
    bucket, key = glue_table["Table"]["Parameters"]["metadata_location"].removeprefix("s3://").split("/", 1)
    metadata = json.loads(boto3.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read())
    (current,) = [s for s in metadata["snapshots"] if s["snapshot-id"] == metadata["current-snapshot-id"]]
    return json.loads(metadata["properties"]["lakeloader.keys"]), int(current["summary"]["total-records"])


def test_keys_edited_deployed_again_refused_then_rebuilt_by_the_hinted_command(e2e, tmp_path):
    from lakeloader_dev.emulator import patches_cloudformation
    from lakeloader_dev.emulator.deploy import deploy

    load, change = f"{PREFIX}LOAD00000001.parquet", f"{PREFIX}20261103-0910.parquet"
    # account 1 in two regions: one row under keys [account_id], two under [account_id, region]
    upload(
        e2e.stack,
        [(parquet([account(1, "eu", 10, 0), account(1, "us", 20, 1), account(2, "eu", 30, 0)]), load)],
    )
    assert wait_for_objects(e2e.stack, {TABLE: [load]}, fail_fast=True)[TABLE] == {load: "done"}
    assert table_state(e2e) == (["account_id"], 2)

    config = (ROOT / E2E_CONFIG).read_text()
    edited = tmp_path / "tables.yaml"
    edited.write_text(config.replace("keys: [account_id]", "keys: [account_id, region]"))
    assert edited.read_text() != config
    deployment = deploy(
        endpoint=e2e.endpoint,
        context={**E2E_CONTEXT, "config": str(edited)},
        failures=patches_cloudformation.CFN_FAILURES.get if e2e.emulator else None,
    )
    assert (
        boto3.client("cloudformation").describe_stacks(StackName=deployment.stack_name)["Stacks"][0][
            "StackStatus"
        ]
        == "UPDATE_COMPLETE"
    )
    (deployed,) = [t for t in e2e.stack.tables() if t.id == TABLE]
    assert deployed.keys == ["account_id", "region"]  # the config sync's Update reached the config table

    upload(e2e.stack, [(parquet([account(2, "eu", 31, 10, op="U")]), change)])
    wait_for_objects(e2e.stack, {TABLE: [change]}, expected_failures=[TABLE])
    code, out = lakeloader("status", "--stage", "dev", "--table", TABLE, "--json")
    (status,) = json.loads(out)
    (stuck,) = status["stuck"]
    assert code == 1 and stuck["key"] == change and "cannot change in place" in stuck["error"], stuck
    hint = re.search(r"lakeloader rebuild \S.*", stuck["error"]).group(0)
    assert hint == f"lakeloader rebuild --table {TABLE} --stage dev", hint

    code, out = lakeloader(*shlex.split(hint)[1:])  # the hint, pasted as it is
    assert code == 0 and f"{TABLE}: rebuild started as run" in out, out
    wait_for_objects(e2e.stack, {TABLE: [load, change]})
    (rebuild, *_) = latest_runs(e2e.stack, [TABLE])[TABLE]
    assert rebuild.status == "succeeded" and rebuild.counts["files"] == 2, rebuild
    assert table_state(e2e) == (["account_id", "region"], 3)
