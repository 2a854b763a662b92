"""The drain loop's outcome (lakeloader.jobs.drain.drain_table), without the e2e suite.

Real: the Ledger code against DynamoDB on moto's server over HTTP, drain_table itself, and its
metrics going to moto's CloudWatch. Every DynamoDB call a drain sends is checked against the job
roles' grants as tests/infra/test_infra_iam_sufficient.py states them. Stubbed: only the Spark
merge (`lakeloader.jobs.load.load_table`, monkeypatched with a stub of the same parameters): it is
not the code under test here and is covered by tests/spark. The stub returns the outcome each test
scripts for the files it is given and can act while a batch "runs" (an object arrives, the lock is
taken over).
"""

from __future__ import annotations

import inspect
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import boto3
import pytest

sys.path.append(str(Path(__file__).resolve().parents[1]))  # tests/ -> aws_fixtures
import aws_fixtures  # noqa: E402
from aws_fixtures import ManualClock, create_dynamodb_table, unique_name  # noqa: E402

from lakeloader.config import TableConfig  # noqa: E402
from lakeloader.contract import GLUE_CATALOG, METRICS_NAMESPACE, RECONCILIATION_MISMATCH_METRIC  # noqa: E402
from lakeloader.jobs import drain as drain_job  # noqa: E402
from lakeloader.jobs import load  # noqa: E402
from lakeloader.jobs.drain import drain_table, drain_tables  # noqa: E402
from lakeloader.jobs.load import LoadResult  # noqa: E402
from lakeloader.ledger import DEFAULT_LOCK_TTL_SECONDS, Ledger, LockLostError, ObjectRef  # noqa: E402
from lakeloader.reconciliation import Reconciliation  # noqa: E402
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


def test_a_good_batch_is_done_and_recorded_as_succeeded(ledger, table, merges):
    calls = merges(table, lambda names: ok(table, inserted=3))
    land(ledger, table, "LOAD00000001.parquet", "LOAD00000002.parquet")

    result = drain(ledger, table)

    assert calls == [
        ["crm/public/customers/LOAD00000001.parquet", "crm/public/customers/LOAD00000002.parquet"]
    ]
    assert result.status == "ok" and result.inserted == 3
    assert statuses(ledger, table) == {
        "LOAD00000001.parquet": ("done", None),
        "LOAD00000002.parquet": ("done", None),
    }
    (run,) = ledger.list_runs(table.id)
    assert (run.status, run.error, run.snapshot_id) == ("succeeded", None, 7)
    assert run.counts["inserted"] == 3 and run.objects == 1
    assert ledger.get_lock(table.id) is None


def test_each_batchs_reconciliation_adds_up_in_the_run_record_and_a_mismatch_is_a_metric(
    ledger, table, merges
):
    """Two batches, the second's commit mismatched (reconcile.on_mismatch: alarm, published): the run
    record keeps both commits' reconciliation, and ReconciliationMismatch counts the mismatched one."""
    clean = Reconciliation(commits=1, upserts_asked=3, inserted=3, live_delta=3, snapshot_id=7)
    bad = Reconciliation(commits=1, upserts_asked=1, updated=2, mismatched_commits=1, snapshot_id=8)
    bad.mismatches.append("2 row(s) inserted or updated for 1 upsert(s) asked")
    table = table.model_copy(update={"trigger": table.trigger.model_copy(update={"max_files_per_run": 2})})

    def outcome(names: list[str]) -> LoadResult:
        if names == ["crm/public/customers/LOAD00000001.parquet"]:
            land(ledger, table, "20240102.parquet")
            return LoadResult(table.id, status="ok", files=1, inserted=3, snapshot_id=7, reconciliation=clean)
        return LoadResult(table.id, status="ok", files=1, updated=2, snapshot_id=8, reconciliation=bad)

    merges(table, outcome)
    land(ledger, table, "LOAD00000001.parquet")

    result = drain(ledger, table)

    assert result.reconciliation is not None and result.reconciliation.mismatched_commits == 1
    (run,) = ledger.list_runs(table.id)
    assert run.status == "succeeded"
    assert {k: v for k, v in run.counts.items() if k.startswith("reconcile_")} == {
        "reconcile_commits": 2,
        "reconcile_upserts_asked": 4,
        "reconcile_deletes_asked": 0,
        "reconcile_superseded": 0,
        "reconcile_late": 0,
        "reconcile_inserted": 3,
        "reconcile_updated": 2,
        "reconcile_deleted": 0,
        "reconcile_live_delta": 3,
        "reconcile_mismatched_commits": 1,
        "reconcile_snapshot_id": 8,
    }
    assert metric_sum(ledger, table, RECONCILIATION_MISMATCH_METRIC) == 1


def test_a_run_that_reconciled_nothing_publishes_no_mismatch_metric(ledger, table, merges):
    merges(table, lambda names: ok(table, inserted=3))
    land(ledger, table, "LOAD00000001.parquet")

    drain(ledger, table)

    (run,) = ledger.list_runs(table.id)
    assert not any(k.startswith("reconcile_") for k in run.counts)
    listed = boto3.client("cloudwatch").list_metrics(
        **metric_of(ledger, table, RECONCILIATION_MISMATCH_METRIC)
    )
    assert listed["Metrics"] == []


def test_a_failed_batch_stays_failed_with_its_error_and_stops_the_run(ledger, table, merges):
    """Batch 1 succeeds; an object arriving meanwhile makes batch 2, which fails; a third
    object arriving during batch 2 stays pending: the run stops at the first failure."""

    def outcome(names: list[str]) -> LoadResult:
        if "crm/public/customers/20240102-bad.parquet" in names:
            land(ledger, table, "20240103-later.parquet")
            return LoadResult(
                table.id, status="failed", files=1, error="ReadError: 20240102-bad.parquet: corrupt"
            )
        land(ledger, table, "20240102-bad.parquet")
        return ok(table, inserted=2)

    calls = merges(table, outcome)
    land(ledger, table, "LOAD00000001.parquet")

    result = drain(ledger, table)

    assert len(calls) == 2
    assert (result.status, result.error) == ("failed", "ReadError: 20240102-bad.parquet: corrupt")
    assert statuses(ledger, table) == {
        "LOAD00000001.parquet": ("done", None),
        "20240102-bad.parquet": ("failed", "ReadError: 20240102-bad.parquet: corrupt"),
        "20240103-later.parquet": ("pending", None),
    }
    (run,) = ledger.list_runs(table.id)
    assert (run.status, run.error) == ("failed", "ReadError: 20240102-bad.parquet: corrupt")
    assert run.counts["inserted"] == 2  # what batch 1 committed stays counted
    assert ledger.get_lock(table.id) is None

    names = {
        m["MetricName"]
        for m in boto3.client("cloudwatch").list_metrics(**metric_of(ledger, table))["Metrics"]
    }
    assert names == {"RunsFailed", "RowsMerged", "FilesQuarantined"}


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


def bad_input(table: TableConfig, bad: str) -> Merge:
    """A merge that fails on `bad` as BadInputError does (load.load_table records its file)."""

    def outcome(names: list[str]) -> LoadResult:
        culprit = next((n for n in names if n.endswith(bad)), None)
        if culprit is None:
            return ok(table, inserted=len(names))
        error = f"table {table.id!r}, file {culprit!r}, column 'id': key column is NULL"
        return LoadResult(
            table.id, status="failed", files=len(names), error=error, bad_files={culprit: error}
        )

    return outcome


def unreadable(table: TableConfig, *bad: str) -> Merge:
    """A merge whose read fails on every `bad` file it is given, as engine.unreadable names them."""

    def outcome(names: list[str]) -> LoadResult:
        guilty = {
            n: f"table {table.id!r}, file {n!r}: cannot be read: truncated" for n in names if n.endswith(bad)
        }
        if not guilty:
            return ok(table, inserted=len(names))
        error = f"table {table.id!r}: {len(guilty)} unreadable file(s)"
        return LoadResult(table.id, status="failed", files=len(names), error=error, bad_files=guilty)

    return outcome


def test_a_bad_file_is_set_aside_and_the_others_are_merged(ledger, table, merges):
    calls = merges(table, bad_input(table, "2-bad.parquet"))
    land(ledger, table, "1.parquet", "2-bad.parquet", "3.parquet")

    result = drain(ledger, table)

    prefix = "crm/public/customers/"
    assert calls == [
        [f"{prefix}{n}" for n in ("1.parquet", "2-bad.parquet", "3.parquet")],
        [f"{prefix}1.parquet", f"{prefix}3.parquet"],
    ]
    found = statuses(ledger, table)
    assert found["1.parquet"] == found["3.parquet"] == ("done", None)
    assert found["2-bad.parquet"][0] == "failed" and "key column is NULL" in found["2-bad.parquet"][1]
    assert {o.key.rsplit("/", 1)[1]: o.attempts for o in ledger.objects(table.id)} == {
        "1.parquet": 1,  # the batch it shared with the bad file does not count against it
        "2-bad.parquet": 1,
        "3.parquet": 1,
    }
    (run,) = ledger.list_runs(table.id)
    assert result.status == run.status == "failed" and "2-bad.parquet" in run.error  # the run says why


def test_every_unreadable_file_of_a_batch_is_set_aside_with_its_own_error(ledger, table, merges):
    calls = merges(table, unreadable(table, "2-cut.parquet", "4-empty.parquet"))
    land(ledger, table, "1.parquet", "2-cut.parquet", "3.parquet", "4-empty.parquet")

    drain(ledger, table, max_attempts=1)

    prefix = "crm/public/customers/"
    assert calls[1] == [f"{prefix}1.parquet", f"{prefix}3.parquet"]  # the others, in the same run
    found = statuses(ledger, table)
    assert found["1.parquet"] == found["3.parquet"] == ("done", None)
    for bad in ("2-cut.parquet", "4-empty.parquet"):
        status, error = found[bad]
        assert status == "quarantined" and f"{prefix}{bad}" in error, found
        assert error.count("file '") == 1  # its own error names no other file
    assert quarantined_metric(ledger, table) == 2


def test_a_file_that_keeps_failing_is_quarantined_after_max_attempts(ledger, table, merges):
    calls = merges(table, bad_input(table, "bad.parquet"))
    land(ledger, table, "bad.parquet")
    for attempt in (1, 2, 3):
        drain(ledger, table)
        assert statuses(ledger, table)["bad.parquet"][0] == ("failed" if attempt < 3 else "quarantined")
        assert quarantined_metric(ledger, table) == (0 if attempt < 3 else 1)  # the alarm's metric
    land(ledger, table, "good.parquet")
    assert drain(ledger, table).status == "ok"
    assert calls[-1] == ["crm/public/customers/good.parquet"]  # no run takes a quarantined file
    assert statuses(ledger, table)["good.parquet"] == ("done", None)


def test_the_stage_sets_how_many_failures_quarantine_a_file(ledger, table, merges):
    merges(table, bad_input(table, "bad.parquet"))
    land(ledger, table, "bad.parquet")
    drain(ledger, table, max_attempts=1)
    assert statuses(ledger, table)["bad.parquet"][0] == "quarantined"


def test_a_run_takes_at_most_its_share_of_files_and_the_next_run_the_rest(ledger, table, merges):
    table = table.model_copy(update={"trigger": table.trigger.model_copy(update={"max_files_per_run": 2})})
    calls = merges(table, lambda names: ok(table, inserted=len(names)))
    land(ledger, table, *(f"{n}.parquet" for n in range(5)))
    for expected_pending in (3, 1, 0):
        assert drain(ledger, table).status == "ok"
        assert [s for s, _ in statuses(ledger, table).values()].count("pending") == expected_pending
        assert ledger.get_lock(table.id) is None  # the sweep can start the next run
    assert [len(c) for c in calls] == [2, 2, 1]
    assert sorted(n.rsplit("/", 1)[1] for c in calls for n in c) == [f"{n}.parquet" for n in range(5)]


def test_a_run_takes_at_most_its_share_of_bytes_and_a_larger_file_alone(ledger, table, merges):
    table = table.model_copy(update={"trigger": table.trigger.model_copy(update={"max_bytes_per_run": 250})})
    calls = merges(table, lambda names: ok(table, inserted=len(names)))
    land(ledger, table, "a.parquet", "b.parquet", size=100)
    land(ledger, table, "c-large.parquet", size=1000)
    land(ledger, table, "d.parquet", size=100)
    drain(ledger, table)
    assert [s for s, _ in statuses(ledger, table).values()] == ["done", "done", "pending", "pending"]
    while [s for s, _ in statuses(ledger, table).values()].count("pending"):
        drain(ledger, table)
    assert [[n.rsplit("/", 1)[1] for n in c] for c in calls] == [
        ["a.parquet", "b.parquet"],
        ["c-large.parquet"],
        ["d.parquet"],
    ]


def test_a_lost_lock_stops_the_run(ledger, table, merges, clock):
    """The run outlives its lock's TTL and another run takes the table: the next batch is not claimed."""

    def outcome(names: list[str]) -> LoadResult:
        clock.now += DEFAULT_LOCK_TTL_SECONDS + 1
        assert ledger.acquire_lock(table.id, "other-run")
        land(ledger, table, "20240102-next.parquet")
        return ok(table, inserted=1)

    calls = merges(table, outcome)
    land(ledger, table, "LOAD00000001.parquet")

    with pytest.raises(LockLostError, match="no longer holds the table lock"):
        drain(ledger, table)

    assert len(calls) == 1
    assert statuses(ledger, table) == {
        "LOAD00000001.parquet": ("done", None),  # finished under its own claim before the loss showed
        "20240102-next.parquet": ("pending", None),  # left to the run that holds the lock
    }
    (run,) = ledger.list_runs(table.id)
    assert run.status == "failed" and run.error.startswith("LockLostError: ")
    assert ledger.get_lock(table.id).holder == "other-run"


def test_a_batch_whose_lock_is_taken_before_it_publishes_is_not_published(ledger, table, monkeypatch, clock):
    """The merge runs the drain's last check right before `main` moves, as apply_batch does: the lock
    was taken meanwhile, so nothing is published, the object is not done and the run failed. The
    stand-in's check defaults to doing nothing: a drain that stopped passing it fails this test, not
    a signature comparison."""
    published: list[str] = []

    def load_table(
        spark, table, files, *, catalog, run_id, progress, log_consumed=False, before_publish=lambda: None
    ):
        current = table
        clock.now += DEFAULT_LOCK_TTL_SECONDS + 1  # the batch outlived its lease ...
        assert ledger.acquire_lock(table.id, "other-run")  # ... and another run took the table
        try:
            before_publish()
        except Exception as exc:  # load_table records a table's error as its failed result
            return LoadResult(current.id, status="failed", error=f"{type(exc).__name__}: {exc}")
        published.append(current.id)
        return ok(current, inserted=1)

    stand_in(monkeypatch, load_table)
    land(ledger, table, "1.parquet")

    result = drain(ledger, table)

    assert published == [] and result.status == "failed" and "no longer holds the table lock" in result.error
    assert statuses(ledger, table)["1.parquet"][0] != "done"
    (run,) = ledger.list_runs(table.id)
    assert run.status == "failed" and "no longer holds the table lock" in run.error


def test_a_run_that_died_reads_abandoned_and_the_next_drain_records_it(ledger, table, merges, clock):
    """A drain killed mid-run leaves its record `running` and its lock to lapse. While the lease
    lasts it reads running; after, abandoned; the next drain records it as abandoned for good."""
    dead = "20261101T090000000Z-dead01"
    assert ledger.acquire_lock(table.id, dead)
    ledger.start_run(table.id, dead, "cid-dead")  # ... and the job is killed here
    assert [r.status for r in ledger.list_runs(table.id)] == ["running"]
    clock.now += DEFAULT_LOCK_TTL_SECONDS + 1
    assert ledger.get_run(table.id, dead).status == "abandoned"
    stored = ledger.client.get_item(
        TableName=ledger.runs_table, Key={"table_id": {"S": table.id}, "run_id": {"S": dead}}
    )["Item"]
    assert stored["status"] == {"S": "running"}  # read as abandoned, not yet recorded so

    merges(table, lambda names: ok(table, inserted=len(names)))
    land(ledger, table, "1.parquet")
    assert drain(ledger, table).status == "ok"

    stored = ledger.client.get_item(
        TableName=ledger.runs_table, Key={"table_id": {"S": table.id}, "run_id": {"S": dead}}
    )["Item"]
    assert stored["status"] == {"S": "abandoned"}
    assert sorted(r.status for r in ledger.list_runs(table.id)) == ["abandoned", "succeeded"]


def test_a_table_locked_by_another_run_is_skipped_untouched(ledger, table, merges):
    calls = merges(table, lambda names: pytest.fail("merged while another run holds the lock"))
    land(ledger, table, "LOAD00000001.parquet")
    assert ledger.acquire_lock(table.id, "other-run")

    result = drain(ledger, table)

    assert result.status == "skipped" and calls == []
    assert statuses(ledger, table) == {"LOAD00000001.parquet": ("pending", None)}
    assert ledger.list_runs(table.id) == []


# -- one run, several tables (the trigger groups due tables: one run's table id is a,b) ----------


def other_table(table: TableConfig) -> TableConfig:
    return table.model_copy(
        update={
            "id": table.id + "_2",
            "source": table.source.model_copy(update={"prefix": "crm/public/orders/"}),
            "target": table.target.model_copy(update={"table": "orders"}),
        }
    )


def test_tables_drained_together_are_isolated(ledger, table, monkeypatch):
    """Two tables in one run, in parallel: one's bad file fails that table alone (its objects,
    its run record, its lock); the other's batch commits and its run succeeds."""
    second = other_table(table)
    both_running = threading.Barrier(2, timeout=30)  # passes only if the two merges overlap

    failing = table

    def load_table(spark, table, files, *, catalog, run_id, progress, log_consumed=False, before_publish):
        both_running.wait()
        if table.id == failing.id:
            return LoadResult(table.id, status="failed", files=1, error="ReadError: 1.parquet: corrupt")
        return ok(table, inserted=len(files))

    stand_in(monkeypatch, load_table)
    land(ledger, table, "1.parquet")
    land(ledger, second, "1.parquet", "2.parquet")

    results = drain_tables(
        "spark", [table, second], ledger, catalog=GLUE_CATALOG, raw_root="s3://raw/", cid="cid", parallel=2
    )

    assert [(r.table_id, r.status) for r in results] == [(table.id, "failed"), (second.id, "ok")]
    assert statuses(ledger, table) == {"1.parquet": ("failed", "ReadError: 1.parquet: corrupt")}
    assert statuses(ledger, second) == {"1.parquet": ("done", None), "2.parquet": ("done", None)}
    ((failed_run,), (good_run,)) = ledger.list_runs(table.id), ledger.list_runs(second.id)
    assert (failed_run.status, failed_run.error) == ("failed", "ReadError: 1.parquet: corrupt")
    assert (good_run.status, good_run.counts["inserted"]) == ("succeeded", 2)
    assert ledger.get_lock(table.id) is None and ledger.get_lock(second.id) is None


def test_a_table_whose_ledger_fails_mid_run_leaves_the_others_alone(ledger, table, monkeypatch, clock):
    """A lost lock raises out of drain_table: drain_tables turns it into that table's failed result."""
    second = other_table(table)

    first = table

    def load_table(spark, table, files, *, catalog, run_id, progress, log_consumed=False, before_publish):
        if table.id == first.id:  # the first table's lock is taken over while its batch runs
            clock.now += DEFAULT_LOCK_TTL_SECONDS + 1
            assert ledger.acquire_lock(first.id, "other-run")
            land(ledger, first, "late.parquet")
        return ok(table, inserted=1)

    stand_in(monkeypatch, load_table)
    land(ledger, table, "1.parquet")
    land(ledger, second, "1.parquet")

    results = drain_tables(
        "spark", [table, second], ledger, catalog=GLUE_CATALOG, raw_root="s3://raw/", cid="cid", parallel=1
    )

    assert results[0].status == "failed" and results[0].error.startswith("LockLostError: ")
    assert results[1].status == "ok"
    assert statuses(ledger, second) == {"1.parquet": ("done", None)}
    assert statuses(ledger, table)["late.parquet"] == ("pending", None)  # left to the lock's holder


def test_files_of_an_incomplete_snapshot_go_back_pending_and_end_the_run(ledger, table, merges):
    """cdc: snapshot: the files a batch leaves waiting (their folder has no _SUCCESS yet) are given
    back pending, not done or failed, with their attempt undone; the run ends once a batch holds
    nothing but waiting files (a batch that also applied something goes on to the next)."""
    land(ledger, table, "a.parquet", "b.parquet")

    def waits_for_b(names: list[str]) -> LoadResult:
        result = ok(table, 1)
        result.waiting = [n for n in names if n.endswith("b.parquet")]
        return result

    calls = merges(table, waits_for_b)
    result = drain(ledger, table)

    assert result.status == "ok" and [len(c) for c in calls] == [2, 1]
    assert statuses(ledger, table) == {"a.parquet": ("done", None), "b.parquet": ("pending", None)}
    assert [o.attempts for o in ledger.objects(table.id) if o.key.endswith("b.parquet")] == [0]
