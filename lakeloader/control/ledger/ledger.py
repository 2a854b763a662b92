"""The Ledger the job, the trigger and the CLI hold: one object over the stage's two DynamoDB tables.

Each operation is defined once, in the module of the item it reads or writes: objects.py (object
items), actions.py (an operator's moves of them), runs.py (run items), lock.py (the ``#lock`` item),
window.py (the ``#window`` item), all over the persistence of base.py (`LedgerTables`: client,
table names, clock, conditional writes). Here only what needs two of them: the drain loop
(``next_batch``: objects and lock) and reading runs against the lock. Which operation is where,
and why one object rather than parts: docs/ledger_and_trigger.md."""

from __future__ import annotations

from dataclasses import replace

from lakeloader.control.ledger.actions import ObjectActions
from lakeloader.control.ledger.lock import DEFAULT_LOCK_TTL_SECONDS, LOCK_RUN_ID, Lock, TableLock
from lakeloader.control.ledger.objects import LedgerObject
from lakeloader.control.ledger.runs import RUN_ABANDONED, RUN_RUNNING, RunHistory, RunRecord
from lakeloader.control.ledger.window import BatchingWindow

# What `every_table_runs` reads: a run's outcome (status, end, objects, counts, snapshot, error) and a
# lock's holder and expiry
RUN_SUMMARY_ATTRIBUTES = (
    "table_id",
    "run_id",
    "status",
    "ended_at",
    "objects",
    "counts",
    "snapshot_id",
    "error",
    "holder",
    "expires_at",
)


class Ledger(ObjectActions, RunHistory, TableLock, BatchingWindow):
    """Ledger and run history on DynamoDB: the union of its parts, none overriding another. Every
    method is safe to call again after a crash or a retried invocation (each write is conditional
    or idempotent)."""

    def _live_run(self, table_id: str) -> str | None:
        """The run that holds the table's lock, if its lease has not lapsed."""
        lock = self.get_lock(table_id)
        return lock.holder if lock is not None and not lock.expired(self.clock()) else None

    def _read_as_abandoned(self, table_id: str, runs: list[RunRecord]) -> list[RunRecord]:
        if not any(r.status == RUN_RUNNING for r in runs):
            return runs
        return _as_abandoned(runs, self._live_run(table_id))

    def every_table_runs(self, *, limit: int = 20) -> dict[str, list[RunRecord]]:
        """Each table's runs as `list_runs` reads them (newest first, read against its lock), from one
        Scan of the run history instead of a query (and a lock read) per table. Each run with what
        `lakeloader status` shows of it (RUN_SUMMARY_ATTRIBUTES), not its engine or start."""
        runs: dict[str, list[RunRecord]] = {}
        live: dict[str, str] = {}
        for item in self.scan(self.runs_table, RUN_SUMMARY_ATTRIBUTES):
            if item.get("run_id", {}).get("S") == LOCK_RUN_ID:
                lock = Lock.from_item(item)
                if not lock.expired(self.clock()):
                    live[lock.table_id] = lock.holder
                continue
            run = RunRecord.from_item(item)
            if not run.run_id.startswith("#"):  # the window item
                runs.setdefault(run.table_id, []).append(run)
        return {
            table: _as_abandoned(sorted(found, key=lambda r: r.run_id, reverse=True)[:limit], live.get(table))
            for table, found in runs.items()
        }

    def list_runs(self, table_id: str, *, limit: int = 20) -> list[RunRecord]:
        """A table's runs, newest first; one still `running` without the table's live lock reads
        `abandoned`: its job died (the record says so for good once the next drain starts)."""
        return self._read_as_abandoned(table_id, self._stored_runs(table_id, limit=limit))

    def get_run(self, table_id: str, run_id: str) -> RunRecord | None:
        run = self._stored_run(table_id, run_id)
        return self._read_as_abandoned(table_id, [run])[0] if run is not None else None

    def abandon_dead_runs(self, table_id: str, holder: str) -> list[str]:
        """Called by a run that has just taken the table's lock: every other run still recorded as
        running is dead (it could not hold the lock), and is recorded as abandoned."""
        dead = [
            r.run_id for r in self._stored_runs(table_id) if r.status == RUN_RUNNING and r.run_id != holder
        ]
        return [run_id for run_id in dead if self.abandon_run(table_id, run_id)]

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
    ) -> list[LedgerObject]:
        """Claim the next batch for a run that holds the table lock; [] means stop.

        Takes pending objects, failed objects of earlier runs and objects left
        running by crashed runs (see ``pending_objects``), at most ``max_objects`` of them
        and ``max_bytes`` in all (a larger one alone if ``at_least_one``). Renews the lock
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
                max_bytes=max_bytes,
                at_least_one=at_least_one,
            )

        found = candidates()
        if found:
            self.keep_lock(table_id, run_id, ttl_seconds=lock_ttl_seconds)
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


def _as_abandoned(runs: list[RunRecord], live: str | None) -> list[RunRecord]:
    """The runs, each still `running` that is not `live` (the holder of the table's lock) abandoned."""
    return [
        replace(r, status=RUN_ABANDONED) if r.status == RUN_RUNNING and r.run_id != live else r for r in runs
    ]
