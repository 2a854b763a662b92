"""What an invocation asks, read once into a typed event: objects arrived, a sweep or a rebuild.

Records are read through aws-lambda-powertools' event data classes (plain dict wrappers, no
pydantic); the walk over envelopes (S3 in SQS, SNS in SQS, EventBridge in SQS, ...) is ours.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_plus

from aws_lambda_powertools.utilities.data_classes import S3EventBridgeNotificationEvent, SQSRecord
from aws_lambda_powertools.utilities.data_classes.s3_event import S3EventRecord
from aws_lambda_powertools.utilities.data_classes.sns_event import SNSEventRecord

from lakeloader.control.contract import REBUILD_EVENT, SWEEP_EVENT
from lakeloader.control.ledger import ObjectRef

_MAX_DEPTH = 4
_KINDS = {"aws:sqs": "SQS", "aws:sns": "SNS"}


@dataclass(frozen=True)
class ObjectEvent:
    """One object named by an event record."""

    ref: ObjectRef
    event_name: str
    source: str  # s3 | sqs | sns | eventbridge (the outermost wrapper)

    @property
    def created(self) -> bool:
        name = self.event_name.removeprefix("s3:")
        return name.startswith("ObjectCreated") or name == "Object Created"


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _s3_object(record: S3EventRecord, source: str) -> ObjectEvent:
    """An S3 notification record; its key arrives URL-encoded (``quote_plus``)."""
    obj = record.s3.get_object
    ref = ObjectRef(
        bucket=record.s3.bucket.name,
        key=unquote_plus(obj.key),
        etag=obj.etag or obj.get("etag"),
        version_id=obj.version_id,
        size=_int_or_none(obj.get("size")),  # absent in removal events, which are ignored later
        sequencer=obj.get("sequencer"),
        event_time=record.get("eventTime"),
    )
    return ObjectEvent(ref=ref, event_name=str(record.get("eventName", "")), source=source)


def _eventbridge_object(
    event: S3EventBridgeNotificationEvent, source: str, keys_encoded: bool
) -> ObjectEvent:
    """An EventBridge ``aws.s3`` event; its key is URL-encoded unless the stage says otherwise."""
    obj = event.detail.object
    time = event.get("time")
    ref = ObjectRef(
        bucket=event.detail.bucket.name,
        key=obj.key if keys_encoded else obj["key"],  # .key is unquote_plus'ed
        etag=obj.etag or obj.get("eTag"),
        version_id=obj.get("version-id"),
        size=_int_or_none(obj.size),
        sequencer=obj.get("sequencer"),
        event_time=time if isinstance(time, str) else None,
    )
    return ObjectEvent(ref=ref, event_name=str(event.get("detail-type", "")), source=source)


def _walk(event: Any, eventbridge_keys_encoded: bool) -> tuple[list[ObjectEvent], list[str], list[Any]]:
    """All objects an event names, a description of each record that could not be read, and the
    bucket of each S3 test event (sent when a notification is configured; it names no object).

    Understands S3 notification records (direct, or in SQS message bodies, or
    in SNS messages, also SNS-in-SQS) and EventBridge ``aws.s3`` events.
    """
    objects: list[ObjectEvent] = []
    problems: list[str] = []
    test_event_buckets: list[Any] = []

    def walk(node: Any, source: str | None, depth: int) -> None:
        if depth > _MAX_DEPTH:
            problems.append("event nested too deeply")
            return
        if isinstance(node, str):
            try:
                node = json.loads(node)
            except json.JSONDecodeError:
                problems.append(f"{source or 'event'} body is not JSON: {node[:120]!r}")
                return
        if not isinstance(node, Mapping):
            problems.append(f"unrecognised {source or 'event'} payload of type {type(node).__name__}")
            return
        if node.get("Event") == "s3:TestEvent":
            test_event_buckets.append(node.get("Bucket"))
            return
        if isinstance(node.get("Records"), list):
            for record in node["Records"]:
                walk_record(record, source, depth)
            return
        if node.get("source") == "aws.s3" and isinstance(node.get("detail"), Mapping):
            try:
                objects.append(
                    _eventbridge_object(
                        S3EventBridgeNotificationEvent(node),
                        source or "eventbridge",
                        eventbridge_keys_encoded,
                    )
                )
            except (KeyError, TypeError) as exc:
                problems.append(f"EventBridge S3 event without {exc}")
            return
        if node.get("Type") == "Notification" and "Message" in node:  # SNS envelope (e.g. in SQS)
            walk(node["Message"], source or "sns", depth + 1)
            return
        problems.append(f"unrecognised {source or 'event'} shape with keys {sorted(node)[:8]}")

    def walk_record(record: Any, source: str | None, depth: int) -> None:
        if not isinstance(record, Mapping):
            problems.append(f"record of type {type(record).__name__}")
            return
        origin = record.get("eventSource") or record.get("EventSource")
        try:
            if origin == "aws:sqs":
                walk(SQSRecord(record).body, source or "sqs", depth + 1)
            elif origin == "aws:sns":
                walk(SNSEventRecord(record).sns.message, source or "sns", depth + 1)
            elif "s3" in record:
                objects.append(_s3_object(S3EventRecord(record), source or "s3"))
            else:
                problems.append(f"unrecognised record from {origin or 'unknown source'}")
        except (KeyError, TypeError) as exc:
            problems.append(f"{_KINDS.get(origin, 'S3')} record without {exc}")

    walk(event, None, 0)
    return objects, problems, test_event_buckets


@dataclass(frozen=True, kw_only=True)
class ObjectsArrived:
    """Objects an S3/SQS/SNS/EventBridge event names, and the records that could not be read."""

    correlation_id: str
    objects: tuple[ObjectEvent, ...] = ()
    problems: tuple[str, ...] = ()
    test_event_buckets: tuple[Any, ...] = ()  # S3 test events: logged, nothing recorded

    @classmethod
    def read(
        cls, event: Any, *, correlation_id: str, eventbridge_keys_encoded: bool = True
    ) -> ObjectsArrived:
        objects, problems, test_event_buckets = _walk(event, eventbridge_keys_encoded)
        return cls(
            correlation_id=correlation_id,
            objects=tuple(objects),
            problems=tuple(problems),
            test_event_buckets=tuple(test_event_buckets),
        )


@dataclass(frozen=True, kw_only=True)
class SweepRequest:
    """Start runs for the tables with pending objects: ``contract.SWEEP_EVENT`` (``table_ids`` None:
    every table), or an EventBridge schedule."""

    correlation_id: str
    table_ids: Sequence[str] | None = None


@dataclass(frozen=True, kw_only=True)
class RebuildRequest:
    """Start runs that rebuild these tables: ``contract.REBUILD_EVENT`` (`lakeloader rebuild --stage`)."""

    correlation_id: str
    table_ids: Sequence[str]
    raw_zone_erased: bool = False


Invocation = ObjectsArrived | SweepRequest | RebuildRequest


def read_invocation(event: Any, context: Any = None, *, eventbridge_keys_encoded: bool = True) -> Invocation:
    """What one invocation asks, read once; raises ValueError for a rebuild request without its tables."""
    cid = _correlation_id(event, context)
    request = event.get("lakeloader") if isinstance(event, Mapping) else None
    request = request if isinstance(request, Mapping) else {}
    if request.get("action") == SWEEP_EVENT["lakeloader"]["action"] or _is_schedule(event):
        return SweepRequest(correlation_id=cid, table_ids=request.get("table_ids"))
    if request.get("action") == REBUILD_EVENT["lakeloader"]["action"]:
        table_ids = request.get("table_ids")
        if not isinstance(table_ids, list) or not table_ids or not all(isinstance(t, str) for t in table_ids):
            raise ValueError(
                f"a rebuild request names its tables in table_ids (a list of ids), got {table_ids!r}"
            )
        return RebuildRequest(
            correlation_id=cid, table_ids=table_ids, raw_zone_erased=request.get("raw_zone_erased") is True
        )
    return ObjectsArrived.read(event, correlation_id=cid, eventbridge_keys_encoded=eventbridge_keys_encoded)


def _is_schedule(event: Any) -> bool:
    return (
        isinstance(event, Mapping)
        and event.get("source") == "aws.events"
        and event.get("detail-type") == "Scheduled Event"
    )


def _correlation_id(event: Any, context: Any) -> str:
    """The Lambda request id; else an explicit one in the event; else a fresh uuid."""
    request_id = getattr(context, "aws_request_id", None)
    if request_id:
        return str(request_id)
    if isinstance(event, Mapping):
        request = event.get("lakeloader")
        if isinstance(request, Mapping) and request.get("correlation_id"):
            return str(request["correlation_id"])
    return uuid.uuid4().hex
