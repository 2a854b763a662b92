"""The run ledger: which raw objects each table has seen, and which runs took them.

Shipped to the S3-arrival Lambda as plain Python, so this module imports only
the standard library and botocore (no pydantic, yaml or pyspark). It talks to
DynamoDB through a low-level boto3 client with typed attribute values.

Two DynamoDB tables:

*Ledger* (PK ``table_id`` S, SK ``object_id`` S) — one item per raw object::

    table_id        S  "crm.customers"
    object_id       S  "<key>#<version-id or etag>"   (see object_id_for)
    bucket, key     S
    etag            S  (no quotes)            version_id  S  (versioned buckets)
    size            N                          sequencer   S, event_time S (from the event)
    status          S  pending | running | done | failed
    attempts        N  how many runs claimed it
    first_seen      S  ISO-8601 UTC            updated_at  S
    run_id          S  the run that last claimed it
    error           S  the last failure (kept while failed; removed when done)
    correlation_id  S  the trigger invocation that first saw it

*Run history* (PK ``table_id`` S, SK ``run_id`` S, TTL attribute ``expires_at``)
— one item per job run, plus one lock item per table (``run_id = "#lock"``)::

    run:  status running|succeeded|failed|skipped, correlation_id, engine,
          engine_run_id, objects N, started_at, started_epoch_ms N, ended_at, duration_ms N,
          counts M{name: N}, snapshot_id N, error, expires_at N (retention)
    lock: holder (run id, or "trigger:<correlation id>" while a start is in
          flight), state starting|running, acquired_at, expires_at N (lock
          expiry, which doubles as the DynamoDB TTL so stale locks vanish),
          engine_run_id
    window (``run_id = "#window"``, tables with a batching window only): last_start N
          (epoch seconds of the table's last run start, claimed by the trigger),
          expires_at N (TTL, a day after the window would allow the next start)

Object life cycle::

    record_object ─► pending ─claim─► running ─finish─► done
                        ▲                        └────► failed ─┐
                        └── finish(status="pending") (release)  │
                 a later run's pending_objects() takes failed ◄─┘

* Duplicate S3 events are harmless: ``record_object`` is a conditional PutItem
  (``attribute_not_exists``), the second delivery returns False.
* Failed objects are retried automatically by the *next* run of their table
  (``pending_objects`` returns pending and failed objects, ``exclude_run`` keeps
  a run from retrying its own failures in a loop). A permanently bad file thus
  keeps failing its table's runs — loudly, in the run history — rather than
  being skipped, because skipping a CDC batch silently corrupts the target.
  Callers who prefer to give up after N tries pass ``max_attempts=N``.
* The trigger only starts a run for objects that are *pending*; tables whose
  only open objects failed wait for new data or a manual run.

One run at a time per table (the lock):

* The trigger reserves the table with ``reserve_start`` (state ``starting``,
  short expiry, holder ``trigger:<correlation id>``) before it starts a Glue/EMR
  run, and releases the reservation if the start fails.
* The job takes the lock with ``acquire_lock`` (state ``running``); it may take
  over a ``starting`` reservation (that is the run the trigger started), an
  expired lock, or a lock it already holds. The lock expiry must exceed the
  job's timeout, or the job renews it (``renew_lock``; ``next_batch`` does).
* Drain protocol, which loses no wake-up: the trigger records the object
  *before* it looks at the lock; the job releases the lock *before* its last
  look at the pending objects, and re-takes the lock if it finds any.
  ``next_batch`` implements this; a job is simply::

      if not ledger.acquire_lock(table_id, run_id):
          return  # another run is in progress; it will drain our objects
      try:
          while batch := ledger.next_batch(table_id, run_id):
              ...merge the batch...
              ledger.finish(table_id, batch, run_id, "done")   # or "failed", error=...
      finally:
          ledger.release_lock(table_id, run_id)
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

LOG = logging.getLogger("lakeloader.ledger")

PENDING = "pending"
RUNNING = "running"
DONE = "done"
FAILED = "failed"
OBJECT_STATUSES = (PENDING, RUNNING, DONE, FAILED)

RUN_RUNNING = "running"
RUN_SUCCEEDED = "succeeded"
RUN_FAILED = "failed"
RUN_SKIPPED = "skipped"
RUN_STATUSES = (RUN_RUNNING, RUN_SUCCEEDED, RUN_FAILED, RUN_SKIPPED)

LOCK_RUN_ID = "#lock"
WINDOW_RUN_ID = "#window"
LOCK_STARTING = "starting"
LOCK_RUNNING = "running"

DEFAULT_LOCK_TTL_SECONDS = 2 * 3600
DEFAULT_START_LEASE_SECONDS = 15 * 60
DEFAULT_RUN_RETENTION_DAYS = 90
MAX_ERROR_CHARS = 4000
_MAX_SORT_KEY_BYTES = 1024


class LedgerError(RuntimeError):
    """The ledger could not do what was asked (the message says which table/object)."""


class LockLostError(LedgerError):
    """A run no longer holds its table's lock (it expired and another run took it)."""


# ---------------------------------------------------------------------------
# small helpers


def utc_now_iso(now: float | None = None) -> str:
    """ISO-8601 UTC with milliseconds, e.g. 2024-05-01T12:00:00.123Z."""
    moment = datetime.fromtimestamp(time.time() if now is None else now, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def new_run_id(now: float | None = None) -> str:
    """A time-sortable run id, e.g. 20240501T120000123Z-9f3a1c (sorts newest-last)."""
    moment = datetime.fromtimestamp(time.time() if now is None else now, tz=UTC)
    return moment.strftime("%Y%m%dT%H%M%S") + f"{moment.microsecond // 1000:03d}Z-{secrets.token_hex(3)}"


def _clip_error(text: str | None) -> str | None:
    if text is None:
        return None
    text = str(text)
    if len(text) <= MAX_ERROR_CHARS:
        return text
    head = MAX_ERROR_CHARS * 2 // 3
    tail = MAX_ERROR_CHARS - head - 20
    return f"{text[:head]}\n...[truncated]...\n{text[-tail:]}"


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


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _n(value: int | float) -> dict[str, str]:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"not a number: {value!r}")
    return {"N": str(value)}


def _get_s(item: Mapping[str, Any], name: str) -> str | None:
    value = item.get(name)
    return value.get("S") if value else None


def _get_n(item: Mapping[str, Any], name: str) -> int | None:
    value = item.get(name)
    if not value or "N" not in value:
        return None
    text = value["N"]
    try:
        return int(text)
    except ValueError:
        return int(float(text))


def _is_condition_failure(exc: ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"


# ---------------------------------------------------------------------------
# records


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
        return cls(
            table_id=_get_s(item, "table_id") or "",
            object_id=_get_s(item, "object_id") or "",
            bucket=_get_s(item, "bucket") or "",
            key=_get_s(item, "key") or "",
            status=_get_s(item, "status") or PENDING,
            etag=_get_s(item, "etag"),
            version_id=_get_s(item, "version_id"),
            size=_get_n(item, "size"),
            sequencer=_get_s(item, "sequencer"),
            event_time=_get_s(item, "event_time"),
            first_seen=_get_s(item, "first_seen"),
            updated_at=_get_s(item, "updated_at"),
            run_id=_get_s(item, "run_id"),
            error=_get_s(item, "error"),
            correlation_id=_get_s(item, "correlation_id"),
            attempts=_get_n(item, "attempts") or 0,
        )


@dataclass(frozen=True)
class RecordOutcome:
    """What ``Ledger.record`` did: ``new`` False means a duplicate event; ``object`` is the stored item."""

    new: bool
    object: LedgerObject


@dataclass(frozen=True)
class Lock:
    """A table's one-run-at-a-time lock (run history item ``run_id = "#lock"``)."""

    table_id: str
    holder: str
    state: str
    acquired_at: str | None
    expires_at: int
    engine_run_id: str | None = None

    def expired(self, now: float | None = None) -> bool:
        return self.expires_at < (time.time() if now is None else now)

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> Lock:
        return cls(
            table_id=_get_s(item, "table_id") or "",
            holder=_get_s(item, "holder") or "",
            state=_get_s(item, "state") or LOCK_RUNNING,
            acquired_at=_get_s(item, "acquired_at"),
            expires_at=_get_n(item, "expires_at") or 0,
            engine_run_id=_get_s(item, "engine_run_id"),
        )


@dataclass(frozen=True)
class RunRecord:
    """One run history item."""

    table_id: str
    run_id: str
    status: str
    correlation_id: str | None = None
    engine: str | None = None
    engine_run_id: str | None = None
    objects: int | None = None
    started_at: str | None = None
    ended_at: str | None = None
    duration_ms: int | None = None
    counts: dict[str, int | float] = field(default_factory=dict)
    snapshot_id: int | None = None
    error: str | None = None
    expires_at: int | None = None

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> RunRecord:
        counts: dict[str, int | float] = {}
        for name, value in (item.get("counts", {}).get("M") or {}).items():
            text = value.get("N", "0")
            counts[name] = float(text) if any(c in text for c in ".eE") else int(text)
        return cls(
            table_id=_get_s(item, "table_id") or "",
            run_id=_get_s(item, "run_id") or "",
            status=_get_s(item, "status") or RUN_RUNNING,
            correlation_id=_get_s(item, "correlation_id"),
            engine=_get_s(item, "engine"),
            engine_run_id=_get_s(item, "engine_run_id"),
            objects=_get_n(item, "objects"),
            started_at=_get_s(item, "started_at"),
            ended_at=_get_s(item, "ended_at"),
            duration_ms=_get_n(item, "duration_ms"),
            counts=counts,
            snapshot_id=_get_n(item, "snapshot_id"),
            error=_get_s(item, "error"),
            expires_at=_get_n(item, "expires_at"),
        )


# ---------------------------------------------------------------------------
# the ledger


class Ledger:
    """Ledger and run history on DynamoDB.

    ``client`` is a low-level ``boto3.client("dynamodb")``. ``clock`` returns
    epoch seconds (tests pass a fake one to age locks). ``page_size`` caps the
    items one Query reads (default: DynamoDB's 1 MB pages). Every method is
    safe to call again after a crash or a retried invocation.
    """

    def __init__(
        self,
        client: Any,
        ledger_table: str,
        runs_table: str,
        *,
        clock: Callable[[], float] = time.time,
        run_retention_days: int = DEFAULT_RUN_RETENTION_DAYS,
        page_size: int | None = None,
    ) -> None:
        self.client = client
        self.page_size = page_size
        self.ledger_table = ledger_table
        self.runs_table = runs_table
        self.clock = clock
        self.run_retention_days = run_retention_days

    # -- objects ------------------------------------------------------------

    def record(self, table_id: str, obj: ObjectRef, *, correlation_id: str) -> RecordOutcome:
        """Record a raw object as pending unless the ledger has it already.

        Conditional PutItem (``attribute_not_exists``): a duplicate event
        changes nothing and returns ``new=False`` with the stored item.
        """
        now = utc_now_iso(self.clock())
        item: dict[str, Any] = {
            "table_id": _s(table_id),
            "object_id": _s(obj.object_id),
            "bucket": _s(obj.bucket),
            "key": _s(obj.key),
            "status": _s(PENDING),
            "attempts": _n(0),
            "first_seen": _s(now),
            "updated_at": _s(now),
            "correlation_id": _s(correlation_id),
        }
        for name in ("etag", "version_id", "sequencer", "event_time"):
            value = getattr(obj, name)
            if value:
                item[name] = _s(value)
        if obj.size is not None:
            item["size"] = _n(int(obj.size))
        try:
            self.client.put_item(
                TableName=self.ledger_table,
                Item=item,
                ConditionExpression="attribute_not_exists(object_id)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if not _is_condition_failure(exc):
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
            TableName=self.ledger_table,
            Key={"table_id": _s(table_id), "object_id": _s(object_id)},
            ConsistentRead=True,
        )
        item = response.get("Item")
        return LedgerObject.from_item(item) if item else None

    def _query_objects(
        self, table_id: str, filter_expression: str | None, values: dict[str, Any]
    ) -> Iterator[LedgerObject]:
        kwargs: dict[str, Any] = {
            "TableName": self.ledger_table,
            "KeyConditionExpression": "table_id = :table_id",
            "ExpressionAttributeValues": {":table_id": _s(table_id), **values},
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
        placeholders = {f":s{i}": _s(status) for i, status in enumerate(wanted)}
        expression = "#status IN (" + ", ".join(placeholders) + ")"
        return list(self._query_objects(table_id, expression, placeholders))

    def _open_filter(
        self, *, include_failed: bool, include_orphaned: bool, exclude_run: str | None
    ) -> tuple[str, dict[str, Any]]:
        values: dict[str, Any] = {":pending": _s(PENDING)}
        others = []
        if include_failed:
            others.append("#status = :failed")
            values[":failed"] = _s(FAILED)
        if include_orphaned:
            others.append("#status = :running")
            values[":running"] = _s(RUNNING)
        expression = "#status = :pending"
        if others:
            other = " OR ".join(others)
            if exclude_run:
                other = f"({other}) AND (attribute_not_exists(#run) OR #run <> :run)"
                values[":run"] = _s(exclude_run)
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
    ) -> list[LedgerObject]:
        """The objects a run of this table should take, oldest first.

        Pending objects, plus failed ones (``include_failed``, the default: a
        later run retries them). ``include_orphaned`` adds objects still marked
        running — only meaningful to the holder of the table's lock, for whom
        they are leftovers of a crashed run. ``exclude_run`` leaves out failed
        and running objects last claimed by that run (so a run does not retry
        its own failures in a loop). ``max_attempts`` leaves out objects that
        were claimed that many times already. Paginated, strongly consistent.
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
        return found[:limit] if limit is not None else found

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
        now = utc_now_iso(self.clock())
        for obj in objects:
            try:
                response = self.client.update_item(
                    TableName=self.ledger_table,
                    Key={"table_id": _s(table_id), "object_id": _s(obj.object_id)},
                    UpdateExpression=(
                        "SET #status = :running, run_id = :run, updated_at = :now, "
                        "attempts = if_not_exists(attempts, :zero) + :one"
                    ),
                    ConditionExpression="attribute_exists(object_id) AND #status <> :done",
                    ExpressionAttributeNames={"#status": "status"},
                    ExpressionAttributeValues={
                        ":running": _s(RUNNING),
                        ":done": _s(DONE),
                        ":run": _s(run_id),
                        ":now": _s(now),
                        ":zero": _n(0),
                        ":one": _n(1),
                    },
                    ReturnValues="ALL_NEW",
                )
            except ClientError as exc:
                if not _is_condition_failure(exc):
                    raise
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
        """End ``run_id``'s claim on objects: ``done``, ``failed`` (keeps ``error``)
        or ``pending`` (give them back untouched for a later run).

        Only objects still claimed by ``run_id`` change (a run whose lock
        expired cannot overwrite the run that took over); returns those.
        """
        if status not in (DONE, FAILED, PENDING):
            raise ValueError(f"finish status must be done, failed or pending, not {status!r}")
        if status == FAILED and not error:
            error = "failed without an error message"
        now = utc_now_iso(self.clock())
        values: dict[str, Any] = {
            ":status": _s(status),
            ":running": _s(RUNNING),
            ":run": _s(run_id),
            ":now": _s(now),
        }
        if status == FAILED:
            update = "SET #status = :status, updated_at = :now, #error = :error"
            values[":error"] = _s(_clip_error(error) or "")
        elif status == DONE:
            update = "SET #status = :status, updated_at = :now REMOVE #error"
        else:
            update = "SET #status = :status, updated_at = :now"
        names = {"#status": "status"}
        if "#error" in update:
            names["#error"] = "error"
        finished = []
        for obj in objects:
            try:
                response = self.client.update_item(
                    TableName=self.ledger_table,
                    Key={"table_id": _s(table_id), "object_id": _s(obj.object_id)},
                    UpdateExpression=update,
                    ConditionExpression="#status = :running AND run_id = :run",
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues=values,
                    ReturnValues="ALL_NEW",
                )
            except ClientError as exc:
                if not _is_condition_failure(exc):
                    raise
                LOG.warning(
                    "object no longer claimed by run %s, left as is: table %s object %s",
                    run_id,
                    table_id,
                    obj.object_id,
                )
                continue
            finished.append(LedgerObject.from_item(response["Attributes"]))
        return finished

    # -- the drain loop -----------------------------------------------------

    def next_batch(
        self,
        table_id: str,
        run_id: str,
        *,
        max_objects: int | None = None,
        max_attempts: int | None = None,
        lock_ttl_seconds: int = DEFAULT_LOCK_TTL_SECONDS,
    ) -> list[LedgerObject]:
        """Claim the next batch for a run that holds the table lock; [] means stop.

        Takes pending objects, failed objects of earlier runs and objects left
        running by crashed runs (see ``pending_objects``). Renews the lock
        while there is work. When there is none, it releases the lock, looks
        once more, and re-takes the lock if an object slipped in (the trigger
        saw the lock held and deferred to us). Returns [] when the run should
        end — the lock is then released (or held by another run that will
        drain). Raises ``LockLostError`` if the lock was taken away mid-run.
        """

        def candidates() -> list[LedgerObject]:
            return self.pending_objects(
                table_id,
                include_failed=True,
                include_orphaned=True,
                exclude_run=run_id,
                max_attempts=max_attempts,
                limit=max_objects,
            )

        found = candidates()
        if found:
            if not self.renew_lock(table_id, run_id, ttl_seconds=lock_ttl_seconds):
                raise LockLostError(f"table {table_id!r}: run {run_id!r} no longer holds the table lock")
            claimed = self.claim(table_id, found, run_id)
            if claimed:
                return claimed
        self.release_lock(table_id, run_id)
        found = candidates()
        if not found or not self.acquire_lock(table_id, run_id, ttl_seconds=lock_ttl_seconds):
            return []
        claimed = self.claim(table_id, found, run_id)
        if not claimed:
            self.release_lock(table_id, run_id)
        return claimed

    # -- runs ---------------------------------------------------------------

    def start_run(
        self,
        table_id: str,
        run_id: str,
        correlation_id: str,
        *,
        engine: str | None = None,
        engine_run_id: str | None = None,
        objects: int | None = None,
    ) -> RunRecord:
        """Write a run history item with status running (overwrites a same-id item)."""
        if not run_id or run_id.startswith("#"):
            raise ValueError(f"run id {run_id!r} is reserved or empty")
        now = self.clock()
        item: dict[str, Any] = {
            "table_id": _s(table_id),
            "run_id": _s(run_id),
            "status": _s(RUN_RUNNING),
            "correlation_id": _s(correlation_id),
            "started_at": _s(utc_now_iso(now)),
            "started_epoch_ms": _n(int(now * 1000)),
            "expires_at": _n(int(now) + self.run_retention_days * 86400),
        }
        if engine:
            item["engine"] = _s(engine)
        if engine_run_id:
            item["engine_run_id"] = _s(engine_run_id)
        if objects is not None:
            item["objects"] = _n(int(objects))
        self.client.put_item(TableName=self.runs_table, Item=item)
        return RunRecord.from_item(item)

    def end_run(
        self,
        table_id: str,
        run_id: str,
        status: str,
        counts: Mapping[str, int | float] | None = None,
        snapshot_id: int | None = None,
        error: str | None = None,
        *,
        objects: int | None = None,
    ) -> RunRecord:
        """Close a run: status, counts (e.g. inserted/updated/deleted/rows_read),
        Iceberg snapshot id, error text, end time and duration."""
        if status not in RUN_STATUSES or status == RUN_RUNNING:
            raise ValueError(f"end_run status must be succeeded, failed or skipped, not {status!r}")
        if not run_id or run_id.startswith("#"):
            raise ValueError(f"run id {run_id!r} is reserved or empty")
        now = self.clock()
        key = {"table_id": _s(table_id), "run_id": _s(run_id)}
        started = (
            self.client.get_item(TableName=self.runs_table, Key=key, ConsistentRead=True).get("Item") or {}
        )
        sets = ["#status = :status", "ended_at = :ended", "expires_at = if_not_exists(expires_at, :expires)"]
        removes = []
        values: dict[str, Any] = {
            ":status": _s(status),
            ":ended": _s(utc_now_iso(now)),
            ":expires": _n(int(now) + self.run_retention_days * 86400),
        }
        started_ms = _get_n(started, "started_epoch_ms")
        if started_ms is not None:
            sets.append("duration_ms = :duration")
            values[":duration"] = _n(max(0, int(now * 1000) - started_ms))
        sets.append("counts = :counts")
        values[":counts"] = {"M": {str(k): _n(v) for k, v in (counts or {}).items()}}
        if snapshot_id is not None:
            sets.append("snapshot_id = :snapshot")
            values[":snapshot"] = _n(int(snapshot_id))
        if objects is not None:
            sets.append("objects = :objects")
            values[":objects"] = _n(int(objects))
        if error:
            sets.append("#error = :error")
            values[":error"] = _s(_clip_error(error) or "")
        else:
            removes.append("#error")
        update = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
        response = self.client.update_item(
            TableName=self.runs_table,
            Key=key,
            UpdateExpression=update,
            ExpressionAttributeNames={"#status": "status", "#error": "error"},
            ExpressionAttributeValues=values,
            ReturnValues="ALL_NEW",
        )
        return RunRecord.from_item(response["Attributes"])

    def get_run(self, table_id: str, run_id: str) -> RunRecord | None:
        response = self.client.get_item(
            TableName=self.runs_table,
            Key={"table_id": _s(table_id), "run_id": _s(run_id)},
            ConsistentRead=True,
        )
        item = response.get("Item")
        return RunRecord.from_item(item) if item else None

    def list_runs(self, table_id: str, *, limit: int = 20) -> list[RunRecord]:
        """A table's runs, newest first when run ids sort by time (see ``new_run_id``)."""
        kwargs: dict[str, Any] = {
            "TableName": self.runs_table,
            "KeyConditionExpression": "table_id = :table_id",
            "ExpressionAttributeValues": {":table_id": _s(table_id)},
            "ScanIndexForward": False,
        }
        runs: list[RunRecord] = []
        while len(runs) < limit:
            response = self.client.query(**kwargs)
            for item in response.get("Items", []):
                if not (_get_s(item, "run_id") or "").startswith("#"):
                    runs.append(RunRecord.from_item(item))
            last = response.get("LastEvaluatedKey")
            if not last:
                break
            kwargs["ExclusiveStartKey"] = last
        return runs[:limit]

    # -- the per-table lock --------------------------------------------------

    def _lock_key(self, table_id: str) -> dict[str, Any]:
        return {"table_id": _s(table_id), "run_id": _s(LOCK_RUN_ID)}

    def get_lock(self, table_id: str) -> Lock | None:
        """The table's lock item, expired or not (``Lock.expired()`` tells), or None."""
        response = self.client.get_item(
            TableName=self.runs_table, Key=self._lock_key(table_id), ConsistentRead=True
        )
        item = response.get("Item")
        return Lock.from_item(item) if item else None

    def _put_lock(
        self, table_id: str, holder: str, state: str, ttl_seconds: int, take_over_start: bool
    ) -> bool:
        if not holder:
            raise ValueError("lock holder must not be empty")
        now = self.clock()
        condition = "attribute_not_exists(run_id) OR expires_at < :now"
        values: dict[str, Any] = {":now": _n(int(now))}
        names: dict[str, str] = {}
        if take_over_start:
            condition += " OR holder = :holder OR #state = :starting"
            values[":holder"] = _s(holder)
            values[":starting"] = _s(LOCK_STARTING)
            names["#state"] = "state"
        kwargs: dict[str, Any] = {
            "TableName": self.runs_table,
            "Item": {
                **self._lock_key(table_id),
                "holder": _s(holder),
                "state": _s(state),
                "acquired_at": _s(utc_now_iso(now)),
                "expires_at": _n(int(now + ttl_seconds)),
            },
            "ConditionExpression": condition,
            "ExpressionAttributeValues": values,
        }
        if names:
            kwargs["ExpressionAttributeNames"] = names
        try:
            self.client.put_item(**kwargs)
        except ClientError as exc:
            if _is_condition_failure(exc):
                return False
            raise
        return True

    def acquire_lock(
        self, table_id: str, holder: str, *, ttl_seconds: int = DEFAULT_LOCK_TTL_SECONDS
    ) -> bool:
        """Job side: take the table lock for run ``holder``; False if another run holds it.

        Succeeds when there is no lock, it expired, ``holder`` already holds it,
        or it is a trigger's ``starting`` reservation (the run it started).
        """
        return self._put_lock(table_id, holder, LOCK_RUNNING, ttl_seconds, take_over_start=True)

    def reserve_start(
        self, table_id: str, holder: str, *, ttl_seconds: int = DEFAULT_START_LEASE_SECONDS
    ) -> bool:
        """Trigger side: reserve the table while starting a run; never takes over a live lock, not
        even its own: copies of one invocation (same holder) running at once get one reservation."""
        return self._put_lock(table_id, holder, LOCK_STARTING, ttl_seconds, take_over_start=False)

    def renew_lock(self, table_id: str, holder: str, *, ttl_seconds: int = DEFAULT_LOCK_TTL_SECONDS) -> bool:
        """Push the expiry out; False if ``holder`` does not hold the lock (any more)."""
        try:
            self.client.update_item(
                TableName=self.runs_table,
                Key=self._lock_key(table_id),
                UpdateExpression="SET expires_at = :expires",
                ConditionExpression="holder = :holder",
                ExpressionAttributeValues={
                    ":holder": _s(holder),
                    ":expires": _n(int(self.clock() + ttl_seconds)),
                },
            )
        except ClientError as exc:
            if _is_condition_failure(exc):
                return False
            raise
        return True

    def note_engine_run(self, table_id: str, holder: str, engine_run_id: str) -> bool:
        """Remember the Glue/EMR run id a reservation started (for operators and retries)."""
        try:
            self.client.update_item(
                TableName=self.runs_table,
                Key=self._lock_key(table_id),
                UpdateExpression="SET engine_run_id = :engine_run",
                ConditionExpression="holder = :holder",
                ExpressionAttributeValues={":holder": _s(holder), ":engine_run": _s(engine_run_id)},
            )
        except ClientError as exc:
            if _is_condition_failure(exc):
                return False
            raise
        return True

    # -- the batching window ----------------------------------------------------

    def _window_key(self, table_id: str) -> dict[str, Any]:
        return {"table_id": _s(table_id), "run_id": _s(WINDOW_RUN_ID)}

    def window_opens_at(self, table_id: str, min_interval_seconds: int) -> float:
        """When the table's next run may start: its last run start plus the window (0: never started)."""
        response = self.client.get_item(
            TableName=self.runs_table, Key=self._window_key(table_id), ConsistentRead=True
        )
        last = _get_n(response.get("Item") or {}, "last_start")
        return 0.0 if last is None else float(last + min_interval_seconds)

    def claim_window(self, table_id: str, min_interval_seconds: int) -> tuple[int, int | None] | None:
        """Note a run start now if the window since the last one has passed.

        Returns (this start, the previous one) for ``unclaim_window``, or None while the window
        is still open. A conditional write: two triggers racing for one window get one start.
        """
        now = int(self.clock())
        try:
            response = self.client.update_item(
                TableName=self.runs_table,
                Key=self._window_key(table_id),
                UpdateExpression="SET last_start = :now, expires_at = :expires",
                ConditionExpression="attribute_not_exists(last_start) OR last_start <= :cutoff",
                ExpressionAttributeValues={
                    ":now": _n(now),
                    ":cutoff": _n(now - min_interval_seconds),
                    ":expires": _n(now + min_interval_seconds + 86400),
                },
                ReturnValues="UPDATED_OLD",
            )
        except ClientError as exc:
            if _is_condition_failure(exc):
                return None
            raise
        return now, _get_n(response.get("Attributes") or {}, "last_start")

    def unclaim_window(self, table_id: str, claimed_at: int, previous: int | None) -> None:
        """Undo a claim whose run did not start, so the next trigger need not wait a whole window."""
        key = self._window_key(table_id)
        values: dict[str, Any] = {":claimed": _n(claimed_at)}
        if previous is None:
            update = "REMOVE last_start"
        else:
            update = "SET last_start = :previous"
            values[":previous"] = _n(previous)
        try:
            self.client.update_item(
                TableName=self.runs_table,
                Key=key,
                UpdateExpression=update,
                ConditionExpression="last_start = :claimed",
                ExpressionAttributeValues=values,
            )
        except ClientError as exc:
            if not _is_condition_failure(exc):
                raise

    def release_lock(self, table_id: str, holder: str) -> bool:
        """Drop the lock if ``holder`` holds it; True if it did. Idempotent."""
        try:
            self.client.delete_item(
                TableName=self.runs_table,
                Key=self._lock_key(table_id),
                ConditionExpression="holder = :holder",
                ExpressionAttributeValues={":holder": _s(holder)},
            )
        except ClientError as exc:
            if _is_condition_failure(exc):
                return False
            raise
        return True
