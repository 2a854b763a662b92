"""on_truncate: empty_table -- a Debezium truncate empties the table as of its place in the order of
changes, in the batch's one commit, in merge and scd2."""

from __future__ import annotations

import pytest

from tests.spark.debezium_events import lines, postgres
from tests.spark.merge_batches import load, rows, snapshots

pytestmark = pytest.mark.spark

EMPTY = {"source": {"format": "json", "cdc": "debezium_envelope"}, "on_truncate": "empty_table"}


def event(op: str, id_: int, name: str, ts_ms: int) -> dict:
    return postgres(op, id_, name, ts_ms, lsn=ts_ms * 10, wrapped=False)


@pytest.mark.slow
@pytest.mark.parametrize("truncate_file", ["src/0002.json", "src/0000.json"])
def test_merge_keeps_only_what_follows_the_truncate(spark, raw, make_table, truncate_file):
    """The truncate's file sorts after or before the others: its sequence decides, not the file."""
    table = make_table(**EMPTY)
    raw.write_text("src/0001a.json", lines([event("c", k, f"v{k}", 1000) for k in (1, 2, 3)]))
    load(spark, table, raw)
    commits = snapshots(spark, table)
    raw.write_text("src/0001b.json", lines([event("u", 1, "before the truncate", 1500)]))
    raw.write_text(truncate_file, lines([event("t", 0, "", 2000)]))
    raw.write_text("src/0003.json", lines([event("c", 4, "after", 2500), event("u", 2, "after", 2600)]))
    result = load(spark, table, raw)
    assert rows(spark, table, "id, first_name") == [(2, "after"), (4, "after")]
    assert snapshots(spark, table) == commits + 1  # one commit: never an empty table in between
    assert result.deleted == 2  # keys 1 and 3
    # a change older than the truncate, delivered late, does not bring its key back
    raw.write_text("src/0004.json", lines([event("u", 3, "late", 1800)]))
    load(spark, table, raw)
    assert rows(spark, table, "id, first_name") == [(2, "after"), (4, "after")]


@pytest.mark.slow
def test_scd2_closes_every_current_version_at_the_truncate(spark, raw, make_table):
    table = make_table(**EMPTY, mode="scd2")
    raw.write_text("src/0001.json", lines([event("c", 1, "a", 1000), event("c", 2, "b", 1000)]))
    load(spark, table, raw)
    raw.write_text("src/0002.json", lines([event("t", 0, "", 2000), event("c", 2, "b again", 3000)]))
    load(spark, table, raw)
    history = rows(spark, table, "id, first_name, valid_from, valid_to, is_current")
    assert history == [
        (1, "a", 1000, 2000, False),
        (2, "b", 1000, 2000, False),
        (2, "b again", 3000, None, True),
    ]
