"""lakeloader.control.config_store and the config-sync custom resource, against DynamoDB in moto."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from lakeloader.config import ConfigError, load_config
from lakeloader.config.items import config_items, load_tables_from_dynamodb
from lakeloader.control.config_store import (
    ConfigStoreError,
    apply_custom_resource_event,
    items_json,
    scan_items,
    sync_items,
)
from lakeloader.control.dynamodb import decode_item, encode_item

REPO = Path(__file__).resolve().parents[2]
TABLE = "lakeloader-test-config"


@pytest.fixture
def lake():
    return load_config(REPO / "config" / "tables.yaml")


@pytest.fixture
def dynamodb(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "table_id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "table_id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield client


def item(table_id: str, prefix: str | None = None) -> dict:
    return {
        "table_id": table_id,
        "prefix": prefix or f"{table_id.replace('.', '/')}/",
        "enabled": True,
        "engine": "glue",
        "config": "{}",
    }


def test_config_items_follow_the_contract(lake):
    items = config_items(lake)
    assert [i["table_id"] for i in items] == [t.id for t in lake.tables]
    first = items[0]
    assert set(first) == {
        "table_id", "prefix", "enabled", "engine", "min_interval_seconds", "execution_class",
        "freshness_seconds", "config"
    }  # fmt: skip
    assert first["prefix"] == "crm/public/customers/"
    assert first["enabled"] is True and first["engine"] == "glue"
    # the trigger settings ride as plain attributes: the arrival Lambda reads them without pydantic
    assert (first["min_interval_seconds"], first["execution_class"]) == (0, "STANDARD")
    # trigger.freshness_minutes (60) in seconds, for the sweep's lag metric; only where it is set
    assert first["freshness_seconds"] == 3600 and "freshness_seconds" not in items[1]
    assert json.loads(first["config"]) == lake.tables[0].model_dump(mode="json", by_alias=True)
    assert json.loads(items[1]["config"])["source"]["schema"]["unit_price"] == "decimal(10,2)"  # by alias
    # stable across processes (it is part of the template): the same text from another interpreter
    # with another hash seed, so no set or dict order can leak into it
    code = (
        "import sys; from lakeloader.config import load_config; "
        "from lakeloader.control.config_store import items_json; "
        "from lakeloader.config.items import config_items; "
        "sys.stdout.write(items_json(config_items(load_config(sys.argv[1]))))"
    )
    other = subprocess.run(
        [sys.executable, "-c", code, str(REPO / "config" / "tables.yaml")],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
        cwd=REPO,
    )
    assert other.stdout == items_json(items)


def test_attribute_round_trip():
    values = {"table_id": "a", "enabled": False, "n": 3, "f": 1.5, "none": None, "m": {"x": [1, "y"]}}
    assert decode_item(encode_item(values)) == values
    with pytest.raises(TypeError):
        encode_item({"x": object()})


def test_sync_then_load_gives_the_same_tables(dynamodb, lake):
    result = sync_items(TABLE, config_items(lake), client=dynamodb)
    assert result.put == [t.id for t in lake.tables] and result.deleted == []
    stored = scan_items(TABLE, client=dynamodb)
    assert [s["table_id"] for s in stored] == sorted(t.id for t in lake.tables)
    assert stored[0]["enabled"] is True
    loaded = load_tables_from_dynamodb(TABLE, client=dynamodb)
    assert loaded == sorted(lake.tables, key=lambda t: t.id)


def test_scan_reads_only_the_attributes_asked_for(dynamodb, lake):
    sync_items(TABLE, config_items(lake), client=dynamodb)
    routes = scan_items(TABLE, client=dynamodb, attributes=("table_id", "prefix"))
    assert routes[0] == {"table_id": "crm.customers", "prefix": "crm/public/customers/"}


def test_sync_updates_changed_items_and_removes_tables_left_out(dynamodb, lake):
    sync_items(TABLE, config_items(lake), client=dynamodb)
    dynamodb.put_item(TableName=TABLE, Item=encode_item(item("manual.extra")))
    kept = config_items(lake)[:1]
    kept[0] = {**kept[0], "enabled": False}
    result = sync_items(TABLE, kept, client=dynamodb)
    assert result.deleted == ["inventory.products", "manual.extra", "sales.order_lines"]
    assert scan_items(TABLE, client=dynamodb) == kept


def test_sync_writes_more_than_one_batch(dynamodb):
    items = [item(f"t{n:03d}") for n in range(60)]
    sync_items(TABLE, items, client=dynamodb)
    assert len(scan_items(TABLE, client=dynamodb)) == 60
    assert sync_items(TABLE, items[:5], client=dynamodb).deleted == [f"t{n:03d}" for n in range(5, 60)]


def test_sync_rejects_malformed_items(dynamodb):
    with pytest.raises(ConfigStoreError, match="lacks prefix"):
        sync_items(
            TABLE, [{"table_id": "a", "enabled": True, "engine": "glue", "config": "{}"}], client=dynamodb
        )
    with pytest.raises(ConfigStoreError, match="'a' appears twice"):
        sync_items(TABLE, [item("a"), item("a")], client=dynamodb)


def test_load_names_the_item_with_an_invalid_config(dynamodb, lake):
    sync_items(TABLE, config_items(lake), client=dynamodb)
    broken = {**config_items(lake)[0], "config": json.dumps({"id": "crm.customers"})}
    dynamodb.put_item(TableName=TABLE, Item=encode_item(broken))
    with pytest.raises(ConfigError, match=r"dynamodb://lakeloader-test-config: item 'crm.customers'"):
        load_tables_from_dynamodb(TABLE, client=dynamodb)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("{not json", r"item 'crm.customers': config is not JSON: Expecting property name"),
        (None, r"item 'crm.customers' holds the config of table 'sales.order_lines'"),
    ],
)
def test_load_says_why_an_items_config_is_unusable(dynamodb, lake, config, message):
    """Not JSON at all, or the config of another table under this item's id (a hand edit)."""
    first, *rest = config_items(lake)
    other = next(i for i in rest if i["table_id"] == "sales.order_lines")
    broken = {**first, "config": config if config is not None else other["config"]}
    dynamodb.put_item(TableName=TABLE, Item=encode_item(broken))
    with pytest.raises(ConfigError, match=rf"^dynamodb://lakeloader-test-config: {message}"):
        load_tables_from_dynamodb(TABLE, client=dynamodb)


def test_an_items_config_is_written_with_sorted_keys(lake):
    """The same config gives the same item text, so a deploy rewrites only the tables that changed."""
    for stored in config_items(lake):
        text = stored["config"]
        assert text == json.dumps(json.loads(text), sort_keys=True)


ASSETS = "cdk-hnb659fds-assets-123456789012-us-east-1"


def items_asset(text: str) -> dict:
    """Upload the items as the deploy's file asset; the properties that name it."""
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket=ASSETS)
    key = f"{abs(hash(text)):x}.json"
    s3.put_object(Bucket=ASSETS, Key=key, Body=text.encode())
    return {"ItemsBucket": ASSETS, "ItemsKey": key}


def event(request: str, items: list[dict], prune: str = "false", table: str = TABLE) -> dict:
    return {
        "RequestType": request,
        "ResourceProperties": {"TableName": table, **items_asset(items_json(items)), "PruneOnDelete": prune},
        "PhysicalResourceId": f"{table}/config-sync",
    }


def test_custom_resource_reads_the_items_property_of_stacks_synthesized_before_the_asset(dynamodb, lake):
    """An update's rollback sends the previous template's properties: inline Items, before 2026-12-02."""
    inline = {"TableName": TABLE, "Items": items_json(config_items(lake)), "PruneOnDelete": "false"}
    assert apply_custom_resource_event(
        {"RequestType": "Update", "ResourceProperties": inline}, client=dynamodb
    )[1] == {"Put": 3, "Deleted": 0}


def test_custom_resource_names_the_items_object_it_cannot_read(dynamodb):
    props = {"TableName": TABLE, "ItemsBucket": ASSETS, "ItemsKey": "gone.json"}
    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=ASSETS)
    with pytest.raises(
        ConfigStoreError, match=f"s3://{ASSETS}/gone.json: the config items could not be read"
    ):
        apply_custom_resource_event({"RequestType": "Create", "ResourceProperties": props}, client=dynamodb)


def test_custom_resource_create_update_delete(dynamodb, lake):
    items = config_items(lake)
    assert apply_custom_resource_event(event("Create", items), client=dynamodb) == (
        f"{TABLE}/config-sync",
        {"Put": 3, "Deleted": 0},
    )
    assert apply_custom_resource_event(event("Update", items[:2]), client=dynamodb)[1] == {
        "Put": 2,
        "Deleted": 1,
    }
    # prod: Delete leaves the items
    assert apply_custom_resource_event(event("Delete", items[:2]), client=dynamodb)[1] == {
        "Put": 0,
        "Deleted": 0,
    }
    assert len(scan_items(TABLE, client=dynamodb)) == 2
    # dev: Delete removes the resource's items; a missing table never fails a Delete
    assert (
        apply_custom_resource_event(event("Delete", items[:2], prune="true"), client=dynamodb)[1]["Deleted"]
        == 2
    )
    assert scan_items(TABLE, client=dynamodb) == []
    gone = event("Delete", items, prune="true", table="no-such-table")
    assert apply_custom_resource_event(gone, client=dynamodb)[1] == {"Put": 0, "Deleted": 0}


# --- the Lambda handler, answering CloudFormation over HTTP --------------------------------


def load_handler():
    spec = importlib.util.spec_from_file_location(
        "config_sync_handler", REPO / "lambda" / "config_sync" / "handler.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def cloudformation():
    """A local HTTP server standing in for the pre-signed ResponseURL; collects the responses."""
    responses: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_PUT(self):  # noqa: N802 - http.server API
            responses.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/response", responses
    server.shutdown()


def cfn_event(url: str, request: str, items) -> dict:
    return {
        "RequestType": request,
        "ResponseURL": url,
        "StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/lakeloader-dev/1",
        "RequestId": "req-1",
        "LogicalResourceId": "ConfigStoreSync",
        "ResourceType": "Custom::LakeloaderConfigSync",
        "ResourceProperties": {
            "ServiceToken": "arn:aws:lambda:us-east-1:123456789012:function:lakeloader-dev-config-sync",
            "TableName": TABLE,
            **items_asset(items if isinstance(items, str) else items_json(items)),
            "PruneOnDelete": "true",
        },
    }


def test_handler_reports_success_to_cloudformation(dynamodb, lake, cloudformation):
    url, responses = cloudformation
    handler = load_handler()
    result = handler.handler(cfn_event(url, "Create", config_items(lake)), None)
    assert result["Status"] == "SUCCESS"
    [response] = responses
    assert response["Status"] == "SUCCESS"
    assert response["PhysicalResourceId"] == f"{TABLE}/config-sync"
    assert response["Data"] == {"Put": 3, "Deleted": 0}
    assert (response["RequestId"], response["LogicalResourceId"]) == ("req-1", "ConfigStoreSync")
    assert len(scan_items(TABLE, client=dynamodb)) == 3


def test_handler_reports_failure_with_the_reason(dynamodb, cloudformation):
    url, responses = cloudformation
    load_handler().handler(cfn_event(url, "Update", "not json"), None)
    [response] = responses
    assert response["Status"] == "FAILED"
    assert f"s3://{ASSETS}/" in response["Reason"] and "is not JSON" in response["Reason"]
