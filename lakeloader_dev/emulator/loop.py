"""Driving a deployed stack through its public APIs: land files, wait for their runs, read the results.

Used by ``make demo`` and ``tests/e2e``. Only boto3 calls against AWS_ENDPOINT_URL (no
emulator internals), so the same code drives LocalStack or an account.
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import boto3

from lakeloader.cli.stage import DeployedStage
from lakeloader.control.contract import ARG_TABLE_ID, SWEEP_EVENT, glue_arg
from lakeloader.control.ledger import DONE, FAILED, QUARANTINED, SKIPPED, Ledger, LedgerObject, RunRecord

SETTLED = (DONE, FAILED, QUARANTINED, SKIPPED)  # what a run leaves an object at (failed: until the next)
TERMINAL_GLUE_STATES = {"SUCCEEDED", "FAILED", "STOPPED", "TIMEOUT", "ERROR"}
TERMINAL_EMR_STATES = {"SUCCESS", "FAILED", "CANCELLED"}
# what a boto3 client is made from here: a client made in another environment is not reused
_CLIENT_ENV = ("AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_ACCESS_KEY_ID")


def client(service: str) -> Any:
    """A boto3 client of `service` in this environment, made once. ``wait_for_objects`` asks four
    every second, and making one costs more than its call: 19 % of an e2e module's own Python CPU
    (py-spy, tests/e2e/test_s3_to_iceberg.py, 2026-11-30)."""
    return _client(service, *(os.environ.get(name) for name in _CLIENT_ENV))


@functools.cache
def _client(service: str, *_environment: str | None) -> Any:
    return boto3.client(service)


def upload(stack: DeployedStage, files: Iterable[tuple[Path | bytes, str]]) -> list[str]:
    """Put each (local file or bytes, key) into the raw bucket; returns the keys."""
    s3 = client("s3")
    keys = []
    for source, key in files:
        body = source if isinstance(source, bytes) else Path(source).read_bytes()
        s3.put_object(Bucket=stack.raw_bucket, Key=key, Body=body)
        keys.append(key)
    return keys


def upload_unannounced(stack: DeployedStage, files: Iterable[tuple[Path | bytes, str]]) -> list[str]:
    """``upload`` while the raw bucket sends no notification, as files that were there before the
    stack (what ``lakeloader backfill`` is for); the bucket's notifications are restored after."""
    s3 = client("s3")
    notifications = s3.get_bucket_notification_configuration(Bucket=stack.raw_bucket)
    notifications.pop("ResponseMetadata", None)
    s3.put_bucket_notification_configuration(Bucket=stack.raw_bucket, NotificationConfiguration={})
    try:
        return upload(stack, files)
    finally:
        s3.put_bucket_notification_configuration(
            Bucket=stack.raw_bucket, NotificationConfiguration=notifications
        )


def lakeloader(*args: str) -> tuple[int, str]:
    """The `lakeloader` command line in this process (its AWS environment is the stack's): the exit
    code and what it printed."""
    import contextlib
    import io

    from lakeloader.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(args))
    return code, out.getvalue()


def find_object(ledger: Ledger, table_id: str, key: str) -> LedgerObject | None:
    matches = [obj for obj in ledger.objects(table_id) if obj.key == key]
    return matches[-1] if matches else None


def active_glue_runs(stack: DeployedStage) -> list[dict[str, Any]]:
    runs = client("glue").get_job_runs(JobName=stack.ingest_job, MaxResults=200)["JobRuns"]
    return [r for r in runs if r["JobRunState"] not in TERMINAL_GLUE_STATES]


def emr_runs(stack: DeployedStage) -> list[dict[str, Any]]:
    """The EMR Serverless application's job runs (newest first, as the API lists them)."""
    if not stack.emr_application:
        return []
    pages = client("emr-serverless").get_paginator("list_job_runs")
    return [run for page in pages.paginate(applicationId=stack.emr_application) for run in page["jobRuns"]]


def active_runs(stack: DeployedStage) -> list[dict[str, Any]]:
    """Ingest runs still going on either engine (Glue job runs and EMR Serverless job runs)."""
    return active_glue_runs(stack) + [r for r in emr_runs(stack) if r["state"] not in TERMINAL_EMR_STATES]


class RunFailed(RuntimeError):
    """An ingest run failed while ``wait_for_objects`` waited for it to succeed."""


def failed_runs(stack: DeployedStage) -> dict[str, tuple[str, str]]:
    """Ingest runs that ended without success, on either engine: run id -> (table id, error)."""
    found = {}
    for run in client("glue").get_job_runs(JobName=stack.ingest_job, MaxResults=200)["JobRuns"]:
        if run["JobRunState"] in TERMINAL_GLUE_STATES - {"SUCCEEDED"}:
            table_id = run.get("Arguments", {}).get(glue_arg(ARG_TABLE_ID), "")
            error = f"Glue run {run['Id']} {run['JobRunState']}: {run.get('ErrorMessage')}"
            found[run["Id"]] = (table_id, error)
    for run in emr_runs(stack):
        if run["state"] in TERMINAL_EMR_STATES - {"SUCCESS"}:
            table_id = run.get("name", "").removeprefix("lakeloader-")  # the trigger's run name
            found[run["id"]] = (table_id, f"EMR run {run['id']} {run['state']}: {run.get('stateDetails')}")
    return found


def sweep(stack: DeployedStage) -> dict[str, Any]:
    """What the EventBridge sweep schedule does: invoke the arrival Lambda with the sweep event."""
    response = client("lambda").invoke(
        FunctionName=stack.arrival_function, Payload=json.dumps(SWEEP_EVENT).encode()
    )
    return json.loads(response["Payload"].read() or b"{}")


def wait_for_objects(
    stack: DeployedStage,
    expected: dict[str, list[str]],
    *,
    timeout: float = 600.0,
    progress: Callable[[str], None] | None = None,
    sweep_after: float = 20.0,
    fail_fast: bool = False,
    expected_failures: Iterable[str] = (),
) -> dict[str, dict[str, str]]:
    """Wait until every expected (table id -> raw keys) object is settled in the ledger (done, failed,
    quarantined or skipped) and no ingest run is active any more.

    While nothing runs and objects stay pending for ``sweep_after`` seconds, fire the
    sweep (the schedule's job on AWS). Returns {table_id: {key: status}}. With ``fail_fast``,
    a run of an expected table (other than ``expected_failures``) that fails after the wait
    began, or an expected object the ledger marks failed, raises ``RunFailed`` at once with
    that run's error, instead of waiting out the timeout.
    """
    ledger = stack.ledger()
    deadline = time.monotonic() + timeout
    watched = set(expected) - set(expected_failures)
    failed_before = set(failed_runs(stack)) if fail_fast else set()
    idle_since: float | None = None
    last_line = ""
    while True:
        statuses: dict[str, dict[str, str]] = {}
        errors: list[str] = []
        for table_id, keys in expected.items():
            by_key = {obj.key: obj for obj in ledger.objects(table_id)}
            statuses[table_id] = {key: getattr(by_key.get(key), "status", "not recorded") for key in keys}
            errors += [
                f"{table_id}: {key} failed: {by_key[key].error}"
                for key in keys
                if table_id in watched and statuses[table_id][key] == FAILED
            ]
        if fail_fast:
            errors += [
                f"{table_id}: {error}"
                for run_id, (table_id, error) in failed_runs(stack).items()
                if run_id not in failed_before and table_id in watched
            ]
            if errors:
                raise RunFailed("; ".join(errors))
        open_count = sum(s not in SETTLED for t in statuses.values() for s in t.values())
        running = active_runs(stack)
        line = f"{open_count} object(s) open, {len(running)} run(s) active"
        if progress and line != last_line:
            progress(line)
            last_line = line
        if open_count == 0 and not running:  # a run ends after its ledger updates: wait for it
            return statuses
        if time.monotonic() > deadline:
            raise TimeoutError(f"objects still open after {timeout:.0f} s: {statuses}")
        if running:
            idle_since = None
        else:
            idle_since = idle_since or time.monotonic()
            if time.monotonic() - idle_since > sweep_after:
                if progress:
                    progress(
                        "nothing running but objects pending: "
                        "firing the sweep (the EventBridge schedule's job)"
                    )
                sweep(stack)
                idle_since = None
        time.sleep(1.0)


def latest_runs(
    stack: DeployedStage, table_ids: Iterable[str], limit: int = 10
) -> dict[str, list[RunRecord]]:
    ledger = stack.ledger()
    return {table_id: ledger.list_runs(table_id, limit=limit) for table_id in table_ids}


def run_summary(runs: dict[str, list[RunRecord]]) -> str:
    """The run history as a table: one line per run, oldest first."""
    header = ("table", "run", "status", "objects", "inserted", "updated", "deleted", "seconds", "error")
    rows = [header]
    for table_id, records in runs.items():
        for run in sorted(records, key=lambda r: r.run_id):
            counts = run.counts or {}
            rows.append(
                (
                    table_id,
                    run.run_id,
                    run.status,
                    str(run.objects if run.objects is not None else ""),
                    str(int(counts.get("inserted", 0))),
                    str(int(counts.get("updated", 0))),
                    str(int(counts.get("deleted", 0))),
                    f"{(run.duration_ms or 0) / 1000:.1f}",
                    (run.error or "")[:80],
                )
            )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
