"""The deployed loop end to end: S3 -> arrival Lambda -> Glue or EMR Serverless run -> Iceberg tables
in the Glue catalog.

Scenarios share two upload waves to keep Spark JVM starts (one per Glue/EMR run) few:

* wave 1 (together): three tables' full loads, a malformed Parquet file of table
  ``audit.events``, a file under a prefix no table claims, the full load of
  ``shop.reviews`` (``engine: emr``: an EMR Serverless job run), and Debezium envelopes
  (schema/payload wrapped) creating ``inventory.stock``;
* wave 2: the CDC batches (updates, deletes, and a new column ``tier`` for customers;
  an update and a delete for ``shop.reviews``; an update, a delete and a Kafka tombstone
  for ``inventory.stock``);
* then the same S3 event is delivered twice more, straight to the Lambda.

Assertions read the Glue catalog (boto3), the ledger and run history (DynamoDB) and the
Iceberg data (Spark through the Glue catalog, in a subprocess). The waves' files, and the calls the
tests make, are in s3_to_iceberg_world.py.
"""

from __future__ import annotations

import time
from typing import Any

import boto3
import pytest

from infra.packed_venv import uses_python_venv
from lakeloader.control import runtimes
from lakeloader.control.contract import (
    ARG_CORRELATION_ID,
    ARG_TABLE_ID,
    ARG_WAREHOUSE,
    METRICS_NAMESPACE,
    emr_arg,
    glue_arg,
)
from lakeloader_dev.emulator.loop import (
    emr_runs,
    find_object,
    lakeloader,
    latest_runs,
    upload_unannounced,
    wait_for_objects,
)
from tests.e2e.s3_to_iceberg_world import (
    BAD_KEY,
    CUSTOMERS_LOAD,
    UNKNOWN_KEY,
    audit_event,
    ingest_runs,
    invoke_arrival,
    land_wave1,
    land_wave2,
    parquet,
    runs_of,
    s3_event,
    status_of,
)

pytestmark = pytest.mark.e2e
SWEEP_AT_ONCE = 1.0  # seconds of nothing running with files pending before the emulated schedule sweeps


@pytest.fixture(scope="module")
def wave1(e2e) -> dict[str, dict[str, str]]:
    return land_wave1(e2e.stack)


@pytest.fixture(scope="module")
def wave2(e2e, wave1) -> dict[str, dict[str, str]]:
    return land_wave2(e2e.stack)


@pytest.fixture(scope="module")
def tables(e2e, wave2) -> dict[str, list[dict[str, Any]]]:
    from lakeloader_dev.emulator.read_tables import read_tables

    return read_tables(
        e2e.stack.warehouse,
        ["crm.customers", "sales.order_lines", "inventory.products", "shop.reviews", "inventory.stock"],
        env=e2e.env,
        database_prefix=e2e.stack.database_prefix,
    )


# --- wave 1: tables arriving together, the malformed file, the unknown prefix -----------------


def test_tables_arriving_together_each_get_their_own_successful_run(e2e, wave1):
    for table_id, keys in wave1.items():
        if table_id != "audit.events":
            assert set(keys.values()) == {"done"}, (table_id, keys)
    for table_id in ("crm.customers", "sales.order_lines", "inventory.products"):
        runs = runs_of(e2e, table_id)
        assert runs, f"no Glue run was started for {table_id}"
        assert runs[-1]["JobRunState"] == "SUCCEEDED", runs[-1]
        assert runs[-1]["Arguments"][glue_arg(ARG_CORRELATION_ID)], "the trigger passes its correlation id"


def test_full_loads_are_iceberg_tables_in_the_glue_catalog(e2e, wave1):
    glue = boto3.client("glue")
    for database, name in (("crm", "customers"), ("sales", "order_lines"), ("inventory", "products")):
        database = e2e.stack.glue_database(database)  # the stage's database (lakeloader_dev_crm)
        table = glue.get_table(DatabaseName=database, Name=name)["Table"]
        assert table["Parameters"]["table_type"].upper() == "ICEBERG"
        assert table["Parameters"]["metadata_location"].startswith(
            f"{e2e.stack.warehouse}{database}.db/{name}/"
        )


def test_malformed_file_fails_its_table_only_with_a_clear_error_and_stays_in_s3(e2e, wave1):
    assert wave1["audit.events"][BAD_KEY] == "quarantined"  # the e2e stage's max_attempts is 1
    ledger = e2e.stack.ledger()
    obj = find_object(ledger, "audit.events", BAD_KEY)
    assert obj is not None and obj.status == "quarantined" and obj.error, obj
    (run,) = latest_runs(e2e.stack, ["audit.events"])["audit.events"][:1]
    assert run.status == "failed" and run.error, run
    glue_runs = runs_of(e2e, "audit.events")
    assert glue_runs and glue_runs[-1]["JobRunState"] == "FAILED"
    assert "audit.events" in glue_runs[-1].get("ErrorMessage", ""), glue_runs[-1]
    # the raw file is kept for a fix-and-retry; the other tables were not blocked (test above)
    boto3.client("s3").head_object(Bucket=e2e.stack.raw_bucket, Key=BAD_KEY)
    with pytest.raises(glue_not_found()):
        boto3.client("glue").get_table(DatabaseName=e2e.stack.glue_database("audit"), Name="events")


def test_malformed_file_error_names_the_file_and_the_cause(e2e, wave1):
    obj = find_object(e2e.stack.ledger(), "audit.events", BAD_KEY)
    assert obj is not None and "LOAD00000001.parquet" in (obj.error or ""), obj
    assert "not a Parquet file" in (obj.error or ""), obj  # the JVM's root cause, not only the name


def glue_not_found():
    return boto3.client("glue").exceptions.EntityNotFoundException


def test_unknown_prefix_is_counted_and_never_recorded(e2e, wave1):
    head = boto3.client("s3").head_object(Bucket=e2e.stack.raw_bucket, Key=UNKNOWN_KEY)
    before = len(ingest_runs(e2e))
    summary = invoke_arrival(
        e2e, s3_event(e2e.stack.raw_bucket, UNKNOWN_KEY, head["ETag"].strip('"'), head["ContentLength"])
    )
    assert summary["unknown"] == 1 and summary["recorded"] == 0 and summary["started"] == {}, summary
    ledger = e2e.stack.ledger()
    for table_id in ("crm.customers", "sales.order_lines", "inventory.products", "audit.events"):
        assert find_object(ledger, table_id, UNKNOWN_KEY) is None
    assert len(ingest_runs(e2e)) == before


# --- wave 2: CDC with updates and deletes, schema drift -----------------------------------------


def test_cdc_batches_are_merged(e2e, wave2, tables):
    assert all(status == "done" for keys in wave2.values() for status in keys.values()), wave2
    customers = {row["customer_id"]: row for row in tables["crm.customers"]}
    assert sorted(customers) == [1, 2, 4, 5, 6, 7]  # 3 deleted, 6 and 7 inserted
    assert customers[1]["name"] == "Ada Lovelace" and customers[2]["email"] == "grace.hopper@example.com"
    orders = {(row["order_id"], row["line_no"]): row for row in tables["sales.order_lines"]}
    assert sorted(orders) == [(100, 1), (100, 2), (102, 1), (103, 1)]  # (101, 1) deleted
    assert orders[(100, 2)]["quantity"] == 3
    products = {row["product_id"]: row for row in tables["inventory.products"]}
    assert sorted(products) == ["P-1", "P-3", "P-4"]  # P-2 deleted by Debezium
    assert products["P-1"]["price"] == 35.0
    # merged by Glue runs of the stage's runtime, the laptop's (E2E_CONTEXT): Glue 6.0 with its packed
    # venv from .venv-glue-6.0, Glue 5.1 with its zip of wheels from .venv
    runtime = runtimes.local()
    dependencies = "--python-virtual-env" if uses_python_venv(runtime) else "--additional-python-modules"
    runs = [run for table_id in ("crm.customers", "sales.order_lines") for run in runs_of(e2e, table_id)]
    assert {run["GlueVersion"] for run in runs} == {runtime.glue_version}, runs
    assert all(dependencies in run["Arguments"] for run in runs), runs


def test_debezium_envelopes_through_s3_lambda_and_glue(e2e, wave2, tables):
    """No SMT: before/after/source/op under the JSON converter's payload; the decimal decoded from
    the wrapper's schema, the delete's key from its before-image, the Kafka tombstone skipped."""
    assert set(wave2["inventory.stock"].values()) == {"done"}, wave2
    stock = {row["id"]: row for row in tables["inventory.stock"]}
    assert sorted(stock) == [1] and stock[1]["balance"] == "11.99", stock  # a decimal (JSON: str)
    table = boto3.client("glue").get_table(DatabaseName=e2e.stack.glue_database("inventory"), Name="stock")
    types = {c["Name"]: c["Type"] for c in table["Table"]["StorageDescriptor"]["Columns"]}
    assert types["balance"] == "decimal(10,2)" and types["created_at"] == "timestamp", types


def test_schema_drift_arriving_through_s3_reaches_catalog_and_data(e2e, wave2, tables):
    table = boto3.client("glue").get_table(DatabaseName=e2e.stack.glue_database("crm"), Name="customers")[
        "Table"
    ]
    columns = [c["Name"] for c in table["StorageDescriptor"]["Columns"]]
    assert "tier" in columns, columns
    tiers = {row["customer_id"]: row["tier"] for row in tables["crm.customers"]}
    assert tiers[6] == "gold" and tiers[7] == "silver" and tiers[1] is None


def test_an_outside_reader_reads_the_tables_spark_wrote_through_the_glue_catalog(e2e, wave2, tables):
    """PyIceberg (no Spark, no lakeloader code) finds the tables in the Glue catalog and reads the rows
    Spark reads: the merged upserts, the deletes (merge-on-read delete files) and the drifted column."""
    from pyiceberg.catalog.glue import GlueCatalog

    env = e2e.env
    catalog = GlueCatalog(
        "outside",
        **{
            "glue.endpoint": e2e.endpoint,
            "glue.region": env["AWS_REGION"],
            "glue.access-key-id": env["AWS_ACCESS_KEY_ID"],
            "glue.secret-access-key": env["AWS_SECRET_ACCESS_KEY"],
            "glue.session-token": env.get("AWS_SESSION_TOKEN", ""),
            "s3.endpoint": e2e.endpoint,
            "s3.region": env["AWS_REGION"],
            "s3.access-key-id": env["AWS_ACCESS_KEY_ID"],
            "s3.secret-access-key": env["AWS_SECRET_ACCESS_KEY"],
            "s3.session-token": env.get("AWS_SESSION_TOKEN", ""),
        },
    )
    for table_id, key in (("crm.customers", "customer_id"), ("sales.order_lines", "order_id")):
        database, name = table_id.split(".")
        rows = catalog.load_table((e2e.stack.glue_database(database), name)).scan().to_arrow().to_pylist()
        seen_by_spark = tables[table_id]
        assert sorted(r[key] for r in rows) == sorted(r[key] for r in seen_by_spark), table_id
        assert set(rows[0]) == set(seen_by_spark[0]), table_id
    customers = {
        r["customer_id"]: r
        for r in catalog.load_table((e2e.stack.glue_database("crm"), "customers"))
        .scan()
        .to_arrow()
        .to_pylist()
    }
    assert customers[1]["name"] == "Ada Lovelace" and customers[6]["tier"] == "gold"


def test_run_history_records_counts_and_commits(e2e, wave2):
    runs = latest_runs(e2e.stack, ["crm.customers"])["crm.customers"]
    succeeded = [r for r in runs if r.status == "succeeded"]
    assert len(succeeded) >= 2
    assert sum(int(r.counts.get("deleted", 0)) for r in succeeded) >= 1
    assert all(r.snapshot_id for r in succeeded)
    assert all(r.correlation_id for r in succeeded)


def test_runs_publish_the_metrics_the_dashboard_reads(e2e, wave2):
    metrics = boto3.client("cloudwatch").list_metrics(Namespace=METRICS_NAMESPACE)["Metrics"]
    names = {(m["MetricName"], d["Value"]) for m in metrics for d in m["Dimensions"]}
    assert {("RunsSucceeded", "crm.customers"), ("RowsMerged", "crm.customers")} <= names, names
    assert ("RunsFailed", "audit.events") in names, names


# --- an engine: emr table ------------------------------------------------------------------------


def test_emr_table_runs_on_emr_serverless_end_to_end(e2e, wave2, tables):
    """The arrival Lambda starts EMR Serverless runs (not Glue) for ``shop.reviews``; each ran the
    deployed entry point with the shipped zip and ended SUCCESS; the table holds the merged rows."""
    assert set(wave2["shop.reviews"].values()) == {"done"}, wave2
    assert not runs_of(e2e, "shop.reviews"), "an engine: emr table must not start Glue runs"
    runs = [r for r in emr_runs(e2e.stack) if r["name"] == "lakeloader-shop.reviews"]
    assert len(runs) == 2 and {r["state"] for r in runs} == {"SUCCESS"}, runs
    emr = boto3.client("emr-serverless")
    run = emr.get_job_run(applicationId=e2e.stack.emr_application, jobRunId=runs[0]["id"])["jobRun"]
    arguments = run["jobDriver"]["sparkSubmit"]["entryPointArguments"]
    assert arguments[:2] == [emr_arg(ARG_TABLE_ID), "shop.reviews"] and emr_arg(ARG_WAREHOUSE) in arguments
    reviews = {row["review_id"]: row for row in tables["shop.reviews"]}
    assert sorted(reviews) == [1, 2]  # 3 deleted by the CDC batch
    assert reviews[2]["rating"] == 4 and reviews[1]["product_id"] == "P-1"
    history = latest_runs(e2e.stack, ["shop.reviews"])["shop.reviews"]
    assert [r.status for r in history] == ["succeeded", "succeeded"], history


# --- duplicate delivery ------------------------------------------------------------------------


def test_same_s3_event_delivered_twice_is_harmless(e2e, wave2):
    head = boto3.client("s3").head_object(Bucket=e2e.stack.raw_bucket, Key=CUSTOMERS_LOAD)
    event = s3_event(e2e.stack.raw_bucket, CUSTOMERS_LOAD, head["ETag"].strip('"'), head["ContentLength"])
    before = len(ingest_runs(e2e))
    first, second = invoke_arrival(e2e, event), invoke_arrival(e2e, event)
    for summary in (first, second):
        assert summary["duplicates"] == 1 and summary["recorded"] == 0 and summary["started"] == {}, summary
    ledger = e2e.stack.ledger()
    items = [obj for obj in ledger.objects("crm.customers") if obj.key == CUSTOMERS_LOAD]
    assert len(items) == 1 and items[0].status == "done"
    time.sleep(1)
    assert len(ingest_runs(e2e)) == before, "a duplicate event must not start a run"


# --- operating the stage: see it, unblock it, backfill it ------------------------------------------


def test_doctor_names_each_missing_lake_formation_precondition_with_its_fix(e2e, wave1):
    """Against the emulator's Lake Formation: off while the warehouse is unregistered; once registered,
    a missing full-table-access setting and an IAMAllowedPrincipals grant each fail with their fix."""
    code, out = lakeloader("doctor", "--stage", "dev")
    assert code == 0 and "Lake Formation mode: off" in out, out
    lf = boto3.client("lakeformation")
    warehouse = "arn:aws:s3:::" + e2e.stack.warehouse.removeprefix("s3://").rstrip("/")
    crm = e2e.stack.glue_database("crm")
    iam_allowed = {"DataLakePrincipalIdentifier": "IAM_ALLOWED_PRINCIPALS"}
    lf.register_resource(ResourceArn=warehouse, RoleArn="arn:aws:iam::123456789012:role/lf-data-access")
    try:
        lf.put_data_lake_settings(DataLakeSettings={"AllowFullTableExternalDataAccess": False})
        lf.grant_permissions(Principal=iam_allowed, Resource={"Database": {"Name": crm}}, Permissions=["ALL"])
        code, out = lakeloader("doctor", "--stage", "dev")
        assert code == 1, out
        assert "FAIL full table access for external engines" in out, out
        assert f"FAIL database {crm}: IAMAllowedPrincipals holds ALL" in out, out
        assert "revoke-permissions --principal DataLakePrincipalIdentifier=IAM_ALLOWED_PRINCIPALS" in out
        lf.put_data_lake_settings(DataLakeSettings={"AllowFullTableExternalDataAccess": True})
        database = {"Database": {"Name": crm}}
        lf.revoke_permissions(Principal=iam_allowed, Resource=database, Permissions=["ALL"])
        code, out = lakeloader("doctor", "--stage", "dev")
        assert code == 0 and "FAIL" not in out and f"ok   database {crm}" in out, out
    finally:
        lf.deregister_resource(ResourceArn=warehouse)


def test_an_operator_skips_the_stuck_file_and_backfills_files_older_than_the_trigger(e2e, wave2):
    # status shows the malformed file of wave 1 and why it is stuck
    stuck = status_of("audit.events")
    assert not stuck["healthy"] and stuck["last_run"]["status"] == "failed"
    assert [(s["key"], s["status"]) for s in stuck["stuck"]] == [(BAD_KEY, "quarantined")]
    assert "not a Parquet file" in stuck["stuck"][0]["error"]

    code, out = lakeloader(
        "skip",
        "--stage",
        "dev",
        "--table",
        "audit.events",
        "--status",
        "quarantined",
        "--reason",
        "not Parquet",
    )
    assert code == 0 and "audit.events: 1 skipped" in out, out
    skipped = find_object(e2e.stack.ledger(), "audit.events", BAD_KEY)
    assert skipped.status == "skipped" and skipped.note.endswith(": not Parquet"), skipped

    # 25 files land while the bucket sends no notification: as if they were there before the stack
    keys = [f"crm/audit/events/backfill/part-{n:03d}.parquet" for n in range(25)]
    upload_unannounced(e2e.stack, [(parquet([audit_event(n)]), key) for n, key in enumerate(keys)])
    assert all(find_object(e2e.stack.ledger(), "audit.events", key) is None for key in keys)

    code, out = lakeloader("backfill", "--stage", "dev", "--table", "audit.events")
    assert code == 0 and "audit.events: 25 recorded as pending, 1 already in the ledger" in out, out
    assert "sweep: runs started for audit.events" in out, out
    code, again = lakeloader("backfill", "--stage", "dev", "--table", "audit.events", "--no-sweep")
    assert code == 0 and "audit.events: 0 recorded as pending, 26 already in the ledger" in again, again

    # max_files_per_run 10: three runs (the sweep starts the next while files wait), each file once.
    # The schedule's sweep is fired as soon as nothing runs: its rate only spaces the runs out.
    waited = wait_for_objects(e2e.stack, {"audit.events": keys}, sweep_after=SWEEP_AT_ONCE)
    assert set(waited["audit.events"].values()) == {"done"}
    assert {o.attempts for o in e2e.stack.ledger().objects("audit.events") if o.key in keys} == {1}
    runs = [r for r in latest_runs(e2e.stack, ["audit.events"])["audit.events"] if r.status == "succeeded"]
    assert sorted(r.counts["files"] for r in runs) == [5, 10, 10], runs
    assert status_of("audit.events")["healthy"]

    # requeue gives the skipped file back to the runs
    code, out = lakeloader(
        "requeue",
        "--stage",
        "dev",
        "--table",
        "audit.events",
        "--status",
        "skipped",
        "--reason",
        "x",
        "--no-sweep",
    )
    assert code == 0 and "audit.events: 1 requeued" in out, out
    assert status_of("audit.events")["counts"] == {"done": 25, "pending": 1}

    # a rebuild, through the trigger's rebuild event and the job: every object but the skipped one
    # loaded again by one run, recorded done by it
    code, out = lakeloader(
        "skip", "--stage", "dev", "--table", "audit.events", "--key", BAD_KEY, "--reason", "y"
    )
    assert code == 0 and "audit.events: 1 skipped" in out, out
    ledger = e2e.stack.ledger()
    before = {r.run_id for r in ledger.list_runs("audit.events", limit=50)}
    code, out = lakeloader("rebuild", "--stage", "dev", "--table", "audit.events")
    assert code == 0 and "audit.events: rebuild started as run" in out, out
    wait_for_objects(e2e.stack, {"audit.events": keys})  # returns once no ingest run is active
    [rebuild] = [r for r in ledger.list_runs("audit.events", limit=50) if r.run_id not in before]
    assert rebuild.status == "succeeded" and rebuild.counts["files"] == 25, rebuild
    objects = {o.key: (o.status, o.run_id) for o in ledger.objects("audit.events")}
    assert objects.pop(BAD_KEY)[0] == "skipped"
    assert set(objects.values()) == {("done", rebuild.run_id)}, objects
