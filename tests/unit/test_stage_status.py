"""What `lakeloader status` shows: the table of every selected table (files still to load, failed,
quarantined, skipped, lag, last run, last commit), then each stuck file with the first line of its
error; and the same as JSON. The ledger on moto (HTTP) with a clock the test sets, so every figure is
exact; the CLI's main for the JSON, as a user types it."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import boto3

from lakeloader.cli import operate
from lakeloader.control.ledger import FAILED, PENDING, QUARANTINED, RUNNING, SKIPPED, Ledger
from lakeloader.control.ledger.base import SCAN_SEGMENTS
from lakeloader.engine.reconciliation import CommitReconciliation
from tests.aws_fixtures import ManualClock
from tests.unit import stage_world
from tests.unit.test_operator_verbs import one_file_in

moto_server, aws_endpoint, stage = stage_world.moto_server, stage_world.aws_endpoint, stage_world.stage
NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
COLUMNS = (
    "table",
    "pending",
    "failed",
    "quarantined",
    "skipped",
    "lag",
    "last run",
    "last commit",
    "reconciled",
)


def clocked(stage, at: datetime) -> Ledger:
    """The stage's ledger, its clock at `at` (runs start and end then)."""
    deployed = stage.deployed
    return Ledger(
        boto3.client("dynamodb"),
        deployed.ledger_table,
        deployed.runs_table,
        clock=ManualClock(at.timestamp()),
    )


def run(stage, table_id: str, run_id: str, status: str, ended: datetime, **end) -> None:
    ledger = clocked(stage, ended)
    ledger.start_run(table_id, run_id, "cid")
    ledger.end_run(table_id, run_id, status, **end)


def statuses(stage, *table_ids: str) -> list[operate.TableStatus]:
    tables = {t.id: t for t in stage.deployed.tables()}
    return [operate.table_status(stage.ledger, tables[t], now=NOW) for t in table_ids]


def test_the_status_table_and_every_stuck_file_with_the_first_line_of_its_error(stage):
    one_file_in(stage, PENDING, size=1, arrived="2026-03-02T10:30:00Z")
    one_file_in(stage, RUNNING, size=2, arrived="2026-03-02T11:00:00Z")
    one_file_in(stage, FAILED, size=4, arrived="2026-03-02T11:50:00Z")
    one_file_in(stage, QUARANTINED, size=8, arrived="2026-03-01T00:00:00Z")
    one_file_in(stage, SKIPPED, size=16, arrived="2026-03-01T00:00:00Z")
    stage.record("crm.customers", "crm.customers/unsized.parquet")  # an event that gave no size: 0 bytes
    run(stage, "crm.customers", "run-1", "succeeded", datetime(2026, 3, 2, 9, tzinfo=UTC), snapshot_id=41)
    run(stage, "crm.customers", "run-2", "failed", datetime(2026, 3, 2, 10, tzinfo=UTC), error="boom\nat x")
    stuck_error = "quarantined: bad rows in crm.customers/quarantined-2026-03-01T00:00:00Z.parquet"
    stage.record("old.archive", "old/x.parquet")  # a stuck file whose error takes lines
    claimed = stage.ledger.claim("old.archive", stage.ledger.objects("old.archive"), "run-1")
    stage.ledger.finish("old.archive", claimed, "run-1", QUARANTINED, error="schema drift:\n  id: int")

    shown = statuses(stage, "crm.customers", "crm.vip", "old.archive")

    lines = operate.status_report(shown).splitlines()
    header = lines[0]
    starts = [0, *(header.index(name) for name in COLUMNS[1:])]
    ends = [*starts[1:], None]
    assert [[line[a:b].strip() for a, b in zip(starts, ends, strict=True)] for line in lines[:4]] == [
        list(COLUMNS),
        ["crm.customers", "3", "1", "1", "1", "90 min", "failed 2026-03-02T10:00:00.000Z", "41", "-"],
        ["crm.vip", "0", "0", "0", "0", "-", "-", "-", "-"],
        ["old.archive (disabled)", "0", "0", "1", "0", "-", "-", "-", "-"],
    ]
    # each column as wide as its widest cell, two spaces apart, nothing trailing
    assert header.index("pending") == len("old.archive (disabled)  ")
    assert header.index("last commit") - header.index("last run") == len("failed 2026-03-02T10:00:00.000Z  ")
    assert all(line == line.rstrip() for line in lines)
    assert lines[4:] == [
        "crm.customers: failed after 1 attempt(s): crm.customers/failed-2026-03-02T11:50:00Z.parquet",
        "    failed: bad rows in crm.customers/failed-2026-03-02T11:50:00Z.parquet",
        "crm.customers: quarantined after 1 attempt(s): "
        "crm.customers/quarantined-2026-03-01T00:00:00Z.parquet",
        f"    {stuck_error}",
        "old.archive: quarantined after 1 attempt(s): old/x.parquet",
        "    schema drift:",  # the first line of the error
    ]
    customers = shown[0]
    assert customers.last_run == {
        "run_id": "run-2",
        "status": "failed",
        "ended_at": "2026-03-02T10:00:00.000Z",
        "objects": None,
        "error": "boom\nat x",
    }
    assert customers.last_commit == {"snapshot_id": 41, "at": "2026-03-02T09:00:00.000Z"}
    assert (customers.lag_seconds, customers.open_bytes) == (5400.0, 7)
    assert not customers.healthy and shown[1].healthy and not shown[2].healthy


def test_lag_is_never_negative_and_a_live_run_is_running_a_dead_one_abandoned(stage):
    one_file_in(stage, PENDING, arrived="2026-03-02T12:05:00Z")  # the clock of the writer ran ahead
    stage.ledger.start_run("crm.customers", "run-3", "cid")  # its job died: it holds no lock

    (shown,) = statuses(stage, "crm.customers")

    assert shown.lag_seconds == 0.0
    assert shown.last_run["status"] == "abandoned" and not shown.healthy
    assert stage.ledger.acquire_lock("crm.customers", "run-3")
    (shown,) = statuses(stage, "crm.customers")
    assert shown.healthy
    row = operate.status_report([shown]).splitlines()[1]
    assert row.split() == ["crm.customers", "1", "0", "0", "0", "0", "min", "running", "-", "-"]


def test_status_json_is_each_table_with_its_health(stage, capsys):
    one_file_in(stage, QUARANTINED, size=8, arrived="2026-03-01T00:00:00Z")
    run(stage, "crm.vip", "run-1", "succeeded", datetime(2026, 3, 2, 9, tzinfo=UTC), snapshot_id=5)

    code, out = stage.cli(capsys, "status", "--json", "--table", "crm.customers", "--table", "crm.vip")

    assert code == 1
    assert out.startswith('[\n  {\n    "table_id": "crm.customers",\n')  # indented for a reader
    customers, vip = json.loads(out)
    assert customers == {
        "table_id": "crm.customers",
        "enabled": True,
        "counts": {QUARANTINED: 1},
        "lag_seconds": None,
        "open_bytes": 0,
        "last_run": None,
        "last_commit": None,
        "stuck": [
            {
                "key": "crm.customers/quarantined-2026-03-01T00:00:00Z.parquet",
                "status": QUARANTINED,
                "attempts": 1,
                "error": "quarantined: bad rows in crm.customers/quarantined-2026-03-01T00:00:00Z.parquet",
            }
        ],
        "last_reconciliation": None,
        "healthy": False,
    }
    assert (
        vip["last_commit"] == {"snapshot_id": 5, "at": "2026-03-02T09:00:00.000Z"} and vip["healthy"] is True
    )
    assert vip["last_run"]["status"] == "succeeded" and vip["last_run"]["run_id"] == "run-1"


def test_each_tables_last_reconciliation_and_a_mismatch_makes_it_unhealthy(stage):
    """The newest run whose record kept a reconciliation (lakeloader.engine.reconciliation.run_counts); a run
    that reconciled nothing (no commit) does not hide it."""
    clean = CommitReconciliation(commits=2, upserts_asked=5, inserted=3, updated=2, live_delta=3).run_counts()
    mismatched = CommitReconciliation(commits=1, updated=2, mismatched_commits=1).run_counts()
    run(stage, "crm.customers", "run-1", "succeeded", datetime(2026, 3, 2, 9, tzinfo=UTC), counts=clean)
    run(stage, "crm.vip", "run-1", "succeeded", datetime(2026, 3, 2, 9, tzinfo=UTC), counts=mismatched)
    run(stage, "crm.vip", "run-2", "succeeded", datetime(2026, 3, 2, 10, tzinfo=UTC), counts={"files": 0})

    customers, vip = statuses(stage, "crm.customers", "crm.vip")

    assert customers.last_reconciliation["commits"] == 2 and customers.last_reconciliation["inserted"] == 3
    assert customers.last_reconciliation["run_id"] == "run-1" and customers.healthy
    assert vip.last_reconciliation["mismatched_commits"] == 1 and not vip.healthy
    lines = operate.status_report([customers, vip]).splitlines()
    cells = [line[lines[0].index("reconciled") :] for line in lines]
    assert cells == ["reconciled", "ok 2 2026-03-02T09:00:00.000Z", "MISMATCH 1/1 2026-03-02T09:00:00.000Z"]


def test_a_table_held_for_its_keys_is_listed_with_the_line_to_add(stage, capsys):
    """A table a source found without keys (control.trigger.found) is not a table to load: status of
    the stage lists it under the tables, with the one line that releases it, and exits 1; --json lists
    it after the tables, with the same line; status of another table (--table) answers for that table
    alone."""
    from lakeloader.control.config_store import found_item, put_found_item

    held = found_item(
        "erp",
        "app.orders",
        "erp/app/orders/",
        {"id": "app.orders"},
        "mode merge needs key columns and no entry of the source's keys matches",
        needs_keys=True,
    )
    put_found_item(stage.deployed.config_table, held, client=boto3.client("dynamodb"))

    code, out = stage.cli(capsys, "status", "--table", "crm.customers")
    assert code == 0 and "app.orders" not in out, out

    code, out = stage.cli(capsys, "status")

    assert code == 1
    hint = (
        "app.orders: held (mode merge needs key columns and no entry of the source's keys matches); its "
        "files stay pending: add under sources 'erp' -> keys: \"app.orders\": [<key column>, ...]"
    )
    assert out.splitlines()[-1] == f"! {hint}"

    code, out = stage.cli(capsys, "status", "--json")

    assert code == 1
    *tables, orders = json.loads(out)
    assert [t["table_id"] for t in tables] == [t.id for t in stage.deployed.tables()]
    assert all("held" not in t for t in tables)  # a table that loads keeps its entry as it was
    assert orders == {
        "table_id": "app.orders",
        "held": {
            "source": "erp",
            "prefix": "erp/app/orders/",
            "reason": "mode merge needs key columns and no entry of the source's keys matches",
            "line": '"app.orders": [<key column>, ...]',
            "hint": hint,
        },
        "healthy": False,
    }
    code, out = stage.cli(capsys, "status", "--json", "--table", "crm.customers")
    assert code == 0 and [t["table_id"] for t in json.loads(out)] == ["crm.customers"]


def test_status_of_the_whole_stage_reads_each_table_of_the_ledger_in_pages_and_says_the_same(stage):
    """`status` of the stage (no --table) scans the ledger and the run history: a request per segment
    and page, however many tables (two queries a table took minutes at 1,000). Of each table it says
    exactly what the table's own queries say: counts, lag, stuck files in key order, the newest run, a
    live run (lock held) running and a dead one abandoned, the last commit and reconciliation."""
    for status in (PENDING, RUNNING, FAILED, QUARANTINED, SKIPPED):
        one_file_in(stage, status, size=3, arrived="2026-03-02T11:00:00Z")
    one_file_in(stage, QUARANTINED, table_id="old.archive", arrived="2026-03-01T00:00:00Z")
    clean = CommitReconciliation(commits=1, upserts_asked=1, inserted=1, live_delta=1).run_counts()
    run(stage, "crm.customers", "run-1", "succeeded", datetime(2026, 3, 2, 9, tzinfo=UTC), snapshot_id=4)
    run(stage, "crm.customers", "run-2", "succeeded", datetime(2026, 3, 2, 10, tzinfo=UTC), counts=clean)
    stage.ledger.start_run("sales.orders", "run-5", "cid")  # died: no lock
    stage.ledger.start_run("crm.vip", "run-6", "cid")
    assert stage.ledger.acquire_lock("crm.vip", "run-6")  # alive
    tables = stage.deployed.tables()
    ledger = stage.deployed.ledger()
    requests: list[str] = []
    ledger.client.meta.events.register(
        "provide-client-params.dynamodb.*", lambda model, **_: requests.append(model.name)
    )

    whole = operate.stage_statuses(ledger, tables, now=NOW)

    assert requests == ["Scan"] * (2 * SCAN_SEGMENTS)  # both tables, one page a segment
    assert whole == [operate.table_status(stage.ledger, table, now=NOW) for table in tables]
    by_id = {s.table_id: s for s in whole}
    assert by_id["crm.customers"].counts == {PENDING: 1, RUNNING: 1, FAILED: 1, QUARANTINED: 1, SKIPPED: 1}
    assert by_id["crm.customers"].last_commit["snapshot_id"] == 4
    assert by_id["crm.customers"].last_reconciliation["run_id"] == "run-2"
    assert (by_id["sales.orders"].last_run["status"], by_id["crm.vip"].last_run["status"]) == (
        "abandoned",
        "running",
    )
    stuck = [s["key"] for s in by_id["crm.customers"].stuck]
    assert stuck == sorted(stuck)
