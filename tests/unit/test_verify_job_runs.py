"""`lakeloader verify`'s job hop on moto over HTTP: which engine runs it takes for the canary's (Glue: the
table among a run's tables, started since the canary landed, newest first; EMR Serverless: the table in
the run's name, created since), and how it names a run that failed or did not end: the run, and the
first lines of its log (Glue: CloudWatch, where the job's security configuration sends them; EMR: the
driver's log in S3). moto runs no job: its runs are started here, held where they are by moto's state
manager, and ended by the API's own cancel."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import boto3
import pytest

from lakeloader.cli.stage import DeployedStage
from lakeloader.cli.verify import HopFailed, Verification, Verifier
from lakeloader.config import canary
from lakeloader.control.contract import ARG_TABLE_ID, EMR_LOGS_PREFIX, glue_arg
from lakeloader.control.ledger import DONE
from tests.unit import stage_world

moto_state_held = stage_world.aws_fixtures.moto_state_held

moto_server, aws_endpoint, stage = stage_world.moto_server, stage_world.aws_endpoint, stage_world.stage
unique_name = stage_world.unique_name

ROLE = "arn:aws:iam::123456789012:role/service-role/lakeloader-dev-glue"  # a path: the name is its last part


@pytest.fixture
def glue_runs_held(aws_endpoint) -> Iterator[None]:
    """moto's Glue runs stay STARTING."""
    with moto_state_held(aws_endpoint, "glue::job_run"):
        yield


def ingest_job(deployed: DeployedStage, security_configuration: str | None) -> DeployedStage:
    """The stage with an ingest job of its own, as the stack makes it."""
    deployed = dataclasses.replace(deployed, ingest_job=unique_name("lakeloader-ingest"))
    extra = {"SecurityConfiguration": security_configuration} if security_configuration else {}
    boto3.client("glue").create_job(
        Name=deployed.ingest_job,
        Role=ROLE,
        Command={"Name": "glueetl"},
        ExecutionProperty={"MaxConcurrentRuns": 10},  # one run per table at a time, not per job
        **extra,
    )
    return deployed


def glue_run(deployed: DeployedStage, *table_ids: str) -> tuple[str, datetime]:
    """A run of the ingest job for `table_ids`, as the trigger starts one: its id and start."""
    glue = boto3.client("glue")
    arguments = {glue_arg(ARG_TABLE_ID): ",".join(table_ids)}
    run_id = glue.start_job_run(JobName=deployed.ingest_job, Arguments=arguments)["JobRunId"]
    time.sleep(0.01)  # each run its own start
    return run_id, glue.get_job_run(JobName=deployed.ingest_job, RunId=run_id)["JobRun"]["StartedOn"]


@pytest.fixture
def glue_log_groups(aws_endpoint) -> None:
    """No Glue job log group yet: moto's filter_log_events ignores logStreamNamePrefix, so a group must
    hold only the run's own stream (the server is the session's)."""
    logs = boto3.client("logs")
    for group in logs.describe_log_groups(logGroupNamePrefix="/aws-glue/jobs/")["logGroups"]:
        logs.delete_log_group(logGroupName=group["logGroupName"])


def job_hop(deployed: DeployedStage, engine: str, since: datetime, outputs: dict | None = None) -> HopFailed:
    verifier = Verifier(deployed, outputs or {}, timeout=1, say=[].append, poll=0.1)
    with pytest.raises(HopFailed) as failed:
        verifier.job_run(Verification(), engine, f"{canary.CANARY_PREFIX}{engine}/verify-1.json", since)
    assert failed.value.hop == f"{engine}: job run"
    return failed.value


TRACEBACK = [f"line {n}" for n in range(15)]


@pytest.mark.parametrize(
    ("configuration", "group"),
    [
        (None, "/aws-glue/jobs/error"),
        (None, "/aws-glue/jobs/logs-v2"),
        ("lakeloader-dev-logs", "/aws-glue/jobs/lakeloader-dev-logs-role/lakeloader-dev-glue/error"),
        ("lakeloader-dev-logs", "/aws-glue/jobs/logs-v2-lakeloader-dev-logs"),
    ],
    ids=["error log", "output log", "encrypted error log", "encrypted output log"],
)
def test_a_glue_run_that_does_not_end_fails_the_hop_naming_the_newest_canary_run_and_its_log(
    stage, glue_runs_held, glue_log_groups, configuration, group
):
    """The runs that took the canary table (alone, or among the tables of a batched run) since it
    landed, newest first; another table's run, one whose table only starts the same, and one from
    before are not the canary's. The hop names the newest and its log: the first lines, then the last
    (a traceback's last line is its error), from the first log group that holds the run's stream."""
    deployed = ingest_job(stage.deployed, configuration)
    table_id = canary.canary_id("glue")
    glue_run(deployed, table_id)  # before the canary landed
    _, since = glue_run(deployed, table_id)
    newest, newest_start = glue_run(deployed, "crm.customers", table_id)
    glue_run(deployed, "crm.customers")
    glue_run(deployed, f"{table_id}_old")
    stage_world.put_log(group, TRACEBACK, int(time.time() * 1000), stream=newest)

    failed = job_hop(deployed, "glue", since)

    assert failed.resource == f"Glue job {deployed.ingest_job} run {newest}"
    assert failed.detail == "STARTING after 1 s"
    assert failed.log[0] == f"log group {group}:"
    assert failed.log[1:] == [*TRACEBACK[:10], "...", *TRACEBACK[-3:]]

    assert job_hop(deployed, "glue", newest_start).resource.endswith(f"run {newest}")  # started at `since`


def test_a_glue_run_without_a_log_is_named_with_the_groups_looked_in(stage, glue_runs_held, glue_log_groups):
    deployed = ingest_job(stage.deployed, None)
    since = datetime.now(UTC) - timedelta(minutes=1)
    run_id, _ = glue_run(deployed, canary.canary_id("glue"))

    failed = job_hop(deployed, "glue", since)

    assert failed.resource == f"Glue job {deployed.ingest_job} run {run_id}"
    assert failed.log == [f"(no log events of run {run_id} in /aws-glue/jobs/error, /aws-glue/jobs/logs-v2)"]


def emr_application(deployed: DeployedStage) -> DeployedStage:
    emr = boto3.client("emr-serverless")
    app = emr.create_application(name=unique_name("lakeloader-dev"), releaseLabel="emr-7.12.0", type="SPARK")
    return dataclasses.replace(deployed, emr_application=app["applicationId"])


def emr_run(deployed: DeployedStage, *table_ids: str) -> str:
    """A job run on the stage's application for `table_ids`, named as the trigger names it."""
    return boto3.client("emr-serverless").start_job_run(
        applicationId=deployed.emr_application,
        executionRoleArn="arn:aws:iam::123456789012:role/lakeloader-dev-emr",
        name=f"lakeloader-{','.join(table_ids)}",
        jobDriver={"sparkSubmit": {"entryPoint": "s3://assets/emr_steps/ingest.py"}},
    )["jobRunId"]


def cancel(deployed: DeployedStage, run_id: str) -> None:
    boto3.client("emr-serverless").cancel_job_run(applicationId=deployed.emr_application, jobRunId=run_id)


def test_an_emr_run_that_took_the_canary_fails_the_hop_once_every_such_run_has_ended_without_it(stage):
    """The canary's EMR runs are those whose name holds its table, created since it landed (moto dates a
    run at the start of its day). One cancelled run beside one still going is not yet a failure: the
    hop waits, and names the run that is still going at the timeout. Once each has ended without the
    file, the hop fails at once naming the run and where its driver log is (EMR logs to S3)."""
    deployed = emr_application(stage.deployed)
    table_id = canary.canary_id("emr")
    first = emr_run(deployed, "crm.customers", table_id)
    second = emr_run(deployed, table_id)
    emr_run(deployed, "crm.customers")  # another table's: not the canary's, however it ends
    midnight = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    since = midnight - timedelta(seconds=1)
    outputs = {"AssetsBucketName": "lakeloader-dev-assets"}
    cancel(deployed, first)

    going = job_hop(deployed, "emr", since, outputs)

    assert going.resource == f"EMR Serverless application {deployed.emr_application} run {first}"
    assert going.detail == "CANCELLED after 1 s"  # the first listed; the second is still going

    cancel(deployed, second)
    ended = job_hop(deployed, "emr", since, outputs)
    assert ended.resource == f"EMR Serverless application {deployed.emr_application} run {first}"
    assert ended.detail == "CANCELLED: "  # moto gives no stateDetails
    application = deployed.emr_application
    assert ended.log == [
        f"driver log: s3://lakeloader-dev-assets/{EMR_LOGS_PREFIX}applications/{application}/jobs/"
        f"{first}/SPARK_DRIVER/stderr.gz"
    ]
    assert job_hop(deployed, "emr", since, {}).log == [
        ended.log[0].replace("lakeloader-dev-assets", "<assets bucket>")
    ]

    assert "no emr run started within 1 s" in job_hop(deployed, "emr", midnight).detail  # created before


@pytest.mark.parametrize("engine", ["glue", "emr"])
def test_the_job_hop_passes_naming_the_engine_run_that_took_the_loaded_canary(stage, glue_runs_held, engine):
    """The file is done in the ledger: the hop passes with the lakeloader run that loaded it, and names
    the engine's run (Glue: the newest that took the canary table; EMR: the first listed)."""
    table_id = canary.canary_id(engine)
    if engine == "glue":
        deployed = ingest_job(stage.deployed, None)
        since = datetime.now(UTC) - timedelta(minutes=1)
        glue_run(deployed, table_id)
        named, _ = glue_run(deployed, table_id)
        resource = f"Glue job {deployed.ingest_job}"
    else:
        deployed = emr_application(stage.deployed)
        since = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(seconds=1)
        named = emr_run(deployed, table_id)
        emr_run(deployed, table_id)
        resource = f"EMR Serverless application {deployed.emr_application}"
    key = f"{canary.CANARY_PREFIX}{engine}/verify-1.json"
    stage.record(table_id, key)
    claimed = stage.ledger.claim(table_id, stage.ledger.objects(table_id), "run-1")
    stage.ledger.finish(table_id, claimed, "run-1", DONE)
    said: list[str] = []
    verifier, result = Verifier(deployed, {}, timeout=1, say=said.append, poll=0.1), Verification()

    assert verifier.job_run(result, engine, key, since) == "run-1"

    assert result.passed == [f"{engine}: job run"]
    assert said[0].endswith(f"{engine}: job run: {resource} run {named} loaded it")
    assert verifier.current == (f"{engine}: job run", resource)
