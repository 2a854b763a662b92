"""An S3 Tables table on the deployed loop (issue 42): S3 -> arrival Lambda -> Glue run -> a commit in the
stage's table bucket through the S3 Tables catalog for Iceberg, read back by an outside Iceberg reader.

`s3t.customers` of tests/e2e/tables.yaml (target.storage: s3_tables) gets the sample customers' full
load, then its two CDC files (updates, deletes, a new column). The reader is pyiceberg, opening the
metadata file S3 Tables names for the table (GetTableMetadataLocation): no Spark, no lakeloader code.
`lakeloader status` reports the table's last commit; `maintain` and `erase` run on it. SCD2, the quality
gate's audit branch and `rebuild` run (one Spark subprocess, tables of their own in the same namespace)
through the engine's own calls with the session's S3 Tables catalog.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import boto3
import pyarrow.parquet as pq
import pytest

from lakeloader_dev.emulator.loop import upload, wait_for_objects

pytestmark = pytest.mark.e2e

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "raw"
TABLE_ID, NAMESPACE, NAME = "s3t.customers", "s3t_crm", "customers"
PREFIX = "s3tables/public/customers/"
LOAD = "LOAD00000001.parquet"
CDC = ["2026/11/01/20261101-100000000.parquet", "2026/11/01/20261101-110000000.parquet"]
SOURCE = "crm/public/customers/"  # the same sample files, landed under the S3 Tables table's prefix


def expected_rows() -> dict[int, dict[str, Any]]:
    """The sample files applied by hand: the latest change per key wins, a delete removes the key."""
    rows: dict[int, dict[str, Any]] = {}
    for row in pq.read_table(EXAMPLES / SOURCE / LOAD).to_pylist():
        rows[row["customer_id"]] = row
    changes = [c for name in CDC for c in pq.read_table(EXAMPLES / SOURCE / name).to_pylist()]
    for change in sorted(changes, key=lambda c: c["last_update_time"]):
        op = change.pop("Op")
        if op == "D":
            rows.pop(change["customer_id"], None)
        else:
            rows[change["customer_id"]] = {**rows.get(change["customer_id"], {}), **change}
    return rows


@pytest.fixture(scope="module")
def table_bucket(e2e) -> str:
    buckets = boto3.client("s3tables").list_table_buckets()["tableBuckets"]
    [arn] = [b["arn"] for b in buckets if b["name"].endswith("-tables")]
    return arn


@pytest.fixture(scope="module")
def loaded(e2e) -> list[dict[str, str]]:
    states = []
    for keys in ([LOAD], CDC):
        upload(e2e.stack, [(EXAMPLES / SOURCE / key, PREFIX + key) for key in keys])
        states.append(
            wait_for_objects(
                e2e.stack,
                {TABLE_ID: [PREFIX + key for key in keys]},
                timeout=1200,
                progress=print,
                fail_fast=True,
            )[TABLE_ID]
        )
    return states


def outside_reader(e2e, table_bucket: str, name: str = NAME):
    """pyiceberg on the metadata file S3 Tables points at, over the stack's S3."""
    from pyiceberg.table import StaticTable

    location = boto3.client("s3tables").get_table_metadata_location(
        tableBucketARN=table_bucket, namespace=NAMESPACE, name=name
    )["metadataLocation"]
    properties = {
        "s3.endpoint": e2e.endpoint,
        "s3.region": os.environ.get("AWS_REGION", "us-east-1"),
        "s3.access-key-id": os.environ["AWS_ACCESS_KEY_ID"],
        "s3.secret-access-key": os.environ["AWS_SECRET_ACCESS_KEY"],
        "s3.force-virtual-addressing": "false",
    }
    return StaticTable.from_metadata(location, properties=properties)


def test_every_file_is_committed_by_a_glue_run(e2e, loaded):
    for state in loaded:
        assert set(state.values()) == {"done"}, state


def test_the_table_is_in_the_table_bucket_not_the_glue_catalog(e2e, loaded, table_bucket):
    tables = boto3.client("s3tables").get_table(tableBucketARN=table_bucket, namespace=NAMESPACE, name=NAME)
    assert tables["metadataLocation"].startswith(tables["warehouseLocation"])
    glue = boto3.client("glue")
    for database in (NAMESPACE, e2e.stack.glue_database(NAMESPACE)):
        with pytest.raises(glue.exceptions.EntityNotFoundException):
            glue.get_table(DatabaseName=database, Name=NAME)


def test_an_outside_iceberg_reader_sees_the_merged_rows(e2e, loaded, table_bucket):
    table = outside_reader(e2e, table_bucket)
    rows = {r["customer_id"]: r for r in table.scan().to_arrow().to_pylist()}
    wanted = expected_rows()
    assert sorted(rows) == sorted(wanted)
    for key, row in wanted.items():
        for column in ("name", "email", "country", "tier"):
            assert rows[key].get(column) == row.get(column), (key, column)
    # the last run's record names the snapshot the reader sees
    [last] = e2e.stack.ledger().list_runs(TABLE_ID, limit=1)
    assert last.status == "succeeded" and str(last.snapshot_id) == str(table.current_snapshot().snapshot_id)


def test_tombstones_live_beside_the_table(e2e, loaded, table_bucket):
    names = {
        t["name"]
        for t in boto3.client("s3tables").list_tables(tableBucketARN=table_bucket, namespace=NAMESPACE)[
            "tables"
        ]
    }
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
    import contextlib
    import io
    import json

    from lakeloader.cli import main

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(["status", "--stage", "dev", "--table", TABLE_ID, "--json"])
    (status,) = json.loads(printed.getvalue())
    assert code == 0 and status["healthy"], status
    assert status["stuck"] == [] and status["last_run"]["status"] == "succeeded", status
    current = outside_reader(e2e, table_bucket).current_snapshot().snapshot_id
    assert str(status["last_commit"]["snapshot_id"]) == str(current), status


# --- maintain and erase on the S3 Tables table (Spark in a subprocess: the JVM reads the endpoint) ---

SCENARIO = """
import json, sys
from lakeloader.config import load_config
from lakeloader.jobs.erase import erase
from lakeloader.jobs.maintenance import maintain_table
from lakeloader.spark import SparkSettings, build_session
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
    import json
    import subprocess
    import sys

    from lakeloader.spark import S3_TABLES_ENV
    from lakeloader_dev.jvm import short_jvm_env

    subject = str(min(expected_rows()))
    log = tmp_path_factory.mktemp("s3-tables") / "spark.log"
    with open(log, "w") as stderr:
        done = subprocess.run(
            [sys.executable, "-c", SCENARIO, e2e.stack.warehouse, "tests/e2e/tables.yaml", TABLE_ID, subject],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            timeout=1200,
            env={**e2e.env, **short_jvm_env(e2e.env), S3_TABLES_ENV: table_bucket},
            cwd=Path(__file__).resolve().parents[2],
        )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, log.read_text()[-4000:]
    return {"subject": subject, **json.loads(lines[-1].removeprefix("RESULT "))}


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
    rows = outside_reader(e2e, table_bucket).scan().to_arrow().to_pylist()
    assert int(maintained_and_erased["subject"]) not in {r["customer_id"] for r in rows}


# --- SCD2, the quality gate's audit branch and rebuild on S3 Tables tables (one Spark subprocess) ---
# Tables of their own in the stack's namespace, built in the scenario from local raw files: the
# engine's calls (apply_batch, rebuild_table) with the session's S3 Tables catalog, as a Glue run or
# `lakeloader rebuild` makes them. NAMESPACE exists (CloudFormation); the tables are created by the catalog.

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
from lakeloader.inputs import list_inputs
from lakeloader.jobs.rebuild import rebuild_table
from lakeloader.s3_tables import target_name
from lakeloader.spark import SparkSettings, build_session
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
out = {"names": [target_name(spark, catalog, scd2), target_name(spark, catalog, gated)]}

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


def run_scenario(e2e_env: dict[str, str], table_bucket: str, argv: list[str], log: Path) -> dict[str, Any]:
    """A scenario in a Spark subprocess against the emulator (its JVM reads the endpoint); its RESULT."""
    import json
    import subprocess
    import sys

    from lakeloader.spark import S3_TABLES_ENV
    from lakeloader_dev.jvm import short_jvm_env

    with open(log, "w") as stderr:
        done = subprocess.run(
            [sys.executable, "-c", *argv],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            timeout=1200,
            env={**e2e_env, **short_jvm_env(e2e_env), S3_TABLES_ENV: table_bucket},
            cwd=Path(__file__).resolve().parents[2],
        )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, log.read_text()[-6000:]
    return json.loads(lines[-1].removeprefix("RESULT "))


@pytest.fixture(scope="module")
def engine_on_s3_tables(e2e, table_bucket, tmp_path_factory) -> dict[str, Any]:
    workdir = tmp_path_factory.mktemp("s3-tables-engine")
    argv = [ENGINE_SCENARIO, e2e.stack.warehouse, str(workdir), ENGINE_CONFIG]
    return run_scenario(e2e.env, table_bucket, argv, workdir / "spark.log")


def s3_tables_names(table_bucket: str) -> set[str]:
    tables = boto3.client("s3tables").list_tables(tableBucketARN=table_bucket, namespace=NAMESPACE)
    return {t["name"] for t in tables["tables"]}


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
    commit and drops it (and its tombstones) again: through the catalog's dropTable with purge, the
    only drop S3 Tables allows. An outside reader sees the rebuilt rows."""
    result = engine_on_s3_tables["rebuild"]
    assert result.get("rows") == [[3, "cy2"]], result
    names = s3_tables_names(table_bucket)
    assert "people_gated__rebuild" not in names and "people_gated__rebuild__tombstones" not in names, names
    table = outside_reader(e2e, table_bucket, "people_gated")
    assert str(table.current_snapshot().snapshot_id) == result["snapshot_id"]
    assert [r["id"] for r in table.scan().to_arrow().to_pylist()] == [3]
