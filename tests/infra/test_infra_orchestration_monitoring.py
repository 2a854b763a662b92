"""Orchestration (maintenance state machine) and monitoring (topic, failure rules, alarms, dashboard)."""

from __future__ import annotations

import json

from aws_cdk.assertions import Match

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
    stage_wide = [
        "emr-job-failures",
        "glue-job-failures",
        "maintenance-failed",
        "s3-arrival-dlq",
        "s3-arrival-errors",
        "s3-arrival-throttles",
    ]
    every_table = ["held", "quarantined", "reconciliation", "stale"]  # one alarm each, however many tables
    assert sorted(alarms) == sorted(prefix + name for name in stage_wide + every_table)
    assert all(a["AlarmActions"] == [topic] for a in alarms.values())
    assert all(
        a["Threshold"] == 1 and a["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
        for a in alarms.values()
    )


def per_table_query(alarm: dict, ledger_ref: str) -> str:
    """The Metrics Insights query of an alarm over every table, with its ledger's Ref as `<ledger>`."""
    [query] = alarm["Metrics"]
    assert (query["ReturnData"], query["Period"]) == (True, 300)
    return join(query["Expression"]).replace("${" + ledger_ref + "}", "<ledger>")


def test_one_alarm_per_metric_watches_every_table_of_the_stage_by_table_id(dev):
    """Quarantined files, an unreconciled commit, lag past a table's freshness and a found table held for
    its keys: each one alarm on a Metrics Insights query of this stage's ledger grouped by TableId, so
    each table is a contributor and its notification names it; the sweep publishes the lag over the
    freshness, so one threshold (1) serves tables of any freshness_minutes (tests/unit/test_batching.py)."""
    alarms = {
        a["Properties"]["AlarmName"]: a["Properties"]
        for a in dev.resources("AWS::CloudWatch::Alarm").values()
    }
    ledger = dev.logical_id(dev.stack.config_store.ledger_table)
    where = 'FROM SCHEMA("lakeloader", "Ledger", "TableId") WHERE "Ledger" = \'<ledger>\' GROUP BY "TableId"'
    expected = {
        "quarantined": (f'SELECT SUM("FilesQuarantined") {where} ORDER BY SUM() DESC', 1),
        "reconciliation": (f'SELECT SUM("ReconciliationMismatch") {where} ORDER BY SUM() DESC', 1),
        "stale": (f'SELECT MAX("PendingAgeOverFreshness") {where} ORDER BY MAX() DESC', 3),
        "held": (f'SELECT SUM("TableHeld") {where} ORDER BY SUM() DESC', 1),
    }
    for name, (query, periods) in expected.items():
        alarm = alarms[f"lakeloader-dev-{name}"]
        assert per_table_query(alarm, ledger) == query, name
        assert (alarm["EvaluationPeriods"], alarm["TreatMissingData"]) == (periods, "notBreaching"), name
        assert "this notification names (TableId" in alarm["AlarmDescription"], name
    assert "reconcile.on_mismatch alarm" in alarms["lakeloader-dev-reconciliation"]["AlarmDescription"]
    # a table a source found without keys: TableHeld is written once, when the table is recorded, so
    # its contributor alarms once; the message says where the line to add is
    held = alarms["lakeloader-dev-held"]["AlarmDescription"]
    assert "lakeloader status --stage dev" in held and "keys" in held, held


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
