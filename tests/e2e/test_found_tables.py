"""Issue 67's acceptance on the emulator's stage: a file under a new table's folder, below a `sources:`
entry's prefix, creates and loads that table with no deploy; a table whose keys the source does not
give is held (its file pending, listed by `lakeloader status` with the line to add)."""

from __future__ import annotations

import io
import json
from datetime import datetime

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakeloader_dev.emulator.loop import lakeloader, upload, wait_for_objects

pytestmark = pytest.mark.e2e


def parquet(rows: list[dict]) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buffer)
    return buffer.getvalue()


def test_a_file_under_a_new_tables_folder_creates_and_loads_it_without_a_deploy(e2e):
    assert "app.widgets" not in {t.id for t in e2e.stack.tables()}
    at = datetime(2026, 11, 3, 9, 0)
    load = "found/app/widgets/LOAD00000001.parquet"
    held = "found/ops/gadgets/LOAD00000001.parquet"  # no entry of the source's keys names ops.*
    upload(
        e2e.stack,
        [
            (
                parquet(
                    [
                        {"id": 1, "name": "bolt", "last_update_time": at},
                        {"id": 2, "name": "nut", "last_update_time": at},
                    ]
                ),
                load,
            ),
            (parquet([{"gid": 7, "last_update_time": at}]), held),
        ],
    )
    assert wait_for_objects(e2e.stack, {"app.widgets": [load]}, fail_fast=True)["app.widgets"] == {
        load: "done"
    }

    [widgets] = [t for t in e2e.stack.tables() if t.id == "app.widgets"]
    assert (widgets.keys, widgets.qualified_target, widgets.source.prefix) == (
        ["id"],
        "found_app.widgets",
        "found/app/widgets/",
    )
    glue_table = boto3.client("glue").get_table(
        DatabaseName=e2e.stack.glue_database("found_app"), Name="widgets"
    )
    bucket, key = glue_table["Table"]["Parameters"]["metadata_location"].removeprefix("s3://").split("/", 1)
    metadata = json.loads(boto3.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read())
    [current] = [s for s in metadata["snapshots"] if s["snapshot-id"] == metadata["current-snapshot-id"]]
    assert int(current["summary"]["total-records"]) == 2

    [gadgets] = [o for o in e2e.stack.ledger().objects("ops.gadgets")]
    assert (gadgets.key, gadgets.status) == (held, "pending")
    code, out = lakeloader("status", "--stage", "dev", "--table", "app.widgets")
    assert code == 0 and "ops.gadgets" not in out, out  # status of one table answers for that table
    code, out = lakeloader("status", "--stage", "dev")
    assert code == 1  # a held table is a stuck one in the stage's status
    assert "add under sources 'found' -> keys: \"ops.gadgets\": [<key column>, ...]" in out
