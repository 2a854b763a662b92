"""Run history: one item per job run of a table (status, counts, snapshot, error, duration)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lakeloader.control.dynamodb import decode_item, encode_item
from lakeloader.control.ledger.base import LedgerTables, clip_error, record_from_item, utc_now_iso

RUN_RUNNING = "running"
RUN_SUCCEEDED = "succeeded"
RUN_FAILED = "failed"
RUN_SKIPPED = "skipped"
# A run left `running` by a job that died: its table lock lapsed or another run holds it (Ledger).
RUN_ABANDONED = "abandoned"
RUN_STATUSES = (RUN_RUNNING, RUN_SUCCEEDED, RUN_FAILED, RUN_SKIPPED, RUN_ABANDONED)


@dataclass(frozen=True)
class RunRecord:
    """One run history item."""

    table_id: str
    run_id: str
    status: str
    correlation_id: str | None = None
    engine: str | None = None
    engine_run_id: str | None = None
    objects: int | None = None
    started_at: str | None = None
    ended_at: str | None = None
    duration_ms: int | None = None
    counts: dict[str, int | float] = field(default_factory=dict)
    snapshot_id: int | None = None
    error: str | None = None
    expires_at: int | None = None

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> RunRecord:
        return record_from_item(cls, item, table_id="", run_id="", status=RUN_RUNNING)


def _check_run_id(run_id: str) -> None:
    # "#lock" and "#window" share the runs table's sort key
    if not run_id or run_id.startswith("#"):
        raise ValueError(f"run id {run_id!r} is reserved or empty")


class RunHistory(LedgerTables):
    """Start, end and abandon a table's runs (the run-history table). Reading them needs the lock
    too (a `running` run without it is dead): `Ledger.list_runs` and `Ledger.get_run`."""

    def _expires_at(self, now: float) -> int:
        return int(now) + self.run_retention_days * 86400

    def start_run(
        self,
        table_id: str,
        run_id: str,
        correlation_id: str,
        *,
        engine: str | None = None,
        engine_run_id: str | None = None,
        objects: int | None = None,
    ) -> RunRecord:
        """Write a run history item with status running (overwrites a same-id item)."""
        _check_run_id(run_id)
        now = self.clock()
        values: dict[str, Any] = {
            "table_id": table_id,
            "run_id": run_id,
            "status": RUN_RUNNING,
            "correlation_id": correlation_id,
            "started_at": utc_now_iso(now),
            "started_epoch_ms": int(now * 1000),
            "expires_at": self._expires_at(now),
        }
        if engine:
            values["engine"] = engine
        if engine_run_id:
            values["engine_run_id"] = engine_run_id
        if objects is not None:
            values["objects"] = int(objects)
        item = encode_item(values)
        self.client.put_item(TableName=self.runs_table, Item=item)
        return RunRecord.from_item(item)

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
    ) -> RunRecord:
        """Close a run: status, counts (e.g. inserted/updated/deleted/rows_read),
        Iceberg snapshot id, error text, end time and duration."""
        if status not in RUN_STATUSES or status in (RUN_RUNNING, RUN_ABANDONED):
            raise ValueError(f"end_run status must be succeeded, failed or skipped, not {status!r}")
        _check_run_id(run_id)
        now = self.clock()
        key = encode_item({"table_id": table_id, "run_id": run_id})
        started = (
            self.client.get_item(TableName=self.runs_table, Key=key, ConsistentRead=True).get("Item") or {}
        )
        sets = ["#status = :status", "ended_at = :ended", "expires_at = if_not_exists(expires_at, :expires)"]
        removes = []
        values: dict[str, Any] = {
            ":status": status,
            ":ended": utc_now_iso(now),
            ":expires": self._expires_at(now),
        }
        started_ms = decode_item(started).get("started_epoch_ms")
        if started_ms is not None:
            sets.append("duration_ms = :duration")
            values[":duration"] = max(0, int(now * 1000) - int(started_ms))
        for name, value in (counts or {}).items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"run count {name!r} is not a number: {value!r}")
        sets.append("counts = :counts")
        values[":counts"] = {str(k): v for k, v in (counts or {}).items()}
        if snapshot_id is not None:
            sets.append("snapshot_id = :snapshot")
            values[":snapshot"] = int(snapshot_id)
        if objects is not None:
            sets.append("objects = :objects")
            values[":objects"] = int(objects)
        if error:
            sets.append("#error = :error")
            values[":error"] = clip_error(error) or ""
        else:
            removes.append("#error")
        update = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
        response = self.client.update_item(
            TableName=self.runs_table,
            Key=key,
            UpdateExpression=update,
            ExpressionAttributeNames={"#status": "status", "#error": "error"},
            ExpressionAttributeValues=encode_item(values),
            ReturnValues="ALL_NEW",
        )
        return RunRecord.from_item(response["Attributes"])

    def abandon_run(self, table_id: str, run_id: str) -> bool:
        """Record a run that died as abandoned; False when it is no longer running (it ended)."""
        response = self.conditional_write(
            self.client.update_item,
            TableName=self.runs_table,
            Key=encode_item({"table_id": table_id, "run_id": run_id}),
            UpdateExpression="SET #status = :abandoned, ended_at = :now",
            ConditionExpression="#status = :running",
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues=encode_item(
                {":abandoned": RUN_ABANDONED, ":running": RUN_RUNNING, ":now": utc_now_iso(self.clock())}
            ),
        )
        return response is not None

    def _stored_run(self, table_id: str, run_id: str) -> RunRecord | None:
        """The run's item as stored: a job that died leaves it `running` (`Ledger.get_run` reads it
        against the lock)."""
        response = self.client.get_item(
            TableName=self.runs_table,
            Key=encode_item({"table_id": table_id, "run_id": run_id}),
            ConsistentRead=True,
        )
        item = response.get("Item")
        return RunRecord.from_item(item) if item else None

    def _stored_runs(self, table_id: str, *, limit: int = 20) -> list[RunRecord]:
        """A table's run items as stored, newest first (run ids sort by time: ``contract.new_run_id``)."""
        kwargs: dict[str, Any] = {
            "TableName": self.runs_table,
            "KeyConditionExpression": "table_id = :table_id",
            "ExpressionAttributeValues": encode_item({":table_id": table_id}),
            "ScanIndexForward": False,
        }
        runs: list[RunRecord] = []
        while len(runs) < limit:
            response = self.client.query(**kwargs)
            records = (RunRecord.from_item(item) for item in response.get("Items", []))
            runs.extend(record for record in records if not record.run_id.startswith("#"))
            last = response.get("LastEvaluatedKey")
            if not last:
                break
            kwargs["ExclusiveStartKey"] = last
        return runs[:limit]
