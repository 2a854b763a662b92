"""SCD2, the quality gate's audit branch and rebuild on S3 Tables tables (issue 42), in one Spark
subprocess against the deployed stack's endpoint.

Tables of their own in the stack's namespace, built in the scenario from local raw files: the engine's
calls (apply_batch, rebuild_table) with the session's S3 Tables catalog, as a Glue run or `lakeloader
rebuild` makes them. The namespace exists (CloudFormation); the tables are created by the catalog. The
loop itself (S3 -> Lambda -> Glue -> commit) on S3 Tables: test_s3_tables_e2e.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.s3_tables_world import (
    NAMESPACE,
    outside_reader,
    run_scenario,
    s3_tables_names,
    table_bucket_arn,
)

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def table_bucket(e2e) -> str:
    return table_bucket_arn()


ENGINE_CONFIG = f"""
raw_root: {{raw}}
warehouse: .lakeloader/warehouse
tables:
  - id: s3t.people_scd2
    source: {{{{prefix: scd2/, format: parquet, cdc: dms}}}}
    target: {{{{database: {NAMESPACE}, table: people_scd2, storage: s3_tables}}}}
    keys: [id]
    sequence_by: last_update_time
    mode: scd2
  - id: s3t.people_gated
    source: {{{{prefix: gated/, format: parquet, cdc: dms}}}}
    target: {{{{database: {NAMESPACE}, table: people_gated, storage: s3_tables}}}}
    keys: [id]
    sequence_by: last_update_time
    mode: merge
    quality:
      on_failure: quarantine
      rules: [{{{{not_null: [email]}}}}]
"""

ENGINE_SCENARIO = """
import json, sys, traceback
from datetime import datetime
from pathlib import Path

import pyarrow as pa, pyarrow.parquet as pq

from lakeloader.config import load_config
from lakeloader.engine import apply_batch
from lakeloader.engine.quality import quarantine_name
from lakeloader.spark.inputs import list_inputs
from lakeloader.jobs.rebuild import rebuild_table
from lakeloader.iceberg.s3_tables import target_name
from lakeloader.spark.session import SparkSettings, build_session
from lakeloader_dev.jars import spark_conf

warehouse, workdir, config_text = sys.argv[1:4]
raw = Path(workdir) / "raw"
t = lambda minute: datetime(2026, 11, 1, 8, minute)
SCHEMA = pa.schema([("Op", pa.string()), ("id", pa.int64()), ("name", pa.string()),
                    ("email", pa.string()), ("last_update_time", pa.timestamp("us"))])

def land(prefix, name, rows):
    (raw / prefix).mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), raw / prefix / name)

def row(op, id_, name, email, minute):
    return {"Op": op, "id": id_, "name": name, "email": email, "last_update_time": t(minute)}

config = Path(workdir) / "tables.yaml"
config.write_text(config_text.format(raw=raw))
lake = load_config(str(config))
settings = SparkSettings(warehouse=warehouse, app_name="e2e-s3-tables-engine", extra_conf=spark_conf())
spark = build_session(settings)
catalog = settings.catalog
scd2, gated = lake.table("s3t.people_scd2"), lake.table("s3t.people_gated")
out = {
    "names": [target_name(spark, catalog, scd2), target_name(spark, catalog, gated)],
    "catalog": {k: spark.conf.get(f"spark.sql.catalog.s3tables.{k}", None) for k in ("type", "catalog-impl")},
    "jars": spark.conf.get("spark.jars", ""),
}

def loaded(table, run_id):
    files = list_inputs(str(raw), table.source.prefix)
    return apply_batch(spark, table, files, catalog=catalog, run_id=run_id)

def section(label, steps):  # one failing section leaves the others' results
    try:
        out[label] = steps()
    except Exception:
        out[label] = {"error": traceback.format_exc()[-3000:]}

def scd2_versions():  # an insert batch, then an update and a delete
    land("scd2/", "1.parquet", [row("I", 1, "ann", "a@x", 0), row("I", 2, "bob", "b@x", 0)])
    loaded(scd2, "scd2-1")
    land("scd2/", "2.parquet", [row("U", 1, "ann2", "a@x", 5), row("D", 2, "bob", "b@x", 6)])
    loaded(scd2, "scd2-2")
    return {"versions": [list(r) for r in spark.sql(
        "SELECT id, name, CAST(valid_from AS STRING), CAST(valid_to AS STRING), is_current "
        f"FROM {target_name(spark, catalog, scd2)} ORDER BY id, valid_from").collect()]}

def gate():  # a batch with one failing row goes through an audit branch
    land("gated/", "1.parquet", [row("I", 1, "ann", "a@x", 0), row("I", 2, "bob", None, 0),
                                 row("I", 3, "cy", "c@x", 0)])
    quality = loaded(gated, "gated-1").quality
    name = target_name(spark, catalog, gated)
    return {
        "action": quality.action, "branch": quality.branch, "quarantined": quality.quarantined_rows,
        "quarantine_table": quality.quarantine_table,
        "rows": [r.id for r in spark.sql(f"SELECT id FROM {name} ORDER BY id").collect()],
        "refs": sorted(r.name for r in spark.sql(f"SELECT name FROM {name}.refs").collect()),
        "quarantine": [[r.run_id, r.audit_branch, r.rule] for r in spark.sql(
            f"SELECT run_id, audit_branch, rule FROM {quarantine_name(name, gated)}").collect()],
    }

def rebuild():  # the gated table replaced by one built from its raw files (one more raw file since)
    land("gated/", "2.parquet", [row("U", 3, "cy2", "c2@x", 5), row("D", 1, "ann", "a@x", 6)])
    files = list_inputs(str(raw), gated.source.prefix)
    rebuilt = rebuild_table(spark, gated, files, catalog=catalog, run_id="rebuild-1")
    name = target_name(spark, catalog, gated)
    return {
        "rows": [list(r) for r in spark.sql(f"SELECT id, name FROM {name} ORDER BY id").collect()],
        "snapshot_id": str(rebuilt.snapshot_id),
    }

section("scd2", scd2_versions)
section("gate", gate)
section("rebuild", rebuild)
print("RESULT " + json.dumps(out, default=str), flush=True)
spark.stop()
"""


@pytest.fixture(scope="module")
def engine_on_s3_tables(e2e, table_bucket, tmp_path_factory) -> dict[str, Any]:
    workdir = tmp_path_factory.mktemp("s3-tables-engine")
    argv = [ENGINE_SCENARIO, e2e.stack.warehouse, str(workdir), ENGINE_CONFIG]
    return run_scenario(e2e.env, table_bucket, argv, workdir / "spark.log")


def test_the_session_reaches_s3_tables_through_the_rest_catalog_with_no_catalog_jar(engine_on_s3_tables):
    """The scenario's catalog `s3tables` is Iceberg's REST catalog (spark.session, on the emulator's
    S3 Tables Iceberg REST endpoint), and no S3 Tables catalog jar is on its classpath."""
    assert engine_on_s3_tables["catalog"] == {"type": "rest", "catalog-impl": None}
    assert "s3-tables-catalog" not in engine_on_s3_tables["jars"]


def test_scd2_on_an_s3_tables_table(engine_on_s3_tables, table_bucket):
    """mode scd2 in the table bucket: an update closes the old version and opens a new one, a delete
    closes the key's version; the table is an S3 Tables table, not a Glue one."""
    result = engine_on_s3_tables["scd2"]
    assert result.get("versions") == [
        [1, "ann", "2026-11-01 08:00:00", "2026-11-01 08:05:00", False],
        [1, "ann2", "2026-11-01 08:05:00", None, True],
        [2, "bob", "2026-11-01 08:00:00", "2026-11-01 08:06:00", False],
    ], result
    assert engine_on_s3_tables["names"][0].startswith("`s3tables`.")
    assert "people_scd2" in s3_tables_names(table_bucket)


def test_the_quality_gate_audits_an_s3_tables_table_on_a_branch(engine_on_s3_tables, table_bucket):
    """The batch is written to an audit branch of the S3 Tables table, its failing row quarantined
    in a table beside it (in the bucket), the rest published to main, and the branch dropped."""
    result = engine_on_s3_tables["gate"]
    assert result.get("action") == "quarantined", result
    assert result["branch"].startswith("audit_") and result["quarantined"] == 1
    assert result["rows"] == [1, 3]
    assert result["refs"] == ["main"]  # the audit branch is gone once published
    assert result["quarantine"] == [["gated-1", result["branch"], "not_null(email)"]]
    assert result["quarantine_table"].startswith("`s3tables`.")
    assert {"people_gated", "people_gated__quarantine"} <= s3_tables_names(table_bucket)


def test_rebuild_replaces_an_s3_tables_table_and_drops_its_staging_table(
    e2e, engine_on_s3_tables, table_bucket
):
    """rebuild builds people_gated__rebuild beside the table, replaces the table with it in one
    commit and drops it (and its tombstones) again: through the catalog's dropTable with purge, which
    S3 Tables' endpoint serves as DeleteTable. An outside reader sees the rebuilt rows."""
    result = engine_on_s3_tables["rebuild"]
    assert result.get("rows") == [[3, "cy2"]], result
    names = s3_tables_names(table_bucket)
    assert "people_gated__rebuild" not in names and "people_gated__rebuild__tombstones" not in names, names
    table = outside_reader(e2e, table_bucket, "people_gated")
    assert str(table.current_snapshot().snapshot_id) == result["snapshot_id"]
    assert [r["id"] for r in table.scan().to_arrow().to_pylist()] == [3]
