"""Starting job runs (lakeloader.control.trigger.launch): Glue and EMR Serverless on moto, concurrency limits,
start failures and an engine that is not configured."""

from __future__ import annotations

import hashlib
import json

import pytest

from lakeloader.control.ledger import PENDING
from lakeloader.control.trigger import RebuildRequest, Trigger, TriggerError, TriggerSettings
from lakeloader.control.trigger.launch import aws_client
from tests.aws_fixtures import moto_state_held, unique_name
from tests.unit import trigger_world
from tests.unit.trigger_world import CUSTOMERS, HANDLER, World, context, log_lines, s3_event, s3_record

# pytest fixtures: the trigger world (config, ledger and runs tables, a Glue job) on one moto server
world = trigger_world.world
aws_endpoint = trigger_world.aws_endpoint
moto_server = trigger_world.moto_server


def test_concurrent_runs_exceeded_leaves_objects_pending(world: World, monkeypatch):
    """moto's Glue honours MaxConcurrentRuns, but finishes runs at once unless told otherwise:
    pin job runs in STARTING through moto's state manager."""
    job = world.create_glue_job(max_concurrent_runs=1)
    monkeypatch.setenv("GLUE_JOB_NAME", job)
    world.add_table("crm.customers", CUSTOMERS)
    world.add_table("sales.order_lines", "sales/public/order_lines/")
    with moto_state_held(world.endpoint, "glue::job_run"):
        first = HANDLER(s3_event(s3_record(CUSTOMERS + "1.parquet")), context("req-a"))
        assert list(first["started"]) == ["crm.customers"]
        second = HANDLER(s3_event(s3_record("sales/public/order_lines/1.csv")), context("req-b"))

    assert second["recorded"] == 1 and second["started"] == {}
    [deferred] = second["deferred"]
    assert (deferred["table_id"], deferred["reason"], deferred["engine"]) == (
        "sales.order_lines",
        "concurrent_runs_exceeded",
        "glue",
    )
    assert "ConcurrentRunsExceededException" in deferred["error"]
    assert [o.status for o in world.ledger.objects("sales.order_lines")] == [PENDING]
    assert world.ledger.get_lock("sales.order_lines") is None  # reservation given back
    assert len(world.glue_runs(job)) == 1

    # capacity again (moto now reports the first run SUCCEEDED): a sweep starts the waiting table;
    # crm.customers still has its reservation, so it is deferred to the run that holds it
    swept = HANDLER({"lakeloader": {"action": "sweep"}}, context("req-sweep"))
    assert swept["action"] == "sweep"
    assert list(swept["started"]) == ["sales.order_lines"]
    assert [d["table_id"] for d in swept["deferred"]] == ["crm.customers"]


def test_emr_serverless_engine(world: World, monkeypatch):
    app = world.emr.create_application(name=unique_name("lakeloader"), releaseLabel="emr-7.5.0", type="SPARK")
    monkeypatch.setenv("EMR_APPLICATION_ID", app["applicationId"])
    monkeypatch.setenv("EMR_JOB_ROLE_ARN", "arn:aws:iam::123456789012:role/lakeloader-emr-job")
    monkeypatch.setenv("EMR_ENTRY_POINT", "s3://assets/emr_steps/ingest.py")
    monkeypatch.setenv("EMR_EXTRA_ARGS", json.dumps(["--config-table", world.config_table]))
    world.add_table("inventory.products", "inventory/products/", engine="emr")
    summary = HANDLER(s3_event(s3_record("inventory/products/1.json")), context("req-emr"))
    run_id = summary["started"]["inventory.products"]
    job_run = world.emr.get_job_run(applicationId=app["applicationId"], jobRunId=run_id)["jobRun"]
    assert job_run["executionRole"] == "arn:aws:iam::123456789012:role/lakeloader-emr-job"
    assert job_run["jobDriver"]["sparkSubmit"] == {
        "entryPoint": "s3://assets/emr_steps/ingest.py",
        "entryPointArguments": [
            "--table-id",
            "inventory.products",
            "--correlation-id",
            "req-emr",
            "--config-table",
            world.config_table,
        ],
    }
    assert world.glue_runs() == []


def test_start_failure_raises_keeps_objects_and_a_retry_recovers(world: World, monkeypatch, capsys):
    monkeypatch.setenv("GLUE_JOB_NAME", "no-such-job")
    world.add_table("crm.customers", CUSTOMERS)
    event = s3_event(s3_record(CUSTOMERS + "1.parquet"))
    with pytest.raises(TriggerError, match="crm.customers"):
        HANDLER(event, context("req-x"))
    assert [o.status for o in world.ledger.objects("crm.customers")] == [PENDING]
    assert world.ledger.get_lock("crm.customers") is None
    summary_line = [x for x in log_lines(capsys) if x["message"] == "trigger.summary"][0]
    assert summary_line["level"] == "ERROR" and summary_line["deferred"][0]["reason"] == "start_failed"

    monkeypatch.setenv("GLUE_JOB_NAME", world.glue_job)  # fixed; Lambda retries the same event
    retry = HANDLER(event, context("req-x"))
    assert (retry["duplicates"], list(retry["started"])) == (1, ["crm.customers"])


def test_engine_not_configured(world: World, monkeypatch):
    world.add_table("inventory.products", "inventory/products/", engine="emr")
    with pytest.raises(TriggerError, match="engine_not_configured"):
        HANDLER(s3_event(s3_record("inventory/products/1.json")), context())
    assert [o.status for o in world.ledger.objects("inventory.products")] == [PENDING]


def test_a_rebuild_request_starts_the_tables_runs_with_the_rebuild_arguments(world: World, monkeypatch):
    """`lakeloader rebuild --stage` asks the Lambda: it holds the engines' settings and the start protocol
    (lock, one run per request); a batched table's window does not hold a rebuild back."""
    app = world.emr.create_application(name=unique_name("lakeloader"), releaseLabel="emr-7.5.0", type="SPARK")
    monkeypatch.setenv("EMR_APPLICATION_ID", app["applicationId"])
    monkeypatch.setenv("EMR_JOB_ROLE_ARN", "arn:aws:iam::123456789012:role/lakeloader-emr-job")
    monkeypatch.setenv("EMR_ENTRY_POINT", "s3://assets/emr_steps/ingest.py")
    world.add_table("crm.customers", CUSTOMERS)
    world.add_table("inventory.products", "inventory/products/", engine="emr")
    world.dynamodb.update_item(  # batched: one run an hour, and one started just now
        TableName=world.config_table,
        Key={"table_id": {"S": "crm.customers"}},
        UpdateExpression="SET min_interval_seconds = :window",
        ExpressionAttributeValues={":window": {"N": "3600"}},
    )
    assert world.ledger.claim_window("crm.customers", 3600) is not None

    request = {"action": "rebuild", "table_ids": ["crm.customers", "inventory.products", "no.such"]}
    summary = HANDLER({"lakeloader": {**request, "raw_zone_erased": True}}, context("req-rebuild"))

    assert summary["action"] == "rebuild" and sorted(summary["started"]) == [
        "crm.customers",
        "inventory.products",
    ]
    assert summary["deferred"] == [{"table_id": "no.such", "reason": "unknown_or_disabled_table"}]
    [glue_run] = world.glue_runs()
    assert glue_run["Arguments"] == {
        "--lakeloader_table_id": "crm.customers",
        "--lakeloader_correlation_id": "req-rebuild",
        "--lakeloader_rebuild": "true",
        "--lakeloader_raw_zone_erased": "true",
    }
    emr_run = world.emr.get_job_run(
        applicationId=app["applicationId"], jobRunId=summary["started"]["inventory.products"]
    )
    arguments = emr_run["jobRun"]["jobDriver"]["sparkSubmit"]["entryPointArguments"]
    assert arguments[4:] == ["--rebuild", "true", "--raw-zone-erased", "true"]

    again = HANDLER({"lakeloader": request}, context("req-rebuild-2"))  # the rebuild runs hold the locks
    assert again["started"] == {} and {d["reason"] for d in again["deferred"]} >= {"run_in_progress"}
    with pytest.raises(ValueError, match="table_ids"):
        HANDLER({"lakeloader": {"action": "rebuild"}}, context("req-bad"))


def test_an_emr_start_is_named_after_its_tables_and_idempotent_per_invocation(world: World, monkeypatch):
    """A Lambda retry of the same invocation sends the same client token: EMR Serverless starts one run."""
    app = world.emr.create_application(name=unique_name("lakeloader"), releaseLabel="emr-7.5.0", type="SPARK")
    monkeypatch.setenv("EMR_APPLICATION_ID", app["applicationId"])
    monkeypatch.setenv("EMR_JOB_ROLE_ARN", "arn:aws:iam::123456789012:role/lakeloader-emr-job")
    monkeypatch.setenv("EMR_ENTRY_POINT", "s3://assets/emr_steps/ingest.py")
    world.add_table("inventory.products", "inventory/products/", engine="emr")
    sent: list[dict] = []
    aws_client("emr-serverless").meta.events.register(
        "provide-client-params.emr-serverless.StartJobRun", lambda params, **_: sent.append(dict(params))
    )

    HANDLER(s3_event(s3_record("inventory/products/1.json")), context("req-emr"))

    (request,) = sent
    assert request["name"] == "lakeloader-inventory.products"
    assert request["clientToken"] == hashlib.sha256(b"req-emr|inventory.products").hexdigest()
    assert request["applicationId"] == app["applicationId"]


@pytest.mark.parametrize(
    ("env", "missing"),
    [
        ({}, "EMR_APPLICATION_ID, EMR_JOB_ROLE_ARN, EMR_ENTRY_POINT"),
        ({"EMR_APPLICATION_ID": "00f1", "EMR_ENTRY_POINT": "s3://a/i.py"}, "EMR_JOB_ROLE_ARN"),
    ],
)
def test_an_emr_table_on_a_stage_without_emr_names_the_missing_settings(
    world: World, monkeypatch, env, missing
):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    world.add_table("inventory.products", "inventory/products/", engine="emr")
    with pytest.raises(TriggerError) as raised:
        HANDLER(s3_event(s3_record("inventory/products/1.json")), context())
    assert str(raised.value) == (
        f"table 'inventory.products': engine_not_configured: {missing} not set but the table's engine is emr"
    )


def test_a_rebuild_asked_in_process_keeps_the_raw_zone_flag_off_and_a_failed_start_raises(world: World):
    world.add_table("crm.customers", CUSTOMERS)
    world.add_table("inventory.products", "inventory/products/", engine="emr")  # no EMR on this stage
    trigger = Trigger(TriggerSettings.from_env(world.env()), dynamodb=world.dynamodb, glue=world.glue)

    summary = trigger.rebuild(RebuildRequest(correlation_id="cid-rebuild", table_ids=["crm.customers"]))

    assert summary["correlation_id"] == "cid-rebuild" and summary["action"] == "rebuild"
    (glue_run,) = world.glue_runs()
    assert glue_run["Arguments"]["--lakeloader_raw_zone_erased"] == "false"
    with pytest.raises(TriggerError, match="inventory.products': engine_not_configured"):
        trigger.rebuild(RebuildRequest(correlation_id="cid-rebuild-2", table_ids=["inventory.products"]))
