"""The drain sets a file its batch proves bad aside (lakeloader.jobs.drain.drain_table): the batch's
other files go on in the same run, and a file that keeps failing is quarantined after the stage's
max_attempts. The world (moto's DynamoDB and CloudWatch, a scripted merge) is drain_world.py's.
"""

from __future__ import annotations

from lakeloader.config import TableConfig
from lakeloader.jobs.load import LoadResult
from tests.unit import drain_world
from tests.unit.drain_world import Merge, drain, land, ok, quarantined_metric, statuses

moto_server, aws_endpoint = drain_world.moto_server, drain_world.aws_endpoint
clock, ledger, table, merges = drain_world.clock, drain_world.ledger, drain_world.table, drain_world.merges


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
