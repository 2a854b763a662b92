"""Starting runs for tables: reserve each table's lock (and a batched one's window), start one engine
run for up to TABLES_PER_RUN reserved tables, give the reservations back when the start fails.

Why each step is safe to retry: docs/ledger_and_trigger.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lakeloader.control.ledger.interfaces import StartLease
from lakeloader.control.trigger.launch import START_ERRORS, Launcher, failure_reason
from lakeloader.control.trigger.logs import log
from lakeloader.control.trigger.routes import TableRoute
from lakeloader.control.trigger.settings import TriggerSettings


@dataclass(frozen=True, kw_only=True)
class StartOutcome:
    """A table's run started (``run_id``), or why not (``reason``, ``detail``; ``error``: the
    invocation fails and is retried)."""

    run_id: str | None = None
    reason: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    error: bool = False


def deferred(table_id: str, reason: str, *, error_flag: bool = False, **detail: Any) -> StartOutcome:
    """A table whose run is not started now, logged: its objects stay pending."""
    level = logging.ERROR if error_flag else logging.INFO
    note = "objects stay pending" + ("" if error_flag else "; the running job or the next trigger takes them")
    log(level, f"run.deferred.{reason}", table_id=table_id, note=note, **detail)
    return StartOutcome(reason=reason, detail=detail, error=error_flag)


class RunStarter:
    """Reserves tables on the ledger and starts their runs through the launcher."""

    def __init__(
        self,
        *,
        settings: TriggerSettings,
        ledger: StartLease,
        launcher: Launcher,
        clock: Callable[[], float],
    ) -> None:
        self.settings = settings
        self.ledger = ledger
        self.launcher = launcher
        self.clock = clock
        self._windows: dict[str, tuple[int, int | None]] = {}  # window claims of starts in flight

    def start(
        self, routes: list[TableRoute], correlation_id: str, job_arguments: Mapping[str, str] | None = None
    ) -> dict[str, StartOutcome]:
        """Start runs for ``routes``: grouped by engine and execution class, TABLES_PER_RUN a run."""
        groups: dict[tuple[str, str], list[TableRoute]] = {}
        for route in routes:
            groups.setdefault((route.engine, route.execution_class), []).append(route)
        outcomes: dict[str, StartOutcome] = {}
        for members in groups.values():
            outcomes.update(self._start_group(members, correlation_id, job_arguments))
        return outcomes

    def _start_group(
        self, routes: list[TableRoute], correlation_id: str, job_arguments: Mapping[str, str] | None = None
    ) -> dict[str, StartOutcome]:
        """Start runs for the free tables of ``routes`` (one engine and execution class), up to
        TABLES_PER_RUN tables a run.

        Each table is reserved on its own lock (a batched one also claims its window); tables
        that are busy, or whose window has not passed, are deferred and leave their place to the next.
        """
        holder = f"trigger:{correlation_id}"
        outcomes: dict[str, StartOutcome] = {}
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

    def _reserve(self, route: TableRoute, holder: str) -> StartOutcome | None:
        """Reserve one table for a start; None when reserved, else why not (or the run already started)."""
        table_id = route.table_id
        lock = self.ledger.get_lock(table_id)
        if lock is not None and not lock.expired(self.clock()):
            if lock.holder == holder and lock.engine_run_id:
                log(logging.INFO, "run.already_started", table_id=table_id, run_id=lock.engine_run_id)
                return StartOutcome(run_id=lock.engine_run_id)
            # Held by another run, or by a copy of this invocation still starting one: wait for it.
            return deferred(
                table_id,
                "run_in_progress",
                lock_holder=lock.holder,
                lock_state=lock.state,
                lock_expires_at=lock.expires_at,
            )
        if not self.ledger.reserve_start(table_id, holder, ttl_seconds=self.settings.start_lease_seconds):
            lock = self.ledger.get_lock(table_id)
            return deferred(
                table_id,
                "run_in_progress",
                lock_holder=lock.holder if lock else None,
                lock_state=lock.state if lock else None,
            )
        if route.batched:
            claim = self.ledger.claim_window(table_id, route.min_interval_seconds)
            if claim is None:  # another trigger started a run within the window meanwhile
                self.ledger.release_lock(table_id, holder)
                return deferred(table_id, "batching_window", min_interval_seconds=route.min_interval_seconds)
            self._windows[table_id] = claim
        return None

    def _launch(
        self,
        reserved: list[TableRoute],
        holder: str,
        correlation_id: str,
        job_arguments: Mapping[str, str] | None = None,
    ) -> dict[str, StartOutcome]:
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
                table_id: deferred(table_id, reason, engine=engine, error=str(exc), error_flag=is_error)
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
        return {table_id: StartOutcome(run_id=run_id) for table_id in table_ids}
