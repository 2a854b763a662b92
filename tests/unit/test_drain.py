"""The drain loop's outcome (lakeloader.jobs.drain.drain_table): a run's batches, their records and
metrics, its share of files, its lock, several tables in one run. The world (moto's DynamoDB and
CloudWatch, a scripted merge) is drain_world.py's; setting a bad file aside is test_drain_set_aside.py.
"""

from __future__ import annotations

import threading

import boto3
import pytest

from lakeloader.config import TableConfig
from lakeloader.control.contract import GLUE_CATALOG, RECONCILIATION_MISMATCH_METRIC
from lakeloader.control.ledger import DEFAULT_LOCK_TTL_SECONDS, LockLostError
from lakeloader.engine.reconciliation import CommitReconciliation
from lakeloader.jobs.drain import drain_tables
from lakeloader.jobs.load import LoadResult
from tests.unit import drain_world
from tests.unit.drain_world import drain, land, metric_of, metric_sum, ok, stand_in, statuses

moto_server, aws_endpoint = drain_world.moto_server, drain_world.aws_endpoint
clock, ledger, table, merges = drain_world.clock, drain_world.ledger, drain_world.table, drain_world.merges


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
    clean = CommitReconciliation(commits=1, upserts_asked=3, inserted=3, live_delta=3, snapshot_id=7)
    bad = CommitReconciliation(commits=1, upserts_asked=1, updated=2, mismatched_commits=1, snapshot_id=8)
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
