"""The run summary's `!` line says what a table's run did (lakeloader.jobs.load.outcome_line): a table
that loaded nothing says it failed, with its files set aside and pending; a table whose every file
was set aside says nothing loaded; one that loaded some says how many, and which were set aside."""

from __future__ import annotations

from lakeloader.engine.batch_result import BatchResult
from lakeloader.jobs.load import LoadResult, outcome_line, summary_table

ASIDE = {"s/b.parquet": "table 't', file 's/b.parquet': cannot be read: EOF"}


def test_a_failed_table_says_nothing_loaded_and_counts_the_files_set_aside_and_pending():
    line = outcome_line(0, ASIDE, 2, "table 't': the catalog is gone")
    assert line.startswith(
        "failed, nothing loaded (1 file(s) set aside, 2 file(s) pending; a later run retries"
    )
    assert line.endswith("table 't': the catalog is gone; set aside: " + ASIDE["s/b.parquet"])
    assert "the others loaded" not in line
    assert outcome_line(0, {}, 3, "boom").startswith("failed, nothing loaded (3 file(s) pending; ")


def test_a_table_whose_every_file_was_set_aside_says_nothing_loaded():
    line = outcome_line(0, ASIDE, 0, None)
    assert line.startswith("nothing loaded: 1 file(s) set aside, none left to load; a later run retries them")
    assert line.endswith(ASIDE["s/b.parquet"])


def test_a_table_that_loaded_some_files_says_how_many_and_names_the_ones_set_aside():
    line = outcome_line(3, ASIDE, 0, None)
    assert line.startswith("3 file(s) loaded, 1 set aside; a later run retries them")
    assert line.endswith(ASIDE["s/b.parquet"])


def test_each_line_in_full():
    two = {"s/b.parquet": "b: EOF", "s/c.parquet": "c: EOF"}
    retry = "a later run retries them (lakeloader run --skip FILE --reason TEXT gives one up)"
    assert outcome_line(0, {}, 0, "boom") == "failed, nothing loaded: boom"
    assert outcome_line(3, two, 0, None) == f"3 file(s) loaded, 2 set aside; {retry}: b: EOF; c: EOF"


def test_the_run_summary_is_a_table_of_each_tables_counts_then_its_errors_and_notes():
    loaded = LoadResult.of_batch(
        "crm.customers",
        BatchResult(
            files=2, changes=1500, inserted=1200, updated=250, deleted=50, snapshot_id=77, notes=["n1"]
        ),
    )
    loaded.seconds = 3.25
    idle = LoadResult.of_batch("crm.orders", BatchResult())
    failed = LoadResult("hr.people", status="failed", error="boom", seconds=0.5)
    assert (loaded.status, idle.status) == ("ok", "skipped")
    assert (loaded.files, loaded.changes, loaded.notes, loaded.snapshot_id) == (2, 1500, ["n1"], 77)
    lines = summary_table([loaded, idle, failed]).splitlines()
    assert [line.split() for line in lines if not line.startswith(("-", "!", " "))] == [
        ["table", "status", "files", "changes", "inserted", "updated", "deleted", "snapshot", "seconds"],
        ["crm.customers", "ok", "2", "1,500", "1,200", "250", "50", "77", "3.2"],
        ["crm.orders", "skipped", "0", "0", "0", "0", "0", "-", "0.0"],
        ["hr.people", "failed", "0", "0", "0", "0", "0", "-", "0.5"],
    ]
    assert lines[-2:] == ["  crm.customers: n1", "! hr.people: boom"]
