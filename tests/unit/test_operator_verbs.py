"""`lakeloader skip|requeue|status --stage` through the CLI's main, on a stage on moto (HTTP).

Real: the CLI's argument parsing, the stage found from its stack's outputs, the ledger's conditional
writes, status's counts, lag and exit code. Nothing is stubbed; requeue runs with --no-sweep (the
sweep is the S3-arrival Lambda's, tested with the trigger).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from lakeloader import cli
from lakeloader.cli import operate
from lakeloader.control.ledger import DONE, FAILED, OBJECT_STATUSES, PENDING, QUARANTINED, RUNNING, SKIPPED
from tests.unit import stage_world
from tests.unit.stage_world import Stage

moto_server, aws_endpoint, stage = stage_world.moto_server, stage_world.aws_endpoint, stage_world.stage
T = "crm.customers"
# docs/operate.md: which statuses each verb takes a file from (every other status leaves it as it is)
MOVES = {
    "requeue": ({QUARANTINED, FAILED, SKIPPED}, PENDING),
    "skip": ({QUARANTINED, FAILED, PENDING}, SKIPPED),
}


def one_file_in(stage: Stage, status: str, *, table_id: str = T, size: int = 10, arrived: str = "") -> str:
    """A file of `table_id` left in `status` the way runs and operators leave it; returns its key."""
    key = f"{table_id}/{status}-{arrived or 'now'}.parquet"
    stage.record(table_id, key, size=size, event_time=arrived or None)
    ledger = stage.ledger
    (obj,) = [o for o in ledger.objects(table_id) if o.key == key]
    if status == SKIPPED:
        ledger.skip(table_id, [obj], note="set aside")
    elif status != PENDING:
        claimed = ledger.claim(table_id, [obj], "run-1")
        if status != RUNNING:
            ledger.finish(table_id, claimed, "run-1", status, error=f"{status}: bad rows in {key}")
    assert {o.key: o.status for o in ledger.objects(table_id)}[key] == status
    return key


def statuses(stage: Stage, table_id: str = T) -> dict[str, str]:
    return {o.key: o.status for o in stage.ledger.objects(table_id)}


@pytest.mark.parametrize("verb", ["requeue", "skip"])
def test_each_verb_moves_a_named_file_only_from_the_statuses_the_docs_name(stage, capsys, verb):
    keys = {status: one_file_in(stage, status) for status in OBJECT_STATUSES}
    named = [arg for key in keys.values() for arg in ("--key", key)]
    extra = ["--no-sweep"] if verb == "requeue" else []

    code, out = stage.cli(capsys, verb, "--table", T, *named, "--reason", "upstream fixed", *extra)

    takes, to = MOVES[verb]
    assert code == 0, out
    assert statuses(stage) == {key: to if status in takes else status for status, key in keys.items()}
    done = {"requeue": "requeued", "skip": "skipped"}[verb]
    assert f"{T}: {len(takes)} {done}" in out, out
    left = {status for status in OBJECT_STATUSES if status not in takes}
    assert sorted(line for line in out.splitlines() if "left as it is" in line) == sorted(
        f"  left as it is ({status}): {keys[status]}" for status in left
    )
    for obj in stage.ledger.objects(T):
        if obj.key in (keys[s] for s in takes):
            assert obj.note.endswith(": upstream fixed") and obj.note.startswith(f"{verb} by ")
            assert obj.attempts == (0 if verb == "requeue" else obj.attempts)


@pytest.mark.parametrize("verb", ["requeue", "skip"])
def test_without_a_key_each_status_option_takes_that_status_alone(stage, capsys, verb):
    takes, to = MOVES[verb]
    keys = {status: one_file_in(stage, status) for status in OBJECT_STATUSES}
    extra = ["--no-sweep"] if verb == "requeue" else []
    for status in sorted(takes - {QUARANTINED}):  # one at a time; the default last
        before = statuses(stage)
        code, out = stage.cli(capsys, verb, "--table", T, "--status", status, "--reason", "r", *extra)
        assert code == 0, out
        assert statuses(stage) == before | {keys[status]: to}
    code, out = stage.cli(capsys, verb, "--table", T, "--reason", "r", *extra)
    assert code == 0 and statuses(stage)[keys[QUARANTINED]] == to, out


@pytest.mark.parametrize(("verb", "status"), [("requeue", PENDING), ("skip", SKIPPED), ("skip", DONE)])
def test_a_status_the_verb_never_takes_is_a_usage_error(stage, capsys, verb, status):
    with pytest.raises(SystemExit) as exited:
        cli_args = [verb, "--stage", stage.name, "--table", T, "--status", status, "--reason", "r"]
        cli.main(cli_args)
    assert exited.value.code == 2


def test_a_verb_without_tables_names_them_and_changes_nothing(stage, capsys):
    key = one_file_in(stage, QUARANTINED)
    assert cli.main(["skip", "--stage", stage.name, "--reason", "r"]) == 2
    assert "skip: name the tables (--table ID) or give --all-tables" in capsys.readouterr().err
    assert statuses(stage) == {key: QUARANTINED}


def test_lag_and_open_bytes_cover_every_open_status_the_oldest_not_pending(stage, capsys):
    """The oldest file still to load is a failed one, then a running one: lag is its age; open bytes
    add pending, failed and running; done, quarantined and skipped files count for neither."""
    one_file_in(stage, DONE, size=1000, arrived="2026-01-01T00:00:00Z")
    one_file_in(stage, QUARANTINED, size=2000, arrived="2026-01-01T00:00:00Z")
    one_file_in(stage, SKIPPED, size=4000, arrived="2026-01-01T00:00:00Z")
    one_file_in(stage, FAILED, size=10, arrived="2026-01-02T00:00:00Z")
    one_file_in(stage, RUNNING, size=20, arrived="2026-01-02T06:00:00Z")
    one_file_in(stage, PENDING, size=40, arrived="2026-01-02T12:00:00Z")
    table = next(t for t in stage.deployed.tables() if t.id == T)
    now = datetime(2026, 1, 3, tzinfo=UTC)

    status = operate.table_status(stage.ledger, table, now=now)
    assert (status.lag_seconds, status.open_bytes) == (86400.0, 70)

    for obj in stage.ledger.objects(T):
        if obj.status == FAILED:
            stage.ledger.requeue(T, [obj], note="x")  # the oldest failed file is pending again
    assert operate.table_status(stage.ledger, table, now=now).lag_seconds == 86400.0
    for obj in stage.ledger.objects(T):
        if obj.key.endswith("2026-01-02T00:00:00Z.parquet"):
            stage.ledger.skip(T, [obj], note="x")  # now the running file is the oldest open one
    assert operate.table_status(stage.ledger, table, now=now).lag_seconds == 18 * 3600.0
    assert operate.table_status(stage.ledger, table, now=now).open_bytes == 60

    code, out = stage.cli(capsys, "status", "--table", T, "--json")
    (shown,) = json.loads(out)
    age = (datetime.now(UTC) - datetime(2026, 1, 2, 6, tzinfo=UTC)).total_seconds()
    assert shown["open_bytes"] == 60 and abs(shown["lag_seconds"] - age) < 60
    assert shown["counts"] == {DONE: 1, QUARANTINED: 1, SKIPPED: 2, RUNNING: 1, PENDING: 1}
    assert code == 1 and not shown["healthy"]  # the quarantined file is stuck


def finished_run(stage: Stage, table_id: str, status: str) -> None:
    stage.ledger.start_run(table_id, "run-9", "cid")
    stage.ledger.end_run(table_id, "run-9", status, snapshot_id=7 if status == "succeeded" else None)


def test_status_exits_1_when_any_table_is_stuck_or_its_last_run_failed(stage, capsys):
    """Healthy: loaded, or with files skipped or still to load. Unhealthy: a quarantined or failed
    file, or a last run that failed. The exit code is 1 as soon as one selected table is unhealthy."""
    finished_run(stage, "crm.customers", "succeeded")
    one_file_in(stage, SKIPPED, table_id="crm.customers")
    one_file_in(stage, PENDING, table_id="crm.vip")
    one_file_in(stage, QUARANTINED, table_id="sales.orders")
    finished_run(stage, "old.archive", "failed")
    healthy = ["--table", "crm.customers", "--table", "crm.vip"]

    assert stage.cli(capsys, "status", *healthy)[0] == 0
    for sick in ("sales.orders", "old.archive"):  # between the healthy ones: each table counts
        code, out = stage.cli(capsys, "status", *healthy[:2], "--table", sick, *healthy[2:], "--json")
        assert code == 1, out
        assert {s["table_id"]: s["healthy"] for s in json.loads(out)} == {
            "crm.customers": True,
            "crm.vip": True,
            sick: False,
        }
    code, out = stage.cli(capsys, "status")  # every table, the disabled one too
    assert code == 1 and "old.archive (disabled)" in out, out
    assert "sales.orders: quarantined after 1 attempt(s): sales.orders/quarantined-now.parquet" in out
    finished_run(stage, "old.archive", "succeeded")
    assert stage.cli(capsys, "status", *healthy, "--table", "old.archive")[0] == 0


@pytest.mark.parametrize("verb", ["requeue", "skip"])
def test_without_a_key_or_a_status_each_verb_takes_the_quarantined_files_alone(stage, capsys, verb):
    to = MOVES[verb][1]
    keys = {status: one_file_in(stage, status) for status in OBJECT_STATUSES}
    extra = ["--no-sweep"] if verb == "requeue" else []

    code, out = stage.cli(capsys, verb, "--table", T, "--reason", "r", *extra)

    assert code == 0, out
    assert statuses(stage) == {key: to if status == QUARANTINED else status for status, key in keys.items()}
