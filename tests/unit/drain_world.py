"""The drain's world for its tests (lakeloader.jobs.drain.drain_table), without the e2e suite.

Real: the Ledger code against DynamoDB on moto's server over HTTP, drain_table itself, and its
metrics going to moto's CloudWatch. Every DynamoDB call a drain sends is checked against the job
roles' grants as tests/infra/test_infra_iam_sufficient.py states them. Stubbed: only the Spark
merge (`lakeloader.jobs.load.load_table`, monkeypatched with a stub of the same parameters): it is
not the code under test here and is covered by tests/spark. The stub returns the outcome each test
scripts for the files it is given and can act while a batch "runs" (an object arrives, the lock is
taken over).

Test modules take the fixtures by module attribute (``ledger = drain_world.ledger``), as pytest finds
fixtures, the way stage_world.py and trigger_world.py are used.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from pathlib import Path

import boto3
import pytest

sys.path.append(str(Path(__file__).resolve().parents[1]))  # tests/ -> aws_fixtures
import aws_fixtures  # noqa: E402
from aws_fixtures import ManualClock, create_dynamodb_table, unique_name  # noqa: E402

from lakeloader.config import TableConfig  # noqa: E402
from lakeloader.control.contract import GLUE_CATALOG, METRICS_NAMESPACE  # noqa: E402
from lakeloader.control.ledger import Ledger, ObjectRef  # noqa: E402
from lakeloader.jobs import drain as drain_job  # noqa: E402
from lakeloader.jobs import load  # noqa: E402
from lakeloader.jobs.drain import drain_table  # noqa: E402
from lakeloader.jobs.load import LoadResult  # noqa: E402
from tests.infra.test_infra_iam_sufficient import JOB_DYNAMODB_ACTIONS  # noqa: E402

moto_server = aws_fixtures.moto_server
aws_endpoint = aws_fixtures.aws_endpoint
PAUSED: list[bool] = []  # non-empty while the stubbed merge acts: its ledger calls are not the run's


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_700_000_000.0)


@pytest.fixture
def ledger(aws_endpoint, clock, monkeypatch) -> Ledger:
    # the drain keeps its CloudWatch client for the process: one made for an earlier session's moto
    # server (a second pytest.main in one process, as mutmut runs) would send the metrics there
    monkeypatch.setattr(drain_job, "_CLOUDWATCH", [])
    client = boto3.client("dynamodb", endpoint_url=aws_endpoint, region_name="us-east-1")
    objects = create_dynamodb_table(client, unique_name("ledger"), "table_id", "object_id")
    runs = create_dynamodb_table(
        client, unique_name("runs"), "table_id", "run_id", ttl_attribute="expires_at"
    )
    return Ledger(client, objects, runs, clock=clock)


@pytest.fixture
def table() -> TableConfig:
    return TableConfig.model_validate(
        {
            "id": unique_name("crm.customers").replace("-", "_"),
            "source": {"prefix": "crm/public/customers/", "format": "parquet", "cdc": "dms"},
            "target": {"database": "crm", "table": "customers"},
            "keys": ["id"],
        }
    )


Merge = Callable[[list[str]], LoadResult]


def stand_in(monkeypatch, fake: Callable[..., LoadResult]) -> None:
    """Put `fake` in place of the Spark merge; its parameters must be the real load_table's own."""

    def parameters(function: Callable) -> list[tuple[str, object]]:
        return [(p.name, p.kind) for p in inspect.signature(function).parameters.values()]

    assert parameters(fake) == parameters(load.load_table)
    monkeypatch.setattr(load, "load_table", fake)


@pytest.fixture
def merges(monkeypatch) -> list[list[str]]:
    """Install a scripted `load_table`; returns the file names of each batch it was given."""
    calls: list[list[str]] = []

    def install(expected: TableConfig, outcome: Merge) -> list[list[str]]:
        def load_table(spark, table, files, *, catalog, run_id, progress, log_consumed=False, before_publish):
            assert table.id == expected.id and spark == "spark" and catalog == GLUE_CATALOG
            names = [f.name for f in files]
            calls.append(names)
            PAUSED.append(True)  # what the scripted outcome does is another actor's, not the run's
            try:
                return outcome(names)
            finally:
                PAUSED.pop()

        stand_in(monkeypatch, load_table)
        return calls

    return install


def land(ledger: Ledger, table: TableConfig, *names: str, size: int | None = None) -> None:
    for name in names:
        ref = ObjectRef(bucket="raw", key=f"{table.source.prefix}{name}", etag=name, size=size)
        assert ledger.record_object(table.id, ref, correlation_id="c")


def statuses(ledger: Ledger, table: TableConfig) -> dict[str, tuple[str, str | None]]:
    return {o.key.rsplit("/", 1)[1]: (o.status, o.error) for o in ledger.objects(table.id)}


def drain(ledger: Ledger, table: TableConfig, **options) -> LoadResult:
    """Run drain_table; every DynamoDB call it sends must be one the job roles are granted."""
    sent: set[tuple[str, str]] = set()

    def record(model, params, **_):
        if not PAUSED:
            sent.add((params["TableName"], model.name))

    ledger.client.meta.events.register("before-parameter-build.dynamodb", record)
    try:
        return drain_table(
            "spark", table, ledger, catalog=GLUE_CATALOG, raw_root="s3://raw/", cid="cid-1", **options
        )
    finally:
        ledger.client.meta.events.unregister("before-parameter-build.dynamodb", record)
        granted = {(ledger.ledger_table, a) for a in JOB_DYNAMODB_ACTIONS["ledger"]}
        granted |= {(ledger.runs_table, a) for a in JOB_DYNAMODB_ACTIONS["runs"]}
        assert sent and sent <= granted, f"not in the job roles' grants: {sorted(sent - granted)}"


def ok(table: TableConfig, inserted: int) -> LoadResult:
    return LoadResult(table.id, status="ok", files=1, changes=inserted, inserted=inserted, snapshot_id=7)


def metric_of(ledger: Ledger, table: TableConfig, name: str | None = None) -> dict:
    """The table's metrics in its stage (the ledger table tells stages of one account apart)."""
    dimensions = [{"Name": "Ledger", "Value": ledger.ledger_table}, {"Name": "TableId", "Value": table.id}]
    return {
        "Namespace": METRICS_NAMESPACE,
        "Dimensions": dimensions,
        **({"MetricName": name} if name else {}),
    }


def quarantined_metric(ledger: Ledger, table: TableConfig) -> float:
    return metric_sum(ledger, table, "FilesQuarantined")


def metric_sum(ledger: Ledger, table: TableConfig, name: str) -> float:
    from datetime import UTC, datetime, timedelta

    now = datetime.now(UTC)
    points = boto3.client("cloudwatch").get_metric_statistics(
        **metric_of(ledger, table, name),
        StartTime=now - timedelta(hours=1),
        EndTime=now + timedelta(minutes=5),
        Period=3600,
        Statistics=["Sum"],
    )["Datapoints"]
    return sum(p["Sum"] for p in points)
