"""Orchestration (maintenance state machine) and monitoring (topic, failure rules, alarms, dashboard)."""

from __future__ import annotations

import json

from aws_cdk.assertions import Match

from infra.app import DEFAULT_CONFIG, REPO_ROOT
from lakeloader.config import load_config
from tests.infra.cdk_helpers import join, statements


def definition(synth) -> dict:
    _, machine = synth.resource("AWS::StepFunctions::StateMachine")
    text = join(machine["Properties"]["DefinitionString"])
    for key, construct in {
        "MAINTAIN_JOB": synth.stack.processing.maintain_job,
        "TOPIC": synth.stack.alarm_topic.topic,
    }.items():
        text = text.replace("${" + synth.logical_id(construct) + "}", key)
    text = text.replace("${AWS::Partition}", "aws")
    return json.loads(text)


def test_maintenance_runs_the_glue_job_synchronously_and_notifies_on_failure(dev):
    states = definition(dev)["States"]
    run = states["RunMaintenance"]
    assert run["Resource"] == "arn:aws:states:::glue:startJobRun.sync"
    assert run["Parameters"]["JobName"] == "MAINTAIN_JOB"
    assert run["Parameters"]["Arguments"] == {
        "--lakeloader_table_id.$": "$.table_id",
        "--lakeloader_correlation_id.$": "$$.Execution.Name",
    }
    [catch] = run["Catch"]
    assert catch["ErrorEquals"] == ["States.ALL"]
    notify = states[catch["Next"]]
    assert notify["Resource"] == "arn:aws:states:::sns:publish"
    assert notify["Parameters"]["TopicArn"] == "TOPIC"
    assert states[notify["Next"]]["Type"] == "Fail"
    assert states["ApplyInput"]["Parameters"] == {
        "args.$": "States.JsonMerge($.defaults, $$.Execution.Input, false)"
    }


def test_state_machine_logs_everything_and_traces(dev):
    dev.template.has_resource_properties(
        "AWS::StepFunctions::StateMachine",
        {
            "StateMachineName": "lakeloader-dev-maintenance",
            "TracingConfiguration": {"Enabled": True},
            "LoggingConfiguration": Match.object_like({"Level": "ALL", "IncludeExecutionData": True}),
        },
    )


def test_state_machine_can_publish_to_the_encrypted_topic(dev):
    role = dev.stack.maintenance.state_machine.role
    found = statements(dev, dev.logical_id(role))
    key = {"Fn::GetAtt": [dev.logical_id(dev.stack.storage.key), "Arn"]}
    assert {"Action": ["kms:Decrypt", "kms:GenerateDataKey"], "Effect": "Allow", "Resource": key} in found
    topic = {"Ref": dev.logical_id(dev.stack.alarm_topic.topic)}
    assert {"Action": "sns:Publish", "Effect": "Allow", "Resource": topic} in found


def test_alarm_publishers_may_use_the_key(dev):
    """CloudWatch alarms and EventBridge rules may use the key of the encrypted topic (their statements
    as AWS documents them: test_infra_key_policy)."""
    _, key = dev.resource("AWS::KMS::Key")
    by_sid = {s.get("Sid"): s for s in key["Properties"]["KeyPolicy"]["Statement"]}
    alarms, rules = by_sid["AllowCloudWatchAlarms"], by_sid["AllowEventBridgeRules"]
    assert alarms["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    assert rules["Principal"] == {"Service": "events.amazonaws.com"}


def test_alarm_topic_is_encrypted_and_tls_only(stage_synth):
    key = stage_synth.logical_id(stage_synth.stack.storage.key)
    stage_synth.template.has_resource_properties(
        "AWS::SNS::Topic",
        {
            "TopicName": f"lakeloader-{stage_synth.stage}-alarms",
            "KmsMasterKeyId": {"Fn::GetAtt": [key, "Arn"]},
        },
    )
    _, policy = stage_synth.resource("AWS::SNS::TopicPolicy")
    denies = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
    assert [s["Condition"] for s in denies] == [{"Bool": {"aws:SecureTransport": "false"}}]


def test_every_alarm_notifies_the_topic(stage_synth):
    topic = {"Ref": stage_synth.logical_id(stage_synth.stack.alarm_topic.topic)}
    alarms = {
        a["Properties"]["AlarmName"]: a["Properties"]
        for a in stage_synth.resources("AWS::CloudWatch::Alarm").values()
    }
    prefix = f"lakeloader-{stage_synth.stage}-"
    tables = load_config(REPO_ROOT / DEFAULT_CONFIG).tables
    per_table = [f"quarantined-{t.id}" for t in tables] + [
        f"stale-{t.id}" for t in tables if t.trigger.freshness_minutes
    ]
    per_table += [f"reconciliation-{t.id}" for t in tables if t.mode in ("merge", "scd2")]
    assert per_table and any(name.startswith("stale-") for name in per_table)
    stage_wide = [
        "emr-job-failures",
        "glue-job-failures",
        "maintenance-failed",
        "s3-arrival-dlq",
        "s3-arrival-errors",
        "s3-arrival-throttles",
    ]
    assert sorted(alarms) == sorted(prefix + name for name in stage_wide + per_table)
    assert all(a["AlarmActions"] == [topic] for a in alarms.values())
    assert all(
        a["Threshold"] == 1 and a["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
        for name, a in alarms.items()
        if "-stale-" not in name
    )


def test_each_table_alarms_on_quarantined_files_and_on_lag_past_its_freshness(dev):
    alarms = {
        a["Properties"]["AlarmName"]: a["Properties"]
        for a in dev.resources("AWS::CloudWatch::Alarm").values()
    }
    ledger = {"Ref": dev.logical_id(dev.stack.config_store.ledger_table)}
    dimensions = [{"Name": "Ledger", "Value": ledger}, {"Name": "TableId", "Value": "crm.customers"}]
    quarantined = alarms["lakeloader-dev-quarantined-crm.customers"]
    assert watched(quarantined) == {
        "Namespace": "lakeloader",
        "MetricName": "FilesQuarantined",
        "Dimensions": dimensions,
    }
    assert (quarantined["Statistic"], quarantined["Threshold"]) == ("Sum", 1)
    stale = alarms["lakeloader-dev-stale-crm.customers"]
    assert watched(stale) == {
        "Namespace": "lakeloader",
        "MetricName": "PendingAgeSeconds",
        "Dimensions": dimensions,
    }
    assert (stale["Statistic"], stale["Threshold"], stale["ComparisonOperator"]) == (
        "Maximum",
        60 * 60,
        "GreaterThanOrEqualToThreshold",
    )
    assert not any(name.startswith("lakeloader-dev-stale-sales") for name in alarms)  # no freshness set


def test_each_merged_table_alarms_on_a_commit_that_did_not_reconcile(dev):
    alarms = {
        a["Properties"]["AlarmName"]: a["Properties"]
        for a in dev.resources("AWS::CloudWatch::Alarm").values()
    }
    ledger = {"Ref": dev.logical_id(dev.stack.config_store.ledger_table)}
    dimensions = [{"Name": "Ledger", "Value": ledger}, {"Name": "TableId", "Value": "crm.customers"}]
    mismatch = alarms["lakeloader-dev-reconciliation-crm.customers"]
    assert watched(mismatch) == {
        "Namespace": "lakeloader",
        "MetricName": "ReconciliationMismatch",
        "Dimensions": dimensions,
    }
    assert (mismatch["Statistic"], mismatch["Threshold"], mismatch["ComparisonOperator"]) == (
        "Sum",
        1,
        "GreaterThanOrEqualToThreshold",
    )
    assert mismatch["AlarmActions"] == [{"Ref": dev.logical_id(dev.stack.alarm_topic.topic)}]
    assert "reconcile.on_mismatch: alarm" in mismatch["AlarmDescription"]
    tables = load_config(REPO_ROOT / DEFAULT_CONFIG).tables
    unreconciled = [t.id for t in tables if t.mode not in ("merge", "scd2")]
    assert not any(f"lakeloader-dev-reconciliation-{t}" in alarms for t in unreconciled)


def watched(alarm: dict) -> dict:
    """The metric an alarm watches (a labelled metric renders as a one-metric Metrics list)."""
    if "MetricName" in alarm:
        return {k: alarm.get(k) for k in ("Namespace", "MetricName", "Dimensions")}
    [metric] = [m for m in alarm["Metrics"] if "MetricStat" in m]
    return metric["MetricStat"]["Metric"]


def test_alarms_watch_the_lambda_the_dlq_and_the_failure_rules(dev):
    alarms = {
        a["Properties"]["AlarmName"]: a["Properties"]
        for a in dev.resources("AWS::CloudWatch::Alarm").values()
    }
    assert watched(alarms["lakeloader-dev-s3-arrival-errors"]) == {
        "Namespace": "AWS/Lambda",
        "MetricName": "Errors",
        "Dimensions": [
            {"Name": "FunctionName", "Value": {"Ref": dev.logical_id(dev.stack.triggers.function)}}
        ],
    }
    assert watched(alarms["lakeloader-dev-s3-arrival-dlq"]) == {
        "Namespace": "AWS/SQS",
        "MetricName": "ApproximateNumberOfMessagesVisible",
        "Dimensions": [
            {
                "Name": "QueueName",
                "Value": {"Fn::GetAtt": [dev.logical_id(dev.stack.triggers.dead_letter_queue), "QueueName"]},
            }
        ],
    }
    assert watched(alarms["lakeloader-dev-glue-job-failures"]) == {
        "Namespace": "AWS/Events",
        "MetricName": "TriggeredRules",
        "Dimensions": [
            {"Name": "RuleName", "Value": {"Ref": dev.logical_id(dev.stack.monitoring.glue_failed_rule)}}
        ],
    }
    maintenance = alarms["lakeloader-dev-maintenance-failed"]["Metrics"]
    assert {m["Id"]: m.get("MetricStat", {}).get("Metric", {}).get("MetricName") for m in maintenance} == {
        "expr_1": None,
        "failed": "ExecutionsFailed",
        "timedout": "ExecutionsTimedOut",
    }


def test_failed_glue_runs_are_sent_to_the_topic(stage_synth):
    _, rule = stage_synth.resource("AWS::Events::Rule", lambda p: "glue-job-failed" in p.get("Name", ""))
    pattern = rule["Properties"]["EventPattern"]
    assert pattern["source"] == ["aws.glue"]
    assert pattern["detail-type"] == ["Glue Job State Change"]
    assert pattern["detail"]["state"] == ["FAILED", "TIMEOUT", "ERROR"]
    jobs = [stage_synth.logical_id(j) for j in stage_synth.stack.processing.glue_jobs]
    assert pattern["detail"]["jobName"] == [{"Ref": j} for j in jobs]
    [target] = rule["Properties"]["Targets"]
    assert target["Arn"] == {"Ref": stage_synth.logical_id(stage_synth.stack.alarm_topic.topic)}
    _, emr_rule = stage_synth.resource("AWS::Events::Rule", lambda p: "emr-job-failed" in p.get("Name", ""))
    assert emr_rule["Properties"]["EventPattern"]["detail"]["state"] == ["FAILED"]


def test_dashboard_shows_runs_rows_merged_lag_and_failures_of_this_stage_only(dev):
    _, dashboard = dev.resource("AWS::CloudWatch::Dashboard")
    assert dashboard["Properties"]["DashboardName"] == "lakeloader-dev-dashboard"
    body = join(dashboard["Properties"]["DashboardBody"])
    for title in (
        '"title":"Runs"',
        '"title":"Rows merged, files quarantined"',
        '"title":"Lag: ',
        '"title":"Failures"',
        '"title":"Alarms"',
    ):
        assert title in body
    ledger = "${" + dev.logical_id(dev.stack.config_store.ledger_table) + "}"
    for metric in ("RowsMerged", "FilesQuarantined", "PendingAgeSeconds"):
        assert f'MetricName=\\"{metric}\\" Ledger=\\"{ledger}\\"' in body
