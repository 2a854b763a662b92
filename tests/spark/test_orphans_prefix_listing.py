"""Iceberg's `remove_orphan_files` with `prefix_listing`, as maintenance calls it under Lake Formation."""

from __future__ import annotations

import os
import time
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pytest

from lakeloader.engine import apply_batch
from lakeloader.jobs.maintenance import maintain_table, summary_table
from lakeloader.spark.inputs import list_inputs
from lakeloader.spark.session import CATALOG

pytestmark = [pytest.mark.spark, pytest.mark.slow]

DMS = pa.schema(
    [("Op", pa.string()), ("id", pa.int64()), ("name", pa.string()), ("last_update_time", pa.timestamp("us"))]
)
FLAG = f"spark.sql.catalog.{CATALOG}.glue.lakeformation-enabled"


def test_maintenance_under_lake_formation_removes_orphans_by_prefix_listing(spark, raw, make_table):
    """With the catalog's `glue.lakeformation-enabled` set (full table access: "Using AWS Glue with AWS
    Lake Formation for Full Table Access", https://docs.aws.amazon.com/glue/latest/dg/security-access-control-fta.html),
    maintenance lists a table's files through its FileIO (`prefix_listing => true`), since the job role
    holds no S3 grant on the warehouse there. The runtime's Iceberg takes the argument and removes the
    orphan all the same (an Iceberg without it fails the step)."""
    table = make_table(
        maintenance={
            "compaction": {"enabled": False},
            "rewrite_delete_files": False,
            "rewrite_manifests": False,
            "snapshots": {"enabled": False},
            "orphan_files": {"older_than_hours": 24},
        },
    )
    raw.write_parquet(
        "src/20261101-0900.parquet",
        [{"Op": "I", "id": 1, "name": "a", "last_update_time": datetime(2026, 11, 1, 9)}],
        DMS,
    )
    apply_batch(
        spark,
        table,
        list_inputs(str(raw.root), table.source.prefix),
        catalog=CATALOG,
        run_id="r",
        progress=print,
    )
    name = f"{CATALOG}.{table.target.database}.{table.target.table}"
    location = spark.sql(f"DESCRIBE TABLE EXTENDED {name}").where("col_name = 'Location'").first().data_type
    orphan = Path(location.removeprefix("file:")) / "data" / "crashed-writer.parquet"
    orphan.write_bytes(b"not committed")
    old = time.time() - 3 * 86400
    os.utime(orphan, (old, old))
    spark.conf.set(FLAG, "true")
    try:
        result = maintain_table(spark, table, catalog=CATALOG)
    finally:
        spark.conf.unset(FLAG)
    steps = {s.step: s for s in result.steps}
    assert steps["remove_orphan_files"].status == "ok", summary_table([result])
    assert steps["remove_orphan_files"].counts["orphan_files_removed"] == 1 and not orphan.exists()
