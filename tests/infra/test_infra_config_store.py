"""Config store: tables (keys, on demand, PITR, KMS, TTL) and the config sync custom resource."""

from __future__ import annotations

import json
import re
from pathlib import Path

from aws_cdk.assertions import Match

from infra.app import config_path
from infra.settings_lake import with_stage_defaults
from lakeloader.config import TableConfig, load_config
from lakeloader.config.canary import with_canaries
from tests.infra.cdk_helpers import as_list, config_items, join, statements


def table(synth, name: str) -> dict:
    return synth.template_json["Resources"][synth.logical_id(getattr(synth.stack.config_store, name))][
        "Properties"
    ]


def test_table_keys_follow_the_contract(dev):
    assert table(dev, "config_table")["KeySchema"] == [{"AttributeName": "table_id", "KeyType": "HASH"}]
    assert table(dev, "ledger_table")["KeySchema"] == [
        {"AttributeName": "table_id", "KeyType": "HASH"},
        {"AttributeName": "object_id", "KeyType": "RANGE"},
    ]
    assert table(dev, "runs_table")["KeySchema"] == [
        {"AttributeName": "table_id", "KeyType": "HASH"},
        {"AttributeName": "run_id", "KeyType": "RANGE"},
    ]
    assert table(dev, "runs_table")["TimeToLiveSpecification"] == {
        "AttributeName": "expires_at",
        "Enabled": True,
    }


def test_tables_are_on_demand_with_pitr_and_the_stage_key(stage_synth):
    key_id = stage_synth.logical_id(stage_synth.stack.storage.key)
    names = set()
    for name in ("config_table", "ledger_table", "runs_table"):
        props = table(stage_synth, name)
        assert props["BillingMode"] == "PAY_PER_REQUEST"
        assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
        assert props["SSESpecification"] == {
            "SSEEnabled": True,
            "SSEType": "KMS",
            "KMSMasterKeyId": {"Fn::GetAtt": [key_id, "Arn"]},
        }
        names.add(props["TableName"])
    assert names == {f"lakeloader-{stage_synth.stage}-{n}" for n in ("config", "ledger", "runs")}


def test_config_sync_carries_the_validated_config_as_a_file_asset(stage_synth):
    _, resource = stage_synth.resource("Custom::LakeloaderConfigSync")
    props = resource["Properties"]
    lake = with_stage_defaults(
        load_config(config_path(stage_synth.app)), stage_synth.stack.stage.settings.batching
    )
    items = config_items(stage_synth)
    assert [i["table_id"] for i in items] == [
        *("crm.customers", "sales.order_lines", "inventory.products"),
        *("lakeloader_canary.glue", "lakeloader_canary.emr"),  # always (lakeloader.config.canary)
    ]
    for item, table in zip(items, with_canaries(lake).tables, strict=True):
        # what the jobs load back (config_table.load_tables_from_dynamodb) and the trigger routes by
        assert TableConfig.model_validate(json.loads(item["config"])) == table
        assert (item["prefix"], item["enabled"], item["engine"]) == (
            table.source.prefix,
            table.enabled,
            table.engine,
        )
    # the template names the object (the bootstrap's assets bucket, a key that is the content's hash)
    # and carries no table: its size does not grow with the config (docs/scale.md)
    assert set(props) == {
        "ServiceToken",
        "ServiceTimeout",
        "TableName",
        "ItemsBucket",
        "ItemsKey",
        "PruneOnDelete",
    }
    assert re.fullmatch(r"[0-9a-f]{64}\.json", props["ItemsKey"])
    assert "cdk-hnb659fds-assets-" in join(props["ItemsBucket"])
    assert props["TableName"] == {"Ref": stage_synth.logical_id(stage_synth.stack.config_store.config_table)}
    assert props["ServiceToken"] == {
        "Fn::GetAtt": [stage_synth.logical_id(stage_synth.stack.config_store.sync_function.function), "Arn"]
    }
    assert props["PruneOnDelete"] == ("true" if stage_synth.stage == "dev" else "false")


def test_a_config_change_changes_the_template(synth, dev, tmp_path):
    source = Path(__file__).resolve().parents[2] / "config" / "tables.yaml"
    changed = tmp_path / "tables.yaml"
    changed.write_text(source.read_text().replace("inventory/products/", "inventory/items/"))
    moved = synth("dev", config=str(changed))
    prefixes = {i["table_id"]: i["prefix"] for i in config_items(moved)}
    assert prefixes["inventory.products"] == "inventory/items/"
    key = moved.resource("Custom::LakeloaderConfigSync")[1]["Properties"]["ItemsKey"]
    assert key != dev.resource("Custom::LakeloaderConfigSync")[1]["Properties"]["ItemsKey"]  # an Update


def test_sync_function_may_only_write_the_config_table(dev):
    role_id = dev.logical_id(dev.stack.config_store.sync_function.role)
    table_id = dev.logical_id(dev.stack.config_store.config_table)
    dynamo = [
        s for s in statements(dev, role_id) if any(a.startswith("dynamodb:") for a in as_list(s["Action"]))
    ]
    assert dynamo == [
        {
            "Action": ["dynamodb:BatchWriteItem", "dynamodb:DeleteItem", "dynamodb:PutItem", "dynamodb:Scan"],
            "Effect": "Allow",
            "Resource": {"Fn::GetAtt": [table_id, "Arn"]},
        }
    ]
    # and read this deploy's items object, no other
    [s3] = [s for s in statements(dev, role_id) if any(a.startswith("s3:") for a in as_list(s["Action"]))]
    key = dev.resource("Custom::LakeloaderConfigSync")[1]["Properties"]["ItemsKey"]
    assert (s3["Action"], join(s3["Resource"]).endswith(f"/{key}")) == ("s3:GetObject", True)
    dev.template.has_resource_properties(
        "AWS::Lambda::Function",
        {"FunctionName": "lakeloader-dev-config-sync", "Runtime": "python3.12", "Handler": "handler.handler"},
    )
    dev.template.has_resource(
        "Custom::LakeloaderConfigSync",
        {"DependsOn": Match.array_with([Match.string_like_regexp("SyncFunctionRole")])},
    )


def test_the_stage_batches_and_runs_flex_the_tables_that_do_not_say_otherwise(stage_synth):
    """prod's defaults (cdk.json): a 900 s window and FLEX; a table's own trigger settings win."""
    _, resource = stage_synth.resource("Custom::LakeloaderConfigSync")
    deployed = {i["table_id"]: json.loads(i["config"])["trigger"] for i in config_items(stage_synth)}
    batching = stage_synth.stack.stage.settings.batching
    expected = (900, "FLEX") if stage_synth.stage == "prod" else (0, "STANDARD")
    assert (batching.window_seconds, batching.execution_class) == expected
    for table in load_config(config_path(stage_synth.app)).tables:
        given = table.trigger.model_fields_set
        window = table.trigger.min_interval_seconds if "min_interval_seconds" in given else expected[0]
        assert deployed[table.id]["min_interval_seconds"] == window
        assert deployed[table.id]["execution_class"] == (
            table.trigger.execution_class
            if "execution_class" in given or table.engine != "glue"
            else expected[1]
        )


def test_a_config_of_one_source_deploys_its_entry_for_the_lambda(synth, tmp_path):
    """A stage whose config is one `sources:` entry: the sync carries the source's item (the Lambda
    finds its tables from it), and its folder is an event prefix of the raw bucket."""
    config = tmp_path / "tables.yaml"
    config.write_text(
        "sources:\n  - id: erp\n    prefix: erp/\n    cdc: dms\n"
        "    defaults: {sequence_by: last_update_time}\n    keys: {'*': [id]}\n"
    )
    synthesized = synth("dev", config=str(config))
    [source] = [i for i in config_items(synthesized) if i["table_id"] == "source:erp"]
    assert (source["kind"], source["prefix"]) == ("source", "erp/")
    entry = json.loads(source["source"])
    assert entry["keys"] == {"*": ["id"]} and entry["defaults"]["target"] == {"storage": "glue"}
    notifications = json.dumps(synthesized.resources("Custom::S3BucketNotifications"))
    assert '"erp/"' in notifications
