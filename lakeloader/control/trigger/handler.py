"""The trigger: one handler per kind of invocation (objects arrived, sweep, rebuild), and the Lambda
body that reads the invocation once and dispatches it.

What each step does and why it is safe to retry: docs/ledger_and_trigger.md.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from lakeloader.control.contract import ARG_RAW_ZONE_ERASED, ARG_REBUILD, SUCCESS_MARKER
from lakeloader.control.ledger import FAILED, PENDING, Ledger, LedgerObject
from lakeloader.control.ledger.interfaces import ArrivalLedger
from lakeloader.control.trigger.events import (
    ObjectEvent,
    ObjectsArrived,
    RebuildRequest,
    SweepRequest,
    read_invocation,
)
from lakeloader.control.trigger.found import FoundTables
from lakeloader.control.trigger.launch import Launcher, aws_client
from lakeloader.control.trigger.logs import configure_logging, correlation_id, log
from lakeloader.control.trigger.metrics import publish_pending_age
from lakeloader.control.trigger.routes import Routes, TableRoute, cached_routes, match_routes
from lakeloader.control.trigger.settings import TriggerSettings
from lakeloader.control.trigger.starts import RunStarter, deferred
from lakeloader.control.trigger.summary import RebuildSummary, Summary, SweepSummary

SWEEP_THREADS = 16  # tables whose ledger items the sweep reads at once


class TriggerError(RuntimeError):
    """The trigger could not start a run it should have started; the invocation is retried."""


class Trigger:
    """Handles each kind of invocation: records arrivals, sweeps, rebuilds; `RunStarter` starts the
    runs. Clients default to cached boto3 clients."""

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
        self.clock = clock
        self.ledger: ArrivalLedger = Ledger(
            self.dynamodb, settings.ledger_table, settings.runs_table, clock=clock
        )
        self.found = FoundTables(self.dynamodb, settings.config_table, settings.ledger_table)
        self.starter = RunStarter(
            settings=settings,
            ledger=self.ledger,
            launcher=Launcher(settings, glue=glue, emr=emr),
            clock=clock,
        )

    def routes(self) -> Routes:
        return cached_routes(self.dynamodb, self.settings.config_table, self.settings.config_cache_seconds)

    def _ignore_reason(self, event: ObjectEvent, routes: Routes) -> str | None:
        ref = event.ref
        if not event.created:
            return f"not an object-created event ({event.event_name or 'no event name'})"
        if self.settings.raw_bucket and ref.bucket != self.settings.raw_bucket:
            return f"bucket {ref.bucket!r} is not the raw bucket {self.settings.raw_bucket!r}"
        if not ref.key or ref.key.endswith("/"):
            return "folder marker"
        name = ref.key.rsplit("/", 1)[-1]
        if name == SUCCESS_MARKER and any(r.success_markers for r in match_routes(ref.key, routes.tables)):
            return None  # it completes a snapshot folder (cdc: snapshot): recorded, and it starts a run
        if name.startswith(("_", ".")):
            return "hidden file (name starts with '_' or '.', which Spark skips)"
        return None

    def handle(self, event: ObjectsArrived) -> dict[str, Any]:
        """Record the objects that arrived and start their tables' runs (a batched table's waits for
        the sweep); returns the summary."""
        summary = Summary(correlation_id=event.correlation_id)
        for bucket in event.test_event_buckets:
            log(logging.INFO, "event.s3_test_event", bucket=bucket)
        summary.records = len(event.objects) + len(event.problems)
        for problem in event.problems:
            summary.ignored += 1
            log(logging.WARNING, "record.unrecognised", reason=problem)

        routes = self.routes() if event.objects else Routes()
        to_start: dict[str, TableRoute] = {}
        for event_object in event.objects:
            ref = event_object.ref
            where = {"bucket": ref.bucket, "key": ref.key, "event": event_object.event_name}
            reason = self._ignore_reason(event_object, routes)
            if reason:
                summary.ignored += 1
                log(logging.INFO, "object.ignored", reason=reason, **where)
                continue
            matched = match_routes(ref.key, routes.tables)
            if found := self.found.claim(ref.key, routes, matched):  # a new table's first file
                matched = [found]
            if not matched:
                summary.unknown += 1
                log(logging.WARNING, "object.unknown_prefix", known_prefixes=len(routes.tables), **where)
                continue
            matched = [self.found.release(r, routes) if r.held else r for r in matched]
            if ref.key.rsplit("/", 1)[-1] == SUCCESS_MARKER:  # only cdc: snapshot tables take it
                matched = [r for r in matched if r.success_markers]
            for route in matched:  # tables sharing a prefix: each its own ledger entry and run
                if self._record(route, event_object, summary):
                    to_start[route.table_id] = route

        for table_id in sorted(r.table_id for r in to_start.values() if r.batched):
            window = to_start.pop(table_id).min_interval_seconds
            summary.add(table_id, deferred(table_id, "batching_window", min_interval_seconds=window))
        return self._start(sorted(to_start.values(), key=lambda r: r.table_id), summary)

    def _record(self, route: TableRoute, event_object: ObjectEvent, summary: Summary) -> bool:
        """Record one object for one table; True when the table's run should start (the object is
        pending and the table enabled)."""
        ref = event_object.ref
        outcome = self.ledger.record(route.table_id, ref, correlation_id=summary.correlation_id)
        fields = {
            "table_id": route.table_id,
            "object_id": outcome.object.object_id,
            "bucket": ref.bucket,
            "key": ref.key,
            "event": event_object.event_name,
        }
        if route.held:
            summary.held += 1
            log(logging.WARNING, "object.table_held", new=outcome.new, reason=route.held, **fields)
            return False
        if not route.enabled:
            summary.disabled += 1
            log(
                logging.WARNING,
                "object.table_disabled",
                new=outcome.new,
                status=outcome.object.status,
                note="recorded as pending; no run started while the table is disabled",
                **fields,
            )
            return False
        if outcome.new:
            summary.recorded += 1
            log(logging.INFO, "object.recorded", size=ref.size, **fields)
            return True
        summary.duplicates += 1
        log(
            logging.INFO,
            "object.duplicate",
            status=outcome.object.status,
            first_seen=outcome.object.first_seen,
            first_correlation_id=outcome.object.correlation_id,
            **fields,
        )
        return outcome.object.status == PENDING

    def sweep(self, request: SweepRequest) -> dict[str, Any]:
        """Start runs for the enabled tables with pending (or orphaned running) objects, batched
        tables only once their window has passed; publish each table's PendingAgeSeconds."""
        summary = SweepSummary(correlation_id=request.correlation_id)
        table_ids = request.table_ids
        known = self.routes()
        released = [self.found.release(r, known) if r.held else r for r in known.tables]
        routes = [r for r in released if r.enabled and (not table_ids or r.table_id in table_ids)]
        now = self.clock()  # a batched table inside its window is not due, pending or not

        def read(route: TableRoute) -> tuple[str, float, list[LedgerObject]]:
            opens_at = (
                self.ledger.window_opens_at(route.table_id, route.min_interval_seconds)
                if route.batched
                else 0.0
            )
            pending = self.ledger.pending_objects(route.table_id, include_failed=True, include_orphaned=True)
            return route.table_id, opens_at, pending

        # one or two queries a table: SWEEP_THREADS tables at a time (1,000 tables one by one take minutes)
        with ThreadPoolExecutor(max_workers=SWEEP_THREADS) as pool:
            read_back = list(pool.map(read, routes))
        in_window = {table_id: opens_at for table_id, opens_at, _ in read_back if opens_at > now}
        open_objects = {table_id: pending for table_id, _, pending in read_back}
        freshness = {r.table_id: r.freshness_seconds for r in routes}
        publish_pending_age(self.settings.ledger_table, open_objects, now, freshness)
        # failed files alone start no run (a failure that is not a file's would repeat every sweep);
        # the next run of their table retries them
        due = [
            r
            for r in routes
            if r.table_id not in in_window and any(o.status != FAILED for o in open_objects[r.table_id])
        ]
        summary.tables_checked = len(routes)
        summary.tables_waiting = len(due)
        summary.tables_in_window = len(in_window)
        log(
            logging.INFO,
            "sweep.checked",
            tables=len(routes),
            due=[r.table_id for r in due],
            in_window=len(in_window),
        )
        return self._start(due, summary)

    def rebuild(self, request: RebuildRequest) -> dict[str, Any]:
        """Start runs that rebuild these tables (`lakeloader rebuild --stage`); a batched table's
        window does not hold a rebuild back, a run holding the table's lock does."""
        summary = RebuildSummary(correlation_id=request.correlation_id)
        routes = [
            dataclasses.replace(r, min_interval_seconds=0)
            for r in self.routes().tables
            if r.enabled and r.table_id in request.table_ids
        ]
        for table_id in sorted(set(request.table_ids) - {r.table_id for r in routes}):
            summary.deferred.append({"table_id": table_id, "reason": "unknown_or_disabled_table"})
        arguments = {ARG_REBUILD: "true", ARG_RAW_ZONE_ERASED: str(request.raw_zone_erased).lower()}
        return self._start(routes, summary, arguments)

    def _start(
        self, routes: list[TableRoute], summary: Summary, job_arguments: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        """Start the routes' runs, log the summary and return it as the Lambda's response; raise
        TriggerError (the invocation is retried) when a start failed for a reason other than a limit."""
        outcomes = self.starter.start(routes, summary.correlation_id, job_arguments)
        for table_id, outcome in outcomes.items():
            summary.add(table_id, outcome)
        response = summary.as_json()
        errors = [
            f"table {table_id!r}: {outcome.reason}: {outcome.detail.get('error', '')}"
            for table_id, outcome in outcomes.items()
            if outcome.error
        ]
        log(
            logging.ERROR if errors else logging.INFO,
            "trigger.summary",
            **{k: v for k, v in response.items() if k != "correlation_id"},
        )
        if errors:
            raise TriggerError("; ".join(errors))
        return response


def handle_event(
    event: Any,
    context: Any = None,
    *,
    settings: TriggerSettings | None = None,
    trigger: Trigger | None = None,
) -> dict[str, Any]:
    """The Lambda entry point's body: settings from the environment, the invocation read once (its
    correlation id on every log line) and handed to the handler of its kind."""
    settings = settings or (trigger.settings if trigger else TriggerSettings.from_env())
    logger = configure_logging(settings.log_level)
    invocation = read_invocation(event, context, eventbridge_keys_encoded=settings.eventbridge_keys_encoded)
    with correlation_id(logger, invocation.correlation_id):
        trigger = trigger or Trigger(settings)
        match invocation:
            case SweepRequest():
                return trigger.sweep(invocation)
            case RebuildRequest():
                return trigger.rebuild(invocation)
            case ObjectsArrived():
                return trigger.handle(invocation)
