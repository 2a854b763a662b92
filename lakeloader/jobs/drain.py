"""Drain a table's pending objects from the ledger into Iceberg, batch by batch, under its run lock.

One run may drain several tables (the trigger groups due tables: ``a,b,c``): they share the Spark
session and run ``parallel`` at a time, each under its own lock, with its own commits and its own
run-history record, so one table's failure never touches another's.
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from urllib.parse import urlparse

from lakeloader.config import TableConfig
from lakeloader.control.contract import (
    FILES_QUARANTINED_METRIC,
    METRIC_DIMENSIONS,
    METRICS_NAMESPACE,
    RECONCILIATION_MISMATCH_METRIC,
    new_run_id,
)
from lakeloader.control.ledger import (
    DEFAULT_MAX_ATTEMPTS,
    FAILED,
    PENDING,
    QUARANTINED,
    LedgerObject,
)
from lakeloader.control.ledger.interfaces import DrainLedger, ObjectBatches
from lakeloader.engine import COUNTED, report_counts
from lakeloader.jobs import load  # load.load_table, looked up per call (tests stand in for it)
from lakeloader.jobs.lineage import LineageLog
from lakeloader.jobs.load import LoadResult, finish_lineage
from lakeloader.jobs.rebuild import rebuild_table
from lakeloader.spark.inputs import InputFile

_CLIENT_LOCK = threading.Lock()  # boto3's default session is not thread-safe when making clients
_CLOUDWATCH: list = []


def log_event(event: str, **fields: object) -> None:
    """One JSON line on stdout: the job's log in CloudWatch."""
    print(json.dumps({"event": event, **fields}, default=str), flush=True)


def _input_file(obj: LedgerObject, raw_root: str) -> InputFile:
    root = urlparse(raw_root)
    root_key = root.path.lstrip("/")
    name = obj.key[len(root_key) :] if root_key and obj.key.startswith(root_key) else obj.key
    return InputFile(name=name, uri=obj.uri, size=obj.size or 0, version=obj.etag or obj.version_id or "")


def drain_table(
    spark,
    table: TableConfig,
    ledger: DrainLedger,
    *,
    catalog: str,
    raw_root: str,
    cid: str,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    rebuild: bool = False,
    raw_zone_erased: bool = False,
    lineage: LineageLog | None = None,
) -> LoadResult:
    """Merge every pending object of one table, batch by batch, holding the table's run lock;
    with `rebuild`, first build the table again from every object it loaded or has to load
    (lakeloader.jobs.rebuild), which the ledger then records as done by this run.

    A batch that fails naming one of its files (bad input) sets that file aside and goes on with
    the others: the file is `failed` (a later run retries it) or, once it has failed `max_attempts`
    times, `quarantined`. Skipping it keeps every order guarantee: each change is still compared
    with what the table holds, so the file's changes apply correctly whenever it is loaded."""
    run_id = new_run_id()
    if not ledger.acquire_lock(table.id, run_id):
        log_event("table_busy", table_id=table.id, correlation_id=cid)
        return LoadResult(table.id, status="skipped", notes=["another run holds the table lock"])
    for dead in ledger.abandon_dead_runs(table.id, run_id):
        log_event("run_abandoned", table_id=table.id, run_id=dead, correlation_id=cid)
    ledger.start_run(table.id, run_id, cid)
    run = lineage.start("rebuild" if rebuild else "ingest", table, run_id) if lineage else None
    total = LoadResult(table.id, status="skipped")
    quarantined = 0

    def still_holds_lock() -> None:  # right before each commit: a run whose lease lapsed must not commit
        ledger.keep_lock(table.id, run_id)

    files_left, bytes_left = table.trigger.max_files_per_run, table.trigger.max_bytes_per_run
    try:
        if rebuild:
            rebuilt = _rebuild(
                spark,
                table,
                ledger,
                catalog=catalog,
                raw_root=raw_root,
                run_id=run_id,
                cid=cid,
                raw_zone_erased=raw_zone_erased,
                before_publish=still_holds_lock,
            )
            _accumulate(total, rebuilt)
        while files_left > 0 and bytes_left > 0:
            batch = ledger.next_batch(
                table.id,
                run_id,
                max_objects=files_left,
                max_bytes=bytes_left,
                at_least_one=files_left == table.trigger.max_files_per_run,  # a run's first file
            )
            if not batch:
                break
            files = [_input_file(obj, raw_root) for obj in batch]
            log_event("batch", table_id=table.id, run_id=run_id, correlation_id=cid, objects=len(files))
            result = load.load_table(
                spark,
                table,
                files,
                catalog=catalog,
                run_id=run_id,
                progress=lambda m: log_event("progress", message=m, table_id=table.id),
                before_publish=still_holds_lock,
            )
            _accumulate(total, result)
            guilty = {
                o: result.bad_files[f.name]
                for o, f in zip(batch, files, strict=True)
                if f.name in result.bad_files
            }
            if result.status == "failed" and guilty:
                quarantined += _set_aside(ledger, table, batch, guilty, run_id, max_attempts, cid)
                files_left -= len(guilty)
                bytes_left -= sum(o.size or 0 for o in guilty)
                continue  # the others: the next batch (this run never takes its own failures again)
            waiting = [o for o, f in zip(batch, files, strict=True) if f.name in result.waiting]
            if waiting:  # cdc: snapshot: incomplete snapshots; their _SUCCESS (or next folder) starts a run
                ledger.finish(table.id, waiting, run_id, PENDING)
                batch = [o for o in batch if o not in waiting]
            status = "failed" if result.status == "failed" else "done"
            ledger.finish(table.id, batch, run_id, status, error=result.error)
            if result.status == "failed" or not batch:
                break
            files_left -= len(batch)
            bytes_left -= sum(o.size or 0 for o in batch)
        else:  # the run's share is taken: what is left rides the next run (the sweep starts it)
            log_event("run_share_taken", table_id=table.id, run_id=run_id, correlation_id=cid)
    except Exception as exc:  # the lock/ledger itself failed: record it, never swallow it
        total.status, total.error = "failed", f"{type(exc).__name__}: {exc}"
        raise
    finally:
        ledger.end_run(
            table.id,
            run_id,
            {"ok": "succeeded", "skipped": "skipped"}.get(total.status, "failed"),
            counts={k: getattr(total, k) for k in COUNTED}
            | report_counts(total.quality)
            | (total.reconciliation.run_counts() if total.reconciliation else {}),
            snapshot_id=total.snapshot_id,
            error=total.error,
            objects=total.files,
        )
        ledger.release_lock(table.id, run_id)
        if run is not None:
            finish_lineage(spark, catalog, run, total)
    log_event("table_done", correlation_id=cid, **asdict(total))
    publish_metrics(total, ledger.ledger_table, quarantined)
    return total


def _rebuild(
    spark,
    table: TableConfig,
    ledger: ObjectBatches,
    *,
    catalog: str,
    raw_root: str,
    run_id: str,
    cid: str,
    raw_zone_erased: bool,
    before_publish,
) -> LoadResult:
    """The table built again from every object it loaded or has to load; once that committed, the
    ledger records them done by this run."""
    objects = ledger.rebuild_objects(table.id)
    log_event("rebuild", table_id=table.id, run_id=run_id, correlation_id=cid, objects=len(objects))
    result = rebuild_table(
        spark,
        table,
        [_input_file(obj, raw_root) for obj in objects],
        catalog=catalog,
        run_id=run_id,
        progress=lambda m: log_event("progress", message=m),
        raw_zone_erased=raw_zone_erased,
        before_publish=before_publish,
    )
    for obj in ledger.mark_rebuilt(table.id, objects, run_id).left:  # skipped meanwhile: loaded all the same
        log_event("rebuild_object_left", table_id=table.id, key=obj.key, status=obj.status)
    return result


def _set_aside(
    ledger: ObjectBatches,
    table: TableConfig,
    batch: list[LedgerObject],
    guilty: dict[LedgerObject, str],
    run_id: str,
    max_attempts: int,
    cid: str,
) -> int:
    """Finish each guilty file (with its own error) failed or quarantined, give the others back; how
    many were quarantined."""
    quarantined = 0
    for obj, error in guilty.items():
        status = QUARANTINED if obj.attempts >= max_attempts else FAILED
        ledger.finish(table.id, [obj], run_id, status, error=error)
        log_event("file_" + status, table_id=table.id, key=obj.key, attempts=obj.attempts, correlation_id=cid)
        quarantined += status == QUARANTINED
    ledger.finish(table.id, [o for o in batch if o not in guilty], run_id, PENDING)
    return quarantined


def publish_metrics(result: LoadResult, ledger_table: str, quarantined: int = 0) -> None:
    """RunsSucceeded / RunsFailed / RowsMerged / FilesQuarantined / ReconciliationMismatch per table,
    for the stack's dashboard and alarms (ReconciliationMismatch: the commits the table disagreed with,
    published under `reconcile.on_mismatch: alarm`, failed under `fail`). Dimensions: the stage's
    ledger table (so two stages of one account never mix) and the table id.

    Best effort: the data is committed already; a metrics outage is logged, not raised.
    """
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    if result.status == "skipped" and not quarantined:
        return
    dimensions = [
        {"Name": name, "Value": value}
        for name, value in zip(METRIC_DIMENSIONS, (ledger_table, result.table_id), strict=True)
    ]
    data = [
        {
            "MetricName": "RunsSucceeded" if result.status == "ok" else "RunsFailed",
            "Value": 1,
            "Unit": "Count",
        },
        {
            "MetricName": "RowsMerged",
            "Value": result.inserted + result.updated + result.deleted,
            "Unit": "Count",
        },
        {"MetricName": FILES_QUARANTINED_METRIC, "Value": quarantined, "Unit": "Count"},
    ]
    if result.reconciliation is not None:
        mismatched = result.reconciliation.mismatched_commits
        data.append({"MetricName": RECONCILIATION_MISMATCH_METRIC, "Value": mismatched, "Unit": "Count"})
    with _CLIENT_LOCK:
        if not _CLOUDWATCH:
            _CLOUDWATCH.append(boto3.client("cloudwatch"))
    try:
        _CLOUDWATCH[0].put_metric_data(
            Namespace=METRICS_NAMESPACE, MetricData=[{**d, "Dimensions": dimensions} for d in data]
        )
    except (BotoCoreError, ClientError) as exc:
        log_event("metrics_not_published", table_id=result.table_id, error=str(exc))


def drain_tables(
    spark,
    tables: list[TableConfig],
    ledger: DrainLedger,
    *,
    catalog: str,
    raw_root: str,
    cid: str,
    parallel: int = 1,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    rebuild: bool = False,
    raw_zone_erased: bool = False,
    lineage: LineageLog | None = None,
) -> list[LoadResult]:
    """`drain_table` for each table, `parallel` at a time in one Spark session; results in table order.

    Each table is isolated: an exception in one (its lock or ledger failed) becomes that table's
    failed result. Iceberg commit properties are per thread (iceberg.commit_properties) and each
    batch's temporary view has its own name, so tables sharing the session do not mix.
    """

    def one(table: TableConfig) -> LoadResult:
        try:
            return drain_table(
                spark,
                table,
                ledger,
                catalog=catalog,
                raw_root=raw_root,
                cid=cid,
                max_attempts=max_attempts,
                rebuild=rebuild,
                raw_zone_erased=raw_zone_erased,
                lineage=lineage,
            )
        except Exception as exc:  # one table's failure never stops the others
            log_event("table_failed", table_id=table.id, correlation_id=cid, error=str(exc))
            return LoadResult(table.id, status="failed", error=f"{type(exc).__name__}: {exc}")

    if parallel <= 1 or len(tables) <= 1:
        return [one(table) for table in tables]
    with ThreadPoolExecutor(max_workers=min(parallel, len(tables)), thread_name_prefix="lakeloader") as pool:
        return list(pool.map(one, tables))


def _accumulate(total: LoadResult, result: LoadResult) -> None:
    total.add(result)
    total.seconds += result.seconds
    if result.status == "failed":
        total.status, total.error = "failed", result.error
    elif total.status != "failed" and result.status == "ok":
        total.status = "ok"
