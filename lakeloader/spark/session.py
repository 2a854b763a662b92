"""One place that builds the SparkSession for each runtime.

* ``local``: PySpark ``local[N]`` with the Iceberg jars its caller passes in (``extra_conf``),
  ``LAKELOADER_SPARK_JARS``, or the jar settings the checkout's jar assembly recorded
  (``.lakeloader/jars/spark-conf-<runtime>.json``, written by ``make setup``): the shipped runtime never
  imports the assembly (``lakeloader_dev.jars``), it only reads what it wrote. The catalog
  is an Iceberg Hadoop catalog on a local warehouse folder, or the Glue catalog + S3FileIO
  against ``AWS_ENDPOINT_URL`` (the embedded emulator) when the warehouse is an ``s3://`` URI.
* ``glue`` / ``emr``: the platform provides Spark and Iceberg; the job's
  ``--conf`` settings name the catalog, we only pick it up.

Whatever the runtime, SQL addresses tables as ``<catalog>.<database>.<table>``
and the catalog is also the session's default, so ``lakeloader sql`` users can
write ``SELECT * FROM crm.customers``.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from lakeloader.control import runtimes
from lakeloader.control.contract import (
    GLUE_CATALOG,
    ICEBERG_EXTENSIONS,
    ICEBERG_SPARK_CATALOG,
    LOCAL_CATALOG,
    S3_TABLES_CATALOG,
    catalog_properties,
    iceberg_catalog_conf,
    s3_tables_catalog_conf,
)
from lakeloader.spark.errors import LakeloaderError
from lakeloader.spark.sql import literal, quote

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

Runtime = Literal["local", "glue", "emr"]
CATALOG = LOCAL_CATALOG  # what tests and benchmarks address local tables with
JARS_ENV = "LAKELOADER_SPARK_JARS"
CACHE_ENV = "LAKELOADER_CACHE"  # the jar cache folder (default: <checkout>/.lakeloader/jars)
# The table bucket ARN of target.storage: s3_tables tables in a local session against an emulator
# (the emulator's Glue runs set it from the deployed job's --conf); unset: no S3 Tables catalog.
S3_TABLES_ENV = "LAKELOADER_S3_TABLES_WAREHOUSE"


# PySpark 4 records the Python call site of every DataFrame and Column call, for error messages: JVM
# calls around each one (F.col 1.4 ms a call against 0.4 ms without, on a 2-core laptop, 2026-11-30).
# The engine's errors name the file, table and column themselves. A static setting: it holds from a
# session's start, and a session that exists keeps its own. PySpark 3.5 has no such recording.
NO_CALL_SITES = {"spark.python.sql.dataFrameDebugging.enabled": "false"}


@dataclass(frozen=True)
class SparkSettings:
    """How to build the session. Defaults suit a laptop and the test suite."""

    runtime: Runtime = "local"
    warehouse: str = ".lakeloader/warehouse"
    app_name: str = "lakeloader"
    master: str = field(default_factory=lambda: os.environ.get("LAKELOADER_SPARK_MASTER", "local[2]"))
    driver_memory: str = field(default_factory=lambda: os.environ.get("LAKELOADER_DRIVER_MEMORY", "2g"))
    shuffle_partitions: int = 4
    extra_conf: dict[str, str] = field(default_factory=dict)

    @property
    def catalog(self) -> str:
        return CATALOG if self.runtime == "local" else GLUE_CATALOG


def _s3_endpoint() -> str | None:
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")


def emulated() -> bool:
    """LAKELOADER_EMULATED=1: the emulator runs a Glue/EMR script (local Spark, catalog GLUE_CATALOG)."""
    return os.environ.get("LAKELOADER_EMULATED") == "1"


def local_conf(settings: SparkSettings) -> dict[str, str]:
    """Spark settings for the local runtime (pure function: tested without a JVM).

    The catalog is ``settings.catalog``: contract.LOCAL_CATALOG locally, contract.GLUE_CATALOG when
    the emulator runs a Glue/EMR script (the name the deployed job's --conf uses).
    """
    catalog = settings.catalog

    conf: dict[str, str] = {
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.memory": settings.driver_memory,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(settings.shuffle_partitions),
        "spark.default.parallelism": str(settings.shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.iceberg.check-ordering": "false",
        "spark.sql.defaultCatalog": catalog,
        **NO_CALL_SITES,
    }
    conf.update(_recorded_jar_conf())
    if os.environ.get(JARS_ENV):
        conf["spark.jars"] = os.environ[JARS_ENV]

    warehouse = settings.warehouse
    prefix = f"spark.sql.catalog.{catalog}"
    if warehouse.startswith("s3://") or warehouse.startswith("s3a://"):
        endpoint = _s3_endpoint()
        conf.update(iceberg_catalog_conf(catalog, warehouse.replace("s3a://", "s3://")))
        if endpoint:
            conf.update(
                {
                    f"{prefix}.s3.endpoint": endpoint,
                    f"{prefix}.s3.path-style-access": "true",
                    f"{prefix}.glue.endpoint": endpoint,
                    f"{prefix}.client.region": os.environ.get("AWS_REGION")
                    or os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
                }
            )
        bucket = os.environ.get(S3_TABLES_ENV)
        if bucket:  # S3 Tables' Iceberg REST endpoint: the emulator serves it at <endpoint>/iceberg
            _, partition, _, region, *_ = bucket.split(":")
            suffix = "amazonaws.com.cn" if partition == "aws-cn" else "amazonaws.com"
            uri = f"{endpoint}/iceberg" if endpoint else None
            conf.update(s3_tables_catalog_conf(bucket, region, url_suffix=suffix, uri=uri))
            if endpoint:
                tables = f"spark.sql.catalog.{S3_TABLES_CATALOG}"
                conf.update(
                    {
                        f"{tables}.s3.endpoint": endpoint,
                        f"{tables}.s3.path-style-access": "true",
                        f"{tables}.client.region": region,
                    }
                )
    else:
        conf.update(
            {
                "spark.sql.extensions": ICEBERG_EXTENSIONS,
                prefix: ICEBERG_SPARK_CATALOG,
                f"{prefix}.type": "hadoop",
                f"{prefix}.warehouse": str(Path(warehouse).resolve()),
                **catalog_properties(catalog),
            }
        )
    conf.update(_s3a_conf())
    conf.update(settings.extra_conf)
    if not (conf.get("spark.jars") or conf.get("spark.jars.packages")):
        raise LakeloaderError(
            f"local Spark needs the Iceberg jars and {jar_conf_path()} does not name them: run "
            "`make setup` (or `python -m lakeloader_dev.jars`) in the checkout, or set "
            f"{JARS_ENV} to a comma-separated jar list"
        )
    return conf


def jar_conf_path(runtime: runtimes.Runtime | None = None) -> Path:
    """Where the checkout's jar set-up records the Spark settings that load a runtime's jars (the
    local runtime's by default)."""
    cache = os.environ.get(CACHE_ENV)
    root = (
        Path(cache).expanduser().resolve()
        if cache
        else Path(__file__).resolve().parents[2] / ".lakeloader" / "jars"
    )
    return root / f"spark-conf-{(runtime or runtimes.local()).name}.json"


def _recorded_jar_conf() -> dict[str, str]:
    path = jar_conf_path()
    return json.loads(path.read_text()) if path.is_file() else {}


def _s3a_conf() -> dict[str, str]:
    """Let Spark's own readers open s3:// raw files (Glue does this natively).

    Hadoop 3.3's S3A calls the AWS SDK v1, Hadoop 3.4's (Spark 4) the SDK v2: each gets its own
    credential providers, environment variables first."""
    sdk_v1 = runtimes.local().hadoop.startswith("3.3.")
    providers = (
        (
            "com.amazonaws.auth.EnvironmentVariableCredentialsProvider",
            "com.amazonaws.auth.DefaultAWSCredentialsProviderChain",
        )
        if sdk_v1
        else (
            "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider",
            "software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider",
        )
    )
    conf = {
        "spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "spark.hadoop.fs.s3a.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "spark.hadoop.fs.s3a.aws.credentials.provider": ",".join(providers),
    }
    endpoint = _s3_endpoint()
    if endpoint:
        conf.update(
            {
                "spark.hadoop.fs.s3a.endpoint": endpoint,
                "spark.hadoop.fs.s3a.endpoint.region": os.environ.get("AWS_REGION")
                or os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
                "spark.hadoop.fs.s3a.path.style.access": "true",
                "spark.hadoop.fs.s3a.connection.ssl.enabled": str(endpoint.startswith("https")).lower(),
                "spark.hadoop.fs.s3a.change.detection.mode": "none",
            }
        )
    return conf


def build_session(settings: SparkSettings) -> SparkSession:
    """Return the session for the runtime (reusing an active one where it exists)."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(settings.app_name)
    if settings.runtime == "local" or emulated():
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = builder.master(settings.master)
        for key, value in local_conf(settings).items():
            builder = builder.config(key, value)
    else:
        for key, value in {**NO_CALL_SITES, **settings.extra_conf}.items():
            builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("LAKELOADER_SPARK_LOG_LEVEL", "ERROR"))
    return spark


def java_class(spark: SparkSession, name: str) -> Any:
    """The JVM class `name` (fully qualified), for py4j calls, in one round trip: py4j's dotted
    ``jvm.org.apache.hadoop.fs.Path`` asks the JVM once per segment (five round trips there)."""
    return getattr(spark.sparkContext._jvm, name)


def table_exists(spark: SparkSession, name: str) -> bool:
    """Whether the catalog holds table `name` (catalog I/O only, no Spark job). Asked of the catalog,
    not by resolving the table and catching the failure: on Spark 4.1 a failed query in a session that
    has observed metrics makes Spark's ObservationManager log an ERROR with the whole stack trace, one
    per missing tombstone table in every batch's job log."""
    return spark.catalog.tableExists(name)


def release(df: DataFrame) -> None:
    """Free the blocks of the localCheckpoints `df` reads, now. `DataFrame.unpersist` does not: it
    drops only what `cache`/`persist` registered, so a batch's checkpoints stayed in the block manager
    until the JVM collected their RDDs (118 MiB after each 250k-change batch of a stage,
    benchmarks/RESULTS.md). `df` (and anything else reading those checkpoints) must not be used again."""
    leaves = df._jdf.queryExecution().logical().collectLeaves()
    for i in range(leaves.size()):
        leaf = leaves.apply(i)
        if leaf.getClass().getSimpleName() == "LogicalRDD":
            leaf.rdd().unpersist(False)


class Metrics:
    """Aggregates observed over a DataFrame's rows as a query reads them (Spark's Observation: no job
    of its own), read back in a few py4j round trips however many there are.

    PySpark 3.5 reads an Observation's metrics entry by entry, two or three round trips each (a
    batch's read observes 10-20), and each round trip costs this driver 0.2-0.3 ms. Observed as one
    struct, the metrics come back as one pickled Row, with the Python types ``collect`` gives."""

    FIELD = "metrics"

    def __init__(self, purpose: str) -> None:
        from pyspark.sql import Observation

        self._observation = Observation(f"lakeloader_{purpose}_{uuid.uuid4().hex[:12]}")

    def on(self, df: DataFrame, metrics: dict[str, str]) -> DataFrame:
        """`df`, observed for `metrics`: aggregates as SQL text, by their names in ``values``. One
        expression, which the JVM parses in one round trip; built from Column objects, a metric took
        9-46 round trips (benchmarks/RESULTS.md)."""
        from pyspark.sql import functions as F

        fields = ", ".join(f"{literal(name)}, {sql}" for name, sql in metrics.items())
        return df.observe(self._observation, F.expr(f"named_struct({fields}) AS {quote(self.FIELD)}"))

    @property
    def values(self) -> dict[str, Any]:
        """The metrics by name; waits, as Observation.get does, for the observed query to finish."""
        import pyspark
        from pyspark.serializers import CPickleSerializer

        observation = self._observation
        if int(pyspark.__version__.split(".")[0]) >= 4:  # PySpark unpickles the Row itself
            return observation.get[self.FIELD].asDict()
        row = observation._jo.getAsJava()[self.FIELD]  # type: ignore[attr-defined]
        utils = getattr(observation._jvm, "org.apache.spark.sql.api.python.PythonSQLUtils")  # type: ignore[attr-defined]
        return CPickleSerializer().loads(utils.toPyRow(row)).asDict()
