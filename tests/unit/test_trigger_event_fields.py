"""Every field the trigger reads from an event, without AWS: what each object record becomes (bucket,
key, ETag, version, size, sequencer, event time, name, outermost source), which names mean "created",
what each unreadable record is reported as, and the requests the operator verbs send (sweep, rebuild).
lakeloader.trigger.events is plain Python; test_trigger_events.py runs the same events through the
handler against moto."""

from __future__ import annotations

import json
from types import SimpleNamespace
from urllib.parse import quote_plus

import pytest

from lakeloader.ledger import ObjectRef
from lakeloader.trigger.events import (
    ObjectEvent,
    correlation_id_for,
    is_sweep,
    parse_event,
    rebuild_request,
    sweep_table_ids,
)
from tests.unit.trigger_world import RAW, context, eventbridge_event, s3_event, s3_record, sqs_event

VERSION = "3HL4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY"


def sns_record(message: dict) -> dict:
    """An SNS notification delivered to the Lambda directly (its record says EventSource)."""
    return {
        "EventSource": "aws:sns",
        "EventVersion": "1.0",
        "EventSubscriptionArn": "arn:aws:sns:us-east-1:123456789012:raw:1b1e",
        "Sns": {"Type": "Notification", "MessageId": "m1", "Message": json.dumps(message)},
    }


def sns_envelope(message: dict) -> dict:
    """An SNS message as SNS delivers it to an SQS queue (the SQS body)."""
    return {
        "Type": "Notification",
        "MessageId": "m2",
        "TopicArn": "arn:aws:sns:...:raw",
        "Message": json.dumps(message),
    }


def only(event, **options) -> ObjectEvent:
    objects, problems = parse_event(event, **options)
    assert problems == []
    (found,) = objects
    return found


def test_an_s3_notification_record_is_its_object_as_s3_described_it():
    found = only(s3_event(s3_record("crm/a b+c.csv", version_id=VERSION, size=77, etag="e1")))
    assert found == ObjectEvent(
        ref=ObjectRef(
            bucket=RAW,
            key="crm/a b+c.csv",
            etag="e1",
            version_id=VERSION,
            size=77,
            sequencer="0055AED6DCD90281E5",
            event_time="2024-05-01T12:00:00.000Z",
        ),
        event_name="ObjectCreated:Put",
        source="s3",
    )
    record = s3_record("crm/b.csv")  # a producer that spells it etag, and sends no size
    record["s3"]["object"]["etag"] = record["s3"]["object"].pop("eTag")
    record["s3"]["object"].pop("size")
    ref = only(s3_event(record)).ref
    assert (ref.etag, ref.size, ref.version_id) == ("d41d8cd98f00b204e9800998ecf8427e", None, None)
    record["s3"]["object"]["size"] = "not a size"
    assert only(s3_event(record)).ref.size is None


def test_an_eventbridge_event_is_its_object_with_its_time_and_version():
    event = eventbridge_event("crm/x+y z.csv", etag="e2")  # sent quote_plus-encoded, as S3 does
    event["detail"]["object"]["version-id"] = VERSION
    found = only(event)
    assert found == ObjectEvent(
        ref=ObjectRef(
            bucket=RAW,
            key="crm/x+y z.csv",
            etag="e2",
            version_id=VERSION,
            size=5,
            sequencer="00617F08299329D189",
            event_time="2024-05-01T12:00:00Z",
        ),
        event_name="Object Created",
        source="eventbridge",
    )
    assert only(event, eventbridge_keys_encoded=False).ref.key == quote_plus("crm/x+y z.csv")  # as it came
    event["detail"]["object"]["eTag"] = event["detail"]["object"].pop("etag")
    event["time"] = 1714564800  # not a timestamp string: no event time rather than a wrong one
    event["detail"]["object"]["size"] = "5 bytes"
    ref = only(event).ref
    assert (ref.etag, ref.event_time, ref.size) == ("e2", None, None)
    del event["detail-type"]  # no name: not a created object, said so
    assert only(event).event_name == ""


@pytest.mark.parametrize(
    ("name", "created"),
    [
        ("ObjectCreated:Put", True),
        ("ObjectCreated:CompleteMultipartUpload", True),
        ("s3:ObjectCreated:Copy", True),
        ("Object Created", True),
        ("ObjectRemoved:Delete", False),
        ("s3:ObjectRemoved:DeleteMarkerCreated", False),
        ("Object Deleted", False),
        ("ObjectRestore:Completed", False),
        ("", False),
    ],
)
def test_which_event_names_mean_a_new_object(name, created):
    assert ObjectEvent(ObjectRef(RAW, "k"), name, "s3").created is created


def test_each_object_keeps_the_outermost_wrapper_as_its_source():
    inner = s3_event(s3_record("crm/in-sqs.csv"))
    event = sqs_event(
        inner, sns_envelope(s3_event(s3_record("crm/sns-in-sqs.csv"))), eventbridge_event("crm/eb.csv")
    )
    objects, problems = parse_event(event)
    assert problems == []
    assert [(o.ref.key, o.source) for o in objects] == [
        ("crm/in-sqs.csv", "sqs"),
        ("crm/sns-in-sqs.csv", "sqs"),
        ("crm/eb.csv", "sqs"),
    ]
    objects, _ = parse_event({"Records": [sns_record(s3_event(s3_record("crm/sns.csv")))]})
    assert [(o.ref.key, o.source) for o in objects] == [("crm/sns.csv", "sns")]


def test_events_nest_four_deep_at_most():
    event = s3_event(s3_record("crm/deep.csv"))
    for _ in range(4):
        event = sqs_event(event)
    assert only(event).ref.key == "crm/deep.csv"
    assert parse_event(sqs_event(event)) == ([], ["event nested too deeply"])


def test_each_record_that_cannot_be_read_is_reported_and_the_others_are_read():
    no_bucket = s3_record("crm/x.csv")
    del no_bucket["s3"]["bucket"]
    eventbridge_without_object = eventbridge_event("crm/y.csv")
    del eventbridge_without_object["detail"]["object"]
    event = {
        "Records": [
            s3_record("crm/good.csv"),
            "junk",
            no_bucket,
            {"eventSource": "aws:sqs"},
            {"EventSource": "aws:sns"},
            {"eventSource": "aws:dynamodb", "dynamodb": {}},
            {"awsRegion": "us-east-1"},
            {"eventSource": "aws:sqs", "body": "not json at all"},
            {"eventSource": "aws:sqs", "body": "[1, 2]"},
            {"eventSource": "aws:sqs", "body": json.dumps({"z": 1, "a": 2})},
            {"eventSource": "aws:sqs", "body": json.dumps(eventbridge_without_object)},
        ]
    }
    objects, problems = parse_event(event)
    assert [o.ref.key for o in objects] == ["crm/good.csv"]
    assert problems == [
        "record of type str",
        "S3 record without 'bucket'",
        "SQS record without 'body'",
        "SNS record without 'Sns'",
        "unrecognised record from aws:dynamodb",
        "unrecognised record from unknown source",
        "sqs body is not JSON: 'not json at all'",
        "unrecognised sqs payload of type list",
        "unrecognised sqs shape with keys ['a', 'z']",
        "EventBridge S3 event without 'object'",
    ]
    assert parse_event("{") == ([], ["event body is not JSON: '{'"])
    assert parse_event(7) == ([], ["unrecognised event payload of type int"])
    many = {f"k{i}": i for i in range(10)}
    assert parse_event(many)[1] == [f"unrecognised event shape with keys {sorted(many)[:8]}"]
    assert parse_event({"Event": "s3:TestEvent", "Bucket": RAW}) == ([], [])
    assert parse_event("x" * 200)[1] == [f"event body is not JSON: {'x' * 120!r}"]


def test_the_requests_the_operator_verbs_and_the_schedule_send():
    assert is_sweep({"lakeloader": {"action": "sweep"}})
    assert is_sweep({"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}})
    for other in (
        {"lakeloader": {"action": "rebuild"}},
        {"lakeloader": "sweep"},
        {"source": "aws.events", "detail-type": "Object Created"},
        {"source": "aws.s3", "detail-type": "Scheduled Event"},
        s3_event(s3_record("crm/a.csv")),
        "sweep",
    ):
        assert not is_sweep(other), other
    assert sweep_table_ids({"lakeloader": {"action": "sweep", "table_ids": ["a", "b"]}}) == ["a", "b"]
    assert sweep_table_ids({"lakeloader": {"action": "sweep"}}) is None
    assert sweep_table_ids({"source": "aws.events"}) is None

    asked = {"action": "rebuild", "table_ids": ["crm.customers"]}
    assert rebuild_request({"lakeloader": asked}) == {
        "table_ids": ["crm.customers"],
        "raw_zone_erased": False,
    }
    erased = rebuild_request({"lakeloader": asked | {"raw_zone_erased": True}})
    assert erased == {"table_ids": ["crm.customers"], "raw_zone_erased": True}
    assert rebuild_request({"lakeloader": asked | {"raw_zone_erased": "yes"}})["raw_zone_erased"] is False
    for not_rebuild in ({"lakeloader": {"action": "sweep"}}, {"lakeloader": "rebuild"}, {}, "rebuild"):
        assert rebuild_request(not_rebuild) is None
    for bad in (None, [], "crm.customers", ["crm.customers", 7]):
        with pytest.raises(ValueError) as raised:
            rebuild_request({"lakeloader": {"action": "rebuild", "table_ids": bad}})
        assert str(raised.value) == (
            f"a rebuild request names its tables in table_ids (a list of ids), got {bad!r}"
        )


def test_the_correlation_id_is_the_lambda_request_else_the_callers_else_a_new_one():
    request = {"lakeloader": {"action": "sweep", "correlation_id": "cli-42"}}
    assert correlation_id_for(request, context("req-1")) == "req-1"
    assert correlation_id_for(request, None) == "cli-42"
    assert correlation_id_for(request, SimpleNamespace(aws_request_id="")) == "cli-42"
    fresh = {correlation_id_for({"lakeloader": {"action": "sweep"}}) for _ in range(3)}
    assert len(fresh) == 3 and all(len(cid) == 32 for cid in fresh)
    assert len(correlation_id_for("not a mapping")) == 32
