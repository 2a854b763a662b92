"""The catalog every session builds (lakeloader.control.contract.CATALOG_PROPERTIES)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakeloader.spark.session import CATALOG, table_exists

pytestmark = pytest.mark.spark


def test_asking_whether_a_table_exists_runs_no_query(spark):
    """`table_exists` asks the catalog. Resolving the table and catching the failure ran a failed query
    on Spark 4.1, and in a session that has observed metrics (every batch's read has) Spark's
    ObservationManager logged each as an ERROR with its stack trace: one per missing tombstone table in
    every Glue 6.0 batch's log. Spark 3.5 runs no query for a failed resolution, so this test can fail
    only under `make test RUNTIME=glue-6.0`."""
    spark.sql(f"CREATE TABLE IF NOT EXISTS {CATALOG}.catalog_checks.somewhere (id bigint) USING iceberg")
    events = spark.sparkContext._jsc.sc().listenerBus()
    executions = spark._jsparkSession.sharedState().statusStore()
    events.waitUntilEmpty()
    before = executions.executionsCount()

    assert table_exists(spark, f"{CATALOG}.catalog_checks.somewhere")
    assert not table_exists(spark, f"{CATALOG}.catalog_checks.nowhere")
    assert not table_exists(spark, f"{CATALOG}.no_such_database.nowhere")

    events.waitUntilEmpty()
    assert executions.executionsCount() == before


@pytest.mark.slow  # make check leaves it out: a table written, its manifest removed, planned again
def test_a_session_reads_each_manifest_once(spark):
    """A batch plans the same manifests several times; the second plan must not read them again (on AWS
    each read is an S3 GET). Shown by removing the manifest after the first scan: the second scan still
    plans, from the session's cache."""
    name = f"{CATALOG}.catalog_checks.manifest_cache"
    spark.sql(f"CREATE TABLE {name} (id bigint) USING iceberg")
    spark.sql(f"INSERT INTO {name} VALUES (1), (2)")
    assert spark.table(name).count() == 2
    manifests = [row.path for row in spark.sql(f"SELECT path FROM {name}.manifests").collect()]
    assert len(manifests) == 1
    Path(manifests[0].removeprefix("file:")).unlink()

    assert spark.table(name).count() == 2  # planned from the cache: the file is gone
