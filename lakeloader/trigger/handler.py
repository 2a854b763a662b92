"""The trigger: record an event's objects in the ledger and start their tables' runs, or sweep.

What each step does and why it is safe to retry: docs/ledger_and_trigger.md.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lakeloader.contract import ARG_RAW_ZONE_ERASED, ARG_REBUILD
from lakeloader.inputs import SUCCESS_MARKER
from lakeloader.ledger import FAILED, PENDING, Ledger
from lakeloader.trigger.events import (
    ObjectEvent,
    correlation_id_for,
    is_sweep,
    parse_event,
    rebuild_request,
    sweep_table_ids,
)
from lakeloader.trigger.launch import START_ERRORS, Launcher, aws_client, failure_reason
from lakeloader.trigger.logs import configure_logging, correlation_id, log
from lakeloader.trigger.metrics import publish_pending_age
from lakeloader.trigger.routes import TableRoute, cached_routes, match_route
from lakeloader.trigger.settings import TriggerSettings


class TriggerError(RuntimeError):
    """The trigger could not start a run it should have started; the invocation is retried."""


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
        self.launcher = Launcher(settings, glue=glue, emr=emr)
        self.clock = clock
        self.ledger = Ledger(self.dynamodb, settings.ledger_table, settings.runs_table, clock=clock)
        self._windows: dict[str, tuple[int, int | None]] = {}  # window claims of starts in flight

    def routes(self) -> list[TableRoute]:
        return cached_routes(self.dynamodb, self.settings.config_table, self.settings.config_cache_seconds)

    def _ignore_reason(self, event: ObjectEvent, routes: list[TableRoute]) -> str | None:
        ref = event.ref
        if not event.created:
            return f"not an object-created event ({event.event_name or 'no event name'})"
        if self.settings.raw_bucket and ref.bucket != self.settings.raw_bucket:
            return f"bucket {ref.bucket!r} is not the raw bucket {self.settings.raw_bucket!r}"
        if not ref.key or ref.key.endswith("/"):
            return "folder marker"
        name = ref.key.rsplit("/", 1)[-1]
        if name == SUCCESS_MARKER and (route := match_route(ref.key, routes)) and route.success_markers:
            return None  # it completes a snapshot folder (cdc: snapshot): recorded, and it starts a run
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
            log(logging.WARNING, "record.unrecognised", reason=problem)

        routes = self.routes() if objects else []
        to_start: dict[str, TableRoute] = {}
        for event_object in objects:
            ref = event_object.ref
            where = {"bucket": ref.bucket, "key": ref.key, "event": event_object.event_name}
            reason = self._ignore_reason(event_object, routes)
            if reason:
                summary["ignored"] += 1
                log(logging.INFO, "object.ignored", reason=reason, **where)
                continue
            route = match_route(ref.key, routes)
            if route is None:
                summary["unknown"] += 1
                log(logging.WARNING, "object.unknown_prefix", known_prefixes=len(routes), **where)
                continue
            outcome = self.ledger.record(route.table_id, ref, correlation_id=correlation_id)
            fields = {"table_id": route.table_id, "object_id": outcome.object.object_id, **where}
            if not route.enabled:
                summary["disabled"] += 1
                log(
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
                log(logging.INFO, "object.recorded", size=ref.size, **fields)
                to_start[route.table_id] = route
            else:
                summary["duplicates"] += 1
                log(
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
        tables only once their window has passed; publish each table's PendingAgeSeconds."""
        summary = _empty_summary(correlation_id)
        summary["action"] = "sweep"
        routes = [r for r in self.routes() if r.enabled and (not table_ids or r.table_id in table_ids)]
        now = self.clock()  # a batched table inside its window is not due, pending or not
        in_window = {
            r.table_id: opens_at
            for r in routes
            if r.batched
            and (opens_at := self.ledger.window_opens_at(r.table_id, r.min_interval_seconds)) > now
        }
        open_objects = {
            r.table_id: self.ledger.pending_objects(r.table_id, include_failed=True, include_orphaned=True)
            for r in routes
        }
        publish_pending_age(self.settings.ledger_table, open_objects, now)
        # failed files alone start no run (a failure that is not a file's would repeat every sweep);
        # the next run of their table retries them
        due = [
            r
            for r in routes
            if r.table_id not in in_window and any(o.status != FAILED for o in open_objects[r.table_id])
        ]
        summary["tables_checked"] = len(routes)
        summary["tables_waiting"] = len(due)
        summary["tables_in_window"] = len(in_window)
        log(
            logging.INFO,
            "sweep.checked",
            tables=len(routes),
            due=[r.table_id for r in due],
            in_window=len(in_window),
        )
        errors = self._start_all(due, correlation_id, summary)
        self._finish(summary, errors)
        return summary

    def rebuild(
        self, correlation_id: str, table_ids: list[str], *, raw_zone_erased: bool = False
    ) -> dict[str, Any]:
        """Start runs that rebuild these tables (`lakeloader rebuild --stage`); a batched table's
        window does not hold a rebuild back, a run holding the table's lock does."""
        summary = _empty_summary(correlation_id)
        summary["action"] = "rebuild"
        routes = [
            dataclasses.replace(r, min_interval_seconds=0)
            for r in self.routes()
            if r.enabled and r.table_id in table_ids
        ]
        for table_id in sorted(set(table_ids) - {r.table_id for r in routes}):
            summary["deferred"].append({"table_id": table_id, "reason": "unknown_or_disabled_table"})
        arguments = {ARG_REBUILD: "true", ARG_RAW_ZONE_ERASED: str(raw_zone_erased).lower()}
        errors = self._start_all(routes, correlation_id, summary, arguments)
        self._finish(summary, errors)
        return summary

    def _finish(self, summary: dict[str, Any], errors: list[str]) -> None:
        level = logging.ERROR if errors else logging.INFO
        log(level, "trigger.summary", **{k: v for k, v in summary.items() if k != "correlation_id"})
        if errors:
            raise TriggerError("; ".join(errors))

    def _start_all(
        self,
        routes: list[TableRoute],
        correlation_id: str,
        summary: dict[str, Any],
        job_arguments: Mapping[str, str] | None = None,
    ) -> list[str]:
        """Start runs for ``routes``: grouped by engine and execution class, TABLES_PER_RUN a run."""
        groups: dict[tuple[str, str], list[TableRoute]] = {}
        for route in routes:
            groups.setdefault((route.engine, route.execution_class), []).append(route)
        errors = []
        for members in groups.values():
            for table_id, outcome in self.start_group(members, correlation_id, job_arguments).items():
                if outcome.run_id:
                    summary["started"][table_id] = outcome.run_id
                    continue
                summary["deferred"].append({"table_id": table_id, "reason": outcome.reason, **outcome.detail})
                if outcome.error:
                    errors.append(f"table {table_id!r}: {outcome.reason}: {outcome.detail.get('error', '')}")
        return errors

    def _reserve(self, route: TableRoute, holder: str) -> _StartOutcome | None:
        """Reserve one table for a start; None when reserved, else why not (or the run already started)."""
        table_id = route.table_id
        lock = self.ledger.get_lock(table_id)
        if lock is not None and not lock.expired(self.clock()):
            if lock.holder == holder and lock.engine_run_id:
                log(logging.INFO, "run.already_started", table_id=table_id, run_id=lock.engine_run_id)
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

    def start_group(
        self, routes: list[TableRoute], correlation_id: str, job_arguments: Mapping[str, str] | None = None
    ) -> dict[str, _StartOutcome]:
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
                outcomes.update(self._launch(reserved, holder, correlation_id, job_arguments))
                reserved = []
        if reserved:
            outcomes.update(self._launch(reserved, holder, correlation_id, job_arguments))
        return outcomes

    def _launch(
        self,
        reserved: list[TableRoute],
        holder: str,
        correlation_id: str,
        job_arguments: Mapping[str, str] | None = None,
    ) -> dict[str, _StartOutcome]:
        """Start one engine run for reserved tables; on failure give back their locks and windows."""
        table_ids = [r.table_id for r in reserved]
        engine, execution_class = reserved[0].engine, reserved[0].execution_class
        try:
            run_id = self.launcher.start(engine, table_ids, correlation_id, execution_class, job_arguments)
        except START_ERRORS as exc:
            for table_id in table_ids:
                self.ledger.release_lock(table_id, holder)
                if table_id in self._windows:
                    self.ledger.unclaim_window(table_id, *self._windows.pop(table_id))
            reason, is_error = failure_reason(exc)
            return {
                table_id: self._deferred(table_id, reason, engine=engine, error=str(exc), error_flag=is_error)
                for table_id in table_ids
            }
        for table_id in table_ids:
            self._windows.pop(table_id, None)
            self.ledger.note_engine_run(table_id, holder, run_id)
        log(
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
        log(level, f"run.deferred.{reason}", table_id=table_id, note=note, **detail)
        return _StartOutcome(reason=reason, detail=detail, error=error_flag)


def handle_event(
    event: Any,
    context: Any = None,
    *,
    settings: TriggerSettings | None = None,
    trigger: Trigger | None = None,
) -> dict[str, Any]:
    """The Lambda entry point's body: settings from the environment, one correlation id per invocation."""
    settings = settings or (trigger.settings if trigger else TriggerSettings.from_env())
    logger = configure_logging(settings.log_level)
    cid = correlation_id_for(event, context)
    with correlation_id(logger, cid):
        trigger = trigger or Trigger(settings)
        if is_sweep(event):
            return trigger.sweep(cid, table_ids=sweep_table_ids(event))
        request = rebuild_request(event)
        if request is not None:
            return trigger.rebuild(cid, request["table_ids"], raw_zone_erased=request["raw_zone_erased"])
        return trigger.handle(event, cid)
