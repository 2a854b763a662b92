"""What the ledger does for a rebuild and for a dead run, on moto's DynamoDB (HTTP): the objects a rebuild
loads (loaded or still to load; never quarantined or skipped ones), recording them as loaded by the
rebuild's run, and a run that died read and recorded as abandoned. The Spark side of a rebuild is
tests/spark/test_rebuild.py; these are the ledger's own writes."""

from __future__ import annotations

from lakeloader.control.ledger import (
    DEFAULT_LOCK_TTL_SECONDS,
    DONE,
    FAILED,
    PENDING,
    QUARANTINED,
    RUNNING,
    SKIPPED,
    Ledger,
)
from tests.unit import test_ledger as base
from tests.unit.test_ledger import FakeClock, T, record

moto_server, dynamodb, clock, ledger = base.moto_server, base.dynamodb, base.clock, base.ledger


def one_in_each_status(ledger: Ledger) -> dict[str, str]:
    """A key per object status, each left in it the way runs and operators leave it."""
    keys = {
        status: f"crm/{status}.parquet" for status in (PENDING, RUNNING, DONE, FAILED, QUARANTINED, SKIPPED)
    }
    record(ledger, *keys.values())
    objects = {o.key: o for o in ledger.objects(T)}
    claimed = ledger.claim(T, [objects[keys[s]] for s in (RUNNING, DONE, FAILED, QUARANTINED)], "run-1")
    by_key = {o.key: o for o in claimed}
    ledger.finish(T, [by_key[keys[DONE]]], "run-1", DONE)
    ledger.finish(T, [by_key[keys[FAILED]]], "run-1", FAILED, error="bad row")
    ledger.finish(T, [by_key[keys[QUARANTINED]]], "run-1", QUARANTINED, error="bad file")
    ledger.skip(T, [objects[keys[SKIPPED]]], note="not ours")
    assert {o.key: o.status for o in ledger.objects(T)} == {key: status for status, key in keys.items()}
    return keys


def test_a_rebuild_loads_what_the_table_loaded_or_still_has_to_load(ledger: Ledger):
    keys = one_in_each_status(ledger)
    taken = ledger.rebuild_objects(T)
    assert sorted(o.key for o in taken) == sorted(keys[s] for s in (PENDING, RUNNING, DONE, FAILED))
    assert ledger.rebuild_objects("other.table") == []


def test_the_objects_a_rebuild_loaded_are_done_by_its_run_and_the_others_left(
    ledger: Ledger, clock: FakeClock
):
    keys = one_in_each_status(ledger)
    taken = ledger.rebuild_objects(T)
    late = next(o for o in taken if o.key == keys[PENDING])
    ledger.skip(T, [late], note="skipped while the rebuild ran")  # a change the rebuild did not see
    clock.now += 60

    outcome = ledger.mark_rebuilt(T, [*taken, *ledger.objects(T, statuses=(QUARANTINED,))], "rebuild-7")

    assert sorted(o.key for o in outcome.changed) == sorted(keys[s] for s in (RUNNING, DONE, FAILED))
    assert sorted(o.key for o in outcome.left) == sorted([keys[PENDING], keys[QUARANTINED]])
    after = {o.key: o for o in ledger.objects(T)}
    for status in (RUNNING, DONE, FAILED):
        obj = after[keys[status]]
        assert (obj.status, obj.attempts, obj.run_id, obj.error) == (DONE, 0, "rebuild-7", None), obj
        assert obj.note == "loaded again by rebuild rebuild-7"
        assert obj.updated_at == "2023-11-14T22:14:20.000Z"  # the ledger's clock, 60 s on
    assert (after[keys[PENDING]].status, after[keys[QUARANTINED]].status) == (SKIPPED, QUARANTINED)
    assert after[keys[QUARANTINED]].error == "bad file"


def test_a_run_that_died_reads_abandoned_and_is_recorded_so_once(ledger: Ledger, clock: FakeClock):
    ledger.start_run(T, "run-dead", "cid")
    assert ledger.acquire_lock(T, "run-dead")
    assert [r.status for r in ledger.list_runs(T)] == ["running"]  # it holds the lock: alive
    clock.now += DEFAULT_LOCK_TTL_SECONDS + 1  # its lock lapsed: it died
    assert [r.status for r in ledger.list_runs(T)] == ["abandoned"]
    assert ledger.get_run(T, "run-dead").status == "abandoned"

    assert ledger.acquire_lock(T, "run-next")
    ledger.start_run(T, "run-next", "cid")
    assert ledger.abandon_dead_runs(T, "run-next") == ["run-dead"]
    dead = ledger.get_run(T, "run-dead")
    assert (dead.status, dead.ended_at) == ("abandoned", "2023-11-15T00:13:21.000Z")
    assert ledger.get_run(T, "run-next").status == "running"
    assert ledger.abandon_run(T, "run-dead") is False  # already recorded: nothing to do
    assert ledger.abandon_dead_runs(T, "run-next") == []
