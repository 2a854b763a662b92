"""The object ledger: one item per raw object a table has seen, recorded, claimed and finished.

Life cycle and the conditional writes that make it safe: docs/ledger_and_trigger.md.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from lakeloader.control.dynamodb import encode_item, is_condition_failure
from lakeloader.control.ledger.base import LedgerTables, clip_error, record_from_item, utc_now_iso

LOG = logging.getLogger("lakeloader.ledger")  # the name log queries know

PENDING = "pending"
RUNNING = "running"
DONE = "done"
FAILED = "failed"
# Failed `max_attempts` times as the file its batch's error names: no run takes it again (a user
# fixes the file and loads it again, see docs/ledger_and_trigger.md).
QUARANTINED = "quarantined"
# Set aside by a user (`lakeloader skip`): no run takes it; `lakeloader requeue` gives it back.
SKIPPED = "skipped"
DEFAULT_MAX_ATTEMPTS = 3
OBJECT_STATUSES = (PENDING, RUNNING, DONE, FAILED, QUARANTINED, SKIPPED)
OPEN_STATUSES = (PENDING, FAILED, RUNNING)  # what a run still takes: the table's backlog

_MAX_SORT_KEY_BYTES = 1024


def _normalise_etag(etag: str | None) -> str | None:
    if not etag:
        return None
    etag = etag.strip().strip('"')
    return etag or None


def _normalise_version(version_id: str | None) -> str | None:
    # Unversioned buckets report no version or the literal "null".
    if not version_id or version_id == "null":
        return None
    return version_id


def object_id_for(
    key: str, *, version_id: str | None = None, etag: str | None = None, sequencer: str | None = None
) -> str:
    """The ledger sort key of one object: ``<key>#<version-id or etag>``.

    A re-upload of a key with new content (new ETag, or a new version in a
    versioned bucket) is a new object; a duplicate event names the same one.
    Keys too long for a DynamoDB sort key (1024 bytes) are replaced by their
    SHA-256; the item keeps the real key in ``key``.
    """
    ident = _normalise_version(version_id) or _normalise_etag(etag) or sequencer or "-"
    object_id = f"{key}#{ident}"
    if len(object_id.encode("utf-8")) > _MAX_SORT_KEY_BYTES:
        object_id = f"sha256:{hashlib.sha256(key.encode('utf-8')).hexdigest()}#{ident}"
    return object_id


def within_bytes(
    objects: list[LedgerObject], max_bytes: int | None, *, at_least_one: bool = True
) -> list[LedgerObject]:
    """The leading objects whose sizes add up to at most ``max_bytes`` (and the first one, however
    large, when ``at_least_one``: a file larger than the limit must still load some day)."""
    if max_bytes is None:
        return objects
    taken, total = [], 0
    for obj in objects:
        total += obj.size or 0
        if total > max_bytes and (taken or not at_least_one):
            break
        taken.append(obj)
    return taken


@dataclass(frozen=True)
class ObjectRef:
    """One raw object as an S3 event (or a listing) describes it."""

    bucket: str
    key: str
    etag: str | None = None
    version_id: str | None = None
    size: int | None = None
    sequencer: str | None = None
    event_time: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "etag", _normalise_etag(self.etag))
        object.__setattr__(self, "version_id", _normalise_version(self.version_id))

    @property
    def object_id(self) -> str:
        return object_id_for(self.key, version_id=self.version_id, etag=self.etag, sequencer=self.sequencer)

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.key}"


@dataclass(frozen=True)
class LedgerObject:
    """One ledger item."""

    table_id: str
    object_id: str
    bucket: str
    key: str
    status: str
    etag: str | None = None
    version_id: str | None = None
    size: int | None = None
    sequencer: str | None = None
    event_time: str | None = None
    first_seen: str | None = None
    updated_at: str | None = None
    run_id: str | None = None
    error: str | None = None
    correlation_id: str | None = None
    attempts: int = 0
    note: str | None = None  # who skipped or requeued it, and why

    @property
    def uri(self) -> str:
        """``s3://bucket/key`` — what a Spark reader takes."""
        return f"s3://{self.bucket}/{self.key}"

    @property
    def ref(self) -> ObjectRef:
        return ObjectRef(
            self.bucket, self.key, self.etag, self.version_id, self.size, self.sequencer, self.event_time
        )

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> LedgerObject:
        return record_from_item(cls, item, table_id="", object_id="", bucket="", key="", status=PENDING)


@dataclass(frozen=True)
class RecordOutcome:
    """What ``record`` did: ``new`` False means a duplicate event; ``object`` is the stored item."""

    new: bool
    object: LedgerObject


class ObjectLedger(LedgerTables):
    """Record, list, claim and finish a table's raw objects (the ledger table)."""

    def _object_key(self, table_id: str, object_id: str) -> dict[str, Any]:
        return encode_item({"table_id": table_id, "object_id": object_id})

    def record(self, table_id: str, obj: ObjectRef, *, correlation_id: str) -> RecordOutcome:
        """Record a raw object as pending unless the ledger has it already.

        Conditional PutItem (``attribute_not_exists``): a duplicate event
        changes nothing and returns ``new=False`` with the stored item.
        """
        now = utc_now_iso(self.clock())
        values: dict[str, Any] = {
            "table_id": table_id,
            "object_id": obj.object_id,
            "bucket": obj.bucket,
            "key": obj.key,
            "status": PENDING,
            "attempts": 0,
            "first_seen": now,
            "updated_at": now,
            "correlation_id": correlation_id,
        }
        for name in ("etag", "version_id", "sequencer", "event_time"):
            if getattr(obj, name):
                values[name] = getattr(obj, name)
        if obj.size is not None:
            values["size"] = int(obj.size)
        item = encode_item(values)
        try:
            self.client.put_item(
                TableName=self.ledger_table,
                Item=item,
                ConditionExpression="attribute_not_exists(object_id)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if not is_condition_failure(exc):
                raise
            old = exc.response.get("Item")
            existing = LedgerObject.from_item(old) if old else self.get_object(table_id, obj.object_id)
            if existing is None:  # deleted in between; extremely unlikely
                existing = LedgerObject.from_item(item)
            return RecordOutcome(new=False, object=existing)
        return RecordOutcome(new=True, object=LedgerObject.from_item(item))

    def record_object(self, table_id: str, obj: ObjectRef, *, correlation_id: str) -> bool:
        """Record a raw object; True if it is new, False for a duplicate event."""
        return self.record(table_id, obj, correlation_id=correlation_id).new

    def get_object(self, table_id: str, object_id: str) -> LedgerObject | None:
        response = self.client.get_item(
            TableName=self.ledger_table, Key=self._object_key(table_id, object_id), ConsistentRead=True
        )
        item = response.get("Item")
        return LedgerObject.from_item(item) if item else None

    def _query_objects(
        self, table_id: str, filter_expression: str | None, values: dict[str, Any]
    ) -> Iterator[LedgerObject]:
        kwargs: dict[str, Any] = {
            "TableName": self.ledger_table,
            "KeyConditionExpression": "table_id = :table_id",
            "ExpressionAttributeValues": encode_item({":table_id": table_id, **values}),
            "ConsistentRead": True,
        }
        if self.page_size:
            kwargs["Limit"] = self.page_size
        if filter_expression:
            kwargs["FilterExpression"] = filter_expression
            kwargs["ExpressionAttributeNames"] = {"#status": "status"}
            if "#run" in filter_expression:
                kwargs["ExpressionAttributeNames"]["#run"] = "run_id"
        while True:
            response = self.client.query(**kwargs)
            for item in response.get("Items", []):
                yield LedgerObject.from_item(item)
            last = response.get("LastEvaluatedKey")
            if not last:
                return
            kwargs["ExclusiveStartKey"] = last

    def objects(self, table_id: str, *, statuses: Iterable[str] | None = None) -> list[LedgerObject]:
        """Every ledger item of a table (optionally only some statuses), in key order."""
        wanted = tuple(statuses or ())
        for status in wanted:
            if status not in OBJECT_STATUSES:
                raise ValueError(f"unknown object status {status!r}; use one of {OBJECT_STATUSES}")
        if not wanted:
            return list(self._query_objects(table_id, None, {}))
        placeholders = {f":s{i}": status for i, status in enumerate(wanted)}
        expression = "#status IN (" + ", ".join(placeholders) + ")"
        return list(self._query_objects(table_id, expression, placeholders))

    @staticmethod
    def _open_filter(
        *, include_failed: bool, include_orphaned: bool, exclude_run: str | None
    ) -> tuple[str, dict[str, Any]]:
        values: dict[str, Any] = {":pending": PENDING}
        others = []
        if include_failed:
            others.append("#status = :failed")
            values[":failed"] = FAILED
        if include_orphaned:
            others.append("#status = :running")
            values[":running"] = RUNNING
        expression = "#status = :pending"
        if others:
            other = " OR ".join(others)
            if exclude_run:
                other = f"({other}) AND (attribute_not_exists(#run) OR #run <> :run)"
                values[":run"] = exclude_run
            expression = f"{expression} OR ({other})"
        return expression, values

    def pending_objects(
        self,
        table_id: str,
        *,
        include_failed: bool = True,
        include_orphaned: bool = False,
        exclude_run: str | None = None,
        max_attempts: int | None = None,
        limit: int | None = None,
        max_bytes: int | None = None,
        at_least_one: bool = True,
    ) -> list[LedgerObject]:
        """The objects a run of this table should take, oldest first.

        Pending objects, plus failed ones (``include_failed``, the default: a
        later run retries them). ``include_orphaned`` adds objects still marked
        running — only meaningful to the holder of the table's lock, for whom
        they are leftovers of a crashed run. ``exclude_run`` leaves out failed
        and running objects last claimed by that run (so a run does not retry
        its own failures in a loop). ``max_attempts`` leaves out objects that
        were claimed that many times already. ``limit`` and ``max_bytes`` bound what is returned
        (the oldest ones; see ``within_bytes``). Paginated, strongly consistent.
        Order: event time (else first seen), then key.
        """
        expression, values = self._open_filter(
            include_failed=include_failed, include_orphaned=include_orphaned, exclude_run=exclude_run
        )
        found = [
            obj
            for obj in self._query_objects(table_id, expression, values)
            if max_attempts is None or obj.attempts < max_attempts
        ]
        found.sort(key=lambda o: (o.event_time or o.first_seen or "", o.key, o.object_id))
        return within_bytes(
            found[:limit] if limit is not None else found, max_bytes, at_least_one=at_least_one
        )

    def has_pending(
        self, table_id: str, *, include_failed: bool = False, include_orphaned: bool = False
    ) -> bool:
        """Whether the table has any open object (stops at the first one found)."""
        expression, values = self._open_filter(
            include_failed=include_failed, include_orphaned=include_orphaned, exclude_run=None
        )
        return next(iter(self._query_objects(table_id, expression, values)), None) is not None

    def claim(self, table_id: str, objects: Sequence[LedgerObject], run_id: str) -> list[LedgerObject]:
        """Mark objects running for ``run_id``; returns those actually claimed.

        Any object that is not done can be claimed (pending, failed, or running
        — the caller holds the table lock, so a running object belongs to a
        crashed run). Objects finished meanwhile are skipped. ``attempts`` is
        incremented; the last error stays until the object finishes.
        """
        claimed = []
        values = encode_item(
            {
                ":running": RUNNING,
                ":done": DONE,
                ":run": run_id,
                ":now": utc_now_iso(self.clock()),
                ":zero": 0,
                ":one": 1,
            }
        )
        requests = [
            {
                "TableName": self.ledger_table,
                "Key": self._object_key(table_id, obj.object_id),
                "UpdateExpression": (
                    "SET #status = :running, run_id = :run, updated_at = :now, "
                    "attempts = if_not_exists(attempts, :zero) + :one"
                ),
                "ConditionExpression": "attribute_exists(object_id) AND #status <> :done",
                "ExpressionAttributeNames": {"#status": "status"},
                "ExpressionAttributeValues": values,
                "ReturnValues": "ALL_NEW",
            }
            for obj in objects
        ]
        responses = self.conditional_writes(self.client.update_item, requests)
        for obj, response in zip(objects, responses, strict=True):
            if response is None:
                LOG.info("object not claimable (done or gone): table %s object %s", table_id, obj.object_id)
                continue
            claimed.append(LedgerObject.from_item(response["Attributes"]))
        return claimed

    def finish(
        self,
        table_id: str,
        objects: Sequence[LedgerObject],
        run_id: str,
        status: str,
        error: str | None = None,
    ) -> list[LedgerObject]:
        """End ``run_id``'s claim on objects: ``done``, ``failed`` or ``quarantined`` (keep
        ``error``), or ``pending`` (give them back for a later batch, the claim's attempt undone).

        Only objects still claimed by ``run_id`` change (a run whose lock
        expired cannot overwrite the run that took over); returns those.
        """
        if status not in (DONE, FAILED, QUARANTINED, PENDING):
            raise ValueError(f"finish status must be done, failed, quarantined or pending, not {status!r}")
        if status in (FAILED, QUARANTINED) and not error:
            error = "failed without an error message"
        values: dict[str, Any] = {
            ":status": status,
            ":running": RUNNING,
            ":run": run_id,
            ":now": utc_now_iso(self.clock()),
        }
        if status in (FAILED, QUARANTINED):
            update = "SET #status = :status, updated_at = :now, #error = :error"
            values[":error"] = clip_error(error) or ""
        elif status == DONE:
            update = "SET #status = :status, updated_at = :now REMOVE #error"
        else:
            update = "SET #status = :status, updated_at = :now, attempts = attempts - :one"
            values[":one"] = 1
        names = {"#status": "status"}
        if "#error" in update:
            names["#error"] = "error"
        encoded = encode_item(values)
        finished = []
        requests = [
            {
                "TableName": self.ledger_table,
                "Key": self._object_key(table_id, obj.object_id),
                "UpdateExpression": update,
                "ConditionExpression": "#status = :running AND run_id = :run",
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": encoded,
                "ReturnValues": "ALL_NEW",
            }
            for obj in objects
        ]
        responses = self.conditional_writes(self.client.update_item, requests)
        for obj, response in zip(objects, responses, strict=True):
            if response is None:
                LOG.warning(
                    "object no longer claimed by run %s, left as is: table %s object %s",
                    run_id,
                    table_id,
                    obj.object_id,
                )
                continue
            finished.append(LedgerObject.from_item(response["Attributes"]))
        return finished
