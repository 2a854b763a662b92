"""Batched arrivals: the batching window, the sweep that picks deferred tables up, runs shared by
several tables, FLEX runs.

Real: the trigger and the ledger against DynamoDB and Glue on moto's server over HTTP, the config
items as `cdk deploy` writes them (config_table.config_items), a clock the test moves. The job
side of a run is the ledger's documented drain protocol (acquire, next_batch, finish, release)
without Spark, which tests/unit/test_drain.py and tests/spark cover.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import boto3
import pytest

sys.path.append(str(Path(__file__).resolve().parents[1]))  # tests/ -> aws_fixtures
import aws_fixtures  # noqa: E402
from aws_fixtures import ManualClock, moto_state_held  # noqa: E402

from lakeloader.config import LakeConfig  # noqa: E402
from lakeloader.config.items import config_items  # noqa: E402
from lakeloader.control import trigger as trigger_module  # noqa: E402
from lakeloader.control.config_store import sync_items  # noqa: E402
from lakeloader.control.contract import (  # noqa: E402
    ARG_TABLE_ID,
    METRICS_NAMESPACE,
    PENDING_AGE_METRIC,
    PENDING_AGE_OVER_FRESHNESS_METRIC,
    glue_arg,
    new_run_id,
)
from lakeloader.control.ledger import DONE, FAILED, PENDING, Ledger, ObjectRef  # noqa: E402
from lakeloader.control.trigger import (  # noqa: E402
    ObjectsArrived,
    SweepRequest,
    Trigger,
    TriggerSettings,
    TriggerSettingsError,
)
from tests.unit.trigger_world import RAW, World, s3_event, s3_record  # noqa: E402

moto_server = aws_fixtures.moto_server
aws_endpoint = aws_fixtures.aws_endpoint
WINDOW = 300
START = float(int(time.time()))


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def world(aws_endpoint: str, clock: ManualClock):
    trigger_module.clear_caches()
    world = World(aws_endpoint)
    world.ledger = Ledger(world.dynamodb, world.ledger_table, world.runs_table, clock=clock)
    yield world
    trigger_module.clear_caches()


def table(
    table_id: str, *, window: int = 0, execution_class: str = "STANDARD", freshness_minutes: int | None = None
) -> dict:
    database, name = table_id.split(".")
    trigger = {"min_interval_seconds": window, "execution_class": execution_class}
    return {
        "id": table_id,
        "source": {"prefix": f"{database}/{name}/", "format": "parquet", "cdc": "none"},
        "target": {"database": database, "table": name},
        "keys": ["id"],
        "trigger": trigger | ({"freshness_minutes": freshness_minutes} if freshness_minutes else {}),
    }


def deploy(world: World, *tables: dict) -> None:
    """Write the config table as the deploy's config-sync custom resource does."""
    sync_items(world.config_table, config_items(LakeConfig(tables=list(tables))), client=world.dynamodb)


def make_trigger(world: World, clock: ManualClock, **env: str) -> Trigger:
    settings = TriggerSettings.from_env(world.env(**env))
    return Trigger(settings, dynamodb=world.dynamodb, glue=world.glue, clock=clock)


def starts(world: World) -> list[dict]:
    """Every StartJobRun request the trigger sends (moto ignores ExecutionClass; the request shows it)."""
    sent: list[dict] = []
    world.glue.meta.events.register(
        "provide-client-params.glue.StartJobRun", lambda params, **_: sent.append(dict(params))
    )
    return sent


def land(trigger: Trigger, table_id: str, name: str, cid: str) -> dict:
    database, table_name = table_id.split(".")
    event = s3_event(s3_record(f"{database}/{table_name}/{name}", etag=name))
    return trigger.handle(ObjectsArrived.read(event, correlation_id=cid))


def sweep(trigger: Trigger, cid: str) -> dict:
    return trigger.sweep(SweepRequest(correlation_id=cid))


def run_job(ledger: Ledger, table_ids: list[str]) -> dict[str, list[str]]:
    """What a job run does per table (lakeloader.jobs.drain.drain_table without Spark): drained keys."""
    drained: dict[str, list[str]] = {}
    for table_id in table_ids:
        run_id = new_run_id()
        assert ledger.acquire_lock(table_id, run_id)
        drained[table_id] = []
        while batch := ledger.next_batch(table_id, run_id):
            drained[table_id] += [o.key.rsplit("/", 1)[1] for o in batch]
            ledger.finish(table_id, batch, run_id, DONE)
    return drained


def table_ids_of(request: dict) -> list[str]:
    return request["Arguments"][glue_arg(ARG_TABLE_ID)].split(",")


def test_arrivals_inside_the_window_wait_and_ride_the_next_run(world, clock):
    deploy(world, table("crm.customers", window=WINDOW))
    trigger, sent = make_trigger(world, clock), starts(world)

    # an arrival of a batched table is recorded, and waits for the sweep
    first = land(trigger, "crm.customers", "1.parquet", "req-1")
    assert (first["recorded"], first["started"]) == (1, {})
    assert first["deferred"] == [
        {"table_id": "crm.customers", "reason": "batching_window", "min_interval_seconds": WINDOW}
    ]
    assert sent == []

    # the sweep starts its run (no run yet, so the window is open), which drains it
    swept = sweep(trigger, "sweep-1")
    assert list(swept["started"]) == ["crm.customers"] and len(sent) == 1
    assert run_job(world.ledger, table_ids_of(sent[0])) == {"crm.customers": ["1.parquet"]}

    # two more arrivals inside the window; sweeps inside it start nothing
    clock.now += 60
    land(trigger, "crm.customers", "2.parquet", "req-2")
    clock.now += 60
    land(trigger, "crm.customers", "3.parquet", "req-3")
    for _ in range(2):
        clock.now += 60
        inside = sweep(trigger, "sweep-inside")
        assert (inside["started"], inside["tables_in_window"]) == ({}, 1)
    assert len(sent) == 1
    assert {o.key: o.status for o in world.ledger.objects("crm.customers")} == {
        "crm/customers/1.parquet": DONE,
        "crm/customers/2.parquet": PENDING,
        "crm/customers/3.parquet": PENDING,
    }

    # the window since the last run start has passed: one run takes both, each exactly once
    clock.now = START + WINDOW
    due = sweep(trigger, "sweep-due")
    assert list(due["started"]) == ["crm.customers"] and len(sent) == 2
    assert run_job(world.ledger, table_ids_of(sent[1])) == {"crm.customers": ["2.parquet", "3.parquet"]}
    objects = world.ledger.objects("crm.customers")
    assert [(o.status, o.attempts) for o in objects] == [(DONE, 1)] * 3
    assert sweep(trigger, "sweep-after")["started"] == {}  # nothing left: no empty run


def test_a_table_without_a_window_starts_at_once_as_before(world, clock):
    deploy(world, table("crm.customers"), table("sales.orders", window=WINDOW))
    trigger, sent = make_trigger(world, clock), starts(world)
    event = s3_event(
        s3_record("crm/customers/1.parquet", etag="a"), s3_record("sales/orders/1.parquet", etag="b")
    )
    summary = trigger.handle(ObjectsArrived.read(event, correlation_id="req-1"))
    assert list(summary["started"]) == ["crm.customers"]
    assert [d["table_id"] for d in summary["deferred"]] == ["sales.orders"]
    assert [table_ids_of(r) for r in sent] == [["crm.customers"]]
    assert "ExecutionClass" not in sent[0]


def test_the_sweep_groups_due_tables_and_keeps_each_tables_lock(world, clock):
    ids = ["a.t1", "a.t2", "a.t3", "a.t4"]
    deploy(world, *(table(t, window=WINDOW) for t in ids))
    trigger, sent = make_trigger(world, clock, TABLES_PER_RUN="2"), starts(world)
    for t in ids:
        land(trigger, t, "1.parquet", f"req-{t}")
    assert world.ledger.acquire_lock("a.t2", "a-running-run")  # a run of a.t2 is in progress

    swept = sweep(trigger, "sweep-1")

    # a.t2 is left to the run that holds it; the others share runs of at most two tables
    assert [table_ids_of(r) for r in sent] == [["a.t1", "a.t3"], ["a.t4"]]
    assert swept["started"] == {
        "a.t1": sent_run(world, 0),
        "a.t3": sent_run(world, 0),
        "a.t4": sent_run(world, 1),
    }
    assert [(d["table_id"], d["reason"]) for d in swept["deferred"]] == [("a.t2", "run_in_progress")]
    for t in ("a.t1", "a.t3", "a.t4"):  # each table reserved on its own lock, noting the shared run
        lock = world.ledger.get_lock(t)
        assert (lock.state, lock.engine_run_id) == ("starting", swept["started"][t])
    # the run drains each of its tables under that table's lock; the busy table is untouched
    assert run_job(world.ledger, ["a.t1", "a.t3"]) == {"a.t1": ["1.parquet"], "a.t3": ["1.parquet"]}
    assert [o.status for o in world.ledger.objects("a.t2")] == [PENDING]
    assert world.ledger.get_lock("a.t2").holder == "a-running-run"


def sent_run(world: World, index: int) -> str:
    runs = sorted(world.glue_runs(), key=lambda r: r["StartedOn"])
    return runs[index]["Id"]


def test_flex_tables_run_flex_and_apart_from_standard_ones(world, clock):
    deploy(
        world,
        table("a.fast"),
        table("a.slow", execution_class="FLEX"),
        table("a.slow2", execution_class="FLEX"),
    )
    trigger, sent = make_trigger(world, clock, TABLES_PER_RUN="5"), starts(world)
    for t in ("a.fast", "a.slow", "a.slow2"):
        world.ledger.record_object(
            t, ObjectRef(RAW, f"a/{t.split('.')[1]}/1.parquet", etag="e"), correlation_id="c"
        )
    sweep(trigger, "sweep-1")
    by_tables = {",".join(table_ids_of(r)): r for r in sent}
    assert set(by_tables) == {"a.fast", "a.slow,a.slow2"}
    assert "ExecutionClass" not in by_tables["a.fast"]
    # a FLEX run is never queued: Glue refuses job-run queuing for FLEX
    flex = by_tables["a.slow,a.slow2"]
    assert (flex["ExecutionClass"], flex["JobRunQueuingEnabled"]) == ("FLEX", False)


def test_a_start_refused_for_capacity_gives_the_window_back(world, clock):
    deploy(world, table("crm.customers", window=WINDOW))
    job = world.create_glue_job(max_concurrent_runs=1)
    trigger = make_trigger(world, clock, GLUE_JOB_NAME=job)
    land(trigger, "crm.customers", "1.parquet", "req-1")
    other = boto3.client("glue", endpoint_url=world.endpoint, region_name="us-east-1")
    with moto_state_held(world.endpoint, "glue::job_run"):
        other.start_job_run(JobName=job)  # the job's one slot is taken
        refused = sweep(trigger, "sweep-1")
    assert refused["started"] == {}
    assert [d["reason"] for d in refused["deferred"]] == ["concurrent_runs_exceeded"]
    assert world.ledger.get_lock("crm.customers") is None
    # no run started, so no window was used up: the next sweep, a minute later, starts it
    clock.now += 60
    assert list(sweep(trigger, "sweep-2")["started"]) == ["crm.customers"]


def test_two_triggers_racing_for_one_window_start_one_run(world, clock):
    deploy(world, table("crm.customers", window=WINDOW))
    first, second = make_trigger(world, clock), make_trigger(world, clock)
    land(first, "crm.customers", "1.parquet", "req-1")
    assert list(sweep(first, "sweep-a")["started"]) == ["crm.customers"]
    run_job(world.ledger, ["crm.customers"])  # the run ended and released the lock
    land(second, "crm.customers", "2.parquet", "req-2")
    late = sweep(second, "sweep-b")  # the lock is free, but the window is not over
    assert (late["started"], late["tables_in_window"]) == ({}, 1)
    assert second.ledger.claim_window("crm.customers", WINDOW) is None


def test_tables_per_run_must_be_a_whole_number_of_at_least_one(world):
    assert TriggerSettings.from_env(world.env()).tables_per_run == 1  # unset: a run per table
    for bad in ("0", "2.5", "many"):
        with pytest.raises(TriggerSettingsError, match="TABLES_PER_RUN must be"):
            TriggerSettings.from_env(world.env(TABLES_PER_RUN=bad))


def pending_ages(output: str, metric: str = PENDING_AGE_METRIC) -> dict[tuple[str, str], float]:
    """A metric per (Ledger, TableId) from the embedded-metric lines a sweep wrote (PendingAgeSeconds)."""
    ages = {}
    for line in output.splitlines():
        if '"_aws"' in line:
            record = json.loads(line)
            (directive,) = record["_aws"]["CloudWatchMetrics"]
            assert directive["Namespace"] == METRICS_NAMESPACE
            assert directive["Dimensions"] == [["Ledger", "TableId"]]
            if metric in record:
                ages[(record["Ledger"], record["TableId"])] = record[metric][0]
    return ages


def test_the_sweep_measures_each_tables_lag_and_failed_files_alone_start_no_run(world, clock, capsys):
    deploy(world, table("a.busy", freshness_minutes=20), table("a.idle"))
    trigger, sent = make_trigger(world, clock), starts(world)
    assert world.ledger.record_object("a.busy", ObjectRef(RAW, "a/busy/1.parquet", "e1"), correlation_id="c")
    clock.now += 600
    capsys.readouterr()
    swept = sweep(trigger, "sweep-1")
    output = capsys.readouterr().out
    assert pending_ages(output) == {
        (world.ledger_table, "a.busy"): 600.0,
        (world.ledger_table, "a.idle"): 0.0,
    }
    # the lag over the table's freshness (20 minutes), for the one alarm over every table; none for a
    # table without freshness_minutes
    over = pending_ages(output, PENDING_AGE_OVER_FRESHNESS_METRIC)
    assert over == {(world.ledger_table, "a.busy"): 0.5}
    assert list(swept["started"]) == ["a.busy"] and len(sent) == 1

    # its run fails the file: it still counts as late, but alone it starts no run every sweep
    run_id = "run-1"
    world.ledger.release_lock("a.busy", "trigger:sweep-1")
    assert world.ledger.acquire_lock("a.busy", run_id)
    world.ledger.finish("a.busy", world.ledger.next_batch("a.busy", run_id), run_id, FAILED, error="boom")
    world.ledger.release_lock("a.busy", run_id)
    clock.now += 600
    swept = sweep(trigger, "sweep-2")
    output = capsys.readouterr().out
    assert pending_ages(output)[(world.ledger_table, "a.busy")] == 1200.0
    assert pending_ages(output, PENDING_AGE_OVER_FRESHNESS_METRIC)[(world.ledger_table, "a.busy")] == 1.0
    assert swept["started"] == {} and len(sent) == 1


def test_a_disabled_tables_pending_files_start_no_run_from_any_sweep(world, clock):
    """A table disabled after its files were recorded keeps them pending: neither the schedule's sweep
    nor one that names it starts a run or counts it (`enabled: false` stops a table's loads)."""
    deploy(world, table("a.on"), {**table("a.off"), "enabled": False})
    trigger, sent = make_trigger(world, clock), starts(world)
    for t in ("a.on", "a.off"):
        key = f"a/{t.split('.')[1]}/1.parquet"
        assert world.ledger.record_object(t, ObjectRef(RAW, key, "e1"), correlation_id="c")

    swept = sweep(trigger, "sweep-1")
    assert list(swept["started"]) == ["a.on"] and table_ids_of(sent[0]) == ["a.on"]
    assert swept["tables_checked"] == 1

    named = trigger.sweep(SweepRequest(correlation_id="sweep-2", table_ids=["a.off"]))
    assert named["started"] == {} and named["tables_checked"] == 0 and len(sent) == 1
    assert [o.status for o in world.ledger.objects("a.off")] == [PENDING]
