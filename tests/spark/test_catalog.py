"""The catalog every session builds (lakeloader.contract.CATALOG_PROPERTIES)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakeloader.spark import CATALOG

# slow (make check leaves it out): a table written, its manifest removed, planned again
pytestmark = [pytest.mark.spark, pytest.mark.slow]


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
