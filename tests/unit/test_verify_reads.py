"""`lakeloader verify`'s read hops on moto over HTTP, without a job run: the canary read back through the
Glue catalog by pyiceberg, from a real Iceberg table that pyiceberg itself writes into moto's Glue catalog
and S3 (as the job leaves it), and each reader's Athena query that fails, is cancelled or is still
running. tests/e2e/test_verify.py reads the table a real job run committed."""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import boto3
import pyarrow as pa
import pytest

from lakeloader.cli.stage import DeployedStage
from lakeloader.cli.verify import HopFailed, Verification, Verifier, verify
from lakeloader.config import canary
from lakeloader.control.contract import ARG_TABLE_ID, glue_arg
from lakeloader.control.ledger import DONE
from tests.unit import stage_world
from tests.unit.stage_world import queue_athena_results, with_canary_tables

if TYPE_CHECKING:
    from pyiceberg.table import Table

moto_server, aws_endpoint, stage = stage_world.moto_server, stage_world.aws_endpoint, stage_world.stage
moto_state_held, unique_name = stage_world.aws_fixtures.moto_state_held, stage_world.unique_name

ARROW_TYPES = {"string": pa.string(), "int": pa.int32()}
CANARY_ARROW = pa.schema([(name, ARROW_TYPES[kind]) for name, kind in canary.CANARY_SCHEMA.items()])
READ_HOP = "glue: read through the catalog"


@pytest.fixture
def deployed(stage, aws_endpoint) -> DeployedStage:
    """The stage with a Glue database prefix of its own, so its canary database is no other test's."""
    return dataclasses.replace(stage.deployed, database_prefix=f"{unique_name('stage').replace('-', '_')}_")


def canary_rows(token: str, row_numbers: list[int]) -> list[dict]:
    """The rows of the canary file verify lands for `token` (canary.canary_file), those numbered."""
    rows = [json.loads(line) for line in canary.canary_file(token, "glue").splitlines()]
    return [rows[n] for n in row_numbers]


def write_canary_table(deployed: DeployedStage, endpoint: str, *batches: list[dict]) -> Table:
    """The glue canary table as a run leaves it: an Iceberg table in the stage's canary database, its
    metadata and data files in the stage's bucket, one snapshot per batch of rows."""
    from pyiceberg.catalog import load_catalog

    database = deployed.glue_database(canary.CANARY_DATABASE)
    boto3.client("glue").create_database(DatabaseInput={"Name": database})
    catalog = load_catalog(
        "test", type="glue", **{"glue.endpoint": endpoint, "s3.endpoint": endpoint, "s3.region": "us-east-1"}
    )
    table = catalog.create_table(
        (database, "glue"),
        schema=CANARY_ARROW,
        location=f"s3://{deployed.raw_bucket}/warehouse/{database}/glue",
    )
    for rows in batches:
        table.append(pa.Table.from_pylist(rows, schema=CANARY_ARROW))
    return table


def test_the_read_hop_passes_on_the_canarys_rows_read_through_the_catalog(deployed, aws_endpoint):
    """Only this verify's rows count (an earlier canary's stay in the table), in whatever order the
    files give them."""
    said: list[str] = []
    verifier, result = Verifier(deployed, {}, timeout=1, say=said.append), Verification()
    earlier = canary_rows("verify-20261201T000000Z-00000000", [0, 1, 2])
    write_canary_table(deployed, aws_endpoint, earlier, canary_rows(verifier.token, [2, 1, 0]))

    verifier.read_back(result, "glue")

    assert result.passed == [READ_HOP]
    (line,) = said
    assert line.startswith("ok ") and line.endswith(f"{READ_HOP}: 3 rows of {verifier.token}")
    database = deployed.glue_database(canary.CANARY_DATABASE)
    assert verifier.current == (READ_HOP, f"Glue table {database}.glue")


def test_the_read_hop_fails_naming_the_rows_it_read_when_a_canary_row_is_missing(deployed, aws_endpoint):
    verifier, result = Verifier(deployed, {}, timeout=1, say=[].append), Verification()
    rows = canary_rows(verifier.token, [0, 2])
    write_canary_table(deployed, aws_endpoint, rows)

    with pytest.raises(HopFailed) as failed:
        verifier.read_back(result, "glue")

    assert failed.value.hop == READ_HOP
    assert failed.value.resource == f"Glue table {deployed.glue_database(canary.CANARY_DATABASE)}.glue"
    assert failed.value.detail == f"read 2 canary rows, wanted {canary.CANARY_ROWS}: {rows}"
    assert result.passed == []


def test_the_read_hop_reads_through_the_emulator_it_is_pointed_at(deployed, aws_endpoint, monkeypatch):
    """pyiceberg is given AWS_ENDPOINT_URL itself (its Glue client and its S3 file IO): it reads the
    emulator even where the SDK leaves endpoint variables alone (AWS_IGNORE_CONFIGURED_ENDPOINT_URLS,
    or an SDK older than them), and never the account the credentials might reach."""
    verifier, result = Verifier(deployed, {}, timeout=1, say=[].append), Verification()
    write_canary_table(deployed, aws_endpoint, canary_rows(verifier.token, [0, 1, 2]))
    monkeypatch.setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true")

    verifier.read_back(result, "glue")

    assert result.passed == [READ_HOP]


def test_the_read_hop_uses_a_catalog_of_its_own_not_the_operators_default(
    deployed, aws_endpoint, monkeypatch
):
    """An operator's default pyiceberg catalog (~/.pyiceberg.yaml, PYICEBERG_CATALOG__DEFAULT__*) does
    not leak into verify's: here one whose FileIO does not exist."""
    import pyiceberg.catalog
    from pyiceberg.utils.config import Config

    verifier, result = Verifier(deployed, {}, timeout=1, say=[].append), Verification()
    write_canary_table(deployed, aws_endpoint, canary_rows(verifier.token, [0, 1, 2]))
    monkeypatch.setenv("PYICEBERG_CATALOG__DEFAULT__PY_IO_IMPL", "no.such.FileIO")
    monkeypatch.setattr(pyiceberg.catalog, "_ENV_CONFIG", Config())  # read as a new process reads it

    verifier.read_back(result, "glue")

    assert result.passed == [READ_HOP]


def test_the_read_hop_without_pyiceberg_says_what_to_install(deployed, monkeypatch):
    """verify is an operator's tool: pyiceberg may be missing where it runs. The hop fails saying so."""
    monkeypatch.setitem(sys.modules, "pyiceberg.catalog", None)  # `import` raises ImportError
    verifier = Verifier(deployed, {}, timeout=1, say=[].append)

    with pytest.raises(HopFailed) as failed:
        verifier.read_back(Verification(), "glue")

    assert failed.value.hop == READ_HOP
    assert failed.value.resource == f"Glue table {deployed.glue_database(canary.CANARY_DATABASE)}.glue"
    assert failed.value.detail == "needs pyiceberg: pip install 'pyiceberg[glue,pyarrow]'"


# -- Athena: a query that does not succeed ---------------------------------------------------------


@pytest.fixture
def queries_held(aws_endpoint) -> Iterator[None]:
    """moto's Athena queries stay QUEUED."""
    with moto_state_held(aws_endpoint, "athena::execution"):
        yield


def reader_workgroup() -> tuple[str, dict[str, str]]:
    """A reader's Athena workgroup and the stack output that names it."""
    workgroup = unique_name("lakeloader-dev-analyst")
    boto3.client("athena").create_work_group(Name=workgroup, Configuration={})
    return workgroup, {"ReaderWorkgroups": f"analyst={workgroup}"}


def only_query(workgroup: str) -> str:
    (qid,) = boto3.client("athena").list_query_executions(WorkGroup=workgroup)["QueryExecutionIds"]
    return qid


def test_an_athena_query_still_running_at_the_timeout_fails_its_workgroups_hop(deployed, queries_held):
    workgroup, outputs = reader_workgroup()
    verifier, result = Verifier(deployed, outputs, timeout=1, say=[].append, poll=0.1), Verification()

    with pytest.raises(HopFailed) as failed:
        verifier.athena(result, "glue")

    assert failed.value.hop == f"glue: Athena workgroup {workgroup}"
    assert failed.value.resource == f"Athena workgroup {workgroup}"
    assert failed.value.detail == f"query {only_query(workgroup)} still running"
    assert result.passed == []


def test_a_cancelled_athena_query_fails_its_hop_at_once(deployed, queries_held):
    """Cancelled (here by a stop_query_execution while it is queued) is an end: the hop fails then,
    with the query's state, not at the timeout."""
    workgroup, outputs = reader_workgroup()
    athena = boto3.client("athena")
    threading.Timer(0.5, lambda: athena.stop_query_execution(QueryExecutionId=only_query(workgroup))).start()

    assert_ends_at_once(deployed, outputs, workgroup, "CANCELLED: None")  # moto gives no reason


def assert_ends_at_once(deployed: DeployedStage, outputs: dict, workgroup: str, detail: str) -> None:
    """The Athena hop fails well before its timeout, on the query's end state: `query <id> <detail>`."""
    verifier, result = Verifier(deployed, outputs, timeout=8, say=[].append, poll=0.1), Verification()
    started = time.monotonic()

    with pytest.raises(HopFailed) as failed:
        verifier.athena(result, "glue")

    assert time.monotonic() - started < 4  # at once, not at the timeout
    assert failed.value.hop == f"glue: Athena workgroup {workgroup}"
    assert failed.value.resource == f"Athena workgroup {workgroup}"
    assert failed.value.detail == f"query {only_query(workgroup)} {detail}"
    assert result.passed == []


def test_a_failed_athena_query_fails_its_hop_at_once_with_athenas_reason(deployed, aws_endpoint, monkeypatch):
    """moto runs no SQL, so none of its queries fails: the Athena client's GetQueryExecution answer (from
    moto, over HTTP) is rewritten to FAILED with Athena's reason by a botocore after-call handler on
    the Athena client only. Everything else is the emulator's and the code under test's own."""
    reason = "COLUMN_NOT_FOUND: line 1:33: Column 'canary_id' cannot be resolved"

    def failed_query(parsed: dict, **_: object) -> None:
        parsed["QueryExecution"]["Status"] |= {"State": "FAILED", "StateChangeReason": reason}

    real_client = boto3.client

    def client(service: str, *args: object, **kwargs: object):
        made = real_client(service, *args, **kwargs)
        if service == "athena":
            made.meta.events.register("after-call.athena.GetQueryExecution", failed_query)
        return made

    monkeypatch.setattr(boto3, "client", client)
    workgroup, outputs = reader_workgroup()

    assert_ends_at_once(deployed, outputs, workgroup, f"FAILED: {reason}")


# -- every hop, one after the other ---------------------------------------------------------------


def play_lambda_and_job(stage, deployed: DeployedStage, endpoint: str, seen: dict) -> None:
    """What moto cannot run, played as the stage runs it: the arrival Lambda records the canary file in
    the ledger; a Glue run of the ingest job loads the file's rows into the Iceberg table (pyiceberg),
    marks the file done and records its end with the snapshot it committed. `seen` gets the file's key
    and rows, the Glue run, the snapshot, or the error."""
    try:
        s3, table_id = boto3.client("s3"), canary.canary_id("glue")
        deadline, listed = time.monotonic() + 20, []
        while not listed and time.monotonic() < deadline:
            prefix = f"{canary.CANARY_PREFIX}glue/"
            listed = s3.list_objects_v2(Bucket=deployed.raw_bucket, Prefix=prefix).get("Contents", [])
            time.sleep(0.05)
        key = listed[0]["Key"]
        stage.record(table_id, key)
        seen["glue run"] = boto3.client("glue").start_job_run(
            JobName=deployed.ingest_job, Arguments={glue_arg(ARG_TABLE_ID): table_id}
        )["JobRunId"]
        body = s3.get_object(Bucket=deployed.raw_bucket, Key=key)["Body"].read().decode()
        seen["key"], seen["rows"] = key, [json.loads(line) for line in body.splitlines()]
        stage.ledger.start_run(table_id, "run-1", "event-1", engine="glue")
        claimed = stage.ledger.claim(table_id, stage.ledger.objects(table_id), "run-1")
        table = write_canary_table(deployed, endpoint, seen["rows"])
        stage.ledger.finish(table_id, claimed, "run-1", DONE)
        seen["snapshot"] = table.current_snapshot().snapshot_id
        stage.ledger.end_run(table_id, "run-1", "succeeded", snapshot_id=seen["snapshot"])
    except Exception as exc:  # noqa: BLE001 -- the test reports it
        seen["error"] = exc


def test_verify_passes_every_hop_in_order_then_removes_the_canary(stage, aws_endpoint):
    """verify() on a stage whose Lambda and job are played (moto runs neither): each hop passes in
    order, with the canary landed by verify read back through the catalog and counted by Athena, then
    the alarm topic; the canary's file and table are removed."""
    deployed = dataclasses.replace(
        stage.deployed, database_prefix=f"{unique_name('stage').replace('-', '_')}_"
    )
    deployed = dataclasses.replace(deployed, ingest_job=unique_name("lakeloader-ingest"))
    with_canary_tables(stage)
    boto3.client("glue").create_job(Name=deployed.ingest_job, Role="arn:aws:iam::123456789012:role/glue",
                                    Command={"Name": "glueetl"})  # fmt: skip
    workgroup, outputs = reader_workgroup()
    outputs["AlarmTopicArn"] = boto3.client("sns").create_topic(Name=unique_name("alarms"))["TopicArn"]
    queue_athena_results(aws_endpoint, str(canary.CANARY_ROWS))
    seen: dict = {}
    job = threading.Thread(target=play_lambda_and_job, args=(stage, deployed, aws_endpoint, seen))
    job.start()
    said: list[str] = []
    started = time.monotonic()

    result = verify(deployed, outputs, timeout=10, say=said.append)

    took = time.monotonic() - started
    job.join()
    assert "error" not in seen and result.failure is None, (seen.get("error"), result.failure)
    hops = ["land", "arrival Lambda -> ledger", "job run", "iceberg commit", "read through the catalog"]
    assert result.passed == [
        *(f"glue: {hop}" for hop in hops),
        f"glue: Athena workgroup {workgroup}",
        "alarm topic",
    ]
    token = seen["key"].removeprefix(f"{canary.CANARY_PREFIX}glue/").removesuffix(".json")
    assert [(r["canary_id"], r["engine"], r["row_no"]) for r in seen["rows"]] == [
        (token, "glue", n) for n in range(canary.CANARY_ROWS)
    ]
    database = deployed.glue_database(canary.CANARY_DATABASE)
    assert [line.split(" s  ", 1)[1] for line in said[:6]] == [
        f"glue: land: s3://{deployed.raw_bucket}/{seen['key']}",
        f"glue: arrival Lambda -> ledger: {deployed.arrival_function} recorded it",
        f"glue: job run: Glue job {deployed.ingest_job} run {seen['glue run']} loaded it",
        f"glue: iceberg commit: Glue table {database}.glue snapshot {seen['snapshot']}, 3 rows added",
        f"glue: read through the catalog: 3 rows of {token}",
        f"glue: Athena workgroup {workgroup}: 3 rows",
    ]
    assert said[6].split(" s  ", 1)[1].startswith(f"alarm topic: {outputs['AlarmTopicArn']} took message ")
    seconds = [float(line.removeprefix("ok").split(" s  ", 1)[0]) for line in said]
    assert seconds == sorted(seconds) and seconds[0] >= 0 and seconds[-1] <= took  # since verify started
    assert f"Glue table {database}.glue and its files" in result.removed and result.cleanup_errors == []
    listed = boto3.client("s3").list_object_versions(Bucket=deployed.raw_bucket, Prefix=canary.CANARY_PREFIX)
    assert not listed.get("Versions") and stage.ledger.objects(canary.canary_id("glue")) == []


def test_a_verify_whose_config_table_is_gone_fails_the_config_hop_with_awss_error(stage):
    """A refusal before any hop has begun (here: no config table) is the config hop's, named with its
    table and AWS's error."""
    deployed = dataclasses.replace(stage.deployed, config_table=unique_name("gone"))

    result = verify(deployed, {}, timeout=1, say=[].append)

    assert (result.failure.hop, result.failure.resource) == (
        "config",
        f"DynamoDB table {deployed.config_table}",
    )
    assert result.failure.detail.startswith("ResourceNotFoundException: ")
    assert result.passed == []


def test_the_canarys_token_is_the_utc_time_it_was_made(stage, monkeypatch):
    """verify-YYYYmmddTHHMMSSZ-8 hex digits: the time in UTC (Z) wherever verify runs."""
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        before = datetime.now(UTC).replace(microsecond=0)
        token = Verifier(stage.deployed, {}, timeout=1, say=[].append).token
    finally:
        monkeypatch.undo()
        time.tzset()
    assert re.fullmatch(r"verify-\d{8}T\d{6}Z-[0-9a-f]{8}", token), token
    made = datetime.strptime(token.split("-")[1], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    assert before <= made <= datetime.now(UTC)


def test_a_reader_role_whose_name_holds_an_equals_sign_is_queried_in_its_workgroup(stage, aws_endpoint):
    """ReaderWorkgroups lists role=workgroup; an IAM role name may hold '=', a workgroup's cannot."""
    workgroup = unique_name("lakeloader-dev-finance")
    boto3.client("athena").create_work_group(Name=workgroup, Configuration={})
    outputs = {"ReaderWorkgroups": f"team=finance={workgroup}"}
    queue_athena_results(aws_endpoint, str(canary.CANARY_ROWS))
    result = Verification()

    Verifier(stage.deployed, outputs, timeout=5, say=[].append).athena(result, "glue")

    assert result.passed == [f"glue: Athena workgroup {workgroup}"]


def test_a_raw_bucket_that_refuses_the_canary_fails_the_land_hop(stage):
    """S3's refusal of the canary file (here: no such bucket) is the land hop's, naming the bucket."""
    with_canary_tables(stage)
    deployed = dataclasses.replace(stage.deployed, raw_bucket=unique_name("gone"))

    result = verify(deployed, {}, timeout=1, say=[].append)

    assert (result.failure.hop, result.failure.resource) == ("glue: land", f"S3 bucket {deployed.raw_bucket}")
    assert result.failure.detail.startswith("NoSuchBucket: ") and result.passed == []


def test_a_ledger_that_refuses_the_read_fails_the_arrival_hop_naming_the_ledger(stage):
    """DynamoDB's refusal while the arrival hop reads the ledger (here: no such table) is that hop's."""
    with_canary_tables(stage)
    deployed = dataclasses.replace(stage.deployed, ledger_table=unique_name("gone"))

    result = verify(deployed, {}, timeout=1, say=[].append)

    hop = ("glue: arrival Lambda -> ledger", f"DynamoDB table {deployed.ledger_table}")
    assert (result.failure.hop, result.failure.resource) == hop and result.passed == ["glue: land"]
    assert result.failure.detail.startswith("ResourceNotFoundException: ")
