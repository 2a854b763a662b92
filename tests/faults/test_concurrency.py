"""Concurrent writers: two `lakeloader run`s at once, two Glue-style drains after a lost lock lease,
maintenance racing a writer. Each must leave the table one run would leave: checked against the oracle."""

from __future__ import annotations

import random
import time
import uuid
from collections import Counter

import boto3
import pytest

from lakeloader.control.ledger import DEFAULT_LOCK_TTL_SECONDS, Ledger, ObjectRef
from lakeloader.engine import merge_statement
from lakeloader.iceberg import commit
from lakeloader.jobs import drain, load
from lakeloader.spark.inputs import list_inputs
from lakeloader.spark.session import CATALOG
from tests.aws_fixtures import (  # noqa: F401
    ManualClock,
    aws_endpoint,
    create_dynamodb_table,
    moto_server,
    unique_name,
)
from tests.faults import oracle
from tests.faults.test_crash import land, name_of, rows, spec

pytestmark = pytest.mark.spark


def test_two_runs_of_the_same_tables_at_once(lake):
    """A plain merge table, a quality-gated one (audit branches) and an SCD2 table, run twice at once."""
    plain = lake.add(spec())
    gated = lake.add(spec(quality={"rules": [{"not_null": ["name"]}, {"unique": True}]}))
    history = lake.add(spec(mode="scd2"))
    work = oracle.workload(41, events=80)
    steady = oracle.workload(42, events=80, ties=False)
    for table, files in ((plain, work.files), (gated, work.files), (history, steady.files)):
        land(lake, table, files)

    first, second = lake.start("run"), lake.start("run")
    outcomes = [lake.finish(first), lake.finish(second)]

    for code, out, err in outcomes:
        assert code == 0, f"{out}\n{causes(err)}"
    faults = Counter({"second writer at once": 1})
    for table in (plain, gated):
        expected = oracle.expected_merge(work.files)
        diff = oracle.compare(rows(lake, table), expected, faults=work.faults + faults, changes=work.changes)
        assert diff.clean, f"{table.id}: {diff}"
        refs = [r.name for r in lake.spark.sql(f"SELECT name FROM {name_of(table)}.refs").collect()]
        cleanup = [line for _, _, err in outcomes for line in err.splitlines() if "audit branch" in line]
        assert refs == ["main"], f"{table.id}: audit branches left behind: {refs}\n" + "\n".join(cleanup)
    versions = rows(lake, history, "id, name, city, valid_from, valid_to, is_current")
    assert not oracle.chain_problems(versions)
    diff = oracle.compare(
        versions,
        oracle.expected_scd2([steady.files]),
        faults=steady.faults + faults,
        changes=steady.changes,
    )
    assert diff.clean, f"{history.id}: {diff}"
    # What happened: every file is recorded as consumed by a commit of one of the two runs.
    for table in (plain, gated, history):
        lake.refresh(name_of(table))
        consumed = commit.consumed_file_ids(lake.spark, name_of(table))
        offered = {commit.file_id(f) for f in list_inputs(str(lake.raw), table.source.prefix)}
        assert offered <= consumed, table.id


@pytest.fixture
def s3_raw(spark, aws_endpoint):  # noqa: F811 - a pytest fixture
    """A raw bucket on moto that the session's Spark reads as s3:// (Glue's own reader does)."""
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in {
        "fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "fs.s3a.endpoint": aws_endpoint,
        "fs.s3a.path.style.access": "true",
        "fs.s3a.connection.ssl.enabled": "false",
        "fs.s3a.change.detection.mode": "none",
        "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        "fs.s3a.access.key": "testing",
        "fs.s3a.secret.key": "testing",
    }.items():
        conf.set(key, value)
    bucket = unique_name("raw")
    s3 = boto3.client("s3", endpoint_url=aws_endpoint, region_name="us-east-1")
    s3.create_bucket(Bucket=bucket)
    return s3, bucket


def test_two_drains_after_a_lost_lock_lease(spark, make_table, s3_raw, tmp_path, monkeypatch):
    """Drain A stalls in its MERGE past its lease; drain B takes the expired lock and drains everything,
    A's files included; then A's MERGE runs. The table is as one run leaves it; the run history says
    B succeeded and A lost its lock; every object is done once."""
    s3, bucket = s3_raw
    table = make_table(source={"prefix": f"t{uuid.uuid4().hex[:8]}/"})
    client = boto3.client("dynamodb", region_name="us-east-1")
    clock = ManualClock(time.time())
    ledger = Ledger(
        client,
        create_dynamodb_table(client, unique_name("ledger"), "table_id", "object_id"),
        create_dynamodb_table(client, unique_name("runs"), "table_id", "run_id", ttl_attribute="expires_at"),
        clock=clock,
    )
    work = oracle.workload(43, events=60)
    folder = tmp_path / "files"

    def land_objects(files: list[oracle.RawFile]) -> None:
        for file in files:
            key = table.source.prefix + file.name
            s3.upload_file(str(file.write(folder)), bucket, key)
            etag = s3.head_object(Bucket=bucket, Key=key)["ETag"]
            ledger.record_object(table.id, ObjectRef(bucket, key, etag=etag), correlation_id="s3-event")

    raw_root = f"s3://{bucket}/"
    half = len(work.files) // 2
    land_objects(work.files[:half])
    stalled: list[load.LoadResult] = []

    def stall(spark_, target):  # A's MERGE is about to run: A stalls past its lease; B runs meanwhile
        if stalled:
            return
        stalled.append(None)
        clock.now += DEFAULT_LOCK_TTL_SECONDS + 60
        land_objects(work.files[half:])
        stalled[0] = drain.drain_table(spark_, table, ledger, catalog=CATALOG, raw_root=raw_root, cid="B")

    monkeypatch.setattr(merge_statement, "before_merge", stall)
    drain.drain_table(spark, table, ledger, catalog=CATALOG, raw_root=raw_root, cid="A")

    b = stalled[0]
    assert b is not None and b.status == "ok", b
    runs = {r.correlation_id: r for r in ledger.list_runs(table.id)}
    objects = ledger.objects(table.id)
    assert len(objects) == len(work.files)
    assert {(o.status, o.run_id) for o in objects} == {("done", runs["B"].run_id)}  # each done once, by B
    assert runs["B"].status == "succeeded" and runs["B"].counts["files"] == len(work.files)
    assert ledger.get_lock(table.id) is None
    faults = work.faults + Counter({"lock lease lost mid-run": 1})
    expected = oracle.expected_merge(work.files)
    diff = oracle.compare(rows_of(spark, table), expected, faults=faults, changes=work.changes)
    assert diff.clean, diff
    assert runs["A"].status == "failed" and "lock" in (runs["A"].error or ""), runs["A"]


def causes(stderr: str) -> str:
    """The lines of a JVM error worth reading (exceptions and their causes), not the stack frames."""
    wanted = [line for line in stderr.splitlines() if "Exception" in line or "Caused by" in line]
    return "\n".join(wanted)[-6000:]


def rows_of(spark, table) -> list[tuple]:
    return [tuple(r) for r in spark.sql(f"SELECT {oracle.COLUMNS} FROM {name_of(table)}").collect()]


def test_maintenance_racing_a_writer(lake):
    """`lakeloader maintain` (compaction, delete files, manifests, expiry) in another process while
    this one merges round after round into a merge-on-read table."""
    mor = {f"write.{op}.mode": "merge-on-read" for op in ("delete", "update", "merge")}
    table = lake.add(
        spec(
            target={"database": f"faults_{uuid.uuid4().hex[:8]}", "table": "t", "properties": mor},
            maintenance={
                "compaction": {"min_input_files": 2},
                "snapshots": {"older_than_days": 1e-9, "retain_last": 2},
                "retry": {"attempts": 8, "base_seconds": 0.2, "max_seconds": 2.0},
            },
        )
    )
    work = oracle.workload(44, events=100)
    rounds = work.rounds(random.Random(44), most=3)
    land(lake, table, rounds[0])
    lake.run_here(table)
    maintaining = lake.start("maintain", "--table", table.id)
    for files in rounds[1:]:
        land(lake, table, files)
        lake.run_here(table)
    code, out, err = lake.finish(maintaining)
    assert code == 0, f"{out}\n{causes(err)}"
    diff = oracle.compare(
        rows(lake, table),
        oracle.expected_merge(work.files),
        faults=work.faults + Counter({"maintenance racing the writer": 1}),
        changes=work.changes,
    )
    assert diff.clean, diff
