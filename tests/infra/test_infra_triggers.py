"""Triggers: the S3-arrival Lambda (code, environment, concurrency, DLQ), notifications, schedules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.settings import SettingsError, resolve_stage
from infra.stack import trigger_settings
from infra.triggers import check_batching_windows, event_prefixes
from lakeloader.config import LakeConfig, parse_config
from tests.infra.cdk_helpers import config_items, join, stage_settings


def arrival(synth) -> dict:
    name = f"lakeloader-{synth.stage}-s3-arrival"
    return synth.resource("AWS::Lambda::Function", lambda p: p.get("FunctionName") == name)[1]["Properties"]


def test_arrival_function_runtime_handler_and_concurrency(stage_synth):
    props = arrival(stage_synth)
    settings = stage_settings(stage_synth.stage)["arrival_lambda"]
    assert props["Runtime"] == "python3.12"
    assert props["Handler"] == "handler.handler"
    # no reservation by default: a new account's quota (10) leaves nothing to reserve
    assert "ReservedConcurrentExecutions" not in props
    assert "reserved_concurrency" not in settings
    assert props["Timeout"] == settings["timeout_seconds"]
    assert props["MemorySize"] == settings["memory_mb"]
    dlq = stage_synth.logical_id(stage_synth.stack.triggers.dead_letter_queue)
    assert props["DeadLetterConfig"] == {"TargetArn": {"Fn::GetAtt": [dlq, "Arn"]}}


def test_arrival_environment(dev):
    env = arrival(dev)["Environment"]["Variables"]
    stack = dev.stack
    assert set(env) == {
        "CONFIG_TABLE",
        "LEDGER_TABLE",
        "RUNS_TABLE",
        "GLUE_JOB_NAME",
        "EMR_APPLICATION_ID",
        "EMR_JOB_ROLE_ARN",
        "EMR_ENTRY_POINT",
        "EMR_EXTRA_ARGS",
        "RAW_BUCKET",
        "POWERTOOLS_SERVICE_NAME",
        "POWERTOOLS_METRICS_NAMESPACE",
        "LOG_LEVEL",
        "TABLES_PER_RUN",
    }
    assert env["CONFIG_TABLE"] == {"Ref": dev.logical_id(stack.config_store.config_table)}
    assert env["LEDGER_TABLE"] == {"Ref": dev.logical_id(stack.config_store.ledger_table)}
    assert env["RUNS_TABLE"] == {"Ref": dev.logical_id(stack.config_store.runs_table)}
    assert env["GLUE_JOB_NAME"] == {"Ref": dev.logical_id(stack.processing.ingest_job)}
    assert env["EMR_APPLICATION_ID"] == {
        "Fn::GetAtt": [dev.logical_id(stack.processing.emr.application), "ApplicationId"]
    }
    assert env["EMR_JOB_ROLE_ARN"] == {"Fn::GetAtt": [dev.logical_id(stack.processing.emr_role), "Arn"]}
    assert env["RAW_BUCKET"] == {"Ref": dev.logical_id(stack.storage.raw)}
    assert env["POWERTOOLS_SERVICE_NAME"] == "lakeloader-s3-arrival"
    assert env["LOG_LEVEL"] == "DEBUG"
    assert join(env["EMR_ENTRY_POINT"]).endswith(".py")
    # EMR_EXTRA_ARGS: a JSON list of strings, appended by the trigger to entryPointArguments
    raw = dev.logical_id(stack.storage.raw)
    curated = dev.logical_id(stack.storage.curated)
    extra = json.loads(
        join(env["EMR_EXTRA_ARGS"])
        .replace("${" + dev.logical_id(stack.config_store.config_table) + "}", "CONFIG")
        .replace("${" + dev.logical_id(stack.config_store.ledger_table) + "}", "LEDGER")
        .replace("${" + dev.logical_id(stack.config_store.runs_table) + "}", "RUNS")
        .replace("${" + raw + "}", "RAW")
        .replace("${" + curated + "}", "CURATED")
    )
    assert extra == [
        "--config-table", "CONFIG",
        "--ledger-table", "LEDGER",
        "--runs-table", "RUNS",
        "--raw-root", "s3://RAW/",
        "--warehouse", "s3://CURATED/warehouse/",
        "--parallel-tables", "4",
        "--max-attempts", "3",
        "--database-prefix", "lakeloader_dev_",
    ]  # fmt: skip


def test_arrival_async_invocations_retry_then_dead_letter(dev):
    _, config = dev.resource("AWS::Lambda::EventInvokeConfig")
    assert config["Properties"]["MaximumRetryAttempts"] == 2
    assert config["Properties"]["MaximumEventAgeInSeconds"] == 360 * 60
    key = dev.logical_id(dev.stack.storage.key)
    dev.template.has_resource_properties(
        "AWS::SQS::Queue",
        {
            "QueueName": "lakeloader-dev-s3-arrival-dlq",
            "KmsMasterKeyId": {"Fn::GetAtt": [key, "Arn"]},
            "MessageRetentionPeriod": 14 * 24 * 3600,
        },
    )


def test_s3_notification_filters_on_the_raw_source_prefixes(stage_synth):
    _, notifications = stage_synth.resource("Custom::S3BucketNotifications")
    props = notifications["Properties"]
    assert props["BucketName"] == {"Ref": stage_synth.logical_id(stage_synth.stack.storage.raw)}
    configs = props["NotificationConfiguration"]["LambdaFunctionConfigurations"]
    function = stage_synth.logical_id(stage_synth.stack.triggers.function)
    assert all(c["LambdaFunctionArn"] == {"Fn::GetAtt": [function, "Arn"]} for c in configs)
    assert all(c["Events"] == ["s3:ObjectCreated:*"] for c in configs)
    filters = sorted(
        r["Value"] for c in configs for r in c["Filter"]["Key"]["FilterRules"] if r["Name"] == "prefix"
    )
    assert filters == ["crm/", "inventory/", "lakeloader-canary/", "sales/"]
    stage_synth.template.has_resource_properties(
        "AWS::Lambda::Permission",
        {
            "Principal": "s3.amazonaws.com",
            "SourceAccount": {"Ref": "AWS::AccountId"},
            "Action": "lambda:InvokeFunction",
        },
    )


def test_schedules_sweep_the_lambda_and_start_maintenance(stage_synth):
    settings = stage_settings(stage_synth.stage)
    _, sweep = stage_synth.resource(
        "AWS::Events::Rule", lambda p: p.get("Name") == f"lakeloader-{stage_synth.stage}-s3-arrival-sweep"
    )
    assert sweep["Properties"]["ScheduleExpression"] == settings["sweep_schedule"]
    [target] = sweep["Properties"]["Targets"]
    assert json.loads(target["Input"]) == {"lakeloader": {"action": "sweep"}}
    _, maintenance = stage_synth.resource(
        "AWS::Events::Rule", lambda p: p.get("Name") == f"lakeloader-{stage_synth.stage}-maintenance-schedule"
    )
    assert maintenance["Properties"]["ScheduleExpression"] == settings["maintenance_schedule"]
    [target] = maintenance["Properties"]["Targets"]
    machine = stage_synth.logical_id(stage_synth.stack.maintenance.state_machine)
    assert target["Arn"] == {"Ref": machine}
    assert json.loads(target["Input"]) == {"table_id": ""}


# --- event_prefixes ----------------------------------------------------------------------

LAKE = parse_config(
    {
        "tables": [
            {
                "id": "a",
                "source": {"prefix": "crm/public/a/"},
                "target": {"database": "d", "table": "a"},
                "mode": "append",
            },
            {
                "id": "b",
                "source": {"prefix": "crm/b/"},
                "target": {"database": "d", "table": "b"},
                "mode": "append",
            },
            {
                "id": "c",
                "source": {"prefix": "hr/c/"},
                "target": {"database": "d", "table": "c"},
                "mode": "append",
            },
        ]
    }
)


def stage_with(prefixes):
    from infra.app import cdk_json_context

    context = cdk_json_context()
    context["lakeloader:stages"]["dev"]["raw_event_prefixes"] = prefixes
    return resolve_stage(context)


def triggers_with(prefixes):
    return trigger_settings(stage_with(prefixes))


def test_event_prefixes_default_to_source_folders_and_the_canaries():
    assert event_prefixes(triggers_with([]), LAKE) == ["crm/", "hr/", "lakeloader-canary/"]


def test_event_prefixes_drop_nested_prefixes_s3_would_reject():
    wanted = ["crm/public/", "crm/", "hr/c/"]
    assert event_prefixes(triggers_with(wanted), LAKE) == ["crm/", "hr/c/", "lakeloader-canary/"]
    assert event_prefixes(triggers_with(["", "crm/"]), LAKE) == [""]


def test_event_prefixes_must_cover_every_table():
    with pytest.raises(SettingsError, match="tables c lie outside"):
        event_prefixes(triggers_with(["crm/"]), LAKE)


ERP = {"id": "erp", "prefix": "erp/dms/", "cdc": "dms", "defaults": {"sequence_by": "last_update_time"}}


def test_event_prefixes_cover_the_sources_whose_tables_are_found_as_they_arrive():
    lake = LAKE.model_copy(update={"sources": parse_config({"sources": [ERP]}).sources})
    assert event_prefixes(triggers_with([]), lake) == ["crm/", "erp/", "hr/", "lakeloader-canary/"]
    with pytest.raises(SettingsError, match="tables source erp lie outside"):
        event_prefixes(triggers_with(["crm/", "hr/"]), lake)


def test_the_jobs_read_a_sources_folder():
    from infra.catalog import raw_folders

    lake = LAKE.model_copy(update={"sources": parse_config({"sources": [ERP]}).sources})
    assert raw_folders(lake) == ["crm/", "erp/", "hr/"]


def test_a_sources_found_tables_take_the_stages_batching_and_storage_unless_its_defaults_say():
    from infra.settings_lake import with_stage_defaults

    given = {**ERP, "defaults": {**ERP["defaults"], "trigger": {"min_interval_seconds": 60}}}
    lake = parse_config({"sources": [given]})
    batching = stage_with([]).settings.batching.model_copy(
        update={"window_seconds": 300, "execution_class": "FLEX"}
    )
    [source] = with_stage_defaults(lake, batching, storage="s3_tables").sources
    assert source.defaults["trigger"] == {"min_interval_seconds": 60, "execution_class": "FLEX"}
    assert source.defaults["target"] == {"storage": "s3_tables"}
    assert source.defaults["sequence_by"] == "last_update_time"


# --- batched arrivals ----------------------------------------------------------------------

BATCHING = {"tables_per_run": 20, "parallel_tables": 8, "job_run_queuing": True}


def batched_overrides(base_temp) -> dict:
    """Context for a dev stack with batching on and crm.customers batched (5-minute window, FLEX)."""
    import yaml

    from infra.app import cdk_json_context

    config = yaml.safe_load((Path(__file__).resolve().parents[2] / "config" / "tables.yaml").read_text())
    for table in config["tables"]:
        if table["id"] == "crm.customers":
            table["trigger"] = {"min_interval_seconds": 300, "execution_class": "FLEX"}
    path = Path(base_temp) / "tables-batched.yaml"
    path.write_text(yaml.safe_dump(config))
    stages = cdk_json_context()["lakeloader:stages"]
    stages["dev"] = {**stages["dev"], "batching": BATCHING, "sweep_schedule": "rate(1 minute)"}
    return {"config": str(path), "lakeloader:stages": stages}


@pytest.fixture(scope="session")
def batched(synth, tmp_path_factory):
    return synth("dev", **batched_overrides(tmp_path_factory.getbasetemp()))


def test_batching_reaches_the_lambda_and_the_config_items(batched):
    env = arrival(batched)["Environment"]["Variables"]
    assert env["TABLES_PER_RUN"] == "20"
    items = {i["table_id"]: i for i in config_items(batched)}
    # the Lambda reads the window and class from these attributes, without pydantic
    assert (items["crm.customers"]["min_interval_seconds"], items["crm.customers"]["execution_class"]) == (
        300,
        "FLEX",
    )
    assert (
        items["sales.order_lines"]["min_interval_seconds"],
        items["sales.order_lines"]["execution_class"],
    ) == (
        0,
        "STANDARD",
    )


def test_dev_gives_every_table_its_own_run_and_prod_shares_runs(stage_synth):
    expected = {"dev": "1", "prod": "10"}[stage_synth.stage]  # cdk.json batching.tables_per_run
    assert arrival(stage_synth)["Environment"]["Variables"]["TABLES_PER_RUN"] == expected


def lake_with_window(window: int) -> LakeConfig:
    table = {
        "id": "crm.customers",
        "source": {"prefix": "crm/customers/"},
        "target": {"database": "crm", "table": "customers"},
        "mode": "append",
        "trigger": {"min_interval_seconds": window},
    }
    return parse_config({"tables": [table]})


def stage_with_sweep(schedule: str):
    from infra.app import cdk_json_context

    context = cdk_json_context()
    context["lakeloader:stages"]["dev"]["sweep_schedule"] = schedule
    return trigger_settings(resolve_stage(context))


def test_a_batched_table_needs_a_sweep_at_least_as_often_as_its_window():
    check_batching_windows(stage_with_sweep("rate(5 minutes)"), lake_with_window(300))
    check_batching_windows(stage_with_sweep("cron(0/5 * * * ? *)"), lake_with_window(300))
    check_batching_windows(stage_with_sweep("off"), lake_with_window(0))  # no batched table
    with pytest.raises(SettingsError) as slow:
        check_batching_windows(stage_with_sweep("rate(15 minutes)"), lake_with_window(300))
    assert str(slow.value).startswith(
        "cdk.json context lakeloader:stages.dev.sweep_schedule is rate(15 minutes)"
    )
    assert "crm.customers" in str(slow.value)
    with pytest.raises(SettingsError, match=r"sweep_schedule is off, but table\(s\) crm.customers set"):
        check_batching_windows(stage_with_sweep("off"), lake_with_window(300))
