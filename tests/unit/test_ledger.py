"""The run ledger against DynamoDB on a real moto server (HTTP)."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import boto3
import pytest

sys.path.append(str(Path(__file__).resolve().parents[1]))  # tests/ -> aws_fixtures
import aws_fixtures  # noqa: E402
from aws_fixtures import create_dynamodb_table, unique_name  # noqa: E402

from lakeloader.control.contract import new_run_id  # noqa: E402
from lakeloader.control.ledger import (  # noqa: E402
    DONE,
    FAILED,
    LOCK_RUN_ID,
    LOCK_RUNNING,
    LOCK_STARTING,
    PENDING,
    RUNNING,
    Ledger,
    LockLostError,
    ObjectRef,
    object_id_for,
)

# pytest fixtures from tests/aws_fixtures.py (one moto server per session)
moto_server = aws_fixtures.moto_server


class FakeClock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def dynamodb(moto_server: str):
    return boto3.client("dynamodb", endpoint_url=moto_server, region_name="us-east-1")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def ledger(dynamodb, clock) -> Ledger:
    ledger_table = create_dynamodb_table(dynamodb, unique_name("ledger"), "table_id", "object_id")
    runs_table = create_dynamodb_table(
        dynamodb, unique_name("runs"), "table_id", "run_id", ttl_attribute="expires_at"
    )
    return Ledger(dynamodb, ledger_table, runs_table, clock=clock)


def ref(key: str, etag: str = "e1", **kwargs) -> ObjectRef:
    return ObjectRef(bucket="raw", key=key, etag=etag, **kwargs)


T = "crm.customers"


def record(ledger: Ledger, *keys: str) -> list[ObjectRef]:
    refs = [ref(k) for k in keys]
    for r in refs:
        assert ledger.record_object(T, r, correlation_id="cid-1")
    return refs


# -- identity and recording ---------------------------------------------------


def test_object_id_prefers_version_then_etag_and_strips_quotes():
    assert object_id_for("a/b.parquet", version_id="v1", etag="x") == "a/b.parquet#v1"
    assert object_id_for("a/b.parquet", version_id="null", etag='"x"') == "a/b.parquet#x"
    assert ObjectRef("raw", "a/b.parquet", etag='"abc"').object_id == "a/b.parquet#abc"
    assert object_id_for("a/b.parquet") == "a/b.parquet#-"
    long_key = "p/" + "x" * 1100
    long_id = object_id_for(long_key, etag="e")
    assert long_id.startswith("sha256:") and long_id.endswith("#e") and len(long_id.encode()) <= 1024


def test_record_is_conditional_and_duplicates_are_harmless(ledger: Ledger, clock: FakeClock):
    obj = ref("crm/public/customers/LOAD0001.parquet", etag='"abc"', size=10, version_id="v1")
    first = ledger.record(T, obj, correlation_id="cid-1")
    assert first.new and first.object.status == PENDING
    clock.now += 60
    again = ledger.record(T, obj, correlation_id="cid-2")
    assert not again.new
    assert again.object.correlation_id == "cid-1"  # the stored item, untouched
    assert again.object.first_seen == first.object.first_seen
    assert not ledger.record_object(T, obj, correlation_id="cid-3")

    items = ledger.objects(T)
    assert len(items) == 1
    item = items[0]
    assert item.object_id == "crm/public/customers/LOAD0001.parquet#v1"
    assert (item.bucket, item.key, item.etag, item.version_id, item.size) == (
        "raw",
        "crm/public/customers/LOAD0001.parquet",
        "abc",
        "v1",
        10,
    )
    assert item.uri == "s3://raw/crm/public/customers/LOAD0001.parquet"
    assert item.attempts == 0 and item.run_id is None and item.error is None


def test_reupload_with_new_content_is_a_new_object(ledger: Ledger):
    assert ledger.record_object(T, ref("k/a.csv", etag="111"), correlation_id="c")
    assert ledger.record_object(T, ref("k/a.csv", etag="222"), correlation_id="c")
    assert {o.etag for o in ledger.pending_objects(T)} == {"111", "222"}


# -- claim / finish / retry semantics ----------------------------------------


def test_claim_and_finish_done(ledger: Ledger):
    record(ledger, "t/1.parquet", "t/2.parquet")
    pending = ledger.pending_objects(T)
    assert [o.key for o in pending] == ["t/1.parquet", "t/2.parquet"]

    claimed = ledger.claim(T, pending, "run-1")
    assert [(o.status, o.run_id, o.attempts) for o in claimed] == [(RUNNING, "run-1", 1)] * 2
    assert ledger.pending_objects(T) == []

    done = ledger.finish(T, claimed, "run-1", DONE)
    assert [o.status for o in done] == [DONE, DONE]
    assert ledger.pending_objects(T) == []
    # a done object cannot be claimed again
    assert ledger.claim(T, pending, "run-2") == []


def test_a_batch_is_claimed_and_finished_with_its_writes_in_flight_together(ledger: Ledger, dynamodb):
    """A 1,000-object run made 2,000 conditional writes one after another; they go out
    WRITES_IN_FLIGHT at a time, each still conditional (an object done meanwhile is not claimed),
    and the results keep the batch's order."""
    keys = [f"t/{i:02d}.parquet" for i in range(24)]
    record(ledger, *keys)
    pending = ledger.pending_objects(T)
    ledger.finish(T, ledger.claim(T, pending[5:6], "run-0"), "run-0", DONE)  # done before the batch

    in_flight, most = 0, 0
    guard = threading.Lock()

    class Counting:  # the real client, counting the update_item calls that overlap
        def __getattr__(self, name):
            return getattr(dynamodb, name)

        def update_item(self, **kwargs):
            nonlocal in_flight, most
            with guard:
                in_flight += 1
                most = max(most, in_flight)
            try:
                return dynamodb.update_item(**kwargs)
            finally:
                with guard:
                    in_flight -= 1

    ledger.client = Counting()
    claimed = ledger.claim(T, pending, "run-1")
    assert [o.key for o in claimed] == keys[:5] + keys[6:]
    done = ledger.finish(T, claimed, "run-1", DONE)
    assert [o.key for o in done] == keys[:5] + keys[6:] and {o.run_id for o in done} == {"run-1"}
    assert most > 1


def test_failed_objects_keep_error_and_are_retried_by_a_later_run(ledger: Ledger):
    record(ledger, "t/bad.parquet")
    claimed = ledger.claim(T, ledger.pending_objects(T), "run-1")
    failed = ledger.finish(
        T, claimed, "run-1", FAILED, error="table 'crm.customers', file 't/bad.parquet': boom"
    )
    assert failed[0].status == FAILED and "boom" in failed[0].error

    # pending_objects takes failed objects by default ...
    assert [o.key for o in ledger.pending_objects(T)] == ["t/bad.parquet"]
    # ... not when asked not to, and never the same run's own failures
    assert ledger.pending_objects(T, include_failed=False) == []
    assert ledger.pending_objects(T, exclude_run="run-1") == []
    # a cap on attempts leaves it out
    assert ledger.pending_objects(T, max_attempts=1) == []

    retried = ledger.claim(T, ledger.pending_objects(T), "run-2")
    assert retried[0].attempts == 2 and retried[0].error.endswith("boom")  # error kept while retrying
    done = ledger.finish(T, retried, "run-2", DONE)
    assert done[0].error is None  # cleared on success


def test_finish_only_touches_objects_claimed_by_that_run(ledger: Ledger):
    record(ledger, "t/1.parquet")
    claimed = ledger.claim(T, ledger.pending_objects(T), "run-1")
    # run-2 takes over (e.g. run-1's lock expired and run-1 is a zombie)
    ledger.claim(T, claimed, "run-2")
    assert ledger.finish(T, claimed, "run-1", FAILED, error="late") == []
    obj = ledger.get_object(T, claimed[0].object_id)
    assert (obj.status, obj.run_id, obj.error) == (RUNNING, "run-2", None)


def test_release_back_to_pending(ledger: Ledger):
    record(ledger, "t/1.parquet")
    claimed = ledger.claim(T, ledger.pending_objects(T), "run-1")
    ledger.finish(T, claimed, "run-1", PENDING)
    assert [o.status for o in ledger.pending_objects(T, include_failed=False)] == [PENDING]


def test_orphaned_running_objects_are_offered_only_when_asked(ledger: Ledger):
    record(ledger, "t/1.parquet")
    ledger.claim(T, ledger.pending_objects(T), "crashed-run")
    assert ledger.pending_objects(T) == []
    orphans = ledger.pending_objects(T, include_orphaned=True, exclude_run="new-run")
    assert [o.run_id for o in orphans] == ["crashed-run"]
    assert ledger.pending_objects(T, include_orphaned=True, exclude_run="crashed-run") == []
    assert ledger.has_pending(T, include_orphaned=True) and not ledger.has_pending(T)


def test_pending_objects_paginates_with_filters(dynamodb, ledger: Ledger):
    small_pages = Ledger(dynamodb, ledger.ledger_table, ledger.runs_table, page_size=2)
    keys = [f"t/{i:02d}.parquet" for i in range(7)]
    record(ledger, *keys)
    done = small_pages.claim(T, small_pages.pending_objects(T, limit=3), "run-1")
    small_pages.finish(T, done, "run-1", DONE)
    assert [o.key for o in small_pages.pending_objects(T)] == keys[3:]
    assert len(small_pages.objects(T)) == 7
    assert len(small_pages.objects(T, statuses=[DONE])) == 3
    assert small_pages.has_pending(T)
    with pytest.raises(ValueError, match="unknown object status"):
        small_pages.objects(T, statuses=["nope"])


def test_tables_are_isolated(ledger: Ledger):
    record(ledger, "t/1.parquet")
    assert ledger.pending_objects("sales.order_lines") == []


# -- the lock ------------------------------------------------------------------


def test_lock_one_holder_at_a_time_and_reentrant(ledger: Ledger):
    assert ledger.acquire_lock(T, "run-1", ttl_seconds=60)
    assert not ledger.acquire_lock(T, "run-2", ttl_seconds=60)
    assert ledger.acquire_lock(T, "run-1", ttl_seconds=60)  # re-entrant
    assert ledger.acquire_lock("other.table", "run-2", ttl_seconds=60)  # per table
    lock = ledger.get_lock(T)
    assert (lock.holder, lock.state, lock.expired(ledger.clock())) == ("run-1", LOCK_RUNNING, False)
    assert not ledger.release_lock(T, "run-2")
    assert ledger.release_lock(T, "run-1")
    assert ledger.get_lock(T) is None
    assert not ledger.release_lock(T, "run-1")  # idempotent
    assert ledger.acquire_lock(T, "run-2")


def test_lock_expiry_lets_the_next_run_in(ledger: Ledger, clock: FakeClock):
    assert ledger.acquire_lock(T, "crashed-run", ttl_seconds=600)
    clock.now += 599
    assert not ledger.acquire_lock(T, "run-2", ttl_seconds=600)
    assert ledger.renew_lock(T, "crashed-run", ttl_seconds=600)  # a live run keeps it
    clock.now += 599
    assert not ledger.acquire_lock(T, "run-2", ttl_seconds=600)
    clock.now += 2  # past expiry: the crashed run no longer blocks the table
    assert ledger.get_lock(T).expired(clock())
    assert ledger.acquire_lock(T, "run-2", ttl_seconds=600)
    assert not ledger.renew_lock(T, "crashed-run")
    assert not ledger.release_lock(T, "crashed-run")
    assert ledger.get_lock(T).holder == "run-2"


def test_lock_item_lives_in_run_history_with_ttl(ledger: Ledger, dynamodb, clock: FakeClock):
    ledger.acquire_lock(T, "run-1", ttl_seconds=300)
    item = dynamodb.get_item(
        TableName=ledger.runs_table, Key={"table_id": {"S": T}, "run_id": {"S": LOCK_RUN_ID}}
    )["Item"]
    assert item["holder"] == {"S": "run-1"}
    assert int(item["expires_at"]["N"]) == int(clock.now) + 300


def test_trigger_reservation_is_taken_over_by_the_job_only(ledger: Ledger):
    assert ledger.reserve_start(T, "trigger:req-1", ttl_seconds=900)
    assert ledger.note_engine_run(T, "trigger:req-1", "jr_123")
    lock = ledger.get_lock(T)
    assert (lock.state, lock.engine_run_id) == (LOCK_STARTING, "jr_123")
    # another trigger cannot take a live reservation
    assert not ledger.reserve_start(T, "trigger:req-2")
    # the job that was started takes it over
    assert ledger.acquire_lock(T, "run-1")
    assert ledger.get_lock(T).state == LOCK_RUNNING
    # and then nobody else gets in, neither a trigger nor another job
    assert not ledger.reserve_start(T, "trigger:req-2")
    assert not ledger.acquire_lock(T, "run-2")
    assert not ledger.note_engine_run(T, "trigger:req-1", "jr_999")


# -- the drain loop ------------------------------------------------------------


def test_next_batch_drains_everything_and_releases_the_lock(ledger: Ledger):
    record(ledger, "t/1.parquet", "t/2.parquet", "t/3.parquet")
    assert ledger.acquire_lock(T, "run-1")
    seen = []
    while batch := ledger.next_batch(T, "run-1", max_objects=2):
        seen.append([o.key for o in batch])
        ledger.finish(T, batch, "run-1", DONE)
    assert seen == [["t/1.parquet", "t/2.parquet"], ["t/3.parquet"]]
    assert ledger.get_lock(T) is None
    assert ledger.pending_objects(T) == []


def test_next_batch_does_not_loop_on_its_own_failures(ledger: Ledger):
    record(ledger, "t/1.parquet")
    assert ledger.acquire_lock(T, "run-1")
    batch = ledger.next_batch(T, "run-1")
    ledger.finish(T, batch, "run-1", FAILED, error="boom")
    assert ledger.next_batch(T, "run-1") == []
    assert ledger.get_lock(T) is None
    # a later run retries it
    assert ledger.acquire_lock(T, "run-2")
    assert [o.key for o in ledger.next_batch(T, "run-2")] == ["t/1.parquet"]


def test_next_batch_picks_up_an_object_that_arrives_while_releasing(ledger: Ledger):
    """The lost-wake-up window: the trigger records an object and sees the lock
    still held (so it defers) just before the job releases the lock."""
    assert ledger.acquire_lock(T, "run-1")
    release = ledger.release_lock

    def release_after_a_late_arrival(table_id: str, holder: str) -> bool:
        # the trigger: record, then look at the lock -> held -> defer
        assert ledger.record_object(T, ref("t/late.parquet"), correlation_id="late")
        assert ledger.get_lock(T).holder == "run-1"
        ledger.release_lock = release  # only once
        return release(table_id, holder)

    ledger.release_lock = release_after_a_late_arrival
    batch = ledger.next_batch(T, "run-1")
    assert [o.key for o in batch] == ["t/late.parquet"]
    assert ledger.get_lock(T).holder == "run-1"  # re-taken
    ledger.finish(T, batch, "run-1", DONE)
    assert ledger.next_batch(T, "run-1") == []
    assert ledger.get_lock(T) is None


def test_next_batch_takes_objects_orphaned_by_a_crashed_run(ledger: Ledger, clock: FakeClock):
    record(ledger, "t/1.parquet")
    assert ledger.acquire_lock(T, "crashed", ttl_seconds=60)
    ledger.next_batch(T, "crashed", lock_ttl_seconds=60)
    clock.now += 61
    assert ledger.acquire_lock(T, "run-2")
    batch = ledger.next_batch(T, "run-2")
    assert [(o.key, o.run_id, o.attempts) for o in batch] == [("t/1.parquet", "run-2", 2)]


def test_next_batch_raises_when_the_lock_was_lost(ledger: Ledger, clock: FakeClock):
    record(ledger, "t/1.parquet")
    assert ledger.acquire_lock(T, "slow", ttl_seconds=60)
    clock.now += 61
    assert ledger.acquire_lock(T, "run-2")
    with pytest.raises(LockLostError, match="crm.customers"):
        ledger.next_batch(T, "slow")


# -- run history -----------------------------------------------------------------


def test_run_history(ledger: Ledger, clock: FakeClock):
    first = new_run_id(clock())
    started = ledger.start_run(T, first, "cid-1", engine="glue", engine_run_id="jr_1", objects=3)
    assert started.status == "running" and started.expires_at == int(clock.now) + 90 * 86400
    clock.now += 12.5
    ended = ledger.end_run(
        T,
        first,
        "succeeded",
        {"inserted": 5, "updated": 2, "deleted": 1},
        snapshot_id=8_123_456_789_012_345_678,
    )
    assert ended.status == "succeeded"
    assert ended.duration_ms == 12_500
    assert ended.counts == {"inserted": 5, "updated": 2, "deleted": 1}
    assert ended.snapshot_id == 8_123_456_789_012_345_678
    assert (ended.engine, ended.engine_run_id, ended.objects, ended.correlation_id) == (
        "glue",
        "jr_1",
        3,
        "cid-1",
    )
    assert ended.error is None

    clock.now += 60
    second = new_run_id(clock())
    ledger.start_run(T, second, "cid-2")
    ledger.acquire_lock(T, second)
    failed = ledger.end_run(T, second, "failed", {"rows_read": 0}, error="x" * 10_000)
    assert failed.status == "failed" and len(failed.error) <= 4000 and "[truncated]" in failed.error

    runs = ledger.list_runs(T)
    assert [r.run_id for r in runs] == [second, first]  # newest first, lock item left out
    assert ledger.get_run(T, first).counts["inserted"] == 5
    assert ledger.get_run(T, "nope") is None


def test_run_ids_are_validated(ledger: Ledger):
    with pytest.raises(ValueError):
        ledger.start_run(T, LOCK_RUN_ID, "cid")
    with pytest.raises(ValueError):
        ledger.end_run(T, "r", "running")
    with pytest.raises(ValueError):
        ledger.finish(T, [], "r", "bogus")


# -- the batching window ---------------------------------------------------------------------


def test_the_window_admits_one_start_per_interval_and_a_failed_start_gives_it_back(ledger, clock):
    start = int(clock.now)
    assert ledger.window_opens_at("w.t", 300) == 0.0  # never started: open
    assert ledger.claim_window("w.t", 300) == (start, None)
    assert ledger.window_opens_at("w.t", 300) == start + 300
    clock.now += 299
    assert ledger.claim_window("w.t", 300) is None  # inside the window
    clock.now += 1
    assert ledger.claim_window("w.t", 300) == (start + 300, start)
    # that start failed: the claim is undone, back to the previous start
    ledger.unclaim_window("w.t", start + 300, start)
    assert ledger.window_opens_at("w.t", 300) == start + 300
    # undoing a claim another start has replaced meanwhile changes nothing
    assert ledger.claim_window("w.t", 300) == (start + 300, start)
    ledger.unclaim_window("w.t", start, None)
    assert ledger.window_opens_at("w.t", 300) == start + 600
    # the window item is no run: run listings skip it
    assert ledger.list_runs("w.t") == []
