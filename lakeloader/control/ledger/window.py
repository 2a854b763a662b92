"""The batching window: when a table with ``min_interval_seconds`` may start its next run.

One item of the runs table per such table (``run_id = "#window"``), claimed by the trigger
with a conditional write so two triggers racing for one window get one start.
"""

from __future__ import annotations

from typing import Any

from lakeloader.control.dynamodb import decode_item, encode_item
from lakeloader.control.ledger.base import LedgerTables

WINDOW_RUN_ID = "#window"


class BatchingWindow(LedgerTables):
    """Read, claim and give back a table's batching window."""

    def _window_key(self, table_id: str) -> dict[str, Any]:
        return encode_item({"table_id": table_id, "run_id": WINDOW_RUN_ID})

    def window_opens_at(self, table_id: str, min_interval_seconds: int) -> float:
        """When the table's next run may start: its last run start plus the window (0: never started)."""
        response = self.client.get_item(
            TableName=self.runs_table, Key=self._window_key(table_id), ConsistentRead=True
        )
        last = decode_item(response.get("Item") or {}).get("last_start")
        return 0.0 if last is None else float(last + min_interval_seconds)

    def claim_window(self, table_id: str, min_interval_seconds: int) -> tuple[int, int | None] | None:
        """Note a run start now if the window since the last one has passed.

        Returns (this start, the previous one) for ``unclaim_window``, or None while the window
        is still open. A conditional write: two triggers racing for one window get one start.
        """
        now = int(self.clock())
        response = self.conditional_write(
            self.client.update_item,
            TableName=self.runs_table,
            Key=self._window_key(table_id),
            UpdateExpression="SET last_start = :now, expires_at = :expires",
            ConditionExpression="attribute_not_exists(last_start) OR last_start <= :cutoff",
            ExpressionAttributeValues=encode_item(
                {
                    ":now": now,
                    ":cutoff": now - min_interval_seconds,
                    ":expires": now + min_interval_seconds + 86400,
                }
            ),
            ReturnValues="UPDATED_OLD",
        )
        if response is None:
            return None
        return now, decode_item(response.get("Attributes") or {}).get("last_start")

    def unclaim_window(self, table_id: str, claimed_at: int, previous: int | None) -> None:
        """Undo a claim whose run did not start, so the next trigger need not wait a whole window."""
        values: dict[str, Any] = {":claimed": claimed_at}
        if previous is None:
            update = "REMOVE last_start"
        else:
            update = "SET last_start = :previous"
            values[":previous"] = previous
        self.conditional_write(
            self.client.update_item,
            TableName=self.runs_table,
            Key=self._window_key(table_id),
            UpdateExpression=update,
            ConditionExpression="last_start = :claimed",
            ExpressionAttributeValues=encode_item(values),
        )
