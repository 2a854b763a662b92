"""Event parsing (lakeloader.control.trigger.events): S3 notifications, their SQS/SNS/EventBridge wrappers,
URL-encoded keys, and records that are counted as ignored rather than dropped."""

from __future__ import annotations

import json

from tests.unit import trigger_world
from tests.unit.trigger_world import (
    CUSTOMERS,
    HANDLER,
    RAW,
    World,
    context,
    eventbridge_event,
    log_lines,
    objects_and_problems,
    s3_event,
    s3_record,
    sqs_event,
)

# pytest fixtures: the trigger world (config, ledger and runs tables, a Glue job) on one moto server
world = trigger_world.world
aws_endpoint = trigger_world.aws_endpoint
moto_server = trigger_world.moto_server


def test_ignored_records_are_counted(world: World, capsys):
    world.add_table("crm.customers", CUSTOMERS)
    summary = HANDLER(
        s3_event(
            s3_record(CUSTOMERS + "1.parquet", event_name="ObjectRemoved:Delete"),
            s3_record(CUSTOMERS + "_SUCCESS"),
            s3_record(CUSTOMERS + ".LOAD1.parquet.crc"),  # hidden: Spark skips it too
            s3_record(CUSTOMERS),  # folder marker
            s3_record(CUSTOMERS + "1.parquet", bucket="someone-elses-bucket"),
            {"eventSource": "aws:dynamodb", "dynamodb": {}},
        ),
        context(),
    )
    assert (summary["records"], summary["ignored"], summary["recorded"], summary["started"]) == (6, 6, 0, {})
    reasons = [
        x.get("reason", "")
        for x in log_lines(capsys)
        if x["message"] in ("object.ignored", "record.unrecognised")
    ]
    assert len(reasons) == 6
    assert reasons.count("hidden file (name starts with '_' or '.', which Spark skips)") == 2
    assert any("ObjectRemoved:Delete" in r for r in reasons)
    assert any("raw bucket" in r for r in reasons)


def test_s3_test_event_is_not_a_record(world: World):
    summary = HANDLER(
        {
            "Service": "Amazon S3",
            "Event": "s3:TestEvent",
            "Time": "2024-05-01T12:00:00.000Z",
            "Bucket": RAW,
            "RequestId": "5582815E1AEA5ADF",
            "HostId": "8cLeGAmw...",
        },
        context(),
    )
    assert summary["records"] == 0 and summary["ignored"] == 0


def test_url_encoded_keys_with_spaces_and_plus(world: World):
    world.add_table("crm.customers", CUSTOMERS)
    key = CUSTOMERS + "2024-05-01 12:00:00/part+1 (copy)=x%.parquet"
    record = s3_record(key)
    assert record["s3"]["object"]["key"] != key  # really encoded: spaces as '+', '+' as %2B
    summary = HANDLER(s3_event(record), context())
    assert summary["recorded"] == 1
    [obj] = world.ledger.objects("crm.customers")
    assert obj.key == key
    assert obj.uri == f"s3://{RAW}/{key}"


def test_sqs_sns_and_eventbridge_wrappers(world: World):
    world.add_table("crm.customers", CUSTOMERS)
    sns_in_sqs = {
        "Type": "Notification",
        "MessageId": "m1",
        "TopicArn": "arn:aws:sns:us-east-1:123456789012:raw",
        "Message": json.dumps(s3_event(s3_record(CUSTOMERS + "sns file.parquet", etag="s"))),
    }
    event = sqs_event(
        s3_event(s3_record(CUSTOMERS + "sqs file.parquet", etag="q")),
        sns_in_sqs,
        eventbridge_event(CUSTOMERS + "eb file.parquet", etag="e"),
    )
    summary = HANDLER(event, context())
    assert (summary["records"], summary["recorded"]) == (3, 3)
    assert len(summary["started"]) == 1
    assert sorted(o.key for o in world.ledger.objects("crm.customers")) == [
        CUSTOMERS + "eb file.parquet",
        CUSTOMERS + "sns file.parquet",
        CUSTOMERS + "sqs file.parquet",
    ]
    # EventBridge directly
    direct = HANDLER(eventbridge_event(CUSTOMERS + "direct.parquet", etag="d"), context())
    assert direct["recorded"] == 1


def test_parse_event_reads_versions_and_reports_garbage():
    objects, problems = objects_and_problems(
        {"Records": [s3_record("a/b c.csv", version_id="3HL4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY"), "junk"]}
    )
    assert [(o.ref.key, o.ref.version_id, o.ref.object_id) for o in objects] == [
        ("a/b c.csv", "3HL4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY", "a/b c.csv#3HL4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY")
    ]
    assert problems == ["record of type str"]
    assert objects_and_problems({"hello": 1})[1] and objects_and_problems([1])[1]
    raw_eb = eventbridge_event("a/x+y.csv")
    raw_eb["detail"]["object"]["key"] = "a/x+y.csv"
    assert objects_and_problems(raw_eb, eventbridge_keys_encoded=False)[0][0].ref.key == "a/x+y.csv"


def test_a_stage_whose_eventbridge_keys_arrive_as_they_are_records_them_so(world: World, monkeypatch):
    """EVENTBRIDGE_KEYS_ENCODED=false (the Lambda's setting for events whose keys are not URL-encoded):
    a '+' in a key stays a '+'."""
    monkeypatch.setenv("EVENTBRIDGE_KEYS_ENCODED", "false")
    world.add_table("crm.customers", CUSTOMERS)
    event = eventbridge_event(CUSTOMERS + "a+b.parquet")
    event["detail"]["object"]["key"] = CUSTOMERS + "a+b.parquet"
    assert HANDLER(event, context())["recorded"] == 1
    assert [o.key for o in world.ledger.objects("crm.customers")] == [CUSTOMERS + "a+b.parquet"]


def test_a_snapshot_tables_success_file_is_recorded_and_starts_its_run(world: World):
    """cdc: snapshot: the _SUCCESS file completes a snapshot folder, so its arrival must reach the
    ledger and start a run (the item comes from config_items, as cdk synth writes it); another
    table's _SUCCESS stays ignored."""
    from boto3.dynamodb.types import TypeSerializer

    from lakeloader.config import LakeConfig
    from lakeloader.config.items import config_items

    accounts = "vendor/accounts/"
    lake = LakeConfig.model_validate(
        {
            "raw_root": f"s3://{RAW}/",
            "warehouse": "s3://wh/",
            "tables": [
                {
                    "id": "vendor.accounts",
                    "source": {"prefix": accounts, "cdc": "snapshot"},
                    "target": {"database": "vendor", "table": "accounts"},
                    "keys": ["id"],
                }
            ],
        }
    )
    [item] = config_items(lake)
    world.dynamodb.put_item(
        TableName=world.config_table, Item={k: TypeSerializer().serialize(v) for k, v in item.items()}
    )
    world.add_table("crm.customers", CUSTOMERS)

    summary = HANDLER(
        s3_event(s3_record(accounts + "2026-11-27/_SUCCESS"), s3_record(CUSTOMERS + "_SUCCESS")), context()
    )

    assert (summary["recorded"], summary["ignored"]) == (1, 1)
    assert [o.key for o in world.ledger.objects("vendor.accounts")] == [accounts + "2026-11-27/_SUCCESS"]
    assert summary["started"], summary
