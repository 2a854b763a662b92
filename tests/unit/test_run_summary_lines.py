"""The run summary's `!` line says what a table's run did (lakeloader.jobs.load.outcome_line): a table
that loaded nothing says it failed, with its files set aside and pending; a table whose every file
was set aside says nothing loaded; one that loaded some says how many, and which were set aside."""

from __future__ import annotations

from lakeloader.jobs.load import outcome_line

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
