"""The S3-arrival Lambda end to end (control.trigger.handler): record, reserve, start one run per table,
in-process against DynamoDB/Glue on a real moto server (HTTP); and what the Lambda bundles import."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lakeloader.control import trigger as trigger_module
from lakeloader.control.ledger import DONE, PENDING
from lakeloader.control.trigger import Trigger, TriggerSettings
from tests.unit import trigger_world
from tests.unit.trigger_world import (
    CUSTOMERS,
    HANDLER,
    RAW,
    ROOT,
    World,
    context,
    log_lines,
    s3_event,
    s3_record,
)

# pytest fixtures: the trigger world (config, ledger and runs tables, a Glue job) on one moto server
world = trigger_world.world
aws_endpoint = trigger_world.aws_endpoint
moto_server = trigger_world.moto_server


def test_new_object_is_recorded_and_starts_a_glue_run(world: World, capsys):
    world.add_table("crm.customers", CUSTOMERS)
    key = CUSTOMERS + "LOAD00000001.parquet"
    summary = HANDLER(s3_event(s3_record(key)), context("req-1"))

    assert summary["correlation_id"] == "req-1"
    assert (summary["records"], summary["recorded"], summary["duplicates"]) == (1, 1, 0)
    assert (summary["unknown"], summary["disabled"], summary["ignored"]) == (0, 0, 0)
    assert summary["deferred"] == []
    [run_id] = summary["started"].values()
    assert list(summary["started"]) == ["crm.customers"]

    [obj] = world.ledger.objects("crm.customers")
    assert (obj.status, obj.bucket, obj.key, obj.etag, obj.size) == (
        PENDING,
        RAW,
        key,
        "d41d8cd98f00b204e9800998ecf8427e",
        1024,
    )
    assert obj.object_id == f"{key}#d41d8cd98f00b204e9800998ecf8427e"
    assert obj.correlation_id == "req-1"

    [glue_run] = world.glue_runs()
    assert glue_run["Id"] == run_id
    assert glue_run["Arguments"] == {
        "--lakeloader_table_id": "crm.customers",
        "--lakeloader_correlation_id": "req-1",
    }

    lock = world.ledger.get_lock("crm.customers")
    assert (lock.holder, lock.state, lock.engine_run_id) == ("trigger:req-1", "starting", run_id)

    logs = log_lines(capsys)
    assert logs and all(line["correlation_id"] == "req-1" for line in logs)
    messages = [line["message"] for line in logs]
    assert {"object.recorded", "run.started", "trigger.summary"} <= set(messages)
    started = next(line for line in logs if line["message"] == "run.started")
    assert (started["table_id"], started["run_id"], started["engine"]) == ("crm.customers", run_id, "glue")


def test_same_event_twice_is_one_object_and_one_run(world: World):
    world.add_table("crm.customers", CUSTOMERS)
    event = s3_event(s3_record(CUSTOMERS + "20240501-120000000.parquet"))
    first = HANDLER(event, context("req-1"))
    second = HANDLER(event, context("req-2"))  # S3 delivered it again

    assert first["recorded"] == 1 and len(first["started"]) == 1
    assert (second["recorded"], second["duplicates"], second["started"]) == (0, 1, {})
    assert second["deferred"] == [
        {
            "table_id": "crm.customers",
            "reason": "run_in_progress",
            "lock_holder": "trigger:req-1",
            "lock_state": "starting",
            "lock_expires_at": world.ledger.get_lock("crm.customers").expires_at,
        }
    ]
    assert len(world.ledger.objects("crm.customers")) == 1
    assert len(world.glue_runs()) == 1

    # The job ran and finished the object; yet another delivery starts nothing.
    run = "run-1"
    assert world.ledger.acquire_lock("crm.customers", run)  # takes over the trigger's reservation
    while batch := world.ledger.next_batch("crm.customers", run):
        world.ledger.finish("crm.customers", batch, run, DONE)
    third = HANDLER(event, context("req-3"))
    assert (third["duplicates"], third["started"], third["deferred"]) == (1, {}, [])
    assert len(world.glue_runs()) == 1


def test_object_arriving_while_a_run_holds_the_lock_stays_pending(world: World):
    world.add_table("crm.customers", CUSTOMERS)
    assert world.ledger.acquire_lock("crm.customers", "job-run-7")
    summary = HANDLER(s3_event(s3_record(CUSTOMERS + "b.parquet")), context())
    assert summary["recorded"] == 1 and summary["started"] == {}
    assert summary["deferred"][0]["reason"] == "run_in_progress"
    assert summary["deferred"][0]["lock_holder"] == "job-run-7"
    assert [o.status for o in world.ledger.objects("crm.customers")] == [PENDING]
    assert world.glue_runs() == []


def test_retry_of_the_same_invocation_does_not_start_twice(world: World):
    world.add_table("crm.customers", CUSTOMERS)
    event = s3_event(s3_record(CUSTOMERS + "a.parquet"))
    first = HANDLER(event, context("req-1"))
    retry = HANDLER(event, context("req-1"))  # Lambda retries keep the request id
    assert retry["started"] == first["started"]
    assert retry["duplicates"] == 1
    assert len(world.glue_runs()) == 1


def test_one_start_per_table_per_batch(world: World):
    world.add_table("crm.customers", CUSTOMERS)
    world.add_table("sales.order_lines", "sales/public/order_lines/")
    event = s3_event(
        s3_record(CUSTOMERS + "1.parquet", etag="a1"),
        s3_record(CUSTOMERS + "2.parquet", etag="a2"),
        s3_record(CUSTOMERS + "3.parquet", etag="a3"),
        s3_record("sales/public/order_lines/1.csv", etag="b1"),
    )
    summary = HANDLER(event, context())
    assert summary["recorded"] == 4
    assert sorted(summary["started"]) == ["crm.customers", "sales.order_lines"]
    runs = world.glue_runs()
    assert sorted(r["Arguments"]["--lakeloader_table_id"] for r in runs) == [
        "crm.customers",
        "sales.order_lines",
    ]


def test_an_expired_lock_does_not_block_the_table(world: World):
    world.add_table("crm.customers", CUSTOMERS)
    assert world.ledger.acquire_lock("crm.customers", "crashed-run", ttl_seconds=60)
    later = Trigger(TriggerSettings.from_env(), clock=lambda: world.ledger.clock() + 3600)
    summary = trigger_module.handle_event(
        s3_event(s3_record(CUSTOMERS + "1.parquet")), context(), trigger=later
    )
    assert list(summary["started"]) == ["crm.customers"]
    assert world.ledger.get_lock("crm.customers").holder.startswith("trigger:")


LAMBDA_IMPORT_PROBE = """
import json, sys
reached = []
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pydantic", "pyspark", "yaml"):
            reached.append(name)
            raise ImportError("not in the Lambda bundle: " + name)
sys.meta_path.insert(0, Block())
sys.path.insert(0, sys.argv[1])
import handler
if sys.argv[2] == "s3_arrival":
    result = handler.handler({"Service": "Amazon S3", "Event": "s3:TestEvent"}, None)
else:
    delete = {"RequestType": "Delete", "ResourceProperties": {"TableName": "t"}}
    result = handler.apply_custom_resource_event(delete)
modules = sorted(m for m in sys.modules if m.startswith("lakeloader"))
print(json.dumps({"reached": reached, "result": result, "modules": modules}))
"""


@pytest.mark.parametrize("function", ["s3_arrival", "config_sync"])
def test_lambda_handlers_never_reach_pydantic_or_pyspark(function: str):
    """Import each Lambda handler (and run it once) with pydantic, pyspark and yaml made unimportable:
    an import that reaches them, even one caught by the code, fails the test."""
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),
        "CONFIG_TABLE": "c",
        "LEDGER_TABLE": "l",
        "RUNS_TABLE": "r",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }
    result = subprocess.run(
        [sys.executable, "-c", LAMBDA_IMPORT_PROBE, str(ROOT / "lambda" / function), function],
        cwd=ROOT / "lambda" / function,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    probe = json.loads(result.stdout.strip().splitlines()[-1])
    assert probe["reached"] == [], f"the {function} Lambda imports {probe['reached']}"
    assert "lakeloader.config" not in probe["modules"]
    if function == "s3_arrival":
        assert probe["result"]["records"] == 0 and probe["result"]["started"] == {}
        assert "lakeloader.control.trigger.handler" in probe["modules"]
    else:
        assert probe["result"] == ["t/config-sync", {"Put": 0, "Deleted": 0}]
