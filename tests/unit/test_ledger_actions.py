"""An operator's actions on a table's objects (requeue, skip) and its backlog (moto DynamoDB, HTTP)."""

from __future__ import annotations

from lakeloader.control.ledger import DONE, FAILED, PENDING, QUARANTINED, SKIPPED, Ledger
from tests.unit import test_ledger as base
from tests.unit.test_ledger import FakeClock, T, record

# the ledger tests' fixtures: a moto server per session, a fresh ledger and a fake clock per test
moto_server, dynamodb, clock, ledger = base.moto_server, base.dynamodb, base.clock, base.ledger


def quarantine(ledger: Ledger, key: str) -> None:
    record(ledger, key)
    claimed = ledger.claim(T, [o for o in ledger.pending_objects(T) if o.key == key], "run-1")
    ledger.finish(T, claimed, "run-1", QUARANTINED, error=f"file {key!r}: key column is NULL")


def by_key(ledger: Ledger) -> dict[str, tuple[str, int]]:
    return {o.key: (o.status, o.attempts) for o in ledger.objects(T)}


def test_requeue_gives_a_quarantined_file_back_with_its_attempts_reset(ledger: Ledger):
    quarantine(ledger, "t/bad.parquet")
    outcome = ledger.requeue(T, ledger.objects(T), note="fixed upstream, by alice")
    assert [(o.status, o.attempts, o.note) for o in outcome.changed] == [
        (PENDING, 0, "fixed upstream, by alice")
    ]
    assert "key column is NULL" in outcome.changed[0].error  # the last error stays until it loads
    assert [o.key for o in ledger.pending_objects(T)] == ["t/bad.parquet"]  # a run takes it again


def test_skip_sets_a_file_aside_so_no_run_takes_it(ledger: Ledger):
    record(ledger, "t/a.parquet", "t/b.parquet")
    (a,) = [o for o in ledger.objects(T) if o.key == "t/a.parquet"]
    outcome = ledger.skip(T, [a], note="test data, by bob")
    assert [(o.status, o.note) for o in outcome.changed] == [(SKIPPED, "test data, by bob")]
    assert [o.key for o in ledger.pending_objects(T, include_orphaned=True)] == ["t/b.parquet"]
    assert ledger.requeue(T, outcome.changed, note="undo").changed[0].status == PENDING


def test_an_object_a_run_changed_since_it_was_read_is_left_alone(ledger: Ledger):
    quarantine(ledger, "t/bad.parquet")
    seen = ledger.objects(T)
    ledger.requeue(T, seen, note="first operator")
    ledger.claim(T, ledger.pending_objects(T), "run-2")  # a run takes it
    outcome = ledger.skip(T, seen, note="second operator, from a stale listing")
    assert outcome.changed == [] and [o.key for o in outcome.left] == ["t/bad.parquet"]
    assert by_key(ledger)["t/bad.parquet"][0] == "running"


def test_done_files_are_never_requeued_or_skipped(ledger: Ledger):
    record(ledger, "t/a.parquet")
    ledger.finish(T, ledger.claim(T, ledger.pending_objects(T), "run-1"), "run-1", DONE)
    assert ledger.requeue(T, ledger.objects(T), note="x").changed == []
    assert ledger.skip(T, ledger.objects(T), note="x").changed == []
    assert by_key(ledger) == {"t/a.parquet": (DONE, 1)}


def test_backlog_counts_statuses_and_dates_the_oldest_file_still_to_load(ledger: Ledger, clock: FakeClock):
    record(ledger, "t/1.parquet")
    first_seen = ledger.objects(T)[0].first_seen
    clock.now += 600
    quarantine(ledger, "t/2-bad.parquet")
    record(ledger, "t/3.parquet")
    (three,) = [o for o in ledger.objects(T) if o.key == "t/3.parquet"]
    ledger.finish(T, ledger.claim(T, [three], "run-2"), "run-2", FAILED, error="boom")

    backlog = ledger.backlog(T)
    assert backlog.counts == {PENDING: 1, QUARANTINED: 1, FAILED: 1}
    assert backlog.open == 2 and backlog.oldest_open == first_seen
    assert sorted(o.key for o in backlog.stuck) == ["t/2-bad.parquet", "t/3.parquet"]
    assert ledger.backlog("other.table").oldest_open is None
