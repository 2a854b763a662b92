"""What an operator does to a table's objects (`lakeloader requeue|skip|status`), without a run.

Each change is one conditional write on the status the operator saw: an object a run claimed
or finished in between is left as it is and reported, never overwritten.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from lakeloader.control.dynamodb import encode_item
from lakeloader.control.ledger.base import clip_error, utc_now_iso
from lakeloader.control.ledger.objects import (
    DONE,
    FAILED,
    OPEN_STATUSES,
    PENDING,
    QUARANTINED,
    RUNNING,
    SKIPPED,
    LedgerObject,
    ObjectLedger,
)

REQUEUE_FROM = (QUARANTINED, FAILED, SKIPPED)
SKIP_FROM = (QUARANTINED, FAILED, PENDING)
REBUILD_FROM = (DONE, PENDING, FAILED, RUNNING)  # a rebuild loads these; quarantined and skipped stay out
# What a backlog reads of an object (Backlog.of), and the keys that place it
BACKLOG_ATTRIBUTES = (
    "table_id",
    "object_id",
    "key",
    "status",
    "attempts",
    "error",
    "size",
    "event_time",
    "first_seen",
)


@dataclass(frozen=True)
class Backlog:
    """One table's objects by status, and what is still to load (pending, failed, running)."""

    counts: dict[str, int]
    oldest_open: str | None  # when the oldest object still to load arrived (its lag)
    open_bytes: int
    stuck: list[LedgerObject] = field(default_factory=list)  # quarantined and failed: why, which

    @classmethod
    def of(cls, objects: list[LedgerObject]) -> Backlog:
        """The backlog of a table's objects (in key order: the stuck ones keep it)."""
        open_objects = [o for o in objects if o.status in OPEN_STATUSES]
        arrivals = [o.event_time or o.first_seen or "" for o in open_objects]
        return cls(
            counts=dict(Counter(o.status for o in objects)),
            oldest_open=min(arrivals) if arrivals else None,
            open_bytes=sum(o.size or 0 for o in open_objects),
            stuck=[o for o in objects if o.status in (QUARANTINED, FAILED)],
        )

    @property
    def open(self) -> int:
        return sum(self.counts.get(status, 0) for status in OPEN_STATUSES)


@dataclass(frozen=True)
class ActionOutcome:
    """Objects changed, and those left alone because a run changed them since they were read."""

    changed: list[LedgerObject]
    left: list[LedgerObject]


class ObjectActions(ObjectLedger):
    """Requeue and skip objects, and summarise a table's backlog."""

    def backlog(self, table_id: str) -> Backlog:
        return Backlog.of(self.objects(table_id))

    def every_table_backlog(self) -> dict[str, Backlog]:
        """Each table's backlog, as `backlog` gives it, from one Scan of the ledger (the attributes a
        backlog reads) instead of a query per table."""
        by_table: dict[str, list[LedgerObject]] = {}
        for item in self.scan(self.ledger_table, BACKLOG_ATTRIBUTES):
            obj = LedgerObject.from_item(item)
            by_table.setdefault(obj.table_id, []).append(obj)
        # each table's in key order, as its query returns them (UTF-8 order is code point order)
        return {
            table: Backlog.of(sorted(found, key=lambda o: o.object_id)) for table, found in by_table.items()
        }

    def requeue(self, table_id: str, objects: Sequence[LedgerObject], *, note: str) -> ActionOutcome:
        """Give quarantined, failed or skipped objects back to the runs: pending, attempts reset."""
        return self._move(
            table_id,
            objects,
            REQUEUE_FROM,
            "SET #status = :to, attempts = :zero, updated_at = :now, note = :note REMOVE run_id",
            {":to": PENDING, ":zero": 0},
            note,
        )

    def skip(self, table_id: str, objects: Sequence[LedgerObject], *, note: str) -> ActionOutcome:
        """Set quarantined, failed or pending objects aside for good: no run takes them again."""
        return self._move(
            table_id,
            objects,
            SKIP_FROM,
            "SET #status = :to, updated_at = :now, note = :note",
            {":to": SKIPPED},
            note,
        )

    def rebuild_objects(self, table_id: str) -> list[LedgerObject]:
        """What `lakeloader rebuild` loads: every object the table loaded or still has to load."""
        return self.objects(table_id, statuses=REBUILD_FROM)

    def mark_rebuilt(self, table_id: str, objects: Sequence[LedgerObject], run_id: str) -> ActionOutcome:
        """Record the objects a rebuild loaded as done by its run (the run holds the table's lock)."""
        return self._move(
            table_id,
            objects,
            REBUILD_FROM,
            "SET #status = :to, attempts = :zero, run_id = :run, updated_at = :now, note = :note "
            "REMOVE #error",
            {":to": DONE, ":zero": 0, ":run": run_id},
            f"loaded again by rebuild {run_id}",
        )

    def _move(
        self,
        table_id: str,
        objects: Sequence[LedgerObject],
        allowed: tuple[str, ...],
        update: str,
        values: dict,
        note: str,
    ) -> ActionOutcome:
        now = utc_now_iso(self.clock())
        movable = [obj for obj in objects if obj.status in allowed]
        requests = [
            {
                "TableName": self.ledger_table,
                "Key": encode_item({"table_id": table_id, "object_id": obj.object_id}),
                "UpdateExpression": update,
                "ConditionExpression": "#status = :seen",
                "ExpressionAttributeNames": {
                    "#status": "status",
                    **({"#error": "error"} if "#error" in update else {}),
                },
                "ExpressionAttributeValues": encode_item(
                    {**values, ":seen": obj.status, ":now": now, ":note": clip_error(note) or ""}
                ),
                "ReturnValues": "ALL_NEW",
            }
            for obj in movable
        ]
        responses = iter(self.conditional_writes(self.client.update_item, requests))
        changed, left = [], []
        for obj in objects:
            if (response := next(responses) if obj.status in allowed else None) is None:
                left.append(obj)
            else:
                changed.append(LedgerObject.from_item(response["Attributes"]))
        return ActionOutcome(changed, left)
