"""Operating a deployed stage from a laptop: see it (status), unblock it (requeue, skip) and load
what is already in its raw bucket (backfill). boto3 against the stage's tables, bucket and Lambda;
no Spark. The CLI verbs are thin wrappers (lakeloader.cli.stage_verbs); docs/operate.md shows them at work.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import boto3

from lakeloader.cli.stage import DeployedStage
from lakeloader.config import TableConfig
from lakeloader.control.contract import REBUILD_EVENT, SWEEP_EVENT, longest_prefix_matches
from lakeloader.control.discovery import FoundTable
from lakeloader.control.ledger import (
    QUARANTINED,
    ActionOutcome,
    Backlog,
    LedgerObject,
    ObjectRef,
    RunRecord,
    object_id_for,
    utc_now_iso,
)
from lakeloader.control.ledger.interfaces import ObjectIntake, ObjectReview, StatusLedger
from lakeloader.engine.reconciliation import from_run_counts
from lakeloader.spark.progress import Progress, no_progress

RECORD_THREADS = 8  # conditional puts in flight while a backfill records a listing
STATUS_THREADS = 16  # tables whose ledger items `status --table` reads at once: each is two round trips
RUNS_READ = 20  # a table's newest runs status looks through for its last commit and reconciliation


@dataclass(frozen=True)
class TableStatus:
    """What `lakeloader status` says of one table."""

    table_id: str
    enabled: bool
    counts: dict[str, int]
    lag_seconds: float | None  # age of the oldest file still to load; None: nothing to load
    open_bytes: int
    last_run: dict[str, Any] | None
    last_commit: dict[str, Any] | None  # the newest run that committed: its snapshot and end
    stuck: list[dict[str, Any]] = field(default_factory=list)  # quarantined and failed files: why
    # the newest run that reconciled a commit (lakeloader.engine.reconciliation): its counts, run and end
    last_reconciliation: dict[str, Any] | None = None

    @property
    def healthy(self) -> bool:
        mismatched = (self.last_reconciliation or {}).get("mismatched_commits")
        return (
            not self.stuck
            and (self.last_run or {}).get("status") not in ("failed", "abandoned")
            and not mismatched
        )


def _age(iso: str | None, now: datetime) -> float | None:
    if not iso:
        return None
    return max(0.0, (now - datetime.fromisoformat(iso.replace("Z", "+00:00"))).total_seconds())


def _run_view(run: RunRecord | None) -> dict[str, Any] | None:
    if run is None:
        return None
    return {
        "run_id": run.run_id,
        "status": run.status,
        "ended_at": run.ended_at,
        "objects": run.objects,
        "error": run.error,
    }


def table_status(ledger: StatusLedger, table: TableConfig, now: datetime | None = None) -> TableStatus:
    return _status(table, ledger.backlog(table.id), ledger.list_runs(table.id, limit=RUNS_READ), now)


def _status(table: TableConfig, backlog: Backlog, runs: list[RunRecord], now: datetime | None) -> TableStatus:
    """What status says of one table, from its backlog and its newest runs (newest first)."""
    committed = next((r for r in runs if r.snapshot_id), None)
    reconciled = next(((r, found) for r in runs if (found := from_run_counts(r.counts))), None)
    return TableStatus(
        table_id=table.id,
        enabled=table.enabled,
        counts=backlog.counts,
        lag_seconds=_age(backlog.oldest_open, now or datetime.now(UTC)),
        open_bytes=backlog.open_bytes,
        last_run=_run_view(runs[0] if runs else None),
        last_commit={"snapshot_id": committed.snapshot_id, "at": committed.ended_at} if committed else None,
        stuck=[
            {"key": o.key, "status": o.status, "attempts": o.attempts, "error": o.error}
            for o in backlog.stuck
        ],
        last_reconciliation=(
            reconciled[1] | {"run_id": reconciled[0].run_id, "at": reconciled[0].ended_at}
            if reconciled
            else None
        ),
    )


def table_statuses(ledger: StatusLedger, tables: list[TableConfig]) -> list[TableStatus]:
    """`table_status` of each table named (`status --table`), in their order, several tables' queries
    in flight at once (two round trips a table)."""
    now = datetime.now(UTC)
    with ThreadPoolExecutor(max_workers=STATUS_THREADS) as pool:
        return list(pool.map(lambda table: table_status(ledger, table, now), tables))


def stage_statuses(
    ledger: StatusLedger, tables: list[TableConfig], now: datetime | None = None
) -> list[TableStatus]:
    """`table_status` of every table of the stage, in their order, from one Scan of each of the two
    tables (their pages, not two queries a table: at 1,000 tables that was minutes). The same items
    the queries read: a table's backlog reads every object it has, done ones too."""
    now = now or datetime.now(UTC)
    with ThreadPoolExecutor(max_workers=2) as pool:
        backlogs = pool.submit(ledger.every_table_backlog)
        runs = pool.submit(ledger.every_table_runs, limit=RUNS_READ)
        backlog, runs_of = backlogs.result(), runs.result()
    return [_status(t, backlog.get(t.id, Backlog.of([])), runs_of.get(t.id, []), now) for t in tables]


def _minutes(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 60:.0f} min"


def status_report(statuses: list[TableStatus]) -> str:
    """The table `lakeloader status` prints, then every stuck file with its error."""
    header = (
        "table",
        "pending",
        "failed",
        "quarantined",
        "skipped",
        "lag",
        "last run",
        "last commit",
        "reconciled",
    )
    rows = [header]
    for s in statuses:
        run = s.last_run or {}
        rows.append(
            (
                s.table_id + ("" if s.enabled else " (disabled)"),
                str(s.counts.get("pending", 0) + s.counts.get("running", 0)),
                str(s.counts.get("failed", 0)),
                str(s.counts.get(QUARANTINED, 0)),
                str(s.counts.get("skipped", 0)),
                _minutes(s.lag_seconds),
                f"{run.get('status', '-')} {run.get('ended_at') or ''}".strip(),
                str((s.last_commit or {}).get("snapshot_id", "-")),
                _reconciled(s.last_reconciliation),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    for s in statuses:
        for stuck in s.stuck:
            lines.append(
                f"{s.table_id}: {stuck['status']} after {stuck['attempts']} attempt(s): {stuck['key']}"
            )
            lines.append(f"    {(stuck['error'] or '').splitlines()[0] if stuck['error'] else ''}")
    return "\n".join(lines)


def _reconciled(found: dict[str, Any] | None) -> str:
    """The status table's cell for a table's last reconciliation: `ok`, or its mismatched commits."""
    if not found:
        return "-"
    if found.get("mismatched_commits"):
        return f"MISMATCH {found['mismatched_commits']}/{found['commits']} {found.get('at') or ''}".strip()
    return f"ok {found['commits']} {found.get('at') or ''}".strip()


def status_json(statuses: list[TableStatus], held: Sequence[FoundTable] = ()) -> str:
    """The tables' statuses, then each held table (found by a source, waiting for its keys): its
    source, folder, why, the line to add (None when keys are not what it waits for), never healthy."""
    tables = [asdict(s) | {"healthy": s.healthy} for s in statuses]
    waiting = [
        {
            "table_id": table.table_id,
            "held": {
                "source": table.source_id,
                "prefix": table.prefix,
                "reason": table.held,
                "line": table.keys_line if table.needs_keys else None,
                "hint": table.hint,
            },
            "healthy": False,
        }
        for table in held
    ]
    return json.dumps(tables + waiting, indent=2, default=str)


def select_objects(
    ledger: ObjectReview, table_id: str, *, keys: list[str] | None, statuses: tuple[str, ...]
) -> list[LedgerObject]:
    """The table's objects an action names: by key (any status), else every object in `statuses`."""
    if keys:
        wanted = set(keys)
        return [o for o in ledger.objects(table_id) if o.key in wanted]
    return ledger.objects(table_id, statuses=statuses)


def act(
    ledger: ObjectReview,
    action: str,
    table_id: str,
    *,
    keys: list[str] | None,
    statuses: tuple[str, ...],
    note: str,
) -> ActionOutcome:
    """Requeue or skip the named objects of one table (each one conditional on what was read)."""
    found = select_objects(ledger, table_id, keys=keys, statuses=statuses)
    missing = sorted(set(keys or ()) - {o.key for o in found})
    if missing:
        raise LookupError(f"table {table_id!r}: no object with key {missing[0]!r} in the ledger")
    move = ledger.requeue if action == "requeue" else ledger.skip
    return move(table_id, found, note=note)


def start_sweep(stage: DeployedStage, table_ids: list[str]) -> dict[str, Any]:
    """Ask the stage's S3-arrival Lambda to sweep these tables now (what its schedule does)."""
    return _invoke_trigger(stage, {**SWEEP_EVENT["lakeloader"], "table_ids": table_ids})


def start_rebuild(stage: DeployedStage, table_id: str, *, raw_zone_erased: bool = False) -> dict[str, Any]:
    """Ask the stage's S3-arrival Lambda to start the table's rebuild run (it holds the engine's settings)."""
    request = {**REBUILD_EVENT["lakeloader"], "table_ids": [table_id], "raw_zone_erased": raw_zone_erased}
    return _invoke_trigger(stage, request)


def _invoke_trigger(stage: DeployedStage, request: dict[str, Any]) -> dict[str, Any]:
    response = boto3.client("lambda").invoke(
        FunctionName=stage.arrival_function, Payload=json.dumps({"lakeloader": request}).encode()
    )
    payload = json.loads(response["Payload"].read() or b"{}")
    if response.get("FunctionError"):
        raise RuntimeError(f"the {request['action']} failed: {payload.get('errorMessage', payload)}")
    return payload


@dataclass
class BackfillResult:
    """What a backfill found under the tables' raw prefixes and recorded, per table."""

    recorded: dict[str, int] = field(default_factory=dict)
    already_known: dict[str, int] = field(default_factory=dict)
    passed_over: int = 0  # folder markers, hidden files (Spark skips them) and files older than --since

    def describe(self) -> str:
        lines = [
            f"  {table_id}: {self.recorded.get(table_id, 0)} recorded as pending, "
            f"{self.already_known.get(table_id, 0)} already in the ledger"
            for table_id in sorted(set(self.recorded) | set(self.already_known))
        ]
        if self.already_known and not any(self.recorded.values()):
            lines.append(
                "  nothing new: the ledger has every object found (the S3 trigger records each file that "
                "lands while the stack exists; docs/operate.md says how to land files it never saw)"
            )
        return "\n".join(
            [*lines, f"  {self.passed_over} passed over (folder markers, hidden, older than --since)"]
        )


def _latest_versions(bucket: str, prefix: str) -> Iterator[dict[str, Any]]:
    """The current version of every object under `prefix` (versioned bucket or not): the version id
    an S3 event carries, so the ledger sees the object the trigger recorded, not a new one."""
    pages = boto3.client("s3").get_paginator("list_object_versions")
    for page in pages.paginate(Bucket=bucket, Prefix=prefix):
        yield from (version for version in page.get("Versions", []) if version.get("IsLatest", True))


def backfill(
    stage: DeployedStage,
    tables: list[TableConfig],
    selected: list[str],
    *,
    since: datetime | None = None,
    correlation_id: str,
    progress: Progress = no_progress,
) -> BackfillResult:
    """Record every object already under the selected tables' raw prefixes as the trigger would:
    pending, once (a conditional put leaves an object the ledger has, in any status, as it is).

    `tables` is the whole deployed config: a key belongs to the table with the longest matching
    prefix, as the trigger routes it, even when that table is not selected.
    """
    result = BackfillResult()
    refs: list[tuple[str, ObjectRef]] = []
    for table in (t for t in tables if t.id in selected):
        for version in _latest_versions(stage.raw_bucket, table.source.prefix):
            key = version["Key"]
            if table not in longest_prefix_matches(key, tables, lambda t: t.source.prefix):
                continue  # a longer prefix, another table's
            name = key.rsplit("/", 1)[-1]
            if not name or name.startswith(("_", ".")) or (since and version["LastModified"] < since):
                result.passed_over += 1
                continue
            ref = ObjectRef(
                bucket=stage.raw_bucket,
                key=key,
                etag=version.get("ETag"),
                version_id=version.get("VersionId"),
                size=version.get("Size"),
                event_time=utc_now_iso(version["LastModified"].timestamp()),
            )
            refs.append((table.id, ref))
    # found, not "to record": objects the trigger already recorded are only counted
    progress(f"backfill: {len(refs)} object(s) under the prefixes of {len(selected)} table(s)")
    ledger: ObjectIntake = stage.ledger()

    def record(item: tuple[str, ObjectRef]) -> tuple[str, bool]:
        table_id, ref = item
        # An event without the version id (an emulator's, or an older notification) recorded the
        # object by its ETag: that is the same object, not a new one to load again.
        by_etag = object_id_for(ref.key, etag=ref.etag)
        if ref.version_id and ledger.get_object(table_id, by_etag) is not None:
            return table_id, False
        return table_id, ledger.record(table_id, ref, correlation_id=correlation_id).new

    with ThreadPoolExecutor(max_workers=RECORD_THREADS) as pool:
        for done, (table_id, new) in enumerate(pool.map(record, refs), start=1):
            counts = result.recorded if new else result.already_known
            counts[table_id] = counts.get(table_id, 0) + 1
            if done % 1000 == 0:
                progress(f"backfill: {done}/{len(refs)} recorded")
    return result
