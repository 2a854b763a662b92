"""`lakeloader verify --stage` through the CLI's main on a stage on moto (HTTP): the hops it can reach
there without a Lambda or a job (moto runs neither; tests/e2e/test_verify.py follows the whole path on
the emulator), the canary it lands and removes, and the canary tables every stage deploys."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
import time

import boto3
import pytest

from lakeloader.cli.canary_cleanup import remove_canary
from lakeloader.cli.verify import DEAD_LETTER_OUTPUT, HopFailed, Verification, Verifier, log_excerpt, verify
from lakeloader.config import ConfigError, canary, parse_config
from lakeloader.control.ledger import DONE, FAILED, QUARANTINED
from tests.unit import stage_world
from tests.unit.stage_world import Stage, put_log, queue_athena_results, with_canary_tables

moto_server, aws_endpoint, stage = stage_world.moto_server, stage_world.aws_endpoint, stage_world.stage


def canary_keys(stage: Stage) -> list[str]:
    listed = boto3.client("s3").list_object_versions(
        Bucket=stage.deployed.raw_bucket, Prefix=canary.CANARY_PREFIX
    )
    return [v["Key"] for v in listed.get("Versions", [])]


def test_a_stage_deployed_without_the_canary_tables_fails_naming_the_config_table(stage, capsys):
    code, out = stage.cli(capsys, "verify", "--timeout", "1")

    assert code == 1
    assert "FAIL config" in out and f"DynamoDB table {stage.deployed.config_table}" in out
    assert "no canary table lakeloader_canary.glue: deploy the stage" in out
    assert canary_keys(stage) == []


def test_a_canary_no_lambda_records_fails_the_arrival_hop_and_is_removed(stage, capsys):
    with_canary_tables(stage)

    code, out = stage.cli(capsys, "verify", "--timeout", "1")

    assert code == 1, out
    assert out.splitlines()[0].startswith("ok ") and "glue: land: s3://" in out.splitlines()[0]
    assert "FAIL glue: arrival Lambda -> ledger" in out
    assert f"resource: Lambda {stage.deployed.arrival_function}" in out
    assert f"/aws/lambda/{stage.deployed.arrival_function}" in out  # where its log would be
    assert "removed s3://" in out and canary_keys(stage) == []


def test_a_cleanup_that_fails_is_reported_beside_the_hops_and_the_rest_is_removed(stage, capsys):
    """The runs table gone (as a cleanup AWS refuses): the hops are printed as they were, the canary
    file and the ledger items are still removed, and the refused step is named with AWS's error."""
    with_canary_tables(stage)
    boto3.client("dynamodb").delete_table(TableName=stage.deployed.runs_table)

    code, out = stage.cli(capsys, "verify", "--timeout", "1")

    assert code == 1, out
    lines = out.splitlines()
    assert lines[0].startswith("ok ") and "glue: land: s3://" in lines[0]
    assert "FAIL glue: arrival Lambda -> ledger" in out  # the hop's own result, not the cleanup's
    assert "removed s3://" in out and canary_keys(stage) == []
    refused = [line for line in lines if line.startswith("FAIL cleanup: ")]
    assert refused and all(stage.deployed.runs_table in line for line in refused), out
    assert "ResourceNotFoundException" in refused[0]


def test_a_cleanup_that_fails_after_passing_hops_leaves_them_passed(stage):
    """The hops that passed stay passed; the cleanup's error is beside them, not a hop failure."""
    with_canary_tables(stage)
    boto3.client("dynamodb").delete_table(TableName=stage.deployed.ledger_table)
    said: list[str] = []
    verifier, result = Verifier(stage.deployed, {}, timeout=1, say=said.append), Verification()
    verifier.land(result, "glue")
    removal = remove_canary(stage.deployed)
    assert removal.removed[0].startswith("s3://") and canary_keys(stage) == []
    assert [e.split(":", 1)[0] for e in removal.errors] == [
        f"items of {canary.canary_id(e)} in {stage.deployed.ledger_table}" for e in canary.CANARY_ENGINES
    ]
    assert result.passed == ["glue: land"] and result.failure is None


def test_keep_leaves_the_canary_file(stage, capsys):
    with_canary_tables(stage)

    code, out = stage.cli(capsys, "verify", "--timeout", "1", "--keep")

    assert code == 1
    (key,) = canary_keys(stage)
    assert key.startswith(f"{canary.CANARY_PREFIX}glue/verify-") and "removed" not in out
    assert out.splitlines()[-1] == "kept the canary (--keep): the next verify without --keep removes it"
    assert (
        boto3.client("s3").get_object(Bucket=stage.deployed.raw_bucket, Key=key)["Body"].read().count(b"\n")
        == canary.CANARY_ROWS
    )


def test_the_next_verify_removes_the_canary_a_kept_verify_left(stage, capsys):
    """What --keep left (or a refused cleanup: tests/e2e/test_verify_lake_formation.py) is removed by
    the next verify, as both promise, not only the file that verify landed itself."""
    with_canary_tables(stage)
    stage.cli(capsys, "verify", "--timeout", "1", "--keep")
    (kept,) = canary_keys(stage)

    code, out = stage.cli(capsys, "verify", "--timeout", "1")

    assert code == 1 and "FAIL glue: arrival Lambda -> ledger" in out  # no Lambda here: the hop fails
    removed = [line.split(f"removed s3://{stage.deployed.raw_bucket}/", 1)[1] for line in out.splitlines()
               if line.startswith("removed s3://")]  # fmt: skip
    assert kept in removed and len(removed) == 2, out
    assert canary_keys(stage) == []
    assert "FAIL cleanup" not in out


def test_a_recorded_canary_that_no_run_takes_fails_the_job_hop_naming_the_lambda(stage):
    """The ledger record is made as the Lambda makes it; then no Glue run starts: the job hop fails,
    and the resource named is the Lambda that should have started one."""
    with_canary_tables(stage)
    boto3.client("glue").create_job(
        Name=stage.deployed.ingest_job,
        Role="arn:aws:iam::123456789012:role/glue",
        Command={"Name": "glueetl"},
    )
    said: list[str] = []
    verifier, result = Verifier(stage.deployed, {}, timeout=1, say=said.append), Verification()
    key = verifier.land(result, "glue")
    stage.record(canary.canary_id("glue"), key)
    verifier.recorded(result, "glue", key)

    with pytest.raises(HopFailed) as failed:
        verifier.job_run(result, "glue", key, since=verifier_since())

    assert failed.value.hop == "glue: job run"
    assert failed.value.resource == f"Lambda {stage.deployed.arrival_function}"
    assert "no glue run started within 1 s" in failed.value.detail
    assert result.passed == ["glue: land", "glue: arrival Lambda -> ledger"]
    assert remove_canary(stage.deployed).removed[0].endswith(key)
    assert stage.ledger.objects(canary.canary_id("glue")) == []


def test_the_commit_hop_waits_for_the_run_to_record_its_end(stage):
    """A run marks its files loaded (what the job hop waits for) before it records its end and snapshot:
    read at once, its record is still running, or abandoned once its lease has lapsed on a loaded
    machine. The hop waits for the recorded end, and names a run that records none in time."""
    table_id, run_id = canary.canary_id("glue"), "20261128T235032872Z-bd114b"
    stage.ledger.start_run(table_id, run_id, "verify-test", engine="glue")
    verifier = Verifier(stage.deployed, {}, timeout=1, say=[].append)
    with pytest.raises(HopFailed) as never:
        verifier.committed(Verification(), "glue", run_id)
    # the run as the ledger holds it for the canary's table, not a lookup by its id alone
    recorded = stage.ledger.get_run(table_id, run_id)
    assert never.value.detail == f"run {run_id} recorded no end within 1 s: {recorded}"
    assert f"table_id='{table_id}'" in never.value.detail
    table = f"Glue table {stage.deployed.glue_database(canary.CANARY_DATABASE)}.glue"
    assert (never.value.hop, never.value.resource) == ("glue: iceberg commit", table)
    assert verifier.current == ("glue: iceberg commit", table)

    threading.Timer(0.5, stage.ledger.end_run, (table_id, run_id, "skipped")).start()
    verifier = Verifier(stage.deployed, {}, timeout=5, say=[].append, poll=0.1)
    with pytest.raises(HopFailed) as ended:
        verifier.committed(Verification(), "glue", run_id)
    assert (ended.value.hop, ended.value.resource) == ("glue: iceberg commit", table)
    assert "recorded no snapshot" in ended.value.detail and "status='skipped'" in ended.value.detail


def s3_event(bucket: str, *keys: str) -> str:
    """An S3 notification as a dead letter's body: its keys quote_plus-encoded, as S3 sends them."""
    from urllib.parse import quote_plus

    records = [
        {
            "eventSource": "aws:s3",
            "eventName": "ObjectCreated:Put",
            "s3": {"bucket": {"name": bucket}, "object": {"key": quote_plus(k), "size": 1, "eTag": "e"}},
        }
        for k in keys
    ]
    return json.dumps({"Records": records})


def test_the_arrival_hop_ends_when_the_canarys_event_is_a_dead_letter(stage):
    """Lambda gave up on the event: the hop fails at once, with the error Lambda sent it with, and
    the canary's message is removed; another event's stays. A queue that cannot be read is no reason
    to fail: the hop waits for its timeout."""
    with_canary_tables(stage)
    sqs = boto3.client("sqs")
    queue = sqs.create_queue(QueueName="arrival-dlq")["QueueUrl"]
    outputs = {DEAD_LETTER_OUTPUT: queue}
    verifier = Verifier(stage.deployed, outputs, timeout=8, say=[].append, poll=0.1)
    key = verifier.land(Verification(), "glue")
    raw = stage.deployed.raw_bucket
    sqs.send_message(QueueUrl=queue, MessageBody=s3_event(raw, "orders/public/orders/LOAD1.parquet"))
    error = {"ErrorMessage": {"DataType": "String", "StringValue": "ResourceNotFoundException: no table"}}
    sqs.send_message(QueueUrl=queue, MessageBody=s3_event(raw, key), MessageAttributes=error)

    started = time.monotonic()
    with pytest.raises(HopFailed) as failed:
        verifier.recorded(Verification(), "glue", key)

    assert time.monotonic() - started < 4  # at once, not at the timeout
    assert failed.value.hop == "glue: arrival Lambda -> ledger"
    assert failed.value.resource == f"Lambda {stage.deployed.arrival_function}"
    assert failed.value.detail == (
        f"Lambda gave up on the S3 event of {key} after its retries: it went to the dead-letter queue "
        f"{queue} "
        "(error: ResourceNotFoundException: no table; the canary's message was removed from the queue)"
    )
    (left,) = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10)["Messages"]
    assert "LOAD1.parquet" in left["Body"]

    unsaid = Verifier(stage.deployed, outputs, timeout=8, say=[].append, poll=0.1)  # no error attribute
    quiet = unsaid.land(Verification(), "glue")
    sqs.send_message(QueueUrl=queue, MessageBody=s3_event(raw, quiet))
    with pytest.raises(HopFailed) as without:
        unsaid.recorded(Verification(), "glue", quiet)
    assert "(error: not given; the canary's message was removed" in without.value.detail

    gone = Verifier(stage.deployed, {DEAD_LETTER_OUTPUT: queue + "-gone"}, timeout=1, say=[].append)
    with pytest.raises(HopFailed) as waited:
        gone.recorded(Verification(), "glue", key)
    assert "no ledger record" in waited.value.detail and not gone.read_dead_letters
    remove_canary(stage.deployed)


def verifier_since():
    from datetime import UTC, datetime, timedelta

    return datetime.now(UTC) - timedelta(minutes=1)


def test_the_alarm_topic_hop_publishes_or_names_the_topic(stage):
    topic = boto3.client("sns").create_topic(Name="lakeloader-alarms")["TopicArn"]
    said: list[str] = []
    result = Verification()
    Verifier(stage.deployed, {"AlarmTopicArn": topic}, timeout=1, say=said.append).alarm_topic(result)
    assert result.passed == ["alarm topic"] and topic in said[0]

    missing = topic.replace("lakeloader-alarms", "gone")
    with pytest.raises(HopFailed) as failed:
        Verifier(stage.deployed, {"AlarmTopicArn": missing}, timeout=1, say=said.append).alarm_topic(result)
    assert failed.value.resource == f"SNS topic {missing}" and "publish refused" in failed.value.detail


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("id", "lakeloader_canary.glue", "its id"),
        ("prefix", "lakeloader-canary/mine/", "its source.prefix"),
        ("database", "lakeloader_canary", "its target.database"),
    ],
)
def test_a_user_table_may_not_take_the_canaries_id_prefix_or_database(field, value, named):
    table = {
        "id": "crm.customers",
        "source": {"prefix": "crm/"},
        "target": {"database": "crm", "table": "customers"},
        "keys": ["id"],
    }
    if field == "id":
        table["id"] = value
    elif field == "prefix":
        table["source"]["prefix"] = value
    else:
        table["target"]["database"] = value
    with pytest.raises(ConfigError, match=f"{named} is reserved for the stage's canary tables"):
        canary.with_canaries(parse_config({"tables": [table]}))


def test_the_canary_prefix_is_one_the_jobs_read():
    """The jobs pass over path parts starting `_` or `.` (hidden files): the canary's must not."""
    from lakeloader.spark.inputs import _is_data_file

    assert _is_data_file(f"{canary.CANARY_PREFIX}glue/verify-1.json")
    assert not _is_data_file("_lakeloader/canary/glue/verify-1.json")  # why not such a prefix


def test_each_readers_workgroup_counts_the_canary_rows_or_fails_naming_it(stage, aws_endpoint):
    athena = boto3.client("athena")
    for name in ("lakeloader-dev-analyst", "lakeloader-dev-auditor"):
        athena.create_work_group(Name=name, Configuration={})
    outputs = {"ReaderWorkgroups": "analyst=lakeloader-dev-analyst,auditor=lakeloader-dev-auditor"}
    said: list[str] = []
    verifier, result = Verifier(stage.deployed, outputs, timeout=5, say=said.append), Verification()

    queue_athena_results(aws_endpoint, str(canary.CANARY_ROWS), "0")
    with pytest.raises(HopFailed) as failed:
        verifier.athena(result, "glue")

    assert result.passed == ["glue: Athena workgroup lakeloader-dev-analyst"]
    assert f"{canary.CANARY_ROWS} rows" in said[0]
    assert failed.value.hop == "glue: Athena workgroup lakeloader-dev-auditor"
    assert failed.value.resource == "Athena workgroup lakeloader-dev-auditor"
    assert f"counted 0 canary rows, wanted {canary.CANARY_ROWS}" in failed.value.detail


def user_table(n: int, engine: str) -> dict:
    return {
        "id": f"crm.t{n}",
        "source": {"prefix": f"crm/t{n}/", "format": "parquet", "cdc": "dms"},
        "target": {"database": "crm", "table": f"t{n}"},
        "keys": ["id"],
        "engine": engine,
    }


@pytest.mark.parametrize(
    ("engines", "used"),
    [((), ["glue"]), (("glue",), ["glue"]), (("glue", "emr"), ["glue", "emr"])],
    ids=["canaries alone", "a glue table", "an emr table"],
)
def test_a_stage_verifies_emr_only_where_a_table_of_its_own_runs_there(stage, engines, used):
    """Which engines a stage uses: glue always; emr where a user's table runs on EMR Serverless. The
    stage's own EMR canary (engine emr, deployed to every stage) does not count."""
    with_canary_tables(stage, *(user_table(n, engine) for n, engine in enumerate(engines)))

    assert Verifier(stage.deployed, {}, timeout=1, say=[].append).engines() == used


@pytest.mark.parametrize("status", [DONE, FAILED, QUARANTINED])
def test_the_job_hop_passes_when_the_ledger_says_loaded_and_fails_when_the_file_is_set_aside(stage, status):
    """The job hop's verdict is the canary file's ledger status: done passes (with the run that loaded
    it); failed or quarantined fails at once, with the run's reason, however long the timeout."""
    with_canary_tables(stage)
    boto3.client("glue").create_job(
        Name=stage.deployed.ingest_job,
        Role="arn:aws:iam::123456789012:role/glue",
        Command={"Name": "glueetl"},
    )
    table_id = canary.canary_id("glue")
    verifier, result = Verifier(stage.deployed, {}, timeout=8, say=[].append, poll=0.1), Verification()
    key = verifier.land(result, "glue")
    stage.record(table_id, key)
    claimed = stage.ledger.claim(table_id, stage.ledger.objects(table_id), "run-1")
    stage.ledger.finish(table_id, claimed, "run-1", status, error=None if status == DONE else "bad canary")
    started = time.monotonic()

    if status == DONE:
        assert verifier.job_run(result, "glue", key, since=verifier_since()) == "run-1"
        assert result.passed == ["glue: land", "glue: job run"]
        return
    with pytest.raises(HopFailed) as failed:
        verifier.job_run(result, "glue", key, since=verifier_since())
    assert time.monotonic() - started < 4  # at once, not at the timeout
    assert failed.value.hop == "glue: job run"
    assert failed.value.detail == f"the run set the file aside ({status}): bad canary"
    assert result.passed == ["glue: land"]


def test_the_cleanup_drops_each_canary_table_with_its_files_and_nothing_beside_them(stage):
    """A canary table is dropped with every object under its location's folder; an object of a sibling
    folder whose name starts the same is not the table's and stays."""
    glue, s3 = boto3.client("glue"), boto3.client("s3")
    database = stage.deployed.glue_database(canary.CANARY_DATABASE)
    bucket = stage.deployed.raw_bucket
    with contextlib.suppress(glue.exceptions.AlreadyExistsException):  # the stage is the module's
        glue.create_database(DatabaseInput={"Name": database})
    location = f"s3://{bucket}/warehouse/canary/glue"
    glue.create_table(
        DatabaseName=database, TableInput={"Name": "glue", "StorageDescriptor": {"Location": location}}
    )
    for key in ("warehouse/canary/glue/data/a.parquet", "warehouse/canary/glue/metadata/v1.json"):
        s3.put_object(Bucket=bucket, Key=key, Body=b"x")
    s3.put_object(Bucket=bucket, Key="warehouse/canary/glue_other/b.parquet", Body=b"x")

    removal = remove_canary(stage.deployed)

    assert f"Glue table {database}.glue and its files" in removal.removed and removal.errors == []
    left = s3.list_objects_v2(Bucket=bucket, Prefix="warehouse/").get("Contents", [])
    assert [o["Key"] for o in left] == ["warehouse/canary/glue_other/b.parquet"]
    assert glue.get_tables(DatabaseName=database)["TableList"] == []


def test_the_athena_hop_counts_the_canary_table_of_its_engine_or_says_no_reader_queries_through_athena(
    stage, aws_endpoint
):
    said: list[str] = []
    Verifier(stage.deployed, {}, timeout=5, say=said.append).athena(Verification(), "glue")
    assert said == ["--   glue: Athena: no reader of the stage queries through Athena"]

    athena = boto3.client("athena")
    athena.create_work_group(Name="lakeloader-dev-engineer", Configuration={})
    outputs = {"ReaderWorkgroups": "engineer=lakeloader-dev-engineer"}
    verifier, result = Verifier(stage.deployed, outputs, timeout=5, say=said.append), Verification()
    queue_athena_results(aws_endpoint, str(canary.CANARY_ROWS))
    verifier.athena(result, "emr")

    assert result.passed == ["emr: Athena workgroup lakeloader-dev-engineer"]
    assert verifier.current == (result.passed[0], "Athena workgroup lakeloader-dev-engineer")
    (qid,) = athena.list_query_executions(WorkGroup="lakeloader-dev-engineer")["QueryExecutionIds"]
    query = athena.get_query_execution(QueryExecutionId=qid)["QueryExecution"]["Query"]
    database = stage.deployed.glue_database(canary.CANARY_DATABASE)
    assert query == f'SELECT count(*) FROM "{database}"."emr" WHERE canary_id = \'{verifier.token}\''


def test_the_alarm_topic_takes_a_subject_line_and_a_stack_without_the_output_fails_the_hop(stage):
    """What a subscriber sees: the subject "lakeloader verify" and the run's token. A stack that names no
    alarm topic fails the hop, named as the alarm topic's."""
    sns, sqs = boto3.client("sns"), boto3.client("sqs")
    topic = sns.create_topic(Name="lakeloader-alarms")["TopicArn"]
    queue = sqs.create_queue(QueueName="alarm-inbox")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn)
    verifier = Verifier(stage.deployed, {"AlarmTopicArn": topic}, timeout=1, say=[].append)
    verifier.alarm_topic(Verification())
    (message,) = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10)["Messages"]
    body = json.loads(message["Body"])
    assert body["Subject"] == "lakeloader verify" and verifier.token in body["Message"]

    with pytest.raises(HopFailed) as failed:
        Verifier(stage.deployed, {}, timeout=1, say=[].append).alarm_topic(Verification())
    assert failed.value.hop == "alarm topic" and failed.value.resource == "SNS topic "


@pytest.mark.parametrize(
    ("metadata", "added"),
    [
        (
            {
                "snapshots": [
                    {"snapshot-id": 41, "summary": {}},
                    {"snapshot-id": 42, "summary": {"added-records": "3"}},
                ]
            },
            "3",
        ),
        ({"snapshots": [{"snapshot-id": 42}]}, "?"),
        ({"snapshots": [{"snapshot-id": 41, "summary": {}}]}, None),
        ({}, None),
    ],
    ids=["snapshot in the metadata", "snapshot without a summary", "snapshot missing", "no snapshots yet"],
)
def test_the_commit_hop_passes_when_the_catalogs_metadata_holds_the_runs_snapshot(stage, metadata, added):
    """The run's snapshot must be in the Iceberg metadata the Glue table points at (metadata_location):
    then the hop passes with the rows it added (as its summary says: the spec's v1 may leave the summary
    out); else it fails naming the metadata file, also where the metadata lists no snapshots at all."""
    table_id, run_id = canary.canary_id("glue"), "20261202T060000000Z-abc123"
    stage.ledger.start_run(table_id, run_id, "verify-test", engine="glue")
    stage.ledger.end_run(table_id, run_id, "succeeded", snapshot_id=42)
    glue, s3 = boto3.client("glue"), boto3.client("s3")
    deployed = dataclasses.replace(stage.deployed, database_prefix=f"{stage_world.unique_name('p')}_")
    database, bucket = deployed.glue_database(canary.CANARY_DATABASE), deployed.raw_bucket  # their own
    key = "warehouse/canary/glue/metadata/00001.metadata.json"
    s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(metadata).encode())
    glue.create_database(DatabaseInput={"Name": database})
    location = f"s3://{bucket}/{key}"
    glue.create_table(
        DatabaseName=database, TableInput={"Name": "glue", "Parameters": {"metadata_location": location}}
    )
    said: list[str] = []
    verifier, result = Verifier(deployed, {}, timeout=5, say=said.append), Verification()

    if added:
        assert verifier.committed(result, "glue", run_id)["Name"] == "glue"
        assert result.passed == ["glue: iceberg commit"]
        assert said[0].endswith(
            f"glue: iceberg commit: Glue table {database}.glue snapshot 42, {added} rows added"
        )
        return
    with pytest.raises(HopFailed) as failed:
        verifier.committed(result, "glue", run_id)
    assert (failed.value.hop, failed.value.resource) == (
        "glue: iceberg commit",
        f"Glue table {database}.glue",
    )
    assert failed.value.detail == f"snapshot 42 is not in {location}"


def test_a_glue_table_that_is_not_iceberg_is_refused_in_the_commit_hop(stage):
    """A canary table without metadata_location (not an Iceberg table): S3 refuses the empty location,
    and verify() reports that refusal as the commit hop's."""
    from botocore.exceptions import BotoCoreError, ClientError

    table_id, run_id = canary.canary_id("glue"), "20261202T070000000Z-abc123"
    stage.ledger.start_run(table_id, run_id, "verify-test", engine="glue")
    stage.ledger.end_run(table_id, run_id, "succeeded", snapshot_id=42)
    glue = boto3.client("glue")
    deployed = dataclasses.replace(stage.deployed, database_prefix=f"{stage_world.unique_name('p')}_")
    database = deployed.glue_database(canary.CANARY_DATABASE)  # its own: no other test's cleanup meets it
    glue.create_database(DatabaseInput={"Name": database})
    glue.create_table(
        DatabaseName=database, TableInput={"Name": "glue", "Parameters": {"classification": "json"}}
    )
    verifier = Verifier(deployed, {}, timeout=5, say=[].append)

    with pytest.raises((BotoCoreError, ClientError)):
        verifier.committed(Verification(), "glue", run_id)
    assert verifier.current == ("glue: iceberg commit", f"Glue table {database}.glue")


@pytest.mark.parametrize("count", [13, 14, 600])
def test_a_log_of_13_lines_is_shown_whole_and_a_longer_one_by_its_first_10_and_last_3(aws_endpoint, count):
    """A traceback's lines keep their indentation and lose their line ends; one page of 500 events is
    read, so a longer log's last lines shown are the 500th's."""
    group = f"/aws/lambda/{stage_world.unique_name('log')}"
    lines = [f"  line {n}\n" for n in range(count)]
    put_log(group, lines, int(time.time() * 1000) - 10_000)

    read = [line.rstrip() for line in lines[:500]]
    assert log_excerpt(group) == [
        f"log group {group}:",
        *(read if count <= 13 else [*read[:10], "...", *read[-3:]]),
    ]


def test_the_arrival_hops_log_starts_when_the_verify_did(stage):
    """A busy function's earlier invocations are not this canary's: the log the hop shows is the
    function's since the verify started."""
    deployed = dataclasses.replace(stage.deployed, arrival_function=stage_world.unique_name("arrival"))
    group = f"/aws/lambda/{deployed.arrival_function}"
    put_log(group, ["an earlier invocation"], int(time.time() * 1000) - 120_000)
    verifier = Verifier(deployed, {}, timeout=1, say=[].append, poll=0.1)
    put_log(group, ["this canary's"], int(verifier.started_at * 1000) + 1)

    with pytest.raises(HopFailed) as failed:
        verifier.recorded(Verification(), "glue", f"{canary.CANARY_PREFIX}glue/verify-1.json")

    assert failed.value.log == [f"log group {group}:", "this canary's"]


def test_an_athena_answer_without_its_count_row_fails_the_hop(stage, aws_endpoint):
    """The header alone (no count row) is no count: the hop fails saying so, it does not crash."""
    workgroup = stage_world.unique_name("lakeloader-dev-analyst")
    boto3.client("athena").create_work_group(Name=workgroup, Configuration={})
    queue_athena_results(aws_endpoint, None)
    verifier = Verifier(
        stage.deployed, {"ReaderWorkgroups": f"analyst={workgroup}"}, timeout=5, say=[].append
    )

    with pytest.raises(HopFailed) as failed:
        verifier.athena(Verification(), "glue")

    assert failed.value.detail.endswith(f"counted None canary rows, wanted {canary.CANARY_ROWS}")


def test_a_failed_hop_is_described_one_thing_a_line():
    failure = HopFailed(
        "glue: job run", "Glue job lakeloader-ingest run jr_1", "FAILED: boom", ["log group g:", "x"]
    )

    assert failure.describe() == (
        "FAIL glue: job run\n"
        "     resource: Glue job lakeloader-ingest run jr_1\n"
        "     FAILED: boom\n"
        "     | log group g:\n"
        "     | x"
    )


def test_a_stack_without_outputs_has_none_to_give(aws_endpoint):
    """A stack CloudFormation returns without Outputs (moto's change-set deploys; a stack mid-update):
    no outputs, not an error."""
    from lakeloader.cli.verify import stack_outputs

    name = stage_world.unique_name("bare")
    template = {"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}}
    boto3.client("cloudformation").create_stack(StackName=name, TemplateBody=json.dumps(template))

    assert stack_outputs(name) == {}


def test_a_cleanup_that_crashes_is_reported_beside_the_hops_never_raised(stage):
    """A canary table the cleanup cannot read (no storage descriptor: not one a run made) makes the
    cleanup itself fail with a non-AWS error: verify still returns the hops' result, with that error
    beside it, named with its type."""
    with_canary_tables(stage)
    deployed = dataclasses.replace(stage.deployed, database_prefix=f"{stage_world.unique_name('p')}_")
    glue = boto3.client("glue")
    database = deployed.glue_database(canary.CANARY_DATABASE)
    glue.create_database(DatabaseInput={"Name": database})
    glue.create_table(DatabaseName=database, TableInput={"Name": "glue"})

    result = verify(deployed, {}, timeout=1, say=[].append)

    assert result.failure is not None and result.failure.hop == "glue: arrival Lambda -> ledger"
    assert result.passed == ["glue: land"]
    assert result.cleanup_errors == ["cleanup: KeyError: 'StorageDescriptor'"] and result.removed == []


def test_an_empty_dead_letter_queue_is_no_failure_and_an_unreadable_one_is_not_read_again(stage):
    """An empty queue: the arrival hop waits for its timeout. A queue that could not be read once (here:
    not there yet) is not read again, even once it holds the canary's dead letter."""
    sqs = boto3.client("sqs")
    empty = sqs.create_queue(QueueName=stage_world.unique_name("dlq"))["QueueUrl"]
    waited = Verifier(stage.deployed, {DEAD_LETTER_OUTPUT: empty}, timeout=1, say=[].append, poll=0.1)
    key = waited.land(Verification(), "glue")
    with pytest.raises(HopFailed) as failed:
        waited.recorded(Verification(), "glue", key)
    assert "no ledger record" in failed.value.detail and waited.read_dead_letters

    later = empty.rsplit("/", 1)[0] + "/" + stage_world.unique_name("dlq-later")
    verifier = Verifier(stage.deployed, {DEAD_LETTER_OUTPUT: later}, timeout=2, say=[].append, poll=0.1)

    def dead_letter_arrives() -> None:
        sqs.create_queue(QueueName=later.rsplit("/", 1)[1])
        sqs.send_message(QueueUrl=later, MessageBody=s3_event(stage.deployed.raw_bucket, key))

    threading.Timer(0.5, dead_letter_arrives).start()
    with pytest.raises(HopFailed) as failed:
        verifier.recorded(Verification(), "glue", key)
    assert "no ledger record" in failed.value.detail and not verifier.read_dead_letters
