"""An S3 Tables table on the deployed loop (issue 42): S3 -> arrival Lambda -> Glue run -> a commit in the
stage's table bucket through S3 Tables' Iceberg REST endpoint (issue 68; the emulator serves it at
<endpoint>/iceberg), read back by an outside Iceberg reader.

`s3t.customers` of tests/e2e/tables.yaml (target.storage: s3_tables) gets the sample customers' full
load, then its two CDC files (updates, deletes, a new column). The reader is pyiceberg, opening the
metadata file S3 Tables names for the table (GetTableMetadataLocation): no Spark, no lakeloader code.
A fourth file lands while the bucket sends no notification and arrives through `lakeloader backfill`.
`lakeloader status` reports the table's last commit; `maintain` and `erase` run on it. SCD2, the quality
gate's audit branch and `rebuild` on S3 Tables: test_s3_tables_engine_e2e.py.
"""

from __future__ import annotations

import io
import json
from datetime import datetime
from pathlib import Path
from typing import Any

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakeloader_dev.emulator.loop import lakeloader, upload, upload_unannounced, wait_for_objects
from tests.e2e.s3_tables_world import (
    NAMESPACE,
    outside_reader,
    run_scenario,
    s3_tables_names,
    table_bucket_arn,
)

pytestmark = pytest.mark.e2e

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "raw"
TABLE_ID, NAME = "s3t.customers", "customers"
PREFIX = "s3tables/public/customers/"
LOAD = "LOAD00000001.parquet"
CDC = ["2026/11/01/20261101-100000000.parquet", "2026/11/01/20261101-110000000.parquet"]
SOURCE = "crm/public/customers/"  # the same sample files, landed under the S3 Tables table's prefix
BACKFILLED = "2026/11/02/20261102-090000000.parquet"  # lands unannounced: `lakeloader backfill` finds it


def backfilled_change() -> dict[str, Any]:
    """A new customer, in the last CDC file's columns (the `tier` column included)."""
    return {
        "Op": "I",
        "customer_id": 100,
        "name": "Barbara",
        "email": "barbara@example.com",
        "country": "GB",
        "last_update_time": datetime(2026, 11, 2, 9, 0),
        "tier": "silver",
    }


def backfilled_file() -> bytes:
    schema = pq.read_schema(EXAMPLES / SOURCE / CDC[-1])
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pylist([backfilled_change()], schema=schema), buffer)
    return buffer.getvalue()


def expected_rows() -> dict[int, dict[str, Any]]:
    """The sample files applied by hand: the latest change per key wins, a delete removes the key."""
    rows: dict[int, dict[str, Any]] = {}
    for row in pq.read_table(EXAMPLES / SOURCE / LOAD).to_pylist():
        rows[row["customer_id"]] = row
    changes = [c for name in CDC for c in pq.read_table(EXAMPLES / SOURCE / name).to_pylist()]
    changes.append(backfilled_change())
    for change in sorted(changes, key=lambda c: c["last_update_time"]):
        op = change.pop("Op")
        if op == "D":
            rows.pop(change["customer_id"], None)
        else:
            rows[change["customer_id"]] = {**rows.get(change["customer_id"], {}), **change}
    return rows


@pytest.fixture(scope="module")
def table_bucket(e2e) -> str:
    return table_bucket_arn()


def wait_for(e2e, keys: list[str]) -> dict[str, str]:
    wanted = {TABLE_ID: [PREFIX + key for key in keys]}
    return wait_for_objects(e2e.stack, wanted, timeout=1200, progress=print, fail_fast=True)[TABLE_ID]


@pytest.fixture(scope="module")
def loaded(e2e) -> dict[str, Any]:
    """The full load and the CDC files through the arrival Lambda, then one file through backfill."""
    states = []
    for keys in ([LOAD], CDC):
        upload(e2e.stack, [(EXAMPLES / SOURCE / key, PREFIX + key) for key in keys])
        states.append(wait_for(e2e, keys))
    upload_unannounced(e2e.stack, [(backfilled_file(), PREFIX + BACKFILLED)])
    unrecorded = {o.key for o in e2e.stack.ledger().objects(TABLE_ID)}.isdisjoint([PREFIX + BACKFILLED])
    backfill = lakeloader("backfill", "--stage", "dev", "--table", TABLE_ID)
    states.append(wait_for(e2e, [BACKFILLED]))
    return {"states": states, "unrecorded_before_backfill": unrecorded, "backfill": backfill}


def test_every_file_is_committed_by_a_glue_run(e2e, loaded):
    for state in loaded["states"]:
        assert set(state.values()) == {"done"}, state


def test_backfill_records_the_unannounced_file_and_its_run_commits_it(loaded):
    assert loaded["unrecorded_before_backfill"]  # the Lambda never saw it
    code, out = loaded["backfill"]
    assert code == 0, out
    assert f"{TABLE_ID}: 1 recorded as pending, 3 already in the ledger" in out, out
    assert f"sweep: runs started for {TABLE_ID}" in out, out


def test_the_table_is_in_the_table_bucket_not_the_glue_catalog(e2e, loaded, table_bucket):
    tables = boto3.client("s3tables").get_table(tableBucketARN=table_bucket, namespace=NAMESPACE, name=NAME)
    assert tables["metadataLocation"].startswith(tables["warehouseLocation"])
    glue = boto3.client("glue")
    for database in (NAMESPACE, e2e.stack.glue_database(NAMESPACE)):
        with pytest.raises(glue.exceptions.EntityNotFoundException):
            glue.get_table(DatabaseName=database, Name=NAME)


def test_an_outside_iceberg_reader_sees_the_merged_rows(e2e, loaded, table_bucket):
    """Every file's changes, the backfilled customer's included."""
    table = outside_reader(e2e, table_bucket, NAME)
    rows = {r["customer_id"]: r for r in table.scan().to_arrow().to_pylist()}
    wanted = expected_rows()
    assert sorted(rows) == sorted(wanted)
    for key, row in wanted.items():
        for column in ("name", "email", "country", "tier"):
            assert rows[key].get(column) == row.get(column), (key, column)
    # the last run's record names the snapshot the reader sees
    [last] = e2e.stack.ledger().list_runs(TABLE_ID, limit=1)
    assert last.status == "succeeded" and str(last.snapshot_id) == str(table.current_snapshot().snapshot_id)


def test_the_glue_runs_commit_through_the_iceberg_rest_endpoint_with_no_catalog_jar(e2e, loaded):
    """The deployed ingest job's settings, which the emulator's Glue runs are built from: the catalog
    `s3tables` is Iceberg's REST catalog on S3 Tables' endpoint ("Accessing tables using the Amazon S3
    Tables Iceberg REST endpoint", S3 User Guide), and no catalog jar is loaded (no --extra-jars)."""
    from lakeloader_dev.emulator.glue_runner import s3_tables_warehouse

    arguments = boto3.client("glue").get_job(JobName=e2e.stack.ingest_job)["Job"]["DefaultArguments"]
    conf = dict(setting.split("=", 1) for setting in arguments["--conf"].split(" --conf "))
    assert conf["spark.sql.catalog.s3tables.type"] == "rest"
    assert conf["spark.sql.catalog.s3tables.uri"] == "https://s3tables.us-east-1.amazonaws.com/iceberg"
    assert conf["spark.sql.catalog.s3tables.rest.signing-name"] == "s3tables"
    assert s3_tables_warehouse(arguments["--conf"]) == table_bucket_arn()
    assert "--extra-jars" not in arguments
    assert not any("s3-tables-catalog" in value or "S3TablesCatalog" in value for value in arguments.values())


def test_tombstones_live_beside_the_table(e2e, loaded, table_bucket):
    names = s3_tables_names(table_bucket)
    assert {NAME, f"{NAME}__tombstones"} <= names, names


def test_s3_tables_maintains_the_table_as_its_config_says(e2e, loaded, table_bucket):
    configuration = boto3.client("s3tables").get_table_maintenance_configuration(
        tableBucketARN=table_bucket, namespace=NAMESPACE, name=NAME
    )["configuration"]
    assert configuration["icebergCompaction"] == {
        "status": "enabled",
        "settings": {"icebergCompaction": {"targetFileSizeMB": 128}},
    }
    assert configuration["icebergSnapshotManagement"] == {
        "status": "enabled",
        "settings": {"icebergSnapshotManagement": {"minSnapshotsToKeep": 3, "maxSnapshotAgeHours": 48}},
    }


def test_status_shows_the_s3_tables_tables_last_commit(e2e, loaded, table_bucket):
    """`lakeloader status` on the S3 Tables table: nothing stuck or open, and its last commit is the
    snapshot S3 Tables names as the table's current one (before maintain and erase below commit)."""
    code, printed = lakeloader("status", "--stage", "dev", "--table", TABLE_ID, "--json")
    (status,) = json.loads(printed)
    assert code == 0 and status["healthy"], status
    assert status["stuck"] == [] and status["last_run"]["status"] == "succeeded", status
    current = outside_reader(e2e, table_bucket, NAME).current_snapshot().snapshot_id
    assert str(status["last_commit"]["snapshot_id"]) == str(current), status


# --- maintain and erase on the S3 Tables table (Spark in a subprocess: the JVM reads the endpoint) ---

SCENARIO = """
import json, sys
from lakeloader.config import load_config
from lakeloader.jobs.erase import erase
from lakeloader.jobs.maintenance import maintain_table
from lakeloader.spark.session import SparkSettings, build_session
from lakeloader_dev.jars import spark_conf

warehouse, config, table_id, key = sys.argv[1:5]
settings = SparkSettings(warehouse=warehouse, app_name="e2e-s3-tables", extra_conf=spark_conf())
spark = build_session(settings)
table = load_config(config).table(table_id)
maintained = maintain_table(spark, table, catalog=settings.catalog)
result = erase(spark, table, catalog=settings.catalog, keys=[key], who="e2e")
audit = spark.sql(
    f"SELECT files_gone_by, erased_at, rows_erased FROM {settings.catalog}.lakeloader_audit.erasures "
    f"WHERE table_id = '{table_id}'"
).collect()
print("RESULT " + json.dumps({
    "steps": [(s.step, s.status, s.error) for s in maintained.steps],
    "erase": result.__dict__,
    "audit": [row.asDict() for row in audit],
}, default=str), flush=True)
spark.stop()
"""


@pytest.fixture(scope="module")
def maintained_and_erased(e2e, loaded, table_bucket, tmp_path_factory) -> dict[str, Any]:
    subject = str(min(expected_rows()))
    argv = [SCENARIO, e2e.stack.warehouse, "tests/e2e/tables.yaml", TABLE_ID, subject]
    log = tmp_path_factory.mktemp("s3-tables") / "spark.log"
    return {"subject": subject, **run_scenario(e2e.env, table_bucket, argv, log)}


def test_maintain_leaves_compaction_expiry_and_orphans_to_s3_tables(maintained_and_erased):
    steps = {name: (status, error) for name, status, error in maintained_and_erased["steps"]}
    assert steps["s3_tables_maintenance"] == ("ok", None), steps
    assert not {"rewrite_data_files", "expire_snapshots", "remove_orphan_files"} & set(steps), steps
    assert {"rewrite_manifests", "purge_tombstones"} <= set(steps), steps
    assert all(status == "ok" for status, _ in steps.values()), steps


def test_erase_records_when_the_files_are_physically_gone(e2e, maintained_and_erased, table_bucket):
    """S3 Tables deletes unreferenced files itself: marked noncurrent after the table bucket's
    unreferenced days, deleted after its noncurrent days (tests/e2e/tables.yaml's stage: 3 + 10)."""
    from datetime import datetime, timedelta

    result = maintained_and_erased["erase"]
    assert result["rows_erased"] == 1 and result["verified"] is True, result
    erased_at = datetime.fromisoformat(result["erased_at"])
    assert datetime.fromisoformat(result["files_gone_by"]) == erased_at + timedelta(days=13)
    assert any("physically gone by" in note for note in result["notes"]), result["notes"]
    [audit] = maintained_and_erased["audit"]
    assert audit["files_gone_by"].startswith(result["files_gone_by"][:16].replace("T", " ")), audit
    # and the subject is gone for an outside reader too
    rows = outside_reader(e2e, table_bucket, NAME).scan().to_arrow().to_pylist()
    assert int(maintained_and_erased["subject"]) not in {r["customer_id"] for r in rows}
