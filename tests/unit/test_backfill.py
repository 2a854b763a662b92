"""`lakeloader backfill --stage` through the CLI's main, on a stage on moto's S3 and DynamoDB (HTTP).

Real: the listing of the versioned raw bucket, the routing of keys to tables, the ledger's conditional
puts, the duplicate check against what the trigger recorded, and (last test) the drain that takes the
backfilled files in runs bounded by the table's trigger settings, with only the Spark merge stood in
for (as tests/unit/test_drain.py does). Runs with --no-sweep: the sweep is the trigger's.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

import boto3
import pytest

from lakeloader.control.contract import GLUE_CATALOG
from lakeloader.control.ledger import DONE, PENDING, SKIPPED
from lakeloader.jobs.drain import drain_table
from lakeloader.jobs.load import LoadResult
from tests.unit import stage_world
from tests.unit.drain_world import stand_in
from tests.unit.stage_world import Stage

moto_server, aws_endpoint, stage = stage_world.moto_server, stage_world.aws_endpoint, stage_world.stage


def upload(stage: Stage, *keys: str, body: bytes = b"0123456789") -> dict[str, dict]:
    """Put each key in the raw bucket; its listing entry (version id, ETag, size) by key."""
    s3 = boto3.client("s3")
    for key in keys:
        s3.put_object(Bucket=stage.deployed.raw_bucket, Key=key, Body=body)
    listed = s3.list_object_versions(Bucket=stage.deployed.raw_bucket)["Versions"]
    return {v["Key"]: v for v in listed if v["IsLatest"] and v["Key"] in keys}


def ledger_view(stage: Stage, table_id: str) -> dict[str, tuple[str, str | None]]:
    return {o.key: (o.status, o.version_id) for o in stage.ledger.objects(table_id)}


def test_every_file_under_the_enabled_tables_is_recorded_pending_once_by_its_table(stage, capsys):
    listed = upload(
        stage,
        "crm/customers/LOAD001.parquet",
        "crm/customers/2026/LOAD002.parquet",
        "crm/customers/vip/LOAD001.parquet",  # the longer prefix: crm.vip's
        "crm/customers/_SUCCESS",
        "crm/customers/.part-0.crc",
        "sales/orders/LOAD001.csv",
        "old/LOAD001.parquet",  # a disabled table's
        "elsewhere/LOAD001.parquet",  # no table's
    )
    upload(stage, "crm/customers/2026/", body=b"")  # a console folder marker

    code, out = stage.cli(capsys, "backfill", "--no-sweep")

    assert code == 0, out
    assert ledger_view(stage, "crm.customers") == {
        key: (PENDING, listed[key]["VersionId"])
        for key in ("crm/customers/LOAD001.parquet", "crm/customers/2026/LOAD002.parquet")
    }
    assert ledger_view(stage, "crm.vip") == {
        "crm/customers/vip/LOAD001.parquet": (
            PENDING,
            listed["crm/customers/vip/LOAD001.parquet"]["VersionId"],
        )
    }
    assert list(ledger_view(stage, "sales.orders")) == ["sales/orders/LOAD001.csv"]
    assert ledger_view(stage, "old.archive") == {}
    (obj,) = stage.ledger.objects("sales.orders")
    assert (obj.etag, obj.size, obj.bucket) == (
        listed[obj.key]["ETag"].strip('"'),
        10,
        stage.deployed.raw_bucket,
    )
    assert obj.event_time.startswith(listed[obj.key]["LastModified"].strftime("%Y-%m-%dT%H:%M:%S"))
    assert "crm.customers: 2 recorded as pending, 0 already in the ledger" in out
    assert "crm.vip: 1 recorded as pending, 0 already in the ledger" in out
    assert "sales.orders: 1 recorded as pending, 0 already in the ledger" in out
    assert "3 passed over" in out, out

    code, again = stage.cli(capsys, "backfill", "--no-sweep")
    assert code == 0 and "crm.customers: 0 recorded as pending, 2 already in the ledger" in again, again
    assert len(stage.ledger.objects("crm.customers")) == 2


def test_a_named_table_takes_only_its_own_keys_and_a_disabled_one_may_be_named(stage, capsys):
    upload(stage, "crm/customers/a.parquet", "crm/customers/vip/b.parquet", "old/c.parquet")
    code, out = stage.cli(
        capsys, "backfill", "--table", "crm.customers", "--table", "old.archive", "--no-sweep"
    )
    assert code == 0, out
    assert list(ledger_view(stage, "crm.customers")) == ["crm/customers/a.parquet"]
    assert ledger_view(stage, "crm.vip") == {}  # crm.vip's key: not recorded under crm.customers either
    assert list(ledger_view(stage, "old.archive")) == ["old/c.parquet"]


def test_files_the_trigger_recorded_by_version_or_by_etag_are_left_as_they_are(stage, capsys):
    keys = [f"crm/customers/LOAD00{n}.parquet" for n in range(1, 6)]
    listed = upload(stage, *keys)
    by_version, by_etag, done, skipped, new = (listed[k] for k in keys)
    stage.record(
        "crm.customers", by_version["Key"], etag=by_version["ETag"], version_id=by_version["VersionId"]
    )
    stage.record("crm.customers", by_etag["Key"], etag=by_etag["ETag"])  # an event without the version
    for entry in (done, skipped):
        stage.record("crm.customers", entry["Key"], etag=entry["ETag"], version_id=entry["VersionId"])
    ledger = stage.ledger
    (loaded,) = [o for o in ledger.objects("crm.customers") if o.key == done["Key"]]
    ledger.finish("crm.customers", ledger.claim("crm.customers", [loaded], "run-1"), "run-1", DONE)
    ledger.skip(
        "crm.customers", [o for o in ledger.objects("crm.customers") if o.key == skipped["Key"]], note="x"
    )

    code, out = stage.cli(capsys, "backfill", "--table", "crm.customers", "--no-sweep")

    assert code == 0 and "crm.customers: 1 recorded as pending, 4 already in the ledger" in out, out
    assert ledger_view(stage, "crm.customers") == {
        by_version["Key"]: (PENDING, by_version["VersionId"]),
        by_etag["Key"]: (PENDING, None),
        done["Key"]: (DONE, done["VersionId"]),
        skipped["Key"]: (SKIPPED, skipped["VersionId"]),
        new["Key"]: (PENDING, new["VersionId"]),
    }


def test_in_an_unversioned_bucket_files_are_known_by_their_etag(stage, capsys):
    boto3.client("s3").put_bucket_versioning(
        Bucket=stage.deployed.raw_bucket, VersioningConfiguration={"Status": "Suspended"}
    )  # new objects get the version id "null", as in a bucket never versioned
    listed: dict[str, dict] = {}
    for n in range(1, 4):
        listed |= upload(stage, f"crm/customers/LOAD00{n}.parquet", body=b"rows of file %d" % n)
    assert {v["VersionId"] for v in listed.values()} == {"null"}
    seen = listed["crm/customers/LOAD001.parquet"]
    stage.record("crm.customers", seen["Key"], etag=seen["ETag"])

    code, out = stage.cli(capsys, "backfill", "--table", "crm.customers", "--no-sweep")

    assert code == 0 and "crm.customers: 2 recorded as pending, 1 already in the ledger" in out, out
    assert {(o.version_id, o.etag) for o in stage.ledger.objects("crm.customers")} == {
        (None, v["ETag"].strip('"')) for v in listed.values()
    }
    code, out = stage.cli(capsys, "backfill", "--table", "crm.customers", "--no-sweep")
    assert code == 0 and "crm.customers: 0 recorded as pending, 3 already in the ledger" in out, out


def test_a_file_replaced_in_place_is_a_new_object_and_only_its_latest_version_is_recorded(stage, capsys):
    (first,) = upload(stage, "crm/customers/LOAD001.parquet").values()
    stage.record("crm.customers", first["Key"], etag=first["ETag"], version_id=first["VersionId"])
    (second,) = upload(stage, "crm/customers/LOAD001.parquet", body=b"new content").values()

    code, out = stage.cli(capsys, "backfill", "--table", "crm.customers", "--no-sweep")

    assert code == 0 and "crm.customers: 1 recorded as pending, 0 already in the ledger" in out, out
    recorded = {(o.version_id, o.status) for o in stage.ledger.objects("crm.customers")}
    assert recorded == {(first["VersionId"], PENDING), (second["VersionId"], PENDING)}


def test_since_passes_over_files_last_modified_before_it(stage, capsys):
    upload(stage, "crm/customers/old.parquet")
    time.sleep(1.2)
    since = datetime.now(UTC).replace(microsecond=0, tzinfo=None)  # after the old file, by a second
    upload(stage, "crm/customers/new.parquet")

    code, out = stage.cli(
        capsys, "backfill", "--table", "crm.customers", "--since", since.isoformat(), "--no-sweep"
    )

    assert code == 0 and "1 passed over" in out, out
    assert list(ledger_view(stage, "crm.customers")) == ["crm/customers/new.parquet"]
    code, out = stage.cli(
        capsys, "backfill", "--table", "crm.customers", "--since", "2000-01-01", "--no-sweep"
    )
    assert code == 0 and "crm.customers: 1 recorded as pending, 1 already in the ledger" in out, out


@pytest.mark.parametrize(
    ("bound", "runs"), [({"max_files_per_run": 10}, [10, 10, 5]), ({"max_bytes_per_run": 120}, [12, 12, 1])]
)
def test_backfilled_files_are_drained_in_runs_bounded_by_the_trigger(stage, capsys, monkeypatch, bound, runs):
    """The sizes the listing gave are what max_bytes_per_run adds up (10 bytes a file)."""
    keys = [f"crm/customers/backfill/part-{n:03d}.parquet" for n in range(25)]
    upload(stage, *keys)
    assert stage.cli(capsys, "backfill", "--table", "crm.customers", "--no-sweep")[0] == 0
    (table,) = [t for t in stage.deployed.tables() if t.id == "crm.customers"]
    table = table.model_copy(update={"trigger": table.trigger.model_copy(update=bound)})

    def load_table(spark, table, files, *, catalog, run_id, progress, log_consumed=False, before_publish):
        return LoadResult(table.id, status="ok", files=len(files))

    stand_in(monkeypatch, load_table)
    taken = []
    while stage.ledger.objects("crm.customers", statuses=(PENDING,)):
        result = drain_table(
            "spark", table, stage.ledger, catalog=GLUE_CATALOG, raw_root="s3://raw/", cid="c"
        )
        taken.append(result.files)
    assert taken == runs
    assert {(o.status, o.attempts) for o in stage.ledger.objects("crm.customers")} == {(DONE, 1)}
