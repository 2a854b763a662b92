"""Every field the trigger reads from an event, without AWS: what each object record becomes (bucket,
key, ETag, version, size, sequencer, event time, name, outermost source), which names mean "created",
what each unreadable record is reported as, and what each invocation reads as (objects arrived, the
sweep and rebuild requests the operator verbs and the schedule send, and its correlation id).
lakeloader.control.trigger.events is plain Python; test_trigger_events.py runs the same events through the
handler against moto."""

from __future__ import annotations

import json
from dataclasses import FrozenInstanceError
from types import SimpleNamespace
from urllib.parse import quote_plus

import pytest

from lakeloader.control.ledger import ObjectRef
from lakeloader.control.trigger.events import (
    ObjectEvent,
    ObjectsArrived,
    RebuildRequest,
    SweepRequest,
    read_invocation,
)
from tests.unit.trigger_world import (
    RAW,
    context,
    eventbridge_event,
    objects_and_problems,
    s3_event,
    s3_record,
    sqs_event,
)

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
    objects, problems = objects_and_problems(event, **options)
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
    objects, problems = objects_and_problems(event)
    assert problems == []
    assert [(o.ref.key, o.source) for o in objects] == [
        ("crm/in-sqs.csv", "sqs"),
        ("crm/sns-in-sqs.csv", "sqs"),
        ("crm/eb.csv", "sqs"),
    ]
    objects, _ = objects_and_problems({"Records": [sns_record(s3_event(s3_record("crm/sns.csv")))]})
    assert [(o.ref.key, o.source) for o in objects] == [("crm/sns.csv", "sns")]


def test_events_nest_four_deep_at_most():
    event = s3_event(s3_record("crm/deep.csv"))
    for _ in range(4):
        event = sqs_event(event)
    assert only(event).ref.key == "crm/deep.csv"
    assert objects_and_problems(sqs_event(event)) == ([], ["event nested too deeply"])


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
    objects, problems = objects_and_problems(event)
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
    assert objects_and_problems("{") == ([], ["event body is not JSON: '{'"])
    assert objects_and_problems(7) == ([], ["unrecognised event payload of type int"])
    many = {f"k{i}": i for i in range(10)}
    assert objects_and_problems(many)[1] == [f"unrecognised event shape with keys {sorted(many)[:8]}"]
    assert objects_and_problems({"Event": "s3:TestEvent", "Bucket": RAW}) == ([], [])
    assert objects_and_problems("x" * 200)[1] == [f"event body is not JSON: {'x' * 120!r}"]


def test_a_sweep_request_or_the_schedule_reads_as_a_sweep_with_its_tables():
    def read(event):
        return read_invocation(event, context("req-1"))

    assert read({"lakeloader": {"action": "sweep"}}) == SweepRequest(correlation_id="req-1")
    scheduled = {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}
    assert read(scheduled) == SweepRequest(correlation_id="req-1", table_ids=None)
    asked = {"lakeloader": {"action": "sweep", "table_ids": ["a", "b"]}}
    assert read(asked) == SweepRequest(correlation_id="req-1", table_ids=["a", "b"])
    assert isinstance(read({"lakeloader": {"action": "rebuild", "table_ids": ["a"]}}), RebuildRequest)
    for other in (
        {"lakeloader": "sweep"},
        {"source": "aws.events", "detail-type": "Object Created"},
        {"source": "aws.s3", "detail-type": "Scheduled Event"},
        s3_event(s3_record("crm/a.csv")),
        "sweep",
    ):
        assert isinstance(read(other), ObjectsArrived), other


def test_a_rebuild_request_reads_as_its_tables_and_whether_the_raw_zone_was_erased():
    def read(request):
        return read_invocation({"lakeloader": request}, context("req-1"))

    asked = {"action": "rebuild", "table_ids": ["crm.customers"]}
    assert read(asked) == RebuildRequest(
        correlation_id="req-1", table_ids=["crm.customers"], raw_zone_erased=False
    )
    erased = read(asked | {"raw_zone_erased": True})
    assert erased == RebuildRequest(correlation_id="req-1", table_ids=["crm.customers"], raw_zone_erased=True)
    assert read(asked | {"raw_zone_erased": "yes"}).raw_zone_erased is False
    for not_rebuild in ({"action": "sweep"}, "rebuild", {}):
        assert not isinstance(read(not_rebuild), RebuildRequest)
    assert isinstance(read_invocation("rebuild"), ObjectsArrived)
    with pytest.raises(FrozenInstanceError):
        erased.raw_zone_erased = False  # type: ignore[misc]


def test_a_rebuild_request_that_does_not_name_its_tables_is_refused():
    for bad in (None, [], "crm.customers", ["crm.customers", 7]):
        with pytest.raises(ValueError) as raised:
            read_invocation({"lakeloader": {"action": "rebuild", "table_ids": bad}})
        assert str(raised.value) == (
            f"a rebuild request names its tables in table_ids (a list of ids), got {bad!r}"
        )
    with pytest.raises(ValueError, match="got None"):
        read_invocation({"lakeloader": {"action": "rebuild"}}, context("req-1"))


def test_an_event_naming_objects_reads_as_its_objects_its_problems_and_its_s3_test_events():
    arrived = read_invocation(
        {"Records": [s3_record("crm/a.csv", etag="e1"), "junk"]},
        context("req-1"),
        eventbridge_keys_encoded=False,
    )
    assert isinstance(arrived, ObjectsArrived) and arrived.correlation_id == "req-1"
    assert [o.ref.key for o in arrived.objects] == ["crm/a.csv"]
    assert arrived.problems == ("record of type str",) and arrived.test_event_buckets == ()
    configured = read_invocation(sqs_event({"Event": "s3:TestEvent", "Bucket": RAW}), context("req-2"))
    assert configured == ObjectsArrived(correlation_id="req-2", test_event_buckets=(RAW,))


def test_the_correlation_id_is_the_lambda_request_else_the_callers_else_a_new_one():
    request = {"lakeloader": {"action": "sweep", "correlation_id": "cli-42"}}
    assert read_invocation(request, context("req-1")).correlation_id == "req-1"
    assert read_invocation(request, None).correlation_id == "cli-42"
    assert read_invocation(request, SimpleNamespace(aws_request_id="")).correlation_id == "cli-42"
    fresh = {read_invocation({"lakeloader": {"action": "sweep"}}).correlation_id for _ in range(3)}
    assert len(fresh) == 3 and all(len(cid) == 32 for cid in fresh)
    assert len(read_invocation("not a mapping").correlation_id) == 32
    rebuild = {"lakeloader": {"action": "rebuild", "table_ids": ["t"], "correlation_id": "cli-43"}}
    assert read_invocation(rebuild).correlation_id == "cli-43"
    assert read_invocation(rebuild, context("req-3")).correlation_id == "req-3"
    assert read_invocation(s3_event(s3_record("crm/a.csv")), context("req-4")).correlation_id == "req-4"
