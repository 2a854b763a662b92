"""The S3-arrival Lambda under duplicate and concurrent delivery: ten invocations at once, over HTTP
against moto (DynamoDB ledger and Glue), start one job run."""

from __future__ import annotations

import threading
from collections import Counter

from tests.faults import oracle
from tests.unit import trigger_world
from tests.unit.trigger_world import CUSTOMERS, HANDLER, World, context, log_lines, s3_event, s3_record

# pytest fixtures: the trigger tests' world (config, ledger and runs tables, a Glue job) on moto
world = trigger_world.world
aws_endpoint = trigger_world.aws_endpoint
moto_server = trigger_world.moto_server

TIMES = 10


def burst(event: dict, request_ids: list[str]) -> list[dict | BaseException]:
    """Invoke the handler once per request id, all threads released together."""
    start = threading.Barrier(len(request_ids))
    results: list[dict | BaseException] = [None] * len(request_ids)  # type: ignore[list-item]

    def invoke(i: int) -> None:
        start.wait()
        try:
            results[i] = HANDLER(event, context(request_ids[i]))
        except BaseException as exc:  # noqa: BLE001 - a Lambda error is an outcome, checked below
            results[i] = exc

    threads = [threading.Thread(target=invoke, args=(i,)) for i in range(len(request_ids))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return results


def starts(world: World, results: list) -> tuple[int, int]:
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, errors
    return len(world.glue_runs()), len({run for r in results for run in r["started"].values()})


def record(fault: str, runs: int) -> None:
    """A Lambda case in the suite's figures: one object in, one run expected (extra runs are duplicates)."""
    stats = oracle.STATS
    stats.cases += 1
    stats.faults.update(Counter({fault: TIMES}))
    stats.changes_in += 1
    stats.rows_expected += 1
    stats.rows_lost += runs == 0
    stats.rows_duplicated += max(0, runs - 1)


def test_one_s3_event_delivered_ten_times_at_once_starts_one_run(world: World, capsys):
    world.add_table("crm.customers", CUSTOMERS)
    HANDLER(s3_event(), context("warm-up"))  # clients and config cached, as in a warm container
    event = s3_event(s3_record(CUSTOMERS + "20261101-0900.parquet"))
    capsys.readouterr()

    request_ids = [f"delivery-{i}" for i in range(TIMES)]
    results = burst(event, request_ids)

    # each invocation's log lines carry its own correlation id, though all ran at once in one process
    summaries = [line for line in log_lines(capsys) if line["message"] == "trigger.summary"]
    assert sorted(line["correlation_id"] for line in summaries) == sorted(request_ids)

    runs, reported = starts(world, results)
    record("concurrent duplicate S3 delivery", runs)
    assert (runs, reported) == (1, 1)
    assert sum(r["recorded"] for r in results) == 1 and sum(r["duplicates"] for r in results) == TIMES - 1
    [obj] = world.ledger.objects("crm.customers")
    assert obj.status == "pending"
    lock = world.ledger.get_lock("crm.customers")
    assert lock.engine_run_id == world.glue_runs()[0]["Id"]


def test_one_invocation_retried_ten_times_at_once_starts_one_run(world: World):
    """Lambda retries keep the request id; ten copies of one invocation in flight together."""
    world.add_table("crm.customers", CUSTOMERS)
    HANDLER(s3_event(), context("warm-up"))
    event = s3_event(s3_record(CUSTOMERS + "20261101-0901.parquet"))

    results = burst(event, ["req-1"] * TIMES)

    runs, reported = starts(world, results)
    record("concurrent retries of one invocation", runs)
    assert (runs, reported) == (1, 1), f"{runs} Glue runs started for one object"
    assert len(world.ledger.objects("crm.customers")) == 1
