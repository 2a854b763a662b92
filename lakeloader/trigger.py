"""S3 arrival → ledger → job run: the logic behind ``lambda/s3_arrival``.

Shipped to the Lambda as plain Python next to ``lakeloader/ledger.py``: imports
only the standard library, boto3 and botocore.

For one event batch (S3 notification records — direct, wrapped in SQS or SNS
— or EventBridge "Object Created" events):

1. every record is parsed (keys are URL-decoded with ``unquote_plus``);
   removal events, folder markers, hidden files (``_SUCCESS``, ``.crc``: names
   starting with ``_`` or ``.``, which Spark skips too) and objects of other
   buckets than ``RAW_BUCKET`` are *ignored*; unrecognised records are ignored
   as well — each one logged, none silently;
2. the key is matched to the table whose ``prefix`` is the longest prefix of
   the key (config table, scanned and cached per container); no match →
   *unknown*;
3. the object is recorded in the ledger (conditional write): new → *recorded*,
   already there → *duplicates*. Objects of disabled tables are recorded too
   (so nothing is lost when the table is enabled again) but counted as
   *disabled* and never start a run;
4. one start per table and batch, for tables with a new object or a duplicate
   whose object is still pending: if the table's lock is held (a run is in
   progress, or another trigger is starting one) the objects stay pending and
   the table is *deferred* — the running job drains every pending object of
   its table before it releases the lock. Otherwise the trigger reserves the
   lock, starts Glue (``--lakeloader_table_id``, ``--lakeloader_correlation_id``)
   or EMR Serverless (``--table-id``, ``--correlation-id``) and notes the run id
   on the lock. Glue ``ConcurrentRunsExceededException`` (EMR
   ``ServiceQuotaExceededException``) releases the reservation and defers.
   Tables due together (same engine and execution class) share one run of up
   to ``TABLES_PER_RUN`` tables (``--lakeloader_table_id a,b,c``): each table
   is reserved on its own lock, and the job drains each under its own lock;
5. a table with a batching window (``min_interval_seconds`` > 0 in its config
   item) never starts a run on arrival: its objects stay pending (*deferred*,
   reason ``batching_window``) and the sweep starts its run once the window
   since the table's last run start (``Ledger.claim_window``) has passed.

Any other start failure is logged, the table deferred, and the invocation then
raises ``TriggerError`` so Lambda retries it and its error metric shows it; the
retry is idempotent (recorded objects come back as pending duplicates, a start
that got through is found on the lock, and copies of one invocation running at
once get one reservation: the others defer; an invocation that died between
reserving and starting leaves its reservation to lapse after
``START_LEASE_SECONDS``, then the sweep starts the run). A *sweep* event (``{"lakeloader":
{"action": "sweep"}}`` or an EventBridge "Scheduled Event") starts runs for
every enabled table that has pending objects and whose window (if any) has
passed, ``TABLES_PER_RUN`` tables a run — the safety net for deferrals and
the scheduler of batched tables.

Every log line is one JSON object carrying the invocation's correlation id
(the Lambda request id), which is also passed to the job run.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import logging
import os
import sys
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote_plus

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from lakeloader.ledger import (
    DEFAULT_START_LEASE_SECONDS,
    PENDING,
    Ledger,
    ObjectRef,
)

LOG = logging.getLogger("lakeloader.trigger")

_CORRELATION_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "lakeloader_correlation_id", default=None
)

ENGINES = ("glue", "emr")
GLUE_CONCURRENCY_ERRORS = {"ConcurrentRunsExceededException"}
EMR_CONCURRENCY_ERRORS = {"ServiceQuotaExceededException"}


class TriggerError(RuntimeError):
    """The trigger could not start a run it should have started; the invocation is retried."""


class SettingsError(ValueError):
    """The Lambda's environment is incomplete or malformed (names the variable)."""


# ---------------------------------------------------------------------------
# structured logging


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, message, correlation_id, fields."""

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        correlation_id = getattr(record, "correlation_id", None) or _CORRELATION_ID.get()
        if correlation_id:
            payload["correlation_id"] = correlation_id
        for name, value in (getattr(record, "fields", None) or {}).items():
            payload.setdefault(name, value)
        if record.exc_info:
            payload["exception"] = self.formatException(record.exc_info)
        return json.dumps(payload, default=str, ensure_ascii=False)


class _StdoutJsonHandler(logging.Handler):
    """Writes to whatever ``sys.stdout`` is at emit time (Lambda ships stdout to CloudWatch)."""

    lakeloader_json = True

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(JsonFormatter())

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stdout.write(self.format(record) + "\n")
            sys.stdout.flush()
        except Exception:  # noqa: BLE001 - logging must never break the trigger
            self.handleError(record)


def configure_logging(level: str | int = "INFO") -> logging.Logger:
    """Send the ``lakeloader`` loggers to stdout as JSON lines (idempotent)."""
    logger = logging.getLogger("lakeloader")
    if not any(getattr(h, "lakeloader_json", False) for h in logger.handlers):
        logger.addHandler(_StdoutJsonHandler())
    logger.setLevel(level.upper() if isinstance(level, str) else level)
    logger.propagate = False
    return logger


def _log(level: int, message: str, **fields: Any) -> None:
    LOG.log(level, message, extra={"fields": fields})


# ---------------------------------------------------------------------------
# settings


def _opt(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name, "").strip()
    return value or None


@dataclass(frozen=True)
class TriggerSettings:
    """The Lambda's environment."""

    config_table: str
    ledger_table: str
    runs_table: str
    glue_job_name: str | None = None
    emr_application_id: str | None = None
    emr_job_role_arn: str | None = None
    emr_entry_point: str | None = None
    emr_extra_args: tuple[str, ...] = ()
    raw_bucket: str | None = None
    log_level: str = "INFO"
    config_cache_seconds: float = 60.0
    start_lease_seconds: int = DEFAULT_START_LEASE_SECONDS
    eventbridge_keys_encoded: bool = True
    tables_per_run: int = 1

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> TriggerSettings:
        """Read CONFIG_TABLE, LEDGER_TABLE, RUNS_TABLE (required), GLUE_JOB_NAME,
        EMR_APPLICATION_ID, EMR_JOB_ROLE_ARN, EMR_ENTRY_POINT, EMR_EXTRA_ARGS (JSON
        list of strings), RAW_BUCKET, LOG_LEVEL, CONFIG_CACHE_SECONDS,
        START_LEASE_SECONDS, EVENTBRIDGE_KEYS_ENCODED (true|false), TABLES_PER_RUN."""
        env = os.environ if env is None else env
        missing = [name for name in ("CONFIG_TABLE", "LEDGER_TABLE", "RUNS_TABLE") if not _opt(env, name)]
        if missing:
            raise SettingsError(f"environment variable(s) not set: {', '.join(missing)}")
        extra_text = _opt(env, "EMR_EXTRA_ARGS") or "[]"
        try:
            extra = json.loads(extra_text)
        except json.JSONDecodeError as exc:
            raise SettingsError(f"EMR_EXTRA_ARGS is not valid JSON ({exc}): {extra_text!r}") from None
        if not isinstance(extra, list) or not all(isinstance(a, str) for a in extra):
            raise SettingsError(f"EMR_EXTRA_ARGS must be a JSON list of strings, got {extra_text!r}")

        def number(name: str, default: float) -> float:
            text = _opt(env, name)
            if text is None:
                return default
            try:
                return float(text)
            except ValueError:
                raise SettingsError(f"{name} must be a number, got {text!r}") from None

        log_level = (_opt(env, "LOG_LEVEL") or "INFO").upper()
        if log_level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
            raise SettingsError(
                f"LOG_LEVEL must be DEBUG, INFO, WARNING, ERROR or CRITICAL, got {log_level!r}"
            )
        tables_per_run = number("TABLES_PER_RUN", 1)
        if tables_per_run < 1 or tables_per_run != int(tables_per_run):
            raise SettingsError(f"TABLES_PER_RUN must be a whole number >= 1, got {tables_per_run:g}")
        encoded = (_opt(env, "EVENTBRIDGE_KEYS_ENCODED") or "true").lower()
        if encoded not in ("true", "false", "1", "0", "yes", "no"):
            raise SettingsError(f"EVENTBRIDGE_KEYS_ENCODED must be true or false, got {encoded!r}")
        return cls(
            config_table=env["CONFIG_TABLE"].strip(),
            ledger_table=env["LEDGER_TABLE"].strip(),
            runs_table=env["RUNS_TABLE"].strip(),
            glue_job_name=_opt(env, "GLUE_JOB_NAME"),
            emr_application_id=_opt(env, "EMR_APPLICATION_ID"),
            emr_job_role_arn=_opt(env, "EMR_JOB_ROLE_ARN"),
            emr_entry_point=_opt(env, "EMR_ENTRY_POINT"),
            emr_extra_args=tuple(extra),
            raw_bucket=_opt(env, "RAW_BUCKET"),
            log_level=log_level,
            config_cache_seconds=number("CONFIG_CACHE_SECONDS", 60.0),
            start_lease_seconds=int(number("START_LEASE_SECONDS", DEFAULT_START_LEASE_SECONDS)),
            eventbridge_keys_encoded=encoded in ("true", "1", "yes"),
            tables_per_run=int(tables_per_run),
        )


# ---------------------------------------------------------------------------
# table routes (the config table)


def normalise_prefix(prefix: str) -> str:
    """Same rule as the config model: no leading '/', exactly one trailing '/'."""
    prefix = prefix.strip().lstrip("/")
    if not prefix:
        return ""
    return prefix if prefix.endswith("/") else prefix + "/"


@dataclass(frozen=True)
class TableRoute:
    """What the trigger needs of one config-table item."""

    table_id: str
    prefix: str
    enabled: bool = True
    engine: str = "glue"
    min_interval_seconds: int = 0  # the batching window; 0: arrivals start runs at once
    execution_class: str = "STANDARD"  # Glue: STANDARD | FLEX

    @property
    def batched(self) -> bool:
        return self.min_interval_seconds > 0


def match_route(key: str, routes: list[TableRoute]) -> TableRoute | None:
    """The route whose prefix is the longest prefix of ``key`` (disabled ones included:
    a file under a disabled nested table belongs to that table, not to its parent)."""
    key = key.lstrip("/")
    candidates = [r for r in routes if r.prefix and key.startswith(r.prefix)]
    return max(candidates, key=lambda r: (len(r.prefix), r.table_id), default=None)


def load_routes(client: Any, config_table: str) -> list[TableRoute]:
    """Scan the config table (paginated). Malformed items are logged and skipped."""
    routes = []
    kwargs: dict[str, Any] = {
        "TableName": config_table,
        "ProjectionExpression": "#id, #prefix, #enabled, #engine, #window, #class",
        "ExpressionAttributeNames": {
            "#id": "table_id",
            "#prefix": "prefix",
            "#enabled": "enabled",
            "#engine": "engine",
            "#window": "min_interval_seconds",
            "#class": "execution_class",
        },
        "ConsistentRead": True,
    }
    while True:
        response = client.scan(**kwargs)
        for item in response.get("Items", []):
            table_id = item.get("table_id", {}).get("S")
            prefix = normalise_prefix(item.get("prefix", {}).get("S", ""))
            enabled_attr = item.get("enabled", {"BOOL": True})
            enabled = enabled_attr.get("BOOL")
            if enabled is None and "S" in enabled_attr:  # tolerate "true"/"false" strings
                enabled = enabled_attr["S"].strip().lower() in ("true", "1", "yes")
            engine = (item.get("engine", {}).get("S") or "glue").strip().lower()
            window = _int_or_none(item.get("min_interval_seconds", {}).get("N")) or 0
            execution_class = (item.get("execution_class", {}).get("S") or "STANDARD").strip().upper()
            if not table_id or not prefix:
                _log(
                    logging.ERROR,
                    "config.item_invalid",
                    config_table=config_table,
                    item_table_id=table_id,
                    reason="table_id and a non-empty prefix are required",
                )
                continue
            routes.append(
                TableRoute(
                    table_id=table_id,
                    prefix=prefix,
                    enabled=bool(enabled),
                    engine=engine,
                    min_interval_seconds=max(0, window),
                    execution_class=execution_class,
                )
            )
        last = response.get("LastEvaluatedKey")
        if not last:
            break
        kwargs["ExclusiveStartKey"] = last
    routes.sort(key=lambda r: r.table_id)
    return routes


_ROUTE_CACHE: dict[str, tuple[float, list[TableRoute]]] = {}
_CLIENTS: dict[tuple[str, str | None, str | None], Any] = {}
_CACHE_LOCK = threading.Lock()


def clear_caches() -> None:
    """Forget cached routes and clients (tests; a changed endpoint)."""
    with _CACHE_LOCK:
        _ROUTE_CACHE.clear()
        _CLIENTS.clear()


def cached_routes(client: Any, config_table: str, max_age_seconds: float) -> list[TableRoute]:
    """``load_routes`` cached per Lambda container for ``max_age_seconds``."""
    now = time.monotonic()
    with _CACHE_LOCK:
        cached = _ROUTE_CACHE.get(config_table)
    if cached and max_age_seconds > 0 and now - cached[0] < max_age_seconds:
        return cached[1]
    routes = load_routes(client, config_table)
    with _CACHE_LOCK:
        _ROUTE_CACHE[config_table] = (now, routes)
    return routes


def aws_client(service: str) -> Any:
    """A boto3 client, reused across invocations (honours AWS_ENDPOINT_URL)."""
    key = (
        service,
        os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"),
        os.environ.get("AWS_ENDPOINT_URL"),
    )
    with _CACHE_LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            client = boto3.client(
                service,
                config=Config(
                    retries={"mode": "standard", "max_attempts": 5}, connect_timeout=5, read_timeout=20
                ),
            )
            _CLIENTS[key] = client
    return client


# ---------------------------------------------------------------------------
# event parsing


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


def _s3_record(record: Mapping[str, Any], source: str) -> ObjectEvent:
    s3 = record["s3"]
    obj = s3["object"]
    ref = ObjectRef(
        bucket=s3["bucket"]["name"],
        key=unquote_plus(obj["key"]),
        etag=obj.get("eTag") or obj.get("etag"),
        version_id=obj.get("versionId"),
        size=_int_or_none(obj.get("size")),
        sequencer=obj.get("sequencer"),
        event_time=record.get("eventTime"),
    )
    return ObjectEvent(ref=ref, event_name=str(record.get("eventName", "")), source=source)


def _eventbridge_record(event: Mapping[str, Any], source: str, keys_encoded: bool) -> ObjectEvent:
    detail = event["detail"]
    obj = detail["object"]
    key = obj["key"]
    ref = ObjectRef(
        bucket=detail["bucket"]["name"],
        key=unquote_plus(key) if keys_encoded else key,
        etag=obj.get("etag") or obj.get("eTag"),
        version_id=obj.get("version-id"),
        size=_int_or_none(obj.get("size")),
        sequencer=obj.get("sequencer"),
        event_time=event.get("time") if isinstance(event.get("time"), str) else None,
    )
    return ObjectEvent(ref=ref, event_name=str(event.get("detail-type", "")), source=source)


def parse_event(event: Any, *, eventbridge_keys_encoded: bool = True) -> tuple[list[ObjectEvent], list[str]]:
    """All objects an event names, and a description of each record that could not be read.

    Understands S3 notification records (direct, or in SQS message bodies, or
    in SNS messages, also SNS-in-SQS) and EventBridge ``aws.s3`` events. S3
    test events (sent when a notification is configured) yield nothing.
    """
    objects: list[ObjectEvent] = []
    problems: list[str] = []

    def walk(node: Any, source: str | None, depth: int) -> None:
        if depth > 4:
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
            _log(logging.INFO, "event.s3_test_event", bucket=node.get("Bucket"))
            return
        if isinstance(node.get("Records"), list):
            for record in node["Records"]:
                walk_record(record, source, depth)
            return
        if node.get("source") == "aws.s3" and isinstance(node.get("detail"), Mapping):
            try:
                objects.append(_eventbridge_record(node, source or "eventbridge", eventbridge_keys_encoded))
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
        if origin == "aws:sqs":
            walk(record.get("body", ""), source or "sqs", depth + 1)
        elif origin == "aws:sns":
            walk((record.get("Sns") or {}).get("Message", ""), source or "sns", depth + 1)
        elif "s3" in record:
            try:
                objects.append(_s3_record(record, source or "s3"))
            except (KeyError, TypeError) as exc:
                problems.append(f"S3 record without {exc}")
        else:
            problems.append(f"unrecognised record from {origin or 'unknown source'}")

    walk(event, None, 0)
    return objects, problems


def is_sweep(event: Any) -> bool:
    """A request to start runs for every table with pending objects."""
    if not isinstance(event, Mapping):
        return False
    request = event.get("lakeloader")
    if isinstance(request, Mapping) and request.get("action") == "sweep":
        return True
    return event.get("source") == "aws.events" and event.get("detail-type") == "Scheduled Event"


def correlation_id_for(event: Any, context: Any = None) -> str:
    """The Lambda request id; else an explicit one in the event; else a fresh uuid."""
    request_id = getattr(context, "aws_request_id", None)
    if request_id:
        return str(request_id)
    if isinstance(event, Mapping):
        request = event.get("lakeloader")
        if isinstance(request, Mapping) and request.get("correlation_id"):
            return str(request["correlation_id"])
    return uuid.uuid4().hex


# ---------------------------------------------------------------------------
# the trigger


def _empty_summary(correlation_id: str) -> dict[str, Any]:
    return {
        "correlation_id": correlation_id,
        "records": 0,
        "recorded": 0,
        "duplicates": 0,
        "unknown": 0,
        "disabled": 0,
        "ignored": 0,
        "started": {},
        "deferred": [],
    }


@dataclass
class _StartOutcome:
    run_id: str | None = None
    reason: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    error: bool = False


class Trigger:
    """Records arrivals and starts runs. Clients default to cached boto3 clients."""

    def __init__(
        self,
        settings: TriggerSettings,
        *,
        dynamodb: Any = None,
        glue: Any = None,
        emr: Any = None,
        clock: Any = time.time,
    ) -> None:
        self.settings = settings
        self.dynamodb = dynamodb or aws_client("dynamodb")
        self._glue = glue
        self._emr = emr
        self.clock = clock
        self.ledger = Ledger(self.dynamodb, settings.ledger_table, settings.runs_table, clock=clock)
        self._windows: dict[str, tuple[int, int | None]] = {}  # window claims of starts in flight

    @property
    def glue(self) -> Any:
        if self._glue is None:
            self._glue = aws_client("glue")
        return self._glue

    @property
    def emr(self) -> Any:
        if self._emr is None:
            self._emr = aws_client("emr-serverless")
        return self._emr

    def routes(self) -> list[TableRoute]:
        return cached_routes(self.dynamodb, self.settings.config_table, self.settings.config_cache_seconds)

    def _ignore_reason(self, event: ObjectEvent) -> str | None:
        ref = event.ref
        if not event.created:
            return f"not an object-created event ({event.event_name or 'no event name'})"
        if self.settings.raw_bucket and ref.bucket != self.settings.raw_bucket:
            return f"bucket {ref.bucket!r} is not the raw bucket {self.settings.raw_bucket!r}"
        if not ref.key or ref.key.endswith("/"):
            return "folder marker"
        name = ref.key.rsplit("/", 1)[-1]
        if name.startswith(("_", ".")):
            return "hidden file (name starts with '_' or '.', which Spark skips)"
        return None

    def handle(self, event: Any, correlation_id: str) -> dict[str, Any]:
        """Process one event batch; returns the summary."""
        summary = _empty_summary(correlation_id)
        objects, problems = parse_event(
            event, eventbridge_keys_encoded=self.settings.eventbridge_keys_encoded
        )
        summary["records"] = len(objects) + len(problems)
        for problem in problems:
            summary["ignored"] += 1
            _log(logging.WARNING, "record.unrecognised", reason=problem)

        routes = self.routes() if objects else []
        to_start: dict[str, TableRoute] = {}
        for event_object in objects:
            ref = event_object.ref
            where = {"bucket": ref.bucket, "key": ref.key, "event": event_object.event_name}
            reason = self._ignore_reason(event_object)
            if reason:
                summary["ignored"] += 1
                _log(logging.INFO, "object.ignored", reason=reason, **where)
                continue
            route = match_route(ref.key, routes)
            if route is None:
                summary["unknown"] += 1
                _log(logging.WARNING, "object.unknown_prefix", known_prefixes=len(routes), **where)
                continue
            outcome = self.ledger.record(route.table_id, ref, correlation_id=correlation_id)
            fields = {"table_id": route.table_id, "object_id": outcome.object.object_id, **where}
            if not route.enabled:
                summary["disabled"] += 1
                _log(
                    logging.WARNING,
                    "object.table_disabled",
                    new=outcome.new,
                    status=outcome.object.status,
                    note="recorded as pending; no run started while the table is disabled",
                    **fields,
                )
                continue
            if outcome.new:
                summary["recorded"] += 1
                _log(logging.INFO, "object.recorded", size=ref.size, **fields)
                to_start[route.table_id] = route
            else:
                summary["duplicates"] += 1
                _log(
                    logging.INFO,
                    "object.duplicate",
                    status=outcome.object.status,
                    first_seen=outcome.object.first_seen,
                    first_correlation_id=outcome.object.correlation_id,
                    **fields,
                )
                if outcome.object.status == PENDING:
                    to_start[route.table_id] = route

        for table_id in sorted(r.table_id for r in to_start.values() if r.batched):
            window = to_start.pop(table_id).min_interval_seconds
            outcome = self._deferred(table_id, "batching_window", min_interval_seconds=window)
            summary["deferred"].append({"table_id": table_id, "reason": outcome.reason, **outcome.detail})
        errors = self._start_all(sorted(to_start.values(), key=lambda r: r.table_id), correlation_id, summary)
        self._finish(summary, errors)
        return summary

    def sweep(self, correlation_id: str, table_ids: list[str] | None = None) -> dict[str, Any]:
        """Start runs for the enabled tables with pending (or orphaned running) objects, batched
        tables only once their window has passed."""
        summary = _empty_summary(correlation_id)
        summary["action"] = "sweep"
        routes = [r for r in self.routes() if r.enabled and (not table_ids or r.table_id in table_ids)]
        # a batched table inside its window is not due, pending or not: one read instead of a query
        now = self.clock()
        in_window = {
            r.table_id: opens_at
            for r in routes
            if r.batched
            and (opens_at := self.ledger.window_opens_at(r.table_id, r.min_interval_seconds)) > now
        }
        due = [
            r
            for r in routes
            if r.table_id not in in_window and self.ledger.has_pending(r.table_id, include_orphaned=True)
        ]
        summary["tables_checked"] = len(routes)
        summary["tables_waiting"] = len(due)
        summary["tables_in_window"] = len(in_window)
        _log(
            logging.INFO,
            "sweep.checked",
            tables=len(routes),
            due=[r.table_id for r in due],
            in_window=len(in_window),
        )
        errors = self._start_all(due, correlation_id, summary)
        self._finish(summary, errors)
        return summary

    def _finish(self, summary: dict[str, Any], errors: list[str]) -> None:
        level = logging.ERROR if errors else logging.INFO
        _log(level, "trigger.summary", **{k: v for k, v in summary.items() if k != "correlation_id"})
        if errors:
            raise TriggerError("; ".join(errors))

    def _start_all(self, routes: list[TableRoute], correlation_id: str, summary: dict[str, Any]) -> list[str]:
        """Start runs for ``routes``: grouped by engine and execution class, TABLES_PER_RUN a run."""
        groups: dict[tuple[str, str], list[TableRoute]] = {}
        for route in routes:
            groups.setdefault((route.engine, route.execution_class), []).append(route)
        errors = []
        for members in groups.values():
            for table_id, outcome in self.start_group(members, correlation_id).items():
                if outcome.run_id:
                    summary["started"][table_id] = outcome.run_id
                    continue
                summary["deferred"].append({"table_id": table_id, "reason": outcome.reason, **outcome.detail})
                if outcome.error:
                    errors.append(f"table {table_id!r}: {outcome.reason}: {outcome.detail.get('error', '')}")
        return errors

    def start(self, route: TableRoute, correlation_id: str) -> _StartOutcome:
        """Start one run for a table unless one is in progress (see module docstring)."""
        return self.start_group([route], correlation_id)[route.table_id]

    def _reserve(self, route: TableRoute, holder: str) -> _StartOutcome | None:
        """Reserve one table for a start; None when reserved, else why not (or the run already started)."""
        table_id = route.table_id
        lock = self.ledger.get_lock(table_id)
        if lock is not None and not lock.expired(self.clock()):
            if lock.holder == holder and lock.engine_run_id:
                _log(logging.INFO, "run.already_started", table_id=table_id, run_id=lock.engine_run_id)
                return _StartOutcome(run_id=lock.engine_run_id)
            # Held by another run, or by a copy of this invocation still starting one: wait for it.
            return self._deferred(
                table_id,
                "run_in_progress",
                lock_holder=lock.holder,
                lock_state=lock.state,
                lock_expires_at=lock.expires_at,
            )
        if not self.ledger.reserve_start(table_id, holder, ttl_seconds=self.settings.start_lease_seconds):
            lock = self.ledger.get_lock(table_id)
            return self._deferred(
                table_id,
                "run_in_progress",
                lock_holder=lock.holder if lock else None,
                lock_state=lock.state if lock else None,
            )
        if route.batched:
            claim = self.ledger.claim_window(table_id, route.min_interval_seconds)
            if claim is None:  # another trigger started a run within the window meanwhile
                self.ledger.release_lock(table_id, holder)
                return self._deferred(
                    table_id, "batching_window", min_interval_seconds=route.min_interval_seconds
                )
            self._windows[table_id] = claim
        return None

    def start_group(self, routes: list[TableRoute], correlation_id: str) -> dict[str, _StartOutcome]:
        """Start runs for the free tables of ``routes`` (one engine and execution class), up to
        TABLES_PER_RUN tables a run.

        Each table is reserved on its own lock (a batched one also claims its window); tables
        that are busy, or whose window has not passed, are deferred and leave their place to the next.
        """
        holder = f"trigger:{correlation_id}"
        outcomes: dict[str, _StartOutcome] = {}
        reserved: list[TableRoute] = []
        for route in routes:
            outcome = self._reserve(route, holder)
            if outcome is not None:
                outcomes[route.table_id] = outcome
                continue
            reserved.append(route)
            if len(reserved) == self.settings.tables_per_run:
                outcomes.update(self._launch(reserved, holder, correlation_id))
                reserved = []
        if reserved:
            outcomes.update(self._launch(reserved, holder, correlation_id))
        return outcomes

    def _launch(
        self, reserved: list[TableRoute], holder: str, correlation_id: str
    ) -> dict[str, _StartOutcome]:
        """Start one engine run for reserved tables; on failure give back their locks and windows."""
        table_ids = [r.table_id for r in reserved]
        engine, execution_class = reserved[0].engine, reserved[0].execution_class
        try:
            if engine == "glue":
                run_id = self._start_glue(table_ids, correlation_id, execution_class)
            elif engine == "emr":
                run_id = self._start_emr(table_ids, correlation_id)
            else:
                raise SettingsError(f"engine {engine!r} is not one of {ENGINES}")
        except (ClientError, BotoCoreError, SettingsError) as exc:
            for table_id in table_ids:
                self.ledger.release_lock(table_id, holder)
                if table_id in self._windows:
                    self.ledger.unclaim_window(table_id, *self._windows.pop(table_id))
            code = exc.response.get("Error", {}).get("Code", "") if isinstance(exc, ClientError) else ""
            if code in GLUE_CONCURRENCY_ERRORS | EMR_CONCURRENCY_ERRORS:
                reason, flag = "concurrent_runs_exceeded", False
            elif isinstance(exc, SettingsError):
                reason, flag = "engine_not_configured", True
            else:
                reason, flag = "start_failed", True
            return {
                table_id: self._deferred(table_id, reason, engine=engine, error=str(exc), error_flag=flag)
                for table_id in table_ids
            }
        for table_id in table_ids:
            self._windows.pop(table_id, None)
            self.ledger.note_engine_run(table_id, holder, run_id)
        _log(
            logging.INFO,
            "run.started",
            table_id=table_ids[0] if len(table_ids) == 1 else None,
            table_ids=table_ids,
            engine=engine,
            execution_class=execution_class,
            run_id=run_id,
        )
        return {table_id: _StartOutcome(run_id=run_id) for table_id in table_ids}

    def _deferred(
        self, table_id: str, reason: str, *, error_flag: bool = False, **detail: Any
    ) -> _StartOutcome:
        level = logging.ERROR if error_flag else logging.INFO
        note = "objects stay pending" + (
            "" if error_flag else "; the running job or the next trigger takes them"
        )
        _log(level, f"run.deferred.{reason}", table_id=table_id, note=note, **detail)
        return _StartOutcome(reason=reason, detail=detail, error=error_flag)

    def _start_glue(self, table_ids: list[str], correlation_id: str, execution_class: str) -> str:
        if not self.settings.glue_job_name:
            raise SettingsError("GLUE_JOB_NAME is not set but the table's engine is glue")
        extra: dict[str, Any] = {}
        if execution_class == "FLEX":  # a flex run is never queued (Glue refuses queuing for FLEX)
            extra = {"ExecutionClass": "FLEX", "JobRunQueuingEnabled": False}
        response = self.glue.start_job_run(
            JobName=self.settings.glue_job_name,
            Arguments={
                "--lakeloader_table_id": ",".join(table_ids),
                "--lakeloader_correlation_id": correlation_id,
            },
            **extra,
        )
        return str(response["JobRunId"])

    def _start_emr(self, table_ids: list[str], correlation_id: str) -> str:
        s = self.settings
        missing = [
            name
            for name, value in (
                ("EMR_APPLICATION_ID", s.emr_application_id),
                ("EMR_JOB_ROLE_ARN", s.emr_job_role_arn),
                ("EMR_ENTRY_POINT", s.emr_entry_point),
            )
            if not value
        ]
        if missing:
            raise SettingsError(f"{', '.join(missing)} not set but the table's engine is emr")
        tables = ",".join(table_ids)
        token = hashlib.sha256(f"{correlation_id}|{tables}".encode()).hexdigest()[:64]
        response = self.emr.start_job_run(
            applicationId=s.emr_application_id,
            executionRoleArn=s.emr_job_role_arn,
            clientToken=token,
            name=f"lakeloader-{tables}"[:256],
            jobDriver={
                "sparkSubmit": {
                    "entryPoint": s.emr_entry_point,
                    "entryPointArguments": [
                        "--table-id",
                        tables,
                        "--correlation-id",
                        correlation_id,
                        *s.emr_extra_args,
                    ],
                }
            },
        )
        return str(response["jobRunId"])


def handle_event(
    event: Any,
    context: Any = None,
    *,
    settings: TriggerSettings | None = None,
    trigger: Trigger | None = None,
) -> dict[str, Any]:
    """The Lambda entry point's body: settings from the environment, one correlation id per invocation."""
    settings = settings or (trigger.settings if trigger else TriggerSettings.from_env())
    configure_logging(settings.log_level)
    correlation_id = correlation_id_for(event, context)
    token = _CORRELATION_ID.set(correlation_id)
    try:
        trigger = trigger or Trigger(settings)
        if is_sweep(event):
            request = event.get("lakeloader") if isinstance(event.get("lakeloader"), Mapping) else {}
            table_ids = request.get("table_ids") if isinstance(request, Mapping) else None
            return trigger.sweep(correlation_id, table_ids=table_ids)
        return trigger.handle(event, correlation_id)
    finally:
        _CORRELATION_ID.reset(token)
