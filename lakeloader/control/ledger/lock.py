"""The per-table lock (one run at a time) and the trigger's start lease, an item of the runs table.

Who may take it when, and the drain protocol built on it: docs/ledger_and_trigger.md.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lakeloader.control.dynamodb import encode_item
from lakeloader.control.ledger.base import LedgerTables, LockLostError, record_from_item, utc_now_iso

LOCK_RUN_ID = "#lock"
LOCK_STARTING = "starting"
LOCK_RUNNING = "running"

DEFAULT_LOCK_TTL_SECONDS = 2 * 3600
DEFAULT_START_LEASE_SECONDS = 15 * 60


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
        return record_from_item(
            cls, item, table_id="", holder="", state=LOCK_RUNNING, acquired_at=None, expires_at=0
        )


class TableLock(LedgerTables):
    """Take, renew, note and release a table's lock; every write is conditional on the holder."""

    def _lock_key(self, table_id: str) -> dict[str, Any]:
        return encode_item({"table_id": table_id, "run_id": LOCK_RUN_ID})

    def get_lock(self, table_id: str) -> Lock | None:
        """The table's lock item, expired or not (``Lock.expired()`` tells), or None."""
        response = self.client.get_item(
            TableName=self.runs_table, Key=self._lock_key(table_id), ConsistentRead=True
        )
        item = response.get("Item")
        return Lock.from_item(item) if item else None

    def _conditional(self, write: Any, **kwargs: Any) -> bool:
        """Run one conditional write on the runs table; False when its condition did not hold."""
        return self.conditional_write(write, TableName=self.runs_table, **kwargs) is not None

    def _put_lock(
        self, table_id: str, holder: str, state: str, ttl_seconds: int, take_over_start: bool
    ) -> bool:
        if not holder:
            raise ValueError("lock holder must not be empty")
        now = self.clock()
        condition = "attribute_not_exists(run_id) OR expires_at < :now"
        values: dict[str, Any] = {":now": int(now)}
        names: dict[str, str] = {}
        if take_over_start:
            condition += " OR holder = :holder OR #state = :starting"
            values[":holder"] = holder
            values[":starting"] = LOCK_STARTING
            names["#state"] = "state"
        item = {
            "holder": holder,
            "state": state,
            "acquired_at": utc_now_iso(now),
            "expires_at": int(now + ttl_seconds),
        }
        kwargs: dict[str, Any] = {
            "Item": {**self._lock_key(table_id), **encode_item(item)},
            "ConditionExpression": condition,
            "ExpressionAttributeValues": encode_item(values),
        }
        if names:
            kwargs["ExpressionAttributeNames"] = names
        return self._conditional(self.client.put_item, **kwargs)

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
        return self._conditional(
            self.client.update_item,
            Key=self._lock_key(table_id),
            UpdateExpression="SET expires_at = :expires",
            ConditionExpression="holder = :holder",
            ExpressionAttributeValues=encode_item(
                {":holder": holder, ":expires": int(self.clock() + ttl_seconds)}
            ),
        )

    def keep_lock(self, table_id: str, holder: str, *, ttl_seconds: int = DEFAULT_LOCK_TTL_SECONDS) -> None:
        """`renew_lock`, raising LockLostError when ``holder`` lost the lock: a run must not go on."""
        if not self.renew_lock(table_id, holder, ttl_seconds=ttl_seconds):
            raise LockLostError(f"table {table_id!r}: run {holder!r} no longer holds the table lock")

    def note_engine_run(self, table_id: str, holder: str, engine_run_id: str) -> bool:
        """Remember the Glue/EMR run id a reservation started (for operators and retries)."""
        return self._conditional(
            self.client.update_item,
            Key=self._lock_key(table_id),
            UpdateExpression="SET engine_run_id = :engine_run",
            ConditionExpression="holder = :holder",
            ExpressionAttributeValues=encode_item({":holder": holder, ":engine_run": engine_run_id}),
        )

    def release_lock(self, table_id: str, holder: str) -> bool:
        """Drop the lock if ``holder`` holds it; True if it did. Idempotent."""
        return self._conditional(
            self.client.delete_item,
            Key=self._lock_key(table_id),
            ConditionExpression="holder = :holder",
            ExpressionAttributeValues=encode_item({":holder": holder}),
        )
