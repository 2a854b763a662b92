"""Seeded disorder, in this process: files shuffled, re-delivered, replayed and late, loaded in
random rounds; the table must equal the oracle's after every round's last file is in."""

from __future__ import annotations

import pytest

from lakeloader.spark.session import CATALOG
from tests.faults import oracle
from tests.faults.rounds import deliver

pytestmark = pytest.mark.spark


def name_of(table) -> str:
    return f"{CATALOG}.{table.target.database}.{table.target.table}"


def merge_case(spark, raw, make_table, seed: int, *, safe: bool) -> oracle.Diff:
    table = make_table()
    work = oracle.workload(seed, safe=safe)
    deliver(spark, table, raw, work, seed)
    actual = [tuple(r) for r in spark.sql(f"SELECT {oracle.COLUMNS} FROM {name_of(table)}").collect()]
    return oracle.compare(actual, oracle.expected_merge(work.files), faults=work.faults, changes=work.changes)


def test_merge_table_equals_the_oracle_under_disorder(spark, raw, make_table):
    diff = merge_case(spark, raw, make_table, 11, safe=True)
    assert diff.clean, diff


def test_merge_ignores_changes_older_than_a_delete_under_disorder(spark, raw, make_table):
    diff = merge_case(spark, raw, make_table, 16, safe=False)
    assert diff.clean, diff


def scd2_case(spark, raw, make_table, seed: int, *, safe: bool) -> tuple[oracle.Diff, list[str]]:
    table = make_table(mode="scd2")
    work = oracle.workload(seed, ties=False, safe=safe)
    rounds = [files for files, _ in deliver(spark, table, raw, work, seed)]
    query = f"SELECT id, name, city, valid_from, valid_to, is_current FROM {name_of(table)}"
    actual = [tuple(r) for r in spark.sql(query).collect()]
    expected = oracle.expected_scd2(rounds)
    diff = oracle.compare(actual, expected, faults=work.faults, changes=work.changes)
    return diff, oracle.chain_problems(actual)


def test_scd2_chains_equal_the_oracle_under_disorder(spark, raw, make_table):
    diff, problems = scd2_case(spark, raw, make_table, 21, safe=True)
    assert not problems, problems
    assert diff.clean, diff


def test_scd2_ignores_changes_older_than_a_delete_under_disorder(spark, raw, make_table):
    diff, problems = scd2_case(spark, raw, make_table, 16, safe=False)
    assert not problems, problems
    assert diff.clean, diff
