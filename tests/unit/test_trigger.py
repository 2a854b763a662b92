"""The S3-arrival Lambda, in-process, against DynamoDB/Glue/EMR Serverless on a real moto server (HTTP)."""

from __future__ import annotations

import importlib.util
import json
import logging
import subprocess
import sys
import uuid
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import quote_plus

import boto3
import pytest

sys.path.append(str(Path(__file__).resolve().parents[1]))  # tests/ -> aws_fixtures
import aws_fixtures  # noqa: E402
from aws_fixtures import create_dynamodb_table, moto_api, unique_name  # noqa: E402

from lakeloader import trigger as trigger_module  # noqa: E402
from lakeloader.ledger import DONE, PENDING, Ledger  # noqa: E402
from lakeloader.trigger import (  # noqa: E402
    SettingsError,
    TableRoute,
    Trigger,
    TriggerError,
    TriggerSettings,
    match_route,
    parse_event,
)

ROOT = Path(__file__).resolve().parents[2]
RAW = "lakeloader-raw-123456789012"

# pytest fixtures from tests/aws_fixtures.py (one moto server per session)
moto_server = aws_fixtures.moto_server
aws_endpoint = aws_fixtures.aws_endpoint


def load_handler():
    spec = importlib.util.spec_from_file_location(
        "s3_arrival_handler", ROOT / "lambda" / "s3_arrival" / "handler.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.handler


HANDLER = load_handler()


# -- realistic events -----------------------------------------------------------


def s3_record(
    key: str,
    *,
    bucket: str = RAW,
    etag: str = "d41d8cd98f00b204e9800998ecf8427e",
    size: int = 1024,
    event_name: str = "ObjectCreated:Put",
    version_id: str | None = None,
) -> dict:
    """One record shaped like AWS's documented S3 notification (key URL-encoded as S3 does)."""
    obj = {"key": quote_plus(key), "size": size, "eTag": etag, "sequencer": "0055AED6DCD90281E5"}
    if version_id:
        obj["versionId"] = version_id
    return {
        "eventVersion": "2.1",
        "eventSource": "aws:s3",
        "awsRegion": "us-east-1",
        "eventTime": "2024-05-01T12:00:00.000Z",
        "eventName": event_name,
        "userIdentity": {"principalId": "AWS:AIDAJDPLRKLG7UEXAMPLE"},
        "requestParameters": {"sourceIPAddress": "203.0.113.10"},
        "responseElements": {
            "x-amz-request-id": "C3D13FE58DE4C810",
            "x-amz-id-2": "FMyUVURIY8/IgAtTv8xRjskZQpcIZ9KG4V5Wp6S7S/JRWeUWerMUE5JgHvANOjpD",
        },
        "s3": {
            "s3SchemaVersion": "1.0",
            "configurationId": "lakeloader-raw-arrival",
            "bucket": {
                "name": bucket,
                "ownerIdentity": {"principalId": "A3NL1KOZZKExample"},
                "arn": f"arn:aws:s3:::{bucket}",
            },
            "object": obj,
        },
    }


def s3_event(*records: dict) -> dict:
    return {"Records": list(records)}


def eventbridge_event(key: str, *, bucket: str = RAW, etag: str = "b1946ac92492d2347c6235b4d2611184") -> dict:
    return {
        "version": "0",
        "id": "17793124-05d4-b198-2fde-7ededc63b103",
        "detail-type": "Object Created",
        "source": "aws.s3",
        "account": "123456789012",
        "time": "2024-05-01T12:00:00Z",
        "region": "us-east-1",
        "resources": [f"arn:aws:s3:::{bucket}"],
        "detail": {
            "version": "0",
            "bucket": {"name": bucket},
            "object": {"key": quote_plus(key), "size": 5, "etag": etag, "sequencer": "00617F08299329D189"},
            "request-id": "N4N7GDK58NMKJ12R",
            "requester": "123456789012",
            "source-ip-address": "1.2.3.4",
            "reason": "PutObject",
        },
    }


def sqs_event(*bodies: dict) -> dict:
    return {
        "Records": [
            {
                "messageId": str(uuid.uuid4()),
                "receiptHandle": "AQEBwJnKyrHigUMZj6rYigCgxlaS3SLy0a...",
                "body": json.dumps(body),
                "attributes": {"ApproximateReceiveCount": "1"},
                "messageAttributes": {},
                "md5OfBody": "e4e68fb7bd0e697a0ae8f1bb342846b3",
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:lakeloader-arrivals",
                "awsRegion": "us-east-1",
            }
            for body in bodies
        ]
    }


def context(request_id: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(
        aws_request_id=request_id or str(uuid.uuid4()), function_name="lakeloader-s3-arrival"
    )


# -- the world: tables, jobs, env ---------------------------------------------------


class World:
    def __init__(self, endpoint: str) -> None:
        kwargs = {"endpoint_url": endpoint, "region_name": "us-east-1"}
        self.endpoint = endpoint
        self.dynamodb = boto3.client("dynamodb", **kwargs)
        self.glue = boto3.client("glue", **kwargs)
        self.emr = boto3.client("emr-serverless", **kwargs)
        self.config_table = create_dynamodb_table(self.dynamodb, unique_name("config"), "table_id")
        self.ledger_table = create_dynamodb_table(
            self.dynamodb, unique_name("ledger"), "table_id", "object_id"
        )
        self.runs_table = create_dynamodb_table(
            self.dynamodb, unique_name("runs"), "table_id", "run_id", ttl_attribute="expires_at"
        )
        self.glue_job = self.create_glue_job(max_concurrent_runs=10)
        self.ledger = Ledger(self.dynamodb, self.ledger_table, self.runs_table)

    def create_glue_job(self, max_concurrent_runs: int) -> str:
        name = unique_name("lakeloader-ingest")
        self.glue.create_job(
            Name=name,
            Role="arn:aws:iam::123456789012:role/lakeloader-glue",
            Command={
                "Name": "glueetl",
                "ScriptLocation": "s3://assets/glue_jobs/ingest.py",
                "PythonVersion": "3",
            },
            GlueVersion="5.0",
            ExecutionProperty={"MaxConcurrentRuns": max_concurrent_runs},
        )
        return name

    def add_table(self, table_id: str, prefix: str, *, enabled: bool = True, engine: str = "glue") -> None:
        config = {"id": table_id, "enabled": enabled, "engine": engine, "source": {"prefix": prefix}}
        self.dynamodb.put_item(
            TableName=self.config_table,
            Item={
                "table_id": {"S": table_id},
                "prefix": {"S": prefix},
                "enabled": {"BOOL": enabled},
                "engine": {"S": engine},
                "config": {"S": json.dumps(config)},
            },
        )

    def glue_runs(self, job: str | None = None) -> list[dict]:
        return self.glue.get_job_runs(JobName=job or self.glue_job)["JobRuns"]

    def env(self, **overrides: str) -> dict[str, str]:
        env = {
            "CONFIG_TABLE": self.config_table,
            "LEDGER_TABLE": self.ledger_table,
            "RUNS_TABLE": self.runs_table,
            "GLUE_JOB_NAME": self.glue_job,
            "RAW_BUCKET": RAW,
            "LOG_LEVEL": "INFO",
            "CONFIG_CACHE_SECONDS": "0",
        }
        env.update(overrides)
        return env


@pytest.fixture
def world(aws_endpoint: str, monkeypatch: pytest.MonkeyPatch):
    world = World(aws_endpoint)
    for name, value in world.env().items():
        monkeypatch.setenv(name, value)
    for name in ("EMR_APPLICATION_ID", "EMR_JOB_ROLE_ARN", "EMR_ENTRY_POINT", "EMR_EXTRA_ARGS"):
        monkeypatch.delenv(name, raising=False)
    trigger_module.clear_caches()
    logger = logging.getLogger("lakeloader")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    yield world
    logger.handlers[:], logger.level, logger.propagate = saved[0], saved[1], saved[2]
    trigger_module.clear_caches()


def log_lines(capsys: pytest.CaptureFixture[str]) -> list[dict]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]


CUSTOMERS = "crm/public/customers/"


# -- the main path ---------------------------------------------------------------------


def test_new_object_is_recorded_and_starts_a_glue_run(world: World, capsys):
    world.add_table("crm.customers", CUSTOMERS)
    key = CUSTOMERS + "LOAD00000001.parquet"
    summary = HANDLER(s3_event(s3_record(key)), context("req-1"))

    assert summary["correlation_id"] == "req-1"
    assert (summary["records"], summary["recorded"], summary["duplicates"]) == (1, 1, 0)
    assert (summary["unknown"], summary["disabled"], summary["ignored"]) == (0, 0, 0)
    assert summary["deferred"] == []
    [run_id] = summary["started"].values()
    assert list(summary["started"]) == ["crm.customers"]

    [obj] = world.ledger.objects("crm.customers")
    assert (obj.status, obj.bucket, obj.key, obj.etag, obj.size) == (
        PENDING,
        RAW,
        key,
        "d41d8cd98f00b204e9800998ecf8427e",
        1024,
    )
    assert obj.object_id == f"{key}#d41d8cd98f00b204e9800998ecf8427e"
    assert obj.correlation_id == "req-1"

    [glue_run] = world.glue_runs()
    assert glue_run["Id"] == run_id
    assert glue_run["Arguments"] == {
        "--lakeloader_table_id": "crm.customers",
        "--lakeloader_correlation_id": "req-1",
    }

    lock = world.ledger.get_lock("crm.customers")
    assert (lock.holder, lock.state, lock.engine_run_id) == ("trigger:req-1", "starting", run_id)

    logs = log_lines(capsys)
    assert logs and all(line["correlation_id"] == "req-1" for line in logs)
    messages = [line["message"] for line in logs]
    assert {"object.recorded", "run.started", "trigger.summary"} <= set(messages)
    started = next(line for line in logs if line["message"] == "run.started")
    assert (started["table_id"], started["run_id"], started["engine"]) == ("crm.customers", run_id, "glue")


def test_same_event_twice_is_one_object_and_one_run(world: World):
    world.add_table("crm.customers", CUSTOMERS)
    event = s3_event(s3_record(CUSTOMERS + "20240501-120000000.parquet"))
    first = HANDLER(event, context("req-1"))
    second = HANDLER(event, context("req-2"))  # S3 delivered it again

    assert first["recorded"] == 1 and len(first["started"]) == 1
    assert (second["recorded"], second["duplicates"], second["started"]) == (0, 1, {})
    assert second["deferred"] == [
        {
            "table_id": "crm.customers",
            "reason": "run_in_progress",
            "lock_holder": "trigger:req-1",
            "lock_state": "starting",
            "lock_expires_at": world.ledger.get_lock("crm.customers").expires_at,
        }
    ]
    assert len(world.ledger.objects("crm.customers")) == 1
    assert len(world.glue_runs()) == 1

    # The job ran and finished the object; yet another delivery starts nothing.
    run = "run-1"
    assert world.ledger.acquire_lock("crm.customers", run)  # takes over the trigger's reservation
    while batch := world.ledger.next_batch("crm.customers", run):
        world.ledger.finish("crm.customers", batch, run, DONE)
    third = HANDLER(event, context("req-3"))
    assert (third["duplicates"], third["started"], third["deferred"]) == (1, {}, [])
    assert len(world.glue_runs()) == 1


def test_object_arriving_while_a_run_holds_the_lock_stays_pending(world: World):
    world.add_table("crm.customers", CUSTOMERS)
    assert world.ledger.acquire_lock("crm.customers", "job-run-7")
    summary = HANDLER(s3_event(s3_record(CUSTOMERS + "b.parquet")), context())
    assert summary["recorded"] == 1 and summary["started"] == {}
    assert summary["deferred"][0]["reason"] == "run_in_progress"
    assert summary["deferred"][0]["lock_holder"] == "job-run-7"
    assert [o.status for o in world.ledger.objects("crm.customers")] == [PENDING]
    assert world.glue_runs() == []


def test_retry_of_the_same_invocation_does_not_start_twice(world: World):
    world.add_table("crm.customers", CUSTOMERS)
    event = s3_event(s3_record(CUSTOMERS + "a.parquet"))
    first = HANDLER(event, context("req-1"))
    retry = HANDLER(event, context("req-1"))  # Lambda retries keep the request id
    assert retry["started"] == first["started"]
    assert retry["duplicates"] == 1
    assert len(world.glue_runs()) == 1


def test_one_start_per_table_per_batch(world: World):
    world.add_table("crm.customers", CUSTOMERS)
    world.add_table("sales.order_lines", "sales/public/order_lines/")
    event = s3_event(
        s3_record(CUSTOMERS + "1.parquet", etag="a1"),
        s3_record(CUSTOMERS + "2.parquet", etag="a2"),
        s3_record(CUSTOMERS + "3.parquet", etag="a3"),
        s3_record("sales/public/order_lines/1.csv", etag="b1"),
    )
    summary = HANDLER(event, context())
    assert summary["recorded"] == 4
    assert sorted(summary["started"]) == ["crm.customers", "sales.order_lines"]
    runs = world.glue_runs()
    assert sorted(r["Arguments"]["--lakeloader_table_id"] for r in runs) == [
        "crm.customers",
        "sales.order_lines",
    ]


# -- nothing silently dropped ------------------------------------------------------------


def test_unknown_prefix_is_counted_and_logged(world: World, capsys):
    world.add_table("crm.customers", CUSTOMERS)
    summary = HANDLER(s3_event(s3_record("hr/public/employees/1.parquet")), context("req-u"))
    assert (summary["records"], summary["unknown"], summary["recorded"]) == (1, 1, 0)
    assert summary["started"] == {} and summary["deferred"] == []
    assert world.ledger.objects("crm.customers") == []
    assert world.glue_runs() == []
    [line] = [x for x in log_lines(capsys) if x["message"] == "object.unknown_prefix"]
    assert (line["level"], line["key"], line["bucket"], line["correlation_id"]) == (
        "WARNING",
        "hr/public/employees/1.parquet",
        RAW,
        "req-u",
    )


def test_disabled_table_is_counted_recorded_and_not_started(world: World, capsys):
    world.add_table("crm.customers", CUSTOMERS, enabled=False)
    summary = HANDLER(s3_event(s3_record(CUSTOMERS + "1.parquet")), context())
    assert (summary["disabled"], summary["recorded"], summary["started"]) == (1, 0, {})
    assert world.glue_runs() == []
    # kept as pending so that enabling the table loses nothing
    assert [o.status for o in world.ledger.objects("crm.customers")] == [PENDING]
    assert any(x["message"] == "object.table_disabled" for x in log_lines(capsys))

    # enabled again: the sweep starts it
    world.add_table("crm.customers", CUSTOMERS, enabled=True)
    swept = HANDLER({"lakeloader": {"action": "sweep"}}, context())
    assert list(swept["started"]) == ["crm.customers"]


def test_ignored_records_are_counted(world: World, capsys):
    world.add_table("crm.customers", CUSTOMERS)
    summary = HANDLER(
        s3_event(
            s3_record(CUSTOMERS + "1.parquet", event_name="ObjectRemoved:Delete"),
            s3_record(CUSTOMERS + "_SUCCESS"),
            s3_record(CUSTOMERS),  # folder marker
            s3_record(CUSTOMERS + "1.parquet", bucket="someone-elses-bucket"),
            {"eventSource": "aws:dynamodb", "dynamodb": {}},
        ),
        context(),
    )
    assert (summary["records"], summary["ignored"], summary["recorded"], summary["started"]) == (5, 5, 0, {})
    reasons = [
        x.get("reason", "")
        for x in log_lines(capsys)
        if x["message"] in ("object.ignored", "record.unrecognised")
    ]
    assert len(reasons) == 5
    assert any("ObjectRemoved:Delete" in r for r in reasons)
    assert any("raw bucket" in r for r in reasons)


def test_s3_test_event_is_not_a_record(world: World):
    summary = HANDLER(
        {
            "Service": "Amazon S3",
            "Event": "s3:TestEvent",
            "Time": "2024-05-01T12:00:00.000Z",
            "Bucket": RAW,
            "RequestId": "5582815E1AEA5ADF",
            "HostId": "8cLeGAmw...",
        },
        context(),
    )
    assert summary["records"] == 0 and summary["ignored"] == 0


# -- keys and prefixes -----------------------------------------------------------------------


def test_url_encoded_keys_with_spaces_and_plus(world: World):
    world.add_table("crm.customers", CUSTOMERS)
    key = CUSTOMERS + "2024-05-01 12:00:00/part+1 (copy)=x%.parquet"
    record = s3_record(key)
    assert record["s3"]["object"]["key"] != key  # really encoded: spaces as '+', '+' as %2B
    summary = HANDLER(s3_event(record), context())
    assert summary["recorded"] == 1
    [obj] = world.ledger.objects("crm.customers")
    assert obj.key == key
    assert obj.uri == f"s3://{RAW}/{key}"


def test_longest_prefix_wins_with_nested_prefixes(world: World):
    world.add_table("crm.all", "crm/")
    world.add_table("crm.customers", CUSTOMERS)
    world.add_table("crm.customers_gdpr", CUSTOMERS + "gdpr/", enabled=False)
    summary = HANDLER(
        s3_event(
            s3_record(CUSTOMERS + "1.parquet", etag="a"),
            s3_record("crm/public/orders/1.parquet", etag="b"),
            s3_record("crm/public/customers_archive/1.parquet", etag="c"),  # not under customers/
            s3_record(CUSTOMERS + "gdpr/1.parquet", etag="d"),  # the disabled nested table owns it
        ),
        context(),
    )
    assert (summary["recorded"], summary["disabled"]) == (3, 1)
    assert [o.key for o in world.ledger.objects("crm.customers")] == [CUSTOMERS + "1.parquet"]
    assert sorted(o.key for o in world.ledger.objects("crm.all")) == [
        "crm/public/customers_archive/1.parquet",
        "crm/public/orders/1.parquet",
    ]
    assert [o.key for o in world.ledger.objects("crm.customers_gdpr")] == [CUSTOMERS + "gdpr/1.parquet"]
    assert sorted(summary["started"]) == ["crm.all", "crm.customers"]


def test_match_route_normalises():
    routes = [TableRoute("a", "x/"), TableRoute("b", "x/y/"), TableRoute("c", "z/", enabled=False)]
    assert match_route("x/y/f", routes).table_id == "b"
    assert match_route("/x/f", routes).table_id == "a"
    assert match_route("x", routes) is None
    assert match_route("z/f", routes).table_id == "c"
    assert trigger_module.normalise_prefix("/crm/public") == "crm/public/"


# -- event wrappers ------------------------------------------------------------------------------


def test_sqs_sns_and_eventbridge_wrappers(world: World):
    world.add_table("crm.customers", CUSTOMERS)
    sns_in_sqs = {
        "Type": "Notification",
        "MessageId": "m1",
        "TopicArn": "arn:aws:sns:us-east-1:123456789012:raw",
        "Message": json.dumps(s3_event(s3_record(CUSTOMERS + "sns file.parquet", etag="s"))),
    }
    event = sqs_event(
        s3_event(s3_record(CUSTOMERS + "sqs file.parquet", etag="q")),
        sns_in_sqs,
        eventbridge_event(CUSTOMERS + "eb file.parquet", etag="e"),
    )
    summary = HANDLER(event, context())
    assert (summary["records"], summary["recorded"]) == (3, 3)
    assert len(summary["started"]) == 1
    assert sorted(o.key for o in world.ledger.objects("crm.customers")) == [
        CUSTOMERS + "eb file.parquet",
        CUSTOMERS + "sns file.parquet",
        CUSTOMERS + "sqs file.parquet",
    ]
    # EventBridge directly
    direct = HANDLER(eventbridge_event(CUSTOMERS + "direct.parquet", etag="d"), context())
    assert direct["recorded"] == 1


def test_parse_event_reads_versions_and_reports_garbage():
    objects, problems = parse_event(
        {"Records": [s3_record("a/b c.csv", version_id="3HL4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY"), "junk"]}
    )
    assert [(o.ref.key, o.ref.version_id, o.ref.object_id) for o in objects] == [
        ("a/b c.csv", "3HL4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY", "a/b c.csv#3HL4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY")
    ]
    assert problems == ["record of type str"]
    assert parse_event({"hello": 1})[1] and parse_event([1])[1]
    raw_eb = eventbridge_event("a/x+y.csv")
    raw_eb["detail"]["object"]["key"] = "a/x+y.csv"
    assert parse_event(raw_eb, eventbridge_keys_encoded=False)[0][0].ref.key == "a/x+y.csv"


# -- engines and failures ------------------------------------------------------------------------


def test_concurrent_runs_exceeded_leaves_objects_pending(world: World, monkeypatch):
    """moto's Glue honours MaxConcurrentRuns, but finishes runs at once unless told otherwise:
    pin job runs in STARTING through moto's state manager."""
    job = world.create_glue_job(max_concurrent_runs=1)
    monkeypatch.setenv("GLUE_JOB_NAME", job)
    world.add_table("crm.customers", CUSTOMERS)
    world.add_table("sales.order_lines", "sales/public/order_lines/")
    moto_api(
        world.endpoint,
        "state-manager/set-transition",
        {"model_name": "glue::job_run", "transition": {"progression": "manual", "times": 1_000_000}},
    )
    try:
        first = HANDLER(s3_event(s3_record(CUSTOMERS + "1.parquet")), context("req-a"))
        assert list(first["started"]) == ["crm.customers"]
        second = HANDLER(s3_event(s3_record("sales/public/order_lines/1.csv")), context("req-b"))
    finally:
        moto_api(world.endpoint, "state-manager/unset-transition", {"model_name": "glue::job_run"})

    assert second["recorded"] == 1 and second["started"] == {}
    [deferred] = second["deferred"]
    assert (deferred["table_id"], deferred["reason"], deferred["engine"]) == (
        "sales.order_lines",
        "concurrent_runs_exceeded",
        "glue",
    )
    assert "ConcurrentRunsExceededException" in deferred["error"]
    assert [o.status for o in world.ledger.objects("sales.order_lines")] == [PENDING]
    assert world.ledger.get_lock("sales.order_lines") is None  # reservation given back
    assert len(world.glue_runs(job)) == 1

    # capacity again (moto now reports the first run SUCCEEDED): a sweep starts the waiting table;
    # crm.customers still has its reservation, so it is deferred to the run that holds it
    swept = HANDLER({"lakeloader": {"action": "sweep"}}, context("req-sweep"))
    assert swept["action"] == "sweep"
    assert list(swept["started"]) == ["sales.order_lines"]
    assert [d["table_id"] for d in swept["deferred"]] == ["crm.customers"]


def test_emr_serverless_engine(world: World, monkeypatch):
    app = world.emr.create_application(name=unique_name("lakeloader"), releaseLabel="emr-7.5.0", type="SPARK")
    monkeypatch.setenv("EMR_APPLICATION_ID", app["applicationId"])
    monkeypatch.setenv("EMR_JOB_ROLE_ARN", "arn:aws:iam::123456789012:role/lakeloader-emr-job")
    monkeypatch.setenv("EMR_ENTRY_POINT", "s3://assets/emr_steps/ingest.py")
    monkeypatch.setenv("EMR_EXTRA_ARGS", json.dumps(["--config-table", world.config_table]))
    world.add_table("inventory.products", "inventory/products/", engine="emr")
    summary = HANDLER(s3_event(s3_record("inventory/products/1.json")), context("req-emr"))
    run_id = summary["started"]["inventory.products"]
    job_run = world.emr.get_job_run(applicationId=app["applicationId"], jobRunId=run_id)["jobRun"]
    assert job_run["executionRole"] == "arn:aws:iam::123456789012:role/lakeloader-emr-job"
    assert job_run["jobDriver"]["sparkSubmit"] == {
        "entryPoint": "s3://assets/emr_steps/ingest.py",
        "entryPointArguments": [
            "--table-id",
            "inventory.products",
            "--correlation-id",
            "req-emr",
            "--config-table",
            world.config_table,
        ],
    }
    assert world.glue_runs() == []


def test_start_failure_raises_keeps_objects_and_a_retry_recovers(world: World, monkeypatch, capsys):
    monkeypatch.setenv("GLUE_JOB_NAME", "no-such-job")
    world.add_table("crm.customers", CUSTOMERS)
    event = s3_event(s3_record(CUSTOMERS + "1.parquet"))
    with pytest.raises(TriggerError, match="crm.customers"):
        HANDLER(event, context("req-x"))
    assert [o.status for o in world.ledger.objects("crm.customers")] == [PENDING]
    assert world.ledger.get_lock("crm.customers") is None
    summary_line = [x for x in log_lines(capsys) if x["message"] == "trigger.summary"][0]
    assert summary_line["level"] == "ERROR" and summary_line["deferred"][0]["reason"] == "start_failed"

    monkeypatch.setenv("GLUE_JOB_NAME", world.glue_job)  # fixed; Lambda retries the same event
    retry = HANDLER(event, context("req-x"))
    assert (retry["duplicates"], list(retry["started"])) == (1, ["crm.customers"])


def test_engine_not_configured(world: World, monkeypatch):
    world.add_table("inventory.products", "inventory/products/", engine="emr")
    with pytest.raises(TriggerError, match="engine_not_configured"):
        HANDLER(s3_event(s3_record("inventory/products/1.json")), context())
    assert [o.status for o in world.ledger.objects("inventory.products")] == [PENDING]


def test_an_expired_lock_does_not_block_the_table(world: World):
    world.add_table("crm.customers", CUSTOMERS)
    assert world.ledger.acquire_lock("crm.customers", "crashed-run", ttl_seconds=60)
    later = Trigger(TriggerSettings.from_env(), clock=lambda: world.ledger.clock() + 3600)
    summary = trigger_module.handle_event(
        s3_event(s3_record(CUSTOMERS + "1.parquet")), context(), trigger=later
    )
    assert list(summary["started"]) == ["crm.customers"]
    assert world.ledger.get_lock("crm.customers").holder.startswith("trigger:")


def test_settings_from_env():
    base = {"CONFIG_TABLE": "c", "LEDGER_TABLE": "l", "RUNS_TABLE": "r"}
    settings = TriggerSettings.from_env({**base, "EMR_EXTRA_ARGS": '["--a", "b"]', "LOG_LEVEL": "debug"})
    assert settings.emr_extra_args == ("--a", "b") and settings.log_level == "DEBUG"
    assert settings.glue_job_name is None and settings.config_cache_seconds == 60
    with pytest.raises(SettingsError, match="LEDGER_TABLE, RUNS_TABLE"):
        TriggerSettings.from_env({"CONFIG_TABLE": "c"})
    with pytest.raises(SettingsError, match="EMR_EXTRA_ARGS"):
        TriggerSettings.from_env({**base, "EMR_EXTRA_ARGS": '{"a": 1}'})
    with pytest.raises(SettingsError, match="EMR_EXTRA_ARGS"):
        TriggerSettings.from_env({**base, "EMR_EXTRA_ARGS": "--a b"})
    with pytest.raises(SettingsError, match="LOG_LEVEL"):
        TriggerSettings.from_env({**base, "LOG_LEVEL": "chatty"})


def test_config_is_cached_per_container(world: World, monkeypatch):
    monkeypatch.setenv("CONFIG_CACHE_SECONDS", "300")
    world.add_table("crm.customers", CUSTOMERS)
    assert HANDLER(s3_event(s3_record(CUSTOMERS + "1.parquet")), context())["recorded"] == 1
    world.add_table("sales.order_lines", "sales/public/order_lines/")
    # still the cached config: the new table is unknown until the cache ages out
    assert HANDLER(s3_event(s3_record("sales/public/order_lines/1.csv")), context())["unknown"] == 1
    trigger_module.clear_caches()
    assert HANDLER(s3_event(s3_record("sales/public/order_lines/1.csv")), context())["recorded"] == 1


LAMBDA_IMPORT_PROBE = """
import json, sys
reached = []
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pydantic", "pyspark", "yaml"):
            reached.append(name)
            raise ImportError("not in the Lambda bundle: " + name)
sys.meta_path.insert(0, Block())
sys.path.insert(0, sys.argv[1])
import handler
if sys.argv[2] == "s3_arrival":
    result = handler.handler({"Service": "Amazon S3", "Event": "s3:TestEvent"}, None)
else:
    delete = {"RequestType": "Delete", "ResourceProperties": {"TableName": "t"}}
    result = handler.apply_custom_resource_event(delete)
modules = sorted(m for m in sys.modules if m.startswith("lakeloader"))
print(json.dumps({"reached": reached, "result": result, "modules": modules}))
"""


@pytest.mark.parametrize("function", ["s3_arrival", "config_sync"])
def test_lambda_handlers_never_reach_pydantic_or_pyspark(function: str):
    """Import each Lambda handler (and run it once) with pydantic, pyspark and yaml made unimportable:
    an import that reaches them, even one caught by the code, fails the test."""
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),
        "CONFIG_TABLE": "c",
        "LEDGER_TABLE": "l",
        "RUNS_TABLE": "r",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }
    result = subprocess.run(
        [sys.executable, "-c", LAMBDA_IMPORT_PROBE, str(ROOT / "lambda" / function), function],
        cwd=ROOT / "lambda" / function,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    probe = json.loads(result.stdout.strip().splitlines()[-1])
    assert probe["reached"] == [], f"the {function} Lambda imports {probe['reached']}"
    assert "lakeloader.config" not in probe["modules"]
    if function == "s3_arrival":
        assert probe["result"]["records"] == 0 and probe["result"]["started"] == {}
        assert "lakeloader.trigger.handler" in probe["modules"]
    else:
        assert probe["result"] == ["t/config-sync", {"Put": 0, "Deleted": 0}]
