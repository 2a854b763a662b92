"""Write-audit-publish quality gates on real Iceberg tables: audit branch, rules, quarantine, fail."""

from __future__ import annotations

import json
from datetime import datetime

import pyarrow as pa
import pytest

from lakeloader.control.ledger import LockLostError
from lakeloader.engine import apply_batch
from lakeloader.engine.quality import QualityError
from lakeloader.jobs.load import LoadResult, run_tables, summary_table
from lakeloader.spark.inputs import list_inputs
from lakeloader.spark.session import CATALOG

pytestmark = pytest.mark.spark

T0 = datetime(2026, 11, 1, 8, 0, 0)
DMS = pa.schema(
    [
        ("Op", pa.string()),
        ("id", pa.int64()),
        ("email", pa.string()),
        ("age", pa.int64()),
        ("status", pa.string()),
        ("last_update_time", pa.timestamp("us")),
    ]
)
RULES = [
    {"not_null": ["email"]},
    {"regex": {"column": "email", "pattern": "^[^@]+@[^@]+$"}},
    {"between": {"column": "age", "min": 0, "max": 150}},
    {"in_set": {"column": "status", "values": ["active", "closed"]}},
    {"name": "adult_or_unknown", "expression": "age IS NULL OR age >= 18"},
    {"unique": True},
    {"min_row_count": 1},
]


def row(op: str, id_: int, email: str | None, age: int | None, status: str = "active", minute: int = 0):
    return {
        "Op": op,
        "id": id_,
        "email": email,
        "age": age,
        "status": status,
        "last_update_time": T0.replace(minute=minute),
    }


def name_of(table) -> str:
    return f"{CATALOG}.{table.target.database}.{table.target.table}"


def load(spark, table, raw, run_id: str):
    files = list_inputs(str(raw.root), table.source.prefix)
    return apply_batch(spark, table, files, catalog=CATALOG, run_id=run_id)


def rows(spark, table) -> list[tuple]:
    return [tuple(r) for r in spark.sql(f"SELECT id, email, age FROM {name_of(table)} ORDER BY id").collect()]


def refs(spark, table) -> dict[str, int]:
    return {r.name: r.snapshot_id for r in spark.sql(f"SELECT * FROM {name_of(table)}.refs").collect()}


def test_passing_batch_is_published_from_the_audit_branch(spark, raw, make_table):
    table = make_table(quality={"rules": RULES})
    raw.write_parquet("src/20261101-0900.parquet", [row("I", 1, "a@x", 30), row("I", 2, "b@x", 40)], DMS)
    result = load(spark, table, raw, "r1")
    assert result.files == 1 and result.inserted == 2
    assert result.quality.action == "passed"
    assert [o.passed for o in result.quality.outcomes] == [True] * len(RULES)
    assert rows(spark, table) == [(1, "a@x", 30), (2, "b@x", 40)]
    # published by fast-forward: main is the audited snapshot, and the branch is gone
    assert list(refs(spark, table)) == ["main"]
    summary = (
        spark.sql(
            f"SELECT summary FROM {name_of(table)}.snapshots WHERE snapshot_id = {refs(spark, table)['main']}"
        )
        .first()
        .summary
    )
    assert summary["lakeloader.run-id"] == "r1"


def test_an_audit_branch_whose_drop_meets_another_writers_commit_is_dropped_again(
    spark, raw, make_table, monkeypatch
):
    """Dropping the published branch is a commit of its own. When it meets another writer's commit
    and Iceberg's own retries are spent (two `lakeloader run`s of a gated table at once on a busy
    machine once left a branch behind), it is retried as the batch's commit is: no branch is left."""
    from lakeloader import iceberg

    table = make_table(quality={"rules": RULES}, maintenance={"retry": {"base_seconds": 0.01}})
    raw.write_parquet("src/20261101-0900.parquet", [row("I", 1, "a@x", 30)], DMS)
    drop_branch, dropped = iceberg.drop_branch, []

    def drop_beside_another_writer(spark_, name, branch):  # the first drop loses the race
        dropped.append(branch)
        if len(dropped) == 1:
            raise RuntimeError(
                f"org.apache.iceberg.exceptions.CommitFailedException: Version 4 already exists: {name}"
            )
        drop_branch(spark_, name, branch)

    monkeypatch.setattr(iceberg, "drop_branch", drop_beside_another_writer)
    result = load(spark, table, raw, "r1")
    assert result.quality.action == "passed" and rows(spark, table) == [(1, "a@x", 30)]
    assert len(dropped) == 2 and dropped[0] == dropped[1]
    assert list(refs(spark, table)) == ["main"]


@pytest.mark.slow
def test_the_last_check_runs_after_the_audit_and_right_before_publishing(spark, raw, make_table):
    """`before_publish` (the drain's lock re-check) runs once, when the audit branch holds the checked
    batch and `main` is about to move: not before the write to the branch. Raising there publishes
    nothing and drops the branch."""
    table = make_table(quality={"rules": RULES})
    raw.write_parquet("src/20261101-0900.parquet", [row("I", 1, "a@x", 30)], DMS)
    load(spark, table, raw, "r1")
    before = refs(spark, table)
    raw.write_parquet("src/20261101-0901.parquet", [row("I", 2, "b@x", 40, minute=1)], DMS)
    seen: list[dict[str, int]] = []

    def lost_the_lock() -> None:
        seen.append(refs(spark, table))
        raise LockLostError(f"table {table.id!r}: run 'r2' no longer holds the table lock")

    files = list_inputs(str(raw.root), table.source.prefix)
    with pytest.raises(LockLostError):
        apply_batch(spark, table, files, catalog=CATALOG, run_id="r2", before_publish=lost_the_lock)
    ((branch, head),) = [(k, v) for k, v in seen[0].items() if k.startswith("audit_")]
    assert len(seen) == 1 and head != seen[0]["main"] == before["main"], seen  # the branch holds the batch
    assert refs(spark, table) == before  # nothing published, the branch dropped
    assert rows(spark, table) == [(1, "a@x", 30)]


@pytest.mark.slow
def test_quarantine_sets_failing_rows_aside_and_publishes_the_rest(spark, raw, make_table):
    table = make_table(quality={"rules": RULES, "on_failure": "quarantine"})
    raw.write_parquet("src/20261101-0900.parquet", [row("I", 1, "a@x", 30), row("I", 2, "b@x", 40)], DMS)
    load(spark, table, raw, "r1")
    raw.write_parquet(
        "src/20261101-0901.parquet",
        [
            row("U", 1, None, 31, minute=1),  # not_null(email): the old row 1 stays
            row(
                "I", 3, "c@x", 200, minute=1
            ),  # between(age) and the expression pass? 200 >= 18: only between
            row("I", 4, "no-at-sign", 20, minute=1),  # regex
            row("I", 5, "e@x", 10, "weird", minute=1),  # in_set and adult_or_unknown
            row("I", 6, "f@x", 50, minute=1),  # good
            row("U", 2, "b2@x", 41, minute=1),  # good update
        ],
        DMS,
    )
    result = load(spark, table, raw, "r2")
    assert result.files == 1
    q = result.quality
    assert q.action == "quarantined"
    failed = {o.rule: o.failed_rows for o in q.outcomes if not o.passed}
    assert failed == {
        "not_null(email)": 1,
        "between(age)": 1,
        "regex(email)": 1,
        "in_set(status)": 1,
        "adult_or_unknown": 1,
    }
    assert rows(spark, table) == [(1, "a@x", 30), (2, "b2@x", 41), (6, "f@x", 50)]
    quarantine = spark.sql(
        f"SELECT * FROM {CATALOG}.{table.target.database}.t__quarantine ORDER BY rule"
    ).collect()
    assert q.quarantined_rows == len(quarantine) == 5
    assert {r.run_id for r in quarantine} == {"r2"} and {r.table_id for r in quarantine} == {table.id}
    by_rule = {r.rule: r for r in quarantine}
    assert json.loads(by_rule["between(age)"].record)["id"] == 3
    assert by_rule["between(age)"].reason == "age = 200 not in [0, 150]"
    assert by_rule["not_null(email)"].reason == "email is NULL"
    assert json.loads(by_rule["regex(email)"].record)["email"] == "no-at-sign"
    assert list(refs(spark, table)) == ["main"]
    # the run summary shows the outcome
    text = summary_table([LoadResult.of_batch(table.id, result)])
    assert "quality quarantined" in text and "adult_or_unknown: FAILED" in text


@pytest.mark.slow
def test_fail_leaves_main_untouched_and_fails_the_table(spark, raw, make_table):
    table = make_table(quality={"rules": RULES, "on_failure": "fail"})
    raw.write_parquet("src/20261101-0900.parquet", [row("I", 1, "a@x", 30)], DMS)
    load(spark, table, raw, "r1")
    main_before = refs(spark, table)["main"]
    snapshots_before = spark.sql(f"SELECT snapshot_id FROM {name_of(table)}.snapshots").count()
    raw.write_parquet(
        "src/20261101-0901.parquet", [row("I", 2, "b@x", 40, minute=1), row("I", 3, None, 50, minute=1)], DMS
    )
    with pytest.raises(QualityError, match=r"not_null\(email\): FAILED, 1 row"):
        load(spark, table, raw, "r2")
    assert refs(spark, table) == {"main": main_before}
    assert rows(spark, table) == [(1, "a@x", 30)]
    # the rejected audit snapshot was expired, so its input file is not taken as consumed
    assert spark.sql(f"SELECT snapshot_id FROM {name_of(table)}.snapshots").count() == snapshots_before
    # through run_tables: recorded as a failed table with the rule outcomes
    files = list_inputs(str(raw.root), table.source.prefix)
    (result,) = run_tables(
        spark, [table], {table.id: files}, catalog=CATALOG, run_id="r3", progress=lambda m: None
    )
    assert result.status == "failed" and "not_null(email): FAILED" in result.error
    assert refs(spark, table) == {"main": main_before}


@pytest.mark.slow
def test_table_level_rule_fails_even_under_quarantine(spark, raw, make_table):
    table = make_table(quality={"rules": [{"min_row_count": 5}], "on_failure": "quarantine"})
    raw.write_parquet("src/20261101-0900.parquet", [row("I", 1, "a@x", 30)], DMS)
    with pytest.raises(QualityError, match="table-level"):
        load(spark, table, raw, "r1")
    assert "main" not in refs(spark, table)  # the new table never got a published snapshot


@pytest.mark.slow
def test_unique_over_a_non_key_column_blames_the_new_duplicates(spark, raw, make_table):
    table = make_table(quality={"rules": [{"unique": ["email"]}]})
    raw.write_parquet("src/20261101-0900.parquet", [row("I", 1, "a@x", 30), row("I", 2, "b@x", 40)], DMS)
    load(spark, table, raw, "r1")
    raw.write_parquet(
        "src/20261101-0901.parquet", [row("I", 3, "a@x", 30, minute=1), row("I", 4, "d@x", 30, minute=1)], DMS
    )
    result = load(spark, table, raw, "r2")
    assert [(o.rule, o.failed_rows) for o in result.quality.outcomes] == [("unique(email)", 1)]
    assert [r[0] for r in rows(spark, table)] == [1, 2, 4]


@pytest.mark.slow
def test_quarantine_on_a_keyless_append_table(spark, raw, make_table):
    table = make_table(
        keys=[],
        mode="append",
        source={"cdc": "none"},
        quality={"rules": [{"between": {"column": "age", "min": 0}}], "on_failure": "quarantine"},
    )
    raw.write_parquet(
        "src/20261101-0900.parquet",
        [row("I", 1, "a@x", 30), row("I", 2, "b@x", -1), row("I", 3, "c@x", 5)],
        DMS,
    )
    result = load(spark, table, raw, "r1")
    assert result.quality.action == "quarantined" and result.quality.quarantined_rows == 1
    assert [r[0] for r in rows(spark, table)] == [1, 3]
    reason = spark.sql(f"SELECT reason FROM {CATALOG}.{table.target.database}.t__quarantine").first().reason
    assert reason == "age = -1 not in [0, inf]"


def test_reports_of_several_batches_combine_into_run_counts():
    from lakeloader.engine.quality import QualityReport, RuleOutcome, combine_reports, report_counts

    first = QualityReport("passed", [RuleOutcome("not_null(email)", "not_null", True)])
    second = QualityReport("quarantined", [RuleOutcome("not_null(email)", "not_null", False, 3)], 3, "q")
    total = combine_reports(combine_reports(None, first), second)
    assert total.action == "quarantined"
    assert report_counts(total) == {
        "quality_rules_checked": 1,
        "quality_rules_failed": 1,
        "quality_quarantined_rows": 3,
        "quality_failed_rows:not_null(email)": 3,
    }
    assert report_counts(None) == {}
