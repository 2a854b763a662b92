"""The operator verbs that hand work to the stage's S3-arrival Lambda -- requeue's and backfill's sweep,
`rebuild --stage`'s run -- through the CLI's main on a stage on moto (HTTP).

moto runs no Lambda without Docker, so the one hop replaced is `lambda:Invoke`: the stage's arrival
function answers it with its own handler (lambda/s3_arrival) in this process, as the Lambda service
would (an unhandled error comes back as FunctionError with errorMessage). Real: the request the CLI
sends and the summary it reads back, the trigger's sweep and rebuild against the stage's config, ledger
and run tables, and the Glue job runs it starts.
"""

from __future__ import annotations

import io
import json
import logging

import boto3
import pytest

from lakeloader import cli
from lakeloader.control import trigger as trigger_module
from lakeloader.control.contract import ARG_RAW_ZONE_ERASED, ARG_REBUILD, ARG_TABLE_ID, glue_arg
from lakeloader.control.ledger import PENDING, QUARANTINED
from tests.unit import stage_world
from tests.unit.stage_world import Stage
from tests.unit.test_operator_verbs import one_file_in, statuses
from tests.unit.trigger_world import HANDLER, context

moto_server, aws_endpoint, stage = stage_world.moto_server, stage_world.aws_endpoint, stage_world.stage


class ArrivalFunction:
    """The stage's S3-arrival function as `lambda:Invoke` reaches it: its handler, in this process."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.events: list[dict] = []

    def invoke(self, *, FunctionName: str, Payload: bytes) -> dict:  # noqa: N803 (boto3's names)
        assert FunctionName == self.name, FunctionName
        event = json.loads(Payload)
        self.events.append(event)
        try:
            body = HANDLER(event, context())
        except Exception as exc:  # what the Lambda service answers for an unhandled error
            error = {"errorMessage": str(exc), "errorType": type(exc).__name__}
            return {
                "StatusCode": 200,
                "FunctionError": "Unhandled",
                "Payload": io.BytesIO(json.dumps(error).encode()),
            }
        return {"StatusCode": 200, "Payload": io.BytesIO(json.dumps(body).encode())}

    def requests(self) -> list[dict]:
        return [event["lakeloader"] for event in self.events]


@pytest.fixture
def arrival(stage: Stage, monkeypatch: pytest.MonkeyPatch):
    """The arrival function, its environment as the stack sets it (the stage's tables, a Glue job)."""
    glue = boto3.client("glue")
    job = f"{stage.name}-ingest"
    glue.create_job(
        Name=job,
        Role="arn:aws:iam::123456789012:role/lakeloader-glue",
        Command={
            "Name": "glueetl",
            "ScriptLocation": "s3://assets/glue_jobs/ingest.py",
            "PythonVersion": "3",
        },
        GlueVersion="5.0",
        ExecutionProperty={"MaxConcurrentRuns": 10},
    )
    deployed = stage.deployed
    env = {
        "CONFIG_TABLE": deployed.config_table,
        "LEDGER_TABLE": deployed.ledger_table,
        "RUNS_TABLE": deployed.runs_table,
        "GLUE_JOB_NAME": job,
        "RAW_BUCKET": deployed.raw_bucket,
        "LOG_LEVEL": "WARNING",
        "CONFIG_CACHE_SECONDS": "0",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    for name in (
        "EMR_APPLICATION_ID",
        "EMR_JOB_ROLE_ARN",
        "EMR_ENTRY_POINT",
        "EMR_EXTRA_ARGS",
        "TABLES_PER_RUN",
    ):
        monkeypatch.delenv(name, raising=False)
    function = ArrivalFunction(deployed.arrival_function)
    client = boto3.client
    monkeypatch.setattr(
        boto3,
        "client",
        lambda service, *a, **kw: function if service == "lambda" else client(service, *a, **kw),
    )
    trigger_module.clear_caches()
    logger = logging.getLogger("lakeloader")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    function.job = job  # where its runs start
    yield function
    logger.handlers[:], logger.level, logger.propagate = saved
    trigger_module.clear_caches()


def runs_by_table(job: str) -> dict[str, dict[str, str]]:
    """The Glue runs started, by the table each loads: their arguments."""
    runs = boto3.client("glue").get_job_runs(JobName=job)["JobRuns"]
    return {run["Arguments"][glue_arg(ARG_TABLE_ID)]: run["Arguments"] for run in runs}


def test_requeue_sweeps_the_tables_it_changed_and_only_those(stage, arrival, capsys):
    for table_id in ("crm.customers", "sales.orders"):
        one_file_in(stage, QUARANTINED, table_id=table_id)
    one_file_in(stage, PENDING, table_id="crm.vip")  # pending, but requeue did not touch its table

    code, out = stage.cli(capsys, "requeue", "--all-tables", "--reason", "fixed upstream")

    assert code == 0, out
    assert arrival.requests() == [{"action": "sweep", "table_ids": ["crm.customers", "sales.orders"]}]
    assert "sweep: runs started for crm.customers, sales.orders" in out.splitlines()
    assert set(runs_by_table(arrival.job)) == {"crm.customers", "sales.orders"}


def test_skip_nothing_to_requeue_and_no_sweep_start_no_run(stage, arrival, capsys):
    key = one_file_in(stage, QUARANTINED)
    code, out = stage.cli(capsys, "skip", "--table", "crm.customers", "--reason", "r")
    assert code == 0 and "crm.customers: 1 skipped" in out
    code, out = stage.cli(capsys, "requeue", "--table", "crm.customers", "--reason", "r")  # none quarantined
    assert code == 0 and "crm.customers: 0 requeued" in out
    back = ["--table", "crm.customers", "--status", "skipped", "--reason", "r", "--no-sweep"]
    code, out = stage.cli(capsys, "requeue", *back)
    assert code == 0 and "crm.customers: 1 requeued" in out and statuses(stage)[key] == PENDING
    assert arrival.events == [] and "sweep:" not in out
    assert runs_by_table(arrival.job) == {}


def test_a_sweep_that_starts_nothing_says_so(stage, arrival, capsys):
    one_file_in(stage, QUARANTINED)
    assert stage.ledger.acquire_lock("crm.customers", "run-elsewhere")  # a run holds the table

    code, out = stage.cli(capsys, "requeue", "--table", "crm.customers", "--reason", "r")

    assert code == 0, out
    assert "sweep: runs started for no table (busy or in its window)" in out.splitlines()
    assert runs_by_table(arrival.job) == {}


def test_backfill_sweeps_the_tables_it_recorded_files_of(stage, arrival, capsys):
    s3 = boto3.client("s3")
    for key in ("crm/customers/a.parquet", "sales/orders/b.parquet"):
        s3.put_object(Bucket=stage.deployed.raw_bucket, Key=key, Body=b"x")

    capsys.readouterr()
    code = cli.main(["backfill", "--stage", stage.name, "--table", "crm.customers"])

    out, err = capsys.readouterr()
    assert code == 0, out
    assert arrival.requests() == [{"action": "sweep", "table_ids": ["crm.customers"]}]
    assert "sweep: runs started for crm.customers" in out.splitlines()
    assert err.endswith(" backfill: 1 object(s) under the prefixes of 1 table(s)\n"), err  # the progress
    (recorded,) = stage.ledger.objects("crm.customers")
    assert recorded.correlation_id.startswith("backfill-")  # which backfill recorded it
    code, out = stage.cli(capsys, "backfill", "--table", "crm.customers")  # nothing new: no sweep
    assert code == 0 and len(arrival.events) == 1 and "sweep:" not in out
    assert set(runs_by_table(arrival.job)) == {"crm.customers"}


@pytest.mark.parametrize("erased", [False, True])
def test_rebuild_on_a_stage_records_unseen_files_and_starts_the_tables_rebuild_run(
    stage, arrival, capsys, erased
):
    boto3.client("s3").put_object(Bucket=stage.deployed.raw_bucket, Key="crm/customers/a.parquet", Body=b"x")
    options = ["--raw-zone-erased"] if erased else []
    if erased:  # and the stage of another project (cdk.json lakeloader:project)
        stack = boto3.client("cloudformation").describe_stacks(StackName=f"lakeloader-{stage.name}")[
            "Stacks"
        ][0]
        outputs = {o["OutputKey"]: {"Value": o["OutputValue"]} for o in stack["Outputs"]}
        template = {"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}, "Outputs": outputs}
        boto3.client("cloudformation").create_stack(
            StackName=f"acme-{stage.name}", TemplateBody=json.dumps(template)
        )
        boto3.client("cloudformation").delete_stack(StackName=f"lakeloader-{stage.name}")
        options += ["--project", "acme"]
    capsys.readouterr()

    code = cli.main(["rebuild", "--stage", stage.name, "--table", "crm.customers", *options])

    out, err = capsys.readouterr()
    assert code == 0, out
    assert err.endswith(" backfill: 1 object(s) under the prefixes of 1 table(s)\n"), err
    assert arrival.requests() == [
        {"action": "rebuild", "table_ids": ["crm.customers"], "raw_zone_erased": erased}
    ]
    (arguments,) = runs_by_table(arrival.job).values()
    assert arguments[glue_arg(ARG_REBUILD)] == "true"
    assert arguments[glue_arg(ARG_RAW_ZONE_ERASED)] == str(erased).lower()
    run_id = boto3.client("glue").get_job_runs(JobName=arrival.job)["JobRuns"][0]["Id"]
    follow = f"follow it with lakeloader status --stage {stage.name}"
    assert f"crm.customers: rebuild started as run {run_id}; {follow}" in out.splitlines()
    assert "crm.customers: 1 recorded as pending, 0 already in the ledger" in out
    assert statuses(stage) == {"crm/customers/a.parquet": PENDING}
    assert stage.ledger.objects("crm.customers")[0].correlation_id.startswith("rebuild-")


@pytest.mark.parametrize(
    ("table_id", "why"),
    [
        ("crm.customers", "'reason': 'run_in_progress', 'lock_holder': 'run-elsewhere'"),
        ("old.archive", "'reason': 'unknown_or_disabled_table'"),
    ],
)
def test_a_rebuild_the_trigger_defers_exits_1_saying_why(stage, arrival, capsys, table_id, why):
    assert stage.ledger.acquire_lock("crm.customers", "run-elsewhere")  # a run holds crm.customers

    capsys.readouterr()
    code = cli.main(["rebuild", "--stage", stage.name, "--table", table_id])

    out, err = capsys.readouterr()
    assert code == 1, out
    error = err.splitlines()[-1]
    assert error.startswith(
        f"lakeloader: error: {table_id}: no rebuild started: [{{'table_id': '{table_id}', {why}"
    )
    assert "rebuild started" not in out
    assert runs_by_table(arrival.job) == {}


def test_a_failed_invocation_raises_the_functions_error(stage, arrival, capsys, monkeypatch):
    one_file_in(stage, QUARANTINED)
    monkeypatch.delenv("GLUE_JOB_NAME")

    with pytest.raises(RuntimeError) as raised:
        stage.cli(capsys, "requeue", "--table", "crm.customers", "--reason", "r")

    assert str(raised.value).startswith(
        "the sweep failed: table 'crm.customers': engine_not_configured: GLUE_JOB_NAME is not set"
    ), raised.value
