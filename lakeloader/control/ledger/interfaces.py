"""The ledger as its callers reach it: one narrow interface per concern (objects, runs, leases), each
naming the few operations its callers use, as Powertools' idempotency handler reaches its
persistence layer through an interface. `Ledger` implements every one; a caller is typed against
the interfaces it needs, so its signature says what it may do to the ledger
(`tests/unit/test_ledger_interfaces.py` holds each caller to its interfaces and `Ledger` to them).

Objects have three interfaces for their three kinds of caller: the arrival side records them
(`ObjectIntake`), a run claims and finishes them (`ObjectBatches`), an operator reads and moves them
(`ObjectReview`). Leases have two: the job's lock on a table (`TableLease`), and the trigger's start
reservation with its batching window (`StartLease`). Where one caller needs several, an interface
joins them (`DrainLedger`, `RunLease`, `StatusLedger`, `ArrivalLedger`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from lakeloader.control.ledger.actions import ActionOutcome, Backlog
from lakeloader.control.ledger.lock import DEFAULT_LOCK_TTL_SECONDS, DEFAULT_START_LEASE_SECONDS, Lock
from lakeloader.control.ledger.objects import LedgerObject, ObjectRef, RecordOutcome
from lakeloader.control.ledger.runs import RunRecord

# ------------------------------------------------------------------------------------------ objects


class ObjectIntake(Protocol):
    """Objects arriving: recorded once each, looked up, a table's open ones listed (the trigger,
    `lakeloader backfill`)."""

    def record(self, table_id: str, obj: ObjectRef, *, correlation_id: str) -> RecordOutcome: ...

    def get_object(self, table_id: str, object_id: str) -> LedgerObject | None: ...

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
    ) -> list[LedgerObject]: ...


class ObjectBatches(Protocol):
    """A run's objects: claimed batch by batch, finished with their status (the drain), or all taken
    again by a rebuild."""

    def next_batch(
        self,
        table_id: str,
        run_id: str,
        *,
        max_objects: int | None = None,
        max_bytes: int | None = None,
        at_least_one: bool = True,
        max_attempts: int | None = None,
        lock_ttl_seconds: int = DEFAULT_LOCK_TTL_SECONDS,
    ) -> list[LedgerObject]: ...

    def finish(
        self,
        table_id: str,
        objects: Sequence[LedgerObject],
        run_id: str,
        status: str,
        error: str | None = None,
    ) -> list[LedgerObject]: ...

    def rebuild_objects(self, table_id: str) -> list[LedgerObject]: ...

    def mark_rebuilt(self, table_id: str, objects: Sequence[LedgerObject], run_id: str) -> ActionOutcome: ...


class ObjectReview(Protocol):
    """What an operator reads of a table's objects and moves (`lakeloader status|requeue|skip|verify`)."""

    def objects(self, table_id: str, *, statuses: Iterable[str] | None = None) -> list[LedgerObject]: ...

    def backlog(self, table_id: str) -> Backlog: ...

    def every_table_backlog(self) -> dict[str, Backlog]: ...

    def requeue(self, table_id: str, objects: Sequence[LedgerObject], *, note: str) -> ActionOutcome: ...

    def skip(self, table_id: str, objects: Sequence[LedgerObject], *, note: str) -> ActionOutcome: ...


# --------------------------------------------------------------------------------------------- runs


class Runs(Protocol):
    """The run history: a run started and ended, the dead ones abandoned, a table's runs read."""

    def start_run(
        self,
        table_id: str,
        run_id: str,
        correlation_id: str,
        *,
        engine: str | None = None,
        engine_run_id: str | None = None,
        objects: int | None = None,
    ) -> RunRecord: ...

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
    ) -> RunRecord: ...

    def abandon_dead_runs(self, table_id: str, holder: str) -> list[str]: ...

    def list_runs(self, table_id: str, *, limit: int = 20) -> list[RunRecord]: ...

    def every_table_runs(self, *, limit: int = 20) -> dict[str, list[RunRecord]]: ...

    def get_run(self, table_id: str, run_id: str) -> RunRecord | None: ...


# ------------------------------------------------------------------------------------------- leases


class TableLease(Protocol):
    """The job's lock on a table: one run at a time, kept while it works, released at its end."""

    def acquire_lock(
        self, table_id: str, holder: str, *, ttl_seconds: int = DEFAULT_LOCK_TTL_SECONDS
    ) -> bool: ...

    def keep_lock(
        self, table_id: str, holder: str, *, ttl_seconds: int = DEFAULT_LOCK_TTL_SECONDS
    ) -> None: ...

    def release_lock(self, table_id: str, holder: str) -> bool: ...


class StartLease(Protocol):
    """The trigger's reservation of a table's start: the short lease a start holds until the run takes
    the lock, and the batching window that spaces starts."""

    def get_lock(self, table_id: str) -> Lock | None: ...

    def reserve_start(
        self, table_id: str, holder: str, *, ttl_seconds: int = DEFAULT_START_LEASE_SECONDS
    ) -> bool: ...

    def note_engine_run(self, table_id: str, holder: str, engine_run_id: str) -> bool: ...

    def release_lock(self, table_id: str, holder: str) -> bool: ...

    def window_opens_at(self, table_id: str, min_interval_seconds: int) -> float: ...

    def claim_window(self, table_id: str, min_interval_seconds: int) -> tuple[int, int | None] | None: ...

    def unclaim_window(self, table_id: str, claimed_at: int, previous: int | None) -> None: ...


# --------------------------------------------------------------------------- for callers of several


class DrainLedger(ObjectBatches, Runs, TableLease, Protocol):
    """The drain: claims and finishes objects in runs it records, under the table's lock;
    `ledger_table` names the stage in its metrics."""

    ledger_table: str


class RunLease(Runs, TableLease, Protocol):
    """A run that takes no objects (`reconcile --repair`): recorded, under the table's lock."""


class StatusLedger(ObjectReview, Runs, Protocol):
    """An operator's view of a table: its objects and its runs (`lakeloader status`, `verify`)."""


class ArrivalLedger(ObjectIntake, StartLease, Protocol):
    """The arrival Lambda: records objects, reserves starts."""
