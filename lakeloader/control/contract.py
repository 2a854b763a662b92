"""Every name that crosses the line between the CDK app (`infra/`) and the code it deploys.

Standard library only: `infra/`, the Glue/EMR jobs and the Lambda bundle all import it,
so a name spelt here cannot drift between the side that sets it and the side that reads it.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import TypeVar

T = TypeVar("T")

# --- job arguments ------------------------------------------------------------------------------
# Glue passes `--<name> value`; the EMR scripts take `--<name without the prefix, "_" -> "-">`.
# Both entry points hand the job a dict keyed by these names.

ARG_CONFIG_TABLE = "lakeloader_config_table"
ARG_LEDGER_TABLE = "lakeloader_ledger_table"
ARG_RUNS_TABLE = "lakeloader_runs_table"
ARG_RAW_ROOT = "lakeloader_raw_root"
ARG_WAREHOUSE = "lakeloader_warehouse"
ARG_TABLE_ID = "lakeloader_table_id"
ARG_CORRELATION_ID = "lakeloader_correlation_id"
ARG_DATABASE_PREFIX = "lakeloader_database_prefix"
ARG_PARALLEL_TABLES = "lakeloader_parallel_tables"
ARG_MAX_ATTEMPTS = "lakeloader_max_attempts"
ARG_REBUILD = (
    "lakeloader_rebuild"  # "true": rebuild the run's tables (lakeloader.jobs.rebuild) before draining
)
ARG_RAW_ZONE_ERASED = "lakeloader_raw_zone_erased"  # "true": a rebuild may run despite recorded erasures

# Set in the job's DefaultArguments at deploy; a job cannot start without them.
JOB_REQUIRED_ARGS = (ARG_CONFIG_TABLE, ARG_LEDGER_TABLE, ARG_RUNS_TABLE, ARG_RAW_ROOT, ARG_WAREHOUSE)
# Per run, or per stage; absent means "" (all tables, no correlation id, the config's names, 1, 3,
# no rebuild).
INGEST_OPTIONAL_ARGS = (
    ARG_TABLE_ID,
    ARG_CORRELATION_ID,
    ARG_DATABASE_PREFIX,
    ARG_PARALLEL_TABLES,
    ARG_MAX_ATTEMPTS,
    ARG_REBUILD,
    ARG_RAW_ZONE_ERASED,
)
MAINTAIN_OPTIONAL_ARGS = (ARG_TABLE_ID, ARG_CORRELATION_ID, ARG_DATABASE_PREFIX)


def glue_arg(name: str) -> str:
    """`lakeloader_table_id` -> `--lakeloader_table_id` (Glue job argument)."""
    return f"--{name}"


def emr_arg(name: str) -> str:
    """`lakeloader_table_id` -> `--table-id` (the EMR scripts' argparse option)."""
    return "--" + name.removeprefix("lakeloader_").replace("_", "-")


# --- S3-arrival Lambda environment --------------------------------------------------------------

ENV_CONFIG_TABLE = "CONFIG_TABLE"
ENV_LEDGER_TABLE = "LEDGER_TABLE"
ENV_RUNS_TABLE = "RUNS_TABLE"
ENV_GLUE_JOB_NAME = "GLUE_JOB_NAME"
ENV_EMR_APPLICATION_ID = "EMR_APPLICATION_ID"
ENV_EMR_JOB_ROLE_ARN = "EMR_JOB_ROLE_ARN"
ENV_EMR_ENTRY_POINT = "EMR_ENTRY_POINT"
ENV_EMR_EXTRA_ARGS = "EMR_EXTRA_ARGS"  # JSON list of strings
ENV_RAW_BUCKET = "RAW_BUCKET"
ENV_LOG_LEVEL = "LOG_LEVEL"
ENV_TABLES_PER_RUN = "TABLES_PER_RUN"
ENV_CONFIG_CACHE_SECONDS = "CONFIG_CACHE_SECONDS"
ENV_START_LEASE_SECONDS = "START_LEASE_SECONDS"
ENV_EVENTBRIDGE_KEYS_ENCODED = "EVENTBRIDGE_KEYS_ENCODED"
ENV_POWERTOOLS_SERVICE_NAME = "POWERTOOLS_SERVICE_NAME"
ENV_POWERTOOLS_METRICS_NAMESPACE = "POWERTOOLS_METRICS_NAMESPACE"
# The S3-arrival Lambda's service name in its logs (ENV_POWERTOOLS_SERVICE_NAME; also the default).
ARRIVAL_SERVICE_NAME = "lakeloader-s3-arrival"

# The event the scheduled sweep sends the S3-arrival Lambda.
SWEEP_EVENT = {"lakeloader": {"action": "sweep"}}
# What `lakeloader rebuild --stage` asks it: start these tables' runs with ARG_REBUILD.
REBUILD_EVENT = {"lakeloader": {"action": "rebuild"}}

# --- which table a raw object belongs to -------------------------------------------------------
# Synth validates prefixes with this rule and the Lambda routes keys with it.

# What an exporter writes beside a finished folder (Spark, Hadoop, Glue): a cdc: snapshot folder is
# complete once it holds one. The Lambda starts the table's run on it; the job lists it only when asked
# (lakeloader.spark.inputs.list_inputs(markers=True)) and formats.full_copy reads the folder as complete.
SUCCESS_MARKER = "_SUCCESS"


def normalise_prefix(prefix: str) -> str:
    """No leading '/', exactly one trailing '/' ("" stays "")."""
    prefix = prefix.strip().lstrip("/")
    if not prefix:
        return ""
    return prefix if prefix.endswith("/") else prefix + "/"


def longest_prefix_matches(key: str, items: Iterable[T], prefix_of: Callable[[T], str]) -> list[T]:
    """The items whose (non-empty) prefix is the longest prefix of `key`, in their order: several when
    tables share one prefix (a current table and its SCD2 history read the same files)."""
    key = key.lstrip("/")
    best: list[T] = []
    best_length = 0
    for item in items:
        prefix = prefix_of(item)
        if not prefix or not key.startswith(prefix) or len(prefix) < best_length:
            continue
        if len(prefix) > best_length:
            best, best_length = [], len(prefix)
        best.append(item)
    return best


# --- metrics ------------------------------------------------------------------------------------

# CloudWatch namespace the jobs and the Lambda publish to and the dashboard reads.
METRICS_NAMESPACE = "lakeloader"
# The reader-grants Lambda's count of grants it could not apply (lambda/reader_grants), per invocation.
READER_GRANTS_UNGRANTED_METRIC = "ReaderGrantsUngranted"
# Dimensions of the per-table metrics: the stage's ledger table name, then the table id.
METRIC_DIMENSIONS = ("Ledger", "TableId")
PENDING_AGE_METRIC = "PendingAgeSeconds"  # the sweep's, per table: the table's lag
# the sweep's, per table with trigger.freshness_minutes: its lag / its freshness (1: at the limit), so
# one alarm with one threshold covers tables of different freshness (infra.monitoring)
PENDING_AGE_OVER_FRESHNESS_METRIC = "PendingAgeOverFreshness"
FILES_QUARANTINED_METRIC = "FilesQuarantined"  # the drain's, per table
# the drain's, per table: commits the table disagreed with (engine.reconciliation), published or not
RECONCILIATION_MISMATCH_METRIC = "ReconciliationMismatch"
# the S3-arrival Lambda's, per table, once: a table a source found cannot load until its keys are given
TABLE_HELD_METRIC = "TableHeld"

# --- Iceberg in Spark ---------------------------------------------------------------------------

# The Spark catalog name of the Glue Data Catalog on Glue and EMR (and in emulated runs).
GLUE_CATALOG = "glue_catalog"
# The catalog name of a laptop run (Hadoop catalog on local disk, or Glue in the emulator).
LOCAL_CATALOG = "lakeloader"
ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
ICEBERG_SPARK_CATALOG = "org.apache.iceberg.spark.SparkCatalog"
# The erasure audit table `lakeloader erase` writes; the stack's erase policy grants it.
AUDIT_DATABASE = "lakeloader_audit"
AUDIT_TABLE = "erasures"
# `<table>__tombstones`: the side table of a table's deletes (lakeloader.engine.tombstones); readers are
# denied it (infra.readers).
TOMBSTONES_SUFFIX = "__tombstones"


# Every catalog, on AWS and on a laptop: a manifest is read once per session, not once per scan. A batch
# plans the same manifests several times (classification, the tombstones' skip check, the MERGE, its
# commit's validation), each read an S3 GET without the cache; a manifest is never rewritten in place,
# so a cached one cannot be stale. Iceberg bounds the cache: 100 MiB per catalog, an entry unread for
# 60 s is dropped, and the JVM may reclaim any under memory pressure (soft references).
MANIFEST_CACHE = "io.manifest.cache-enabled"
CATALOG_PROPERTIES = {MANIFEST_CACHE: "true"}


def catalog_properties(catalog: str) -> dict[str, str]:
    """CATALOG_PROPERTIES as Spark settings of `catalog`."""
    return {f"spark.sql.catalog.{catalog}.{key}": value for key, value in CATALOG_PROPERTIES.items()}


def iceberg_catalog_conf(catalog: str, warehouse: str) -> dict[str, str]:
    """Spark settings for Iceberg tables in the Glue Data Catalog, stored under `warehouse`."""
    prefix = f"spark.sql.catalog.{catalog}"
    return {
        "spark.sql.extensions": ICEBERG_EXTENSIONS,
        prefix: ICEBERG_SPARK_CATALOG,
        f"{prefix}.catalog-impl": "org.apache.iceberg.aws.glue.GlueCatalog",
        f"{prefix}.io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        f"{prefix}.warehouse": warehouse,
        **catalog_properties(catalog),
    }


# The Spark catalog name of the stage's S3 Tables table bucket (target.storage: s3_tables): a namespace is
# the config's database, unprefixed (the table bucket is the stage's own). The catalog is Iceberg's REST
# catalog on S3 Tables' Iceberg REST endpoint, SigV4-signed for `s3tables`, with the table bucket's ARN
# as its warehouse ("Accessing tables using the Amazon S3 Tables Iceberg REST endpoint", S3 User Guide;
# the endpoint AWS's "Running ETL jobs on Amazon S3 tables with AWS Glue" offers beside the analytics
# integration, where the S3 Tables catalog jar is "not recommended for new AWS Glue ETL job
# implementations"). Iceberg's runtime and AWS bundle, which Glue and EMR provide, hold the REST
# catalog, the SigV4 signer and S3FileIO: no jar of its own. docs/deploy.md#amazon-s3-tables says why
# this endpoint and not Glue's.
S3_TABLES_CATALOG = "s3tables"
S3_TABLES_SIGNING_NAME = "s3tables"


def s3_tables_endpoint(region: str, url_suffix: str = "amazonaws.com") -> str:
    """S3 Tables' Iceberg REST endpoint in `region` (`url_suffix`: amazonaws.com.cn in China)."""
    return f"https://s3tables.{region}.{url_suffix}/iceberg"


def s3_tables_catalog_conf(
    table_bucket_arn: str,
    region: str,
    *,
    url_suffix: str = "amazonaws.com",
    uri: str | None = None,
    catalog: str = S3_TABLES_CATALOG,
) -> dict[str, str]:
    """Spark settings for the tables of one S3 Tables table bucket, through S3 Tables' Iceberg REST
    endpoint (`uri` replaces it: the emulator's)."""
    prefix = f"spark.sql.catalog.{catalog}"
    return {
        "spark.sql.extensions": ICEBERG_EXTENSIONS,
        prefix: ICEBERG_SPARK_CATALOG,
        f"{prefix}.type": "rest",
        f"{prefix}.uri": uri or s3_tables_endpoint(region, url_suffix),
        f"{prefix}.warehouse": table_bucket_arn,
        f"{prefix}.rest.sigv4-enabled": "true",
        f"{prefix}.rest.signing-name": S3_TABLES_SIGNING_NAME,
        f"{prefix}.rest.signing-region": region,
        f"{prefix}.io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        **catalog_properties(catalog),
    }


def lake_formation_catalog_conf(catalog: str, account: str, region: str) -> dict[str, str]:
    """Lake Formation mode (Glue 5 / EMR 7 full table access): the catalog asks Lake Formation for the
    table's S3 credentials instead of using the role's own, and drops a table's folder before the
    table (Lake Formation vends no credentials for a table that is gone)."""
    prefix = f"spark.sql.catalog.{catalog}"
    return {
        f"{prefix}.glue.lakeformation-enabled": "true",
        f"{prefix}.glue.account-id": account,
        f"{prefix}.client.region": region,
        "spark.sql.catalog.dropDirectoryBeforeTable.enabled": "true",
    }


# Where EMR Serverless runs log, under the assets bucket (the application's S3 monitoring; EMR writes
# applications/<app>/jobs/<run>/SPARK_DRIVER/stderr.gz below it): what `lakeloader verify` points at.
EMR_LOGS_PREFIX = "emr/logs/"

# --- stage names --------------------------------------------------------------------------------
# A stage's resources are `<project>-<stage>-<what>` (infra.settings.Stage.resource_name), its stack
# `<project>-<stage>`.

DEFAULT_PROJECT = "lakeloader"


def stage_options(config_table: str) -> list[str]:
    """`--stage` (and `--project`) naming the stack whose config table this is: a stage's resources
    are `<project>-<stage>-<what>` (infra.settings.Stage.resource_name), its stack `<project>-<stage>`."""
    project, _, stage = config_table.removesuffix("-config").rpartition("-")
    return ["--stage", stage] if project == DEFAULT_PROJECT else ["--project", project, "--stage", stage]


# --- run ids ------------------------------------------------------------------------------------


def new_run_id(now: float | None = None) -> str:
    """The one run-id format, time-sortable: e.g. 20240501T120000123Z-9f3a1c (sorts newest-last).

    The Lambda, the Glue/EMR drain and `lakeloader run` all name runs with it.
    """
    moment = datetime.fromtimestamp(time.time() if now is None else now, tz=UTC)
    return moment.strftime("%Y%m%dT%H%M%S") + f"{moment.microsecond // 1000:03d}Z-{secrets.token_hex(3)}"
