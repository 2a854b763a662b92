"""The Ledger the job and the trigger hold: objects, runs, the lock and the window in one object,
and the drain loop (``next_batch``) that needs the objects and the lock together."""

from __future__ import annotations

from lakeloader.ledger.base import LockLostError
from lakeloader.ledger.lock import DEFAULT_LOCK_TTL_SECONDS, TableLock
from lakeloader.ledger.objects import LedgerObject, ObjectLedger
from lakeloader.ledger.runs import RunHistory
from lakeloader.ledger.window import BatchingWindow


class Ledger(ObjectLedger, RunHistory, TableLock, BatchingWindow):
    """Ledger and run history on DynamoDB. Every method is safe to call again after a crash or a
    retried invocation (each write is conditional or idempotent)."""

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
