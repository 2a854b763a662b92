"""`lakeloader erase` on the deployed stack's versioned curated bucket: erased means physically gone.

On a versioned bucket a deleted file is only hidden: its noncurrent version stays readable by
version id until the lifecycle rule expires it. The scenario writes a table in the stack's
warehouse, updates the subject and runs maintenance (compaction, snapshot expiry) so that
files holding the subject are already noncurrent versions before the erasure starts, then
erases the subject and checks every object version left under the table's location.
Spark runs in a subprocess (the JVM reads AWS_ENDPOINT_URL at launch).
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
from typing import Any
from urllib.parse import urlparse

import boto3
import pyarrow.parquet as pq
import pytest

from lakeloader_dev.jvm import short_jvm_env

pytestmark = pytest.mark.e2e

DATABASE, TABLE = "e2e_erasure", "people"
SUBJECT = ("bob@example.com", "bob.new@example.com")  # the subject's email before and after an update
SCENARIO_SECONDS = 1200  # the whole scenario; about a minute on 2 cores

SCENARIO = """
import json, sys
from datetime import UTC, datetime
from lakeloader.config import LakeConfig
from lakeloader.jobs.erase import erase
from lakeloader.jobs.maintenance import timestamp_literal
from lakeloader.spark.session import SparkSettings, build_session
from lakeloader_dev.jars import spark_conf

warehouse, database, table = sys.argv[1:4]
subject = tuple(sys.argv[4:6])
settings = SparkSettings(warehouse=warehouse, app_name="e2e-erasure", extra_conf=spark_conf())
spark = build_session(settings)
name = f"{settings.catalog}.`{database}`.`{table}`"
spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {settings.catalog}.`{database}`")
spark.sql(
    f"CREATE TABLE {name} (id BIGINT, email STRING) USING iceberg TBLPROPERTIES ("
    "'format-version'='2', 'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read')"
)
spark.sql(f"INSERT INTO {name} VALUES (1, 'ann@example.com'), (2, '{subject[0]}'), (3, 'cy@example.com')")
spark.sql(f"INSERT INTO {name} VALUES (4, 'dee@example.com')")
spark.sql(f"UPDATE {name} SET email = '{subject[1]}' WHERE id = 2")
# maintenance as the nightly job does it: compaction, then snapshot expiry deletes the old files
spark.sql(f"CALL {settings.catalog}.system.rewrite_data_files(table => '{database}.{table}', "
          "options => map('min-input-files', '1', 'delete-file-threshold', '1'))")
now = timestamp_literal(datetime.now(UTC))
spark.sql(f"CALL {settings.catalog}.system.expire_snapshots(table => '{database}.{table}', "
          f"older_than => {now}, retain_last => 1)")
location = spark.sql(f"DESCRIBE TABLE EXTENDED {name}").where("col_name = 'Location'").first().data_type
print("LOCATION " + location, flush=True)
sys.stdin.readline()  # the test inspects the bucket, then lets the erasure start

config = LakeConfig.model_validate({
    "raw_root": "s3://unused/", "warehouse": warehouse,
    "tables": [{"id": "e2e.people", "source": {"prefix": "e2e/people/", "format": "parquet"},
                "target": {"database": database, "table": table}, "keys": ["id"]}],
})
result = erase(spark, config.table("e2e.people"), catalog=settings.catalog, keys=["2"], who="e2e")
audit = spark.sql(f"SELECT * FROM {settings.catalog}.lakeloader_audit.erasures").collect()
print("RESULT " + json.dumps({"result": result.__dict__, "describe": result.describe(),
                              "audit": [row.asDict() for row in audit]}, default=str), flush=True)
spark.stop()
"""


def object_versions(location: str) -> dict[str, list[dict[str, Any]]]:
    parsed = urlparse(location)
    bucket, prefix = parsed.netloc, parsed.path.lstrip("/").rstrip("/") + "/"
    found: dict[str, list[dict[str, Any]]] = {"Versions": [], "DeleteMarkers": []}
    pages = boto3.client("s3").get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=prefix)
    for page in pages:
        for kind in found:
            found[kind] += [{**v, "Bucket": bucket} for v in page.get(kind, [])]
    return found


def emails_in(version: dict[str, Any]) -> set[str]:
    """Every email value in one object version, when it is a Parquet data file."""
    if not version["Key"].endswith(".parquet"):
        return set()
    body = (
        boto3.client("s3")
        .get_object(Bucket=version["Bucket"], Key=version["Key"], VersionId=version["VersionId"])["Body"]
        .read()
    )
    data = pq.read_table(io.BytesIO(body))
    return set(data.column("email").to_pylist()) if "email" in data.column_names else set()


@pytest.fixture(scope="module")
def erasure(e2e, tmp_path_factory) -> dict[str, Any]:
    """Run the scenario; returns what the bucket held before the erasure and what erase reported."""
    log = tmp_path_factory.mktemp("erasure") / "spark.log"
    with open(log, "w") as stderr:  # Spark's log would fill a pipe nobody reads while we wait
        return _run_scenario(e2e, stderr, log)


def _run_scenario(e2e, stderr, log) -> dict[str, Any]:
    process = subprocess.Popen(
        [sys.executable, "-c", SCENARIO, e2e.stack.warehouse, DATABASE, TABLE, *SUBJECT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        env={**e2e.env, **short_jvm_env(e2e.env)},
    )
    # A scenario that hangs (Spark waiting on the emulator, say) fails with its log, instead of
    # blocking the read of its output and with it the rest of the suite.
    timed_out = threading.Event()

    def stop() -> None:
        timed_out.set()
        process.kill()

    watchdog = threading.Timer(SCENARIO_SECONDS, stop)
    watchdog.start()
    try:
        return _drive(process, log, timed_out)
    finally:
        watchdog.cancel()
        if process.poll() is None:
            process.kill()
        process.wait()


def _drive(process: subprocess.Popen, log, timed_out: threading.Event) -> dict[str, Any]:
    def failure(what: str) -> RuntimeError:
        # its output ended, so it is exiting: wait for the code (the watchdog still bounds the wait)
        why = f"killed after {SCENARIO_SECONDS} s" if timed_out.is_set() else f"exit {process.wait()}"
        return RuntimeError(f"{what} ({why}):\n{log.read_text()[-4000:]}")

    assert process.stdin is not None and process.stdout is not None
    location = ""
    for line in process.stdout:
        if line.startswith("LOCATION "):
            location = line.split(" ", 1)[1].strip()
            break
    if not location:
        raise failure("the scenario failed before the erasure")
    before = object_versions(location)
    subject_before = {
        email for v in before["Versions"] if not v["IsLatest"] for email in emails_in(v) if email in SUBJECT
    }
    stdout, _ = process.communicate("\n")
    results = [line for line in stdout.splitlines() if line.startswith("RESULT ")]
    if process.returncode != 0 or not results:
        raise failure("the erasure failed")
    return {
        "location": location,
        "before": before,
        "subject_before": subject_before,
        **json.loads(results[-1].split(" ", 1)[1]),
    }


def test_maintenance_left_the_subject_in_noncurrent_versions_before_the_erasure(e2e, erasure):
    """The premise: the curated bucket is versioned, and files deleted by maintenance (not by the
    erasure) still hold the subject as noncurrent versions."""
    assert erasure["location"].startswith(e2e.stack.warehouse), erasure["location"]
    noncurrent = [v for v in erasure["before"]["Versions"] if not v["IsLatest"]]
    assert noncurrent and erasure["before"]["DeleteMarkers"]
    assert erasure["subject_before"] == set(SUBJECT)


def test_erase_leaves_no_noncurrent_version_and_no_object_version_holds_the_subject(erasure):
    after = object_versions(erasure["location"])
    assert after["DeleteMarkers"] == []
    assert [v["Key"] for v in after["Versions"] if not v["IsLatest"]] == []
    data_files = [v for v in after["Versions"] if v["Key"].endswith(".parquet")]
    assert data_files, "the table keeps its other rows"
    remaining = set().union(*(emails_in(v) for v in data_files))
    assert remaining.isdisjoint(SUBJECT) and "ann@example.com" in remaining, remaining


def test_erase_reports_and_audits_the_purged_versions(erasure):
    result = erasure["result"]
    purged_before = len([v for v in erasure["before"]["Versions"] if not v["IsLatest"]])
    assert result["verified"] is True and result["rows_erased"] == 1
    assert result["object_versions_purged"] >= purged_before + len(erasure["before"]["DeleteMarkers"])
    assert result["versioned_locations"] == [erasure["location"].rstrip("/") + "/"]
    assert f"purged {result['object_versions_purged']:,} noncurrent object version(s)" in erasure["describe"]
    (audit,) = erasure["audit"]
    assert audit["object_versions_purged"] == result["object_versions_purged"] and audit["verified"] is True
