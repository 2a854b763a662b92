"""The canary tables every stage deploys (config.canary), which `lakeloader verify` lands its file on:
in the config the stack writes, routed by the S3 notification, readable by both engines' jobs, in a Glue
database of their own; no crawler and no alarm of theirs."""

from __future__ import annotations

import json

from lakeloader.config.canary import CANARY_DATABASE, CANARY_PREFIX, canary_table
from tests.infra.cdk_helpers import config_items, join, statements

CANARIES = {"lakeloader_canary.glue": "glue", "lakeloader_canary.emr": "emr"}


def test_every_stage_deploys_a_canary_table_per_engine_that_runs_at_once(stage_synth):
    """Even prod, whose defaults are a 900 s window and FLEX: a verify must not wait for them."""
    items = {i["table_id"]: i for i in config_items(stage_synth)}
    for table_id, engine in CANARIES.items():
        item = items[table_id]
        assert (item["prefix"], item["engine"], item["enabled"]) == (
            f"{CANARY_PREFIX}{engine}/",
            engine,
            True,
        )
        assert (item["min_interval_seconds"], item["execution_class"]) == (0, "STANDARD")
        assert json.loads(item["config"]) == canary_table(engine).model_dump(mode="json", by_alias=True)


def test_the_canary_prefix_invokes_the_arrival_lambda(stage_synth):
    _, notifications = stage_synth.resource("Custom::S3BucketNotifications")
    configs = notifications["Properties"]["NotificationConfiguration"]["LambdaFunctionConfigurations"]
    prefixes = [
        r["Value"] for c in configs for r in c["Filter"]["Key"]["FilterRules"] if r["Name"] == "prefix"
    ]
    assert CANARY_PREFIX in prefixes


def test_both_engines_read_the_canary_prefixes_and_the_canary_database_exists(stage_synth):
    stack = stage_synth.stack
    for role in (stack.processing.glue_role, stack.processing.emr_role):
        (read,) = [
            s
            for s in statements(stage_synth, stage_synth.logical_id(role))
            if s.get("Sid") == "ReadRawTablePrefixes"
        ]
        resources = [join(r) for r in read["Resource"]]
        assert any(r.endswith(f"/{CANARY_PREFIX}*") for r in resources), (role, resources)
    names = [
        join(d["Properties"]["DatabaseInput"]["Name"])
        for d in stage_synth.resources("AWS::Glue::Database").values()
    ]
    assert f"lakeloader_{stage_synth.stage}_{CANARY_DATABASE}" in names


def test_the_canaries_have_no_crawler_and_no_alarm(stage_synth):
    text = json.dumps(
        [
            *stage_synth.resources("AWS::Glue::Crawler").values(),
            *stage_synth.resources("AWS::CloudWatch::Alarm").values(),
        ]
    )
    assert "canary" not in text.lower()
