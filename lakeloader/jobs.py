"""What a Glue or EMR run does: drain a table's pending objects from the ledger into Iceberg.

The entry points in glue_jobs/ and emr_steps/ only parse arguments and call
these functions. The table config comes from the DynamoDB config table (as
deployed from config/tables.yaml); the ledger says which raw objects are new.

One run may drain several tables (the trigger groups due tables: ``a,b,c``):
they share the Spark session and run ``parallel_tables`` at a time, each under
its own lock, with its own commits and its own run-history record, so one
table's failure never touches another's.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from urllib.parse import urlparse

from lakeloader import quality
from lakeloader.config import LakeConfig, TableConfig
from lakeloader.inputs import InputFile
from lakeloader.ledger import Ledger, LedgerObject, LockLostError, new_run_id
from lakeloader.merge import TableResult

METRICS_NAMESPACE = "lakeloader"  # infra.settings.METRICS_NAMESPACE: the dashboard reads it
ARG_KEYS = (
    "lakeloader_config_table",
    "lakeloader_ledger_table",
    "lakeloader_runs_table",
    "lakeloader_raw_root",
    "lakeloader_warehouse",
    "lakeloader_table_id",
    "lakeloader_correlation_id",
    "lakeloader_database_prefix",
    "lakeloader_parallel_tables",
)
_CLIENT_LOCK = threading.Lock()  # boto3's default session is not thread-safe when making clients
_CLOUDWATCH: list = []


def parse_table_ids(value: str | None) -> list[str]:
    """The tables a run covers: one id or a comma-separated list ("" or None: every enabled table)."""
    return [part.strip() for part in (value or "").split(",") if part.strip()]


def parse_parallel_tables(value: str | None) -> int:
    """How many tables a run drains at once (default 1); a bad value is a usage error naming the argument."""
    text = (value or "").strip() or "1"
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"--lakeloader_parallel_tables must be a whole number >= 1, got {value!r}")
    return int(text)


def with_database_prefix(tables: list[TableConfig], prefix: str) -> list[TableConfig]:
    """Point each table at its stage's Glue database, `<prefix><database>` (infra.catalog names them).

    Applied once, where the jobs load the config: every name a run derives from the target (the
    table, its quarantine table, maintenance) follows. Local runs pass no prefix.
    """
    if not prefix:
        return tables
    return [
        t.model_copy(update={"target": t.target.model_copy(update={"database": prefix + t.target.database})})
        for t in tables
    ]


def _input_file(obj: LedgerObject, raw_root: str) -> InputFile:
    root = urlparse(raw_root)
    root_key = root.path.lstrip("/")
    name = obj.key[len(root_key) :] if root_key and obj.key.startswith(root_key) else obj.key
    return InputFile(name=name, uri=obj.uri, size=obj.size or 0, version=obj.etag or obj.version_id or "")


def _log(event: str, **fields: object) -> None:
    print(json.dumps({"event": event, **fields}, default=str), flush=True)


def drain_table(
    spark, table: TableConfig, ledger: Ledger, *, catalog: str, raw_root: str, cid: str
) -> TableResult:
    """Merge every pending object of one table, batch by batch, holding the table's run lock."""
    from lakeloader.runner import run_tables

    run_id = new_run_id()
    if not ledger.acquire_lock(table.id, run_id):
        _log("table_busy", table_id=table.id, correlation_id=cid)
        return TableResult(table.id, status="skipped", notes=["another run holds the table lock"])
    ledger.start_run(table.id, run_id, cid)
    total = TableResult(table.id, status="skipped")

    def still_holds_lock() -> None:  # right before each commit: a run whose lease lapsed must not commit
        if not ledger.renew_lock(table.id, run_id):
            raise LockLostError(f"table {table.id!r}: run {run_id!r} no longer holds the table lock")

    try:
        while batch := ledger.next_batch(table.id, run_id):
            files = [_input_file(obj, raw_root) for obj in batch]
            _log("batch", table_id=table.id, run_id=run_id, correlation_id=cid, objects=len(files))
            (result,) = run_tables(
                spark,
                [table],
                {table.id: files},
                catalog=catalog,
                run_id=run_id,
                progress=lambda m: _log("progress", message=m),
                before_commit=still_holds_lock,
            )
            status = "failed" if result.status == "failed" else "done"
            ledger.finish(table.id, batch, run_id, status, error=result.error)
            _accumulate(total, result)
            if result.status == "failed":
                break
    except Exception as exc:  # the lock/ledger itself failed: record it, never swallow it
        total.status, total.error = "failed", f"{type(exc).__name__}: {exc}"
        raise
    finally:
        ledger.end_run(
            table.id,
            run_id,
            {"ok": "succeeded", "skipped": "skipped"}.get(total.status, "failed"),
            counts={k: getattr(total, k) for k in ("files", "changes", "inserted", "updated", "deleted")}
            | quality.run_counts(total.quality),
            snapshot_id=total.snapshot_id,
            error=total.error,
            objects=total.files,
        )
        ledger.release_lock(table.id, run_id)
    _log("table_done", correlation_id=cid, **asdict(total))
    publish_metrics(total)
    return total


def publish_metrics(result: TableResult) -> None:
    """RunsSucceeded / RunsFailed / RowsMerged per table, for the stack's dashboard and alarms.

    Best effort: the data is committed already; a metrics outage is logged, not raised.
    """
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    if result.status == "skipped":
        return
    dimensions = [{"Name": "TableId", "Value": result.table_id}]
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
    ]
    with _CLIENT_LOCK:
        if not _CLOUDWATCH:
            _CLOUDWATCH.append(boto3.client("cloudwatch"))
    try:
        _CLOUDWATCH[0].put_metric_data(
            Namespace=METRICS_NAMESPACE, MetricData=[{**d, "Dimensions": dimensions} for d in data]
        )
    except (BotoCoreError, ClientError) as exc:
        _log("metrics_not_published", table_id=result.table_id, error=str(exc))


def drain_tables(
    spark,
    tables: list[TableConfig],
    ledger: Ledger,
    *,
    catalog: str,
    raw_root: str,
    cid: str,
    parallel: int = 1,
) -> list[TableResult]:
    """`drain_table` for each table, `parallel` at a time in one Spark session; results in table order.

    Each table is isolated: an exception in one (its lock or ledger failed) becomes that table's
    failed result. Iceberg commit properties are per thread (merge.commit_properties) and each
    batch's temporary view has its own name, so tables sharing the session do not mix.
    """

    def one(table: TableConfig) -> TableResult:
        try:
            return drain_table(spark, table, ledger, catalog=catalog, raw_root=raw_root, cid=cid)
        except Exception as exc:  # one table's failure never stops the others
            _log("table_failed", table_id=table.id, correlation_id=cid, error=str(exc))
            return TableResult(table.id, status="failed", error=f"{type(exc).__name__}: {exc}")

    if parallel <= 1 or len(tables) <= 1:
        return [one(table) for table in tables]
    with ThreadPoolExecutor(max_workers=min(parallel, len(tables)), thread_name_prefix="lakeloader") as pool:
        return list(pool.map(one, tables))


def _accumulate(total: TableResult, result: TableResult) -> None:
    for field in ("files", "changes", "inserted", "updated", "deleted"):
        setattr(total, field, getattr(total, field) + getattr(result, field))
    total.seconds += result.seconds
    total.quality = quality.combine(total.quality, result.quality)
    total.snapshot_id = result.snapshot_id or total.snapshot_id
    total.notes.extend(result.notes)
    if result.status == "failed":
        total.status, total.error = "failed", result.error
    elif total.status != "failed" and result.status == "ok":
        total.status = "ok"


def ingest_main(args: Mapping[str, str], *, runtime: str) -> int:
    """Glue/EMR ingest: the tables in lakeloader_table_id (one id or a comma-separated list) or, when
    empty, every enabled table; lakeloader_parallel_tables of them at a time."""
    import boto3

    from lakeloader.config_store import load_tables_from_dynamodb
    from lakeloader.runner import summary_table
    from lakeloader.spark import SparkSettings, build_session

    missing = [k for k in ARG_KEYS[:5] if not args.get(k)]
    if missing:
        print(f"lakeloader: missing job arguments: {', '.join('--' + k for k in missing)}", file=sys.stderr)
        return 2
    try:
        parallel = parse_parallel_tables(args.get("lakeloader_parallel_tables"))
    except ValueError as exc:
        print(f"lakeloader: {exc}", file=sys.stderr)
        return 2
    dynamodb = boto3.client("dynamodb")
    config = LakeConfig(
        raw_root=args["lakeloader_raw_root"],
        warehouse=args["lakeloader_warehouse"],
        tables=with_database_prefix(
            load_tables_from_dynamodb(args["lakeloader_config_table"], client=dynamodb),
            args.get("lakeloader_database_prefix") or "",
        ),
    )
    table_ids = parse_table_ids(args.get("lakeloader_table_id"))
    cid = args.get("lakeloader_correlation_id") or new_run_id()
    known = {t.id for t in config.tables}
    # a table removed from the config since the trigger grouped it fails alone
    unknown = [
        TableResult(t, status="failed", error=f"unknown table {t!r}: not in the config table")
        for t in table_ids
        if t not in known
    ]
    wanted = [t for t in table_ids if t in known]
    tables = config.select(wanted) if wanted else [] if table_ids else config.select(None)
    ledger = Ledger(dynamodb, args["lakeloader_ledger_table"], args["lakeloader_runs_table"])
    name = table_ids[0] if len(table_ids) == 1 else f"{len(table_ids)}-tables" if table_ids else "all"
    settings = SparkSettings(runtime=runtime, warehouse=config.warehouse, app_name=f"lakeloader-{name}-{cid}")
    spark = build_session(settings)
    results = unknown + drain_tables(
        spark, tables, ledger, catalog=settings.catalog, raw_root=config.raw_root, cid=cid, parallel=parallel
    )
    print(summary_table(results), flush=True)
    failed = [r for r in results if r.status == "failed"]
    if failed:
        print("lakeloader: " + "; ".join(f"{r.table_id}: {r.error}" for r in failed), file=sys.stderr)
    return 1 if failed else 0


def maintain_main(args: Mapping[str, str], *, runtime: str) -> int:
    """Glue/EMR maintenance: one table (lakeloader_table_id) or, when empty, every enabled table.

    Same job arguments as `ingest_main`. It takes no table lock: maintenance and ingest may run
    at once; their commit conflicts are retried (commit.retry.* and maintenance.retry).
    """
    import boto3

    from lakeloader.config_store import load_tables_from_dynamodb
    from lakeloader.maintenance import maintain_tables, summary_table
    from lakeloader.spark import SparkSettings, build_session

    missing = [k for k in ARG_KEYS[:5] if not args.get(k)]
    if missing:
        print(f"lakeloader: missing job arguments: {', '.join('--' + k for k in missing)}", file=sys.stderr)
        return 2
    config = LakeConfig(
        raw_root=args["lakeloader_raw_root"],
        warehouse=args["lakeloader_warehouse"],
        tables=with_database_prefix(
            load_tables_from_dynamodb(args["lakeloader_config_table"], client=boto3.client("dynamodb")),
            args.get("lakeloader_database_prefix") or "",
        ),
    )
    table_id = args.get("lakeloader_table_id") or ""
    cid = args.get("lakeloader_correlation_id") or new_run_id()
    tables = config.select([table_id] if table_id else None)
    settings = SparkSettings(
        runtime=runtime, warehouse=config.warehouse, app_name=f"lakeloader-maintain-{table_id or 'all'}-{cid}"
    )
    spark = build_session(settings)
    results = maintain_tables(
        spark,
        tables,
        catalog=settings.catalog,
        progress=lambda m: _log("progress", message=m, correlation_id=cid),
    )
    for result in results:
        _log("maintenance_done", correlation_id=cid, **asdict(result))
    print(summary_table(results), flush=True)
    failed = [r for r in results if r.status == "failed"]
    if failed:
        print("lakeloader: " + "; ".join(f"{r.table_id}: {r.error}" for r in failed), file=sys.stderr)
    return 1 if failed else 0
