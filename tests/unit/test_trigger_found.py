"""Tables found as they arrive (issue 67 item 2), the S3-arrival Lambda end to end on a real moto
server: a file under a source's prefix records its new table in the config table and starts its first
run, with no deploy; a table without keys is held (files pending, one TableHeld metric) and released
by the sweep once its source's keys name it; a deploy's sync leaves found tables alone."""

from __future__ import annotations

import json

from lakeloader.config import TableConfig
from lakeloader.config.items import load_tables_from_dynamodb
from lakeloader.control.config_store import scan_items, source_item, sync_items
from lakeloader.control.ledger import PENDING
from tests.unit import trigger_world
from tests.unit.trigger_world import HANDLER, World, context, log_lines, s3_event, s3_record

world = trigger_world.world
aws_endpoint = trigger_world.aws_endpoint
moto_server = trigger_world.moto_server

SOURCE = {
    "id": "erp",
    "prefix": "erp/",
    "format": "parquet",
    "cdc": "dms",
    "layout": "<schema>/<table>/",
    "include": ["*"],
    "exclude": ["app.audit*"],
    "defaults": {"sequence_by": "last_update_time"},
    "keys": {"app.staff": ["staff_id"]},
}


def put_source(world: World, source: dict) -> None:
    sync_items(world.config_table, [source_item(source)], prune=False, client=world.dynamodb)


def items(world: World) -> dict[str, dict]:
    return {i["table_id"]: i for i in scan_items(world.config_table, client=world.dynamodb)}


def test_the_first_file_of_a_new_table_records_it_and_starts_its_run(world: World, capsys):
    put_source(world, SOURCE)
    first = HANDLER(s3_event(s3_record("erp/app/staff/LOAD00000001.parquet", etag="a1")), context("req-1"))
    assert (first["recorded"], first["unknown"], list(first["started"])) == (1, 0, ["app.staff"])
    item = items(world)["app.staff"]
    assert (item["prefix"], item["found_by"], item["enabled"]) == ("erp/app/staff/", "erp", True)
    table = TableConfig.model_validate(json.loads(item["config"]))
    assert (table.keys, table.qualified_target, table.source.cdc) == (["staff_id"], "app.staff", "dms")
    assert [t.id for t in load_tables_from_dynamodb(world.config_table, client=world.dynamodb)] == [
        "app.staff"
    ]
    assert any(line["message"] == "table.found" for line in log_lines(capsys))

    # the next file is the known table's: recorded, no second item write; excluded tables stay unknown
    second = HANDLER(
        s3_event(
            s3_record("erp/app/staff/2026/01/02/20260102-1200.parquet", etag="a2"),
            s3_record("erp/app/audit_log/LOAD1.parquet", etag="a3"),
        ),
        context("req-2"),
    )
    assert (second["recorded"], second["unknown"]) == (1, 1)
    assert len(world.ledger.objects("app.staff")) == 2


def test_a_table_without_keys_is_held_then_released_once_its_keys_are_given(world: World, capsys):
    put_source(world, SOURCE)
    key = "erp/app/orders/LOAD00000001.parquet"
    held = HANDLER(s3_event(s3_record(key, etag="b1")), context("req-h"))
    assert (held["held"], held["recorded"], held["started"], held["unknown"]) == (1, 0, {}, 0)
    item = items(world)["app.orders"]
    assert item["enabled"] is False and "needs key columns" in item["held"]
    assert [(o.key, o.status) for o in world.ledger.objects("app.orders")] == [(key, PENDING)]
    out = capsys.readouterr().out
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    [warning] = [line for line in lines if line.get("message") == "table.held"]
    assert "add under sources 'erp' -> keys: \"app.orders\": [<key column>, ...]" in warning["hint"]
    metrics = [line for line in lines if "TableHeld" in line]
    assert len(metrics) == 1 and metrics[0]["TableId"] == "app.orders" and metrics[0]["TableHeld"] == [1.0]
    # the jobs never see a held table
    assert load_tables_from_dynamodb(world.config_table, client=world.dynamodb) == []

    # another file of it: held again, no second metric
    again = HANDLER(s3_event(s3_record("erp/app/orders/2026/x.parquet", etag="b2")), context())
    assert again["held"] == 1 and "TableHeld" not in capsys.readouterr().out

    # the line is added (a deploy syncs the source's item): the sweep releases the table and starts it
    put_source(world, {**SOURCE, "keys": {**SOURCE["keys"], "app.orders": ["order_id"]}})
    swept = HANDLER({"lakeloader": {"action": "sweep"}}, context("req-s"))
    assert list(swept["started"]) == ["app.orders"]
    item = items(world)["app.orders"]
    assert item["enabled"] is True and "held" not in item
    assert [t.keys for t in load_tables_from_dynamodb(world.config_table, client=world.dynamodb)] == [
        ["order_id"]
    ]
    assert {o.status for o in world.ledger.objects("app.orders")} == {PENDING}  # both files, none lost
    assert len(world.ledger.objects("app.orders")) == 2


def test_a_declared_table_keeps_its_files_and_a_deploy_keeps_found_tables(world: World):
    put_source(world, SOURCE)
    world.add_table("legacy", "erp/app/legacy/")  # declared under the source's prefix
    summary = HANDLER(
        s3_event(
            s3_record("erp/app/legacy/LOAD1.parquet", etag="c1"),
            s3_record("erp/app/staff/LOAD1.parquet", etag="c2"),
        ),
        context(),
    )
    assert sorted(summary["started"]) == ["app.staff", "legacy"]
    assert "app.legacy" not in items(world)

    # a deploy: the config holds the source and no declared table; the found table stays
    declared_gone = sync_items(world.config_table, [source_item(SOURCE)], client=world.dynamodb)
    assert declared_gone.deleted == ["legacy"]
    assert set(items(world)) == {"source:erp", "app.staff"}
    # the source leaves the config: its found tables go with it
    gone = sync_items(world.config_table, [], client=world.dynamodb)
    assert gone.deleted == ["app.staff", "source:erp"]
