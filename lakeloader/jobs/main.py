"""The Glue/EMR job bodies: ingest (drain the ledger into Iceberg) and maintain, from the job arguments.

glue_jobs/ and emr_steps/ resolve the arguments (lakeloader.jobs.args) into a dict keyed by
contract.ARG_*. Both jobs start the same way: the table config from the DynamoDB config table (as
deployed from config/tables.yaml), with the stage's database prefix, and a Spark session; both
end with a summary table and exit code 1 if any table failed.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from lakeloader.config import LakeConfig, TableConfig
from lakeloader.control import contract
from lakeloader.control.ledger import DEFAULT_MAX_ATTEMPTS, Ledger
from lakeloader.jobs.drain import drain_tables, log_event
from lakeloader.jobs.lineage import JOB_NAMESPACE, OPENLINEAGE_APP_NAME, open_log
from lakeloader.jobs.load import LoadResult

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakeloader.spark.session import SparkSettings


def parse_table_ids(value: str | None) -> list[str]:
    """The tables a run covers: one id or a comma-separated list ("" or None: every enabled table)."""
    return [part.strip() for part in (value or "").split(",") if part.strip()]


def parse_count(args: Mapping[str, str], name: str, default: int) -> int:
    """A whole-number job argument >= 1 (`default` when absent); a bad value is a usage error naming it."""
    value = args.get(name)
    text = (value or "").strip() or str(default)
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{contract.glue_arg(name)} must be a whole number >= 1, got {value!r}")
    return int(text)


def parse_flag(args: Mapping[str, str], name: str) -> bool:
    """A yes/no job argument: "true" or absent/"false"."""
    return (args.get(name) or "").strip().lower() == "true"


def with_database_prefix(tables: list[TableConfig], prefix: str) -> list[TableConfig]:
    """Point each table at its stage's Glue database, `<prefix><database>` (infra.catalog names them).

    Applied once, where the jobs load the config: every name a run derives from the target (the
    table, its quarantine table, maintenance) follows. Local runs pass no prefix. A table in S3 Tables
    (target.storage s3_tables) keeps its database as its namespace: the table bucket is the stage's own.
    """
    if not prefix:
        return tables
    return [
        t
        if t.target.storage == "s3_tables"
        else t.model_copy(
            update={"target": t.target.model_copy(update={"database": prefix + t.target.database})}
        )
        for t in tables
    ]


@dataclass(frozen=True)
class JobStart:
    """What a job run starts from: the deployed config, its correlation id, its DynamoDB client."""

    config: LakeConfig
    cid: str
    dynamodb: Any

    def spark(self, runtime: str, name: str, verb: str) -> tuple[SparkSettings, SparkSession]:
        """The run's session (named after what it runs) and the settings that name its catalog.

        The OpenLineage listener that Glue 6.1+ and EMR 8.2+ (or the stage's DataZone setting) register
        names its jobs after `spark.openlineage.appName`, else the app name, which holds this run's id:
        `lakeloader.<verb>` keeps one job per verb and table across runs (the listener appends the
        output table's name to it)."""
        from lakeloader.spark.session import SparkSettings, build_session

        settings = SparkSettings(
            runtime=runtime,
            warehouse=self.config.warehouse,
            app_name=f"lakeloader-{name}-{self.cid}",
            extra_conf={OPENLINEAGE_APP_NAME: f"{JOB_NAMESPACE}.{verb}"},
        )
        return settings, build_session(settings)


def _missing_args(args: Mapping[str, str]) -> str | None:
    missing = [contract.glue_arg(name) for name in contract.JOB_REQUIRED_ARGS if not args.get(name)]
    return f"missing job arguments: {', '.join(missing)}" if missing else None


def _start(args: Mapping[str, str]) -> JobStart:
    import boto3

    from lakeloader.config.items import load_tables_from_dynamodb
    from lakeloader.spark import next_step

    next_step.address(*contract.stage_options(args[contract.ARG_CONFIG_TABLE]))
    dynamodb = boto3.client("dynamodb")
    tables = load_tables_from_dynamodb(args[contract.ARG_CONFIG_TABLE], client=dynamodb)
    config = LakeConfig(
        raw_root=args[contract.ARG_RAW_ROOT],
        warehouse=args[contract.ARG_WAREHOUSE],
        tables=with_database_prefix(tables, args.get(contract.ARG_DATABASE_PREFIX) or ""),
    )
    return JobStart(config, args.get(contract.ARG_CORRELATION_ID) or contract.new_run_id(), dynamodb)


def _usage_error(message: str) -> int:
    print(f"lakeloader: {message}", file=sys.stderr)
    return 2


def _finish(results: list, summary: str) -> int:
    """Print the summary; a failed table fails the run (exit 1) with its error on stderr."""
    print(summary, flush=True)
    failed = [r for r in results if r.status == "failed"]
    if failed:
        print("lakeloader: " + "; ".join(f"{r.table_id}: {r.error}" for r in failed), file=sys.stderr)
    return 1 if failed else 0


def ingest_main(args: Mapping[str, str], *, runtime: str) -> int:
    """Glue/EMR ingest: the tables in ARG_TABLE_ID (one id or a comma-separated list) or, when
    empty, every enabled table; ARG_PARALLEL_TABLES of them at a time."""
    from lakeloader.jobs.load import summary_table

    problem = _missing_args(args)
    if problem:
        return _usage_error(problem)
    try:
        parallel = parse_count(args, contract.ARG_PARALLEL_TABLES, 1)
        max_attempts = parse_count(args, contract.ARG_MAX_ATTEMPTS, DEFAULT_MAX_ATTEMPTS)
    except ValueError as exc:
        return _usage_error(str(exc))
    rebuild = {
        "rebuild": parse_flag(args, contract.ARG_REBUILD),
        "raw_zone_erased": parse_flag(args, contract.ARG_RAW_ZONE_ERASED),
    }
    job = _start(args)
    table_ids = parse_table_ids(args.get(contract.ARG_TABLE_ID))
    known = {t.id for t in job.config.tables}
    # a table removed from the config since the trigger grouped it fails alone
    unknown = [
        LoadResult(t, status="failed", error=f"unknown table {t!r}: not in the config table")
        for t in table_ids
        if t not in known
    ]
    wanted = [t for t in table_ids if t in known]
    tables = job.config.select(wanted) if wanted else [] if table_ids else job.config.select(None)
    ledger = Ledger(job.dynamodb, args[contract.ARG_LEDGER_TABLE], args[contract.ARG_RUNS_TABLE])
    name = table_ids[0] if len(table_ids) == 1 else f"{len(table_ids)}-tables" if table_ids else "all"
    settings, spark = job.spark(runtime, name, "rebuild" if rebuild["rebuild"] else "ingest")
    lineage = open_log(None, warehouse=job.config.warehouse, raw_root=job.config.raw_root)
    results = unknown + drain_tables(
        spark,
        tables,
        ledger,
        catalog=settings.catalog,
        raw_root=job.config.raw_root,
        cid=job.cid,
        parallel=parallel,
        max_attempts=max_attempts,
        lineage=lineage,
        **rebuild,
    )
    return _finish(results, summary_table(results))


def maintain_main(args: Mapping[str, str], *, runtime: str) -> int:
    """Glue/EMR maintenance: one table (ARG_TABLE_ID) or, when empty, every enabled table.

    Same job arguments as `ingest_main`. It takes no table lock: maintenance and ingest may run
    at once; their commit conflicts are retried (commit.retry.* and maintenance.retry).
    """
    from lakeloader.jobs.maintenance import maintain_tables, summary_table

    problem = _missing_args(args)
    if problem:
        return _usage_error(problem)
    job = _start(args)
    table_id = args.get(contract.ARG_TABLE_ID) or ""
    tables = job.config.select([table_id] if table_id else None)
    settings, spark = job.spark(runtime, f"maintain-{table_id or 'all'}", "maintain")
    results = maintain_tables(
        spark,
        tables,
        catalog=settings.catalog,
        progress=lambda m: log_event("progress", message=m, correlation_id=job.cid),
        lineage=open_log(None, warehouse=job.config.warehouse, raw_root=job.config.raw_root),
    )
    for result in results:
        log_event("maintenance_done", correlation_id=job.cid, **asdict(result))
    return _finish(results, summary_table(results))
