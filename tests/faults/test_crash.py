"""SIGKILL at each step of a run: `lakeloader run|maintain|erase` in a subprocess dies at a named crash
point (lakeloader.spark.faults); the next run, here, must finish the work exactly once."""

from __future__ import annotations

import signal
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from lakeloader.jobs.erase import erase
from lakeloader.jobs.maintenance import maintain_table, maintain_tables
from lakeloader.spark.session import CATALOG
from tests.faults import oracle

pytestmark = pytest.mark.spark

KILLED = -signal.SIGKILL


def spec(mode: str = "merge", **extra) -> dict:
    n = uuid.uuid4().hex[:8]
    return {
        "id": f"faults.t{n}",
        "source": {"prefix": f"t{n}/", "format": "parquet", "cdc": "dms"},
        "target": {"database": f"faults_{n}", "table": "t"},
        "keys": ["id"],
        "mode": mode,
        **extra,
    }


def name_of(table) -> str:
    return f"{CATALOG}.{table.target.database}.{table.target.table}"


def land(lake, table, files: list[oracle.RawFile]) -> None:
    for file in files:
        file.write(lake.raw / table.source.prefix)


def rows(lake, table, columns: str = oracle.COLUMNS) -> list[tuple]:
    """The table's rows, sorted: compaction rewrites files, and a scan's order with them."""
    lake.refresh(name_of(table))
    return sorted(tuple(r) for r in lake.spark.sql(f"SELECT {columns} FROM {name_of(table)}").collect())


def crash(lake, *args: str, at: str) -> None:
    code, out, err = lake.cli(*args, crash_at=at)
    assert code == KILLED, f"expected the run to die at {at!r}; exit {code}\n{out}\n{err[-3000:]}"


def halves(work: oracle.Workload) -> tuple[list[oracle.RawFile], list[oracle.RawFile]]:
    middle = len(work.files) // 2
    return work.files[:middle], work.files[middle:]


def check(lake, table, work: oracle.Workload, fault: str, expected: dict | None = None) -> None:
    diff = oracle.compare(
        rows(lake, table),
        oracle.expected_merge(work.files) if expected is None else expected,
        faults=work.faults + Counter({fault: 1}),
        changes=work.changes,
    )
    assert diff.clean, diff


def test_killed_after_reading_the_next_run_loads_every_file(lake):
    table = lake.add(spec())
    work = oracle.workload(31, events=60)
    first, second = halves(work)
    land(lake, table, first)
    lake.run_here(table)
    land(lake, table, second)

    crash(lake, "run", "--table", table.id, at="after_read")

    assert lake.run_here(table).files == len(second)
    check(lake, table, work, "SIGKILL after reading")


def test_killed_after_the_commit_before_the_input_log_the_next_run_applies_nothing_twice(lake):
    """An append table shows a second application as duplicate rows (a merge table's guard would hide it)."""
    table = lake.add(spec(mode="append", keys=[]))
    work = oracle.workload(32, events=60, replays=0, redeliveries=0)
    land(lake, table, work.files)

    crash(lake, "run", "--table", table.id, at="after_commit")

    assert lake.run_here(table).files == 0  # the snapshot summary says the commit consumed them
    expected = sorted(c.row for f in work.files for c in f.changes)
    faults = work.faults + Counter({"SIGKILL after commit": 1})
    diff = oracle.compare(rows(lake, table), expected, faults=faults, changes=work.changes)
    assert diff.clean, diff


def test_killed_before_an_audit_branch_is_published_the_next_run_loses_nothing(lake):
    table = lake.add(spec(quality={"rules": [{"not_null": ["name"]}]}))
    work = oracle.workload(33, events=60)
    first, second = halves(work)
    land(lake, table, first)
    lake.run_here(table)
    land(lake, table, second)

    crash(lake, "run", "--table", table.id, at="before_publish")

    assert lake.run_here(table).files == len(second)
    check(lake, table, work, "SIGKILL before publishing an audit branch")
    refs = {r.name: r.snapshot_id for r in lake.spark.sql(f"SELECT * FROM {name_of(table)}.refs").collect()}
    left = [ref for ref, snapshot in refs.items() if ref != "main" and snapshot == refs["main"]]
    assert not left, f"the killed run's audit branch was published: {left}"
    killed = [ref for ref in refs if ref.startswith("audit_")]
    assert killed, "the killed run left no audit branch: the case below proves nothing"

    # once no run can hold the table's lock (2 h lease), maintenance drops the dead run's branch
    merged = rows(lake, table)
    later = datetime.now(UTC) + timedelta(hours=3)
    result = maintain_table(lake.spark, table, catalog=CATALOG, now=later)
    assert result.status == "ok", result.error
    refs = [r.name for r in lake.spark.sql(f"SELECT name FROM {name_of(table)}.refs").collect()]
    assert not [ref for ref in refs if ref.startswith("audit_")], refs
    assert rows(lake, table) == merged


def test_killed_during_maintenance_the_table_is_intact_and_maintenance_finishes(lake):
    table = lake.add(spec(maintenance={"compaction": {"min_input_files": 2}}))
    work = oracle.workload(34, events=60)
    first, second = halves(work)
    for files in (first[:2], first[2:]):
        land(lake, table, files)
        lake.run_here(table)

    crash(lake, "maintain", "--table", table.id, at="maintain:rewrite_data_files")

    check(lake, table, work.__class__(work.seed, first), "SIGKILL during maintenance")
    lake.refresh(name_of(table))
    (again,) = maintain_tables(lake.spark, [table], catalog=CATALOG)
    assert again.status == "ok", again.error
    land(lake, table, second)
    lake.run_here(table)
    check(lake, table, work, "run after a killed maintenance")


def test_killed_during_an_erasure_the_rerun_verifies_and_no_run_brings_the_subject_back(lake):
    table = lake.add(spec())
    work = oracle.workload(35, events=60)
    land(lake, table, work.files)
    lake.run_here(table)
    expected = oracle.expected_merge(work.files)
    subject = sorted(expected)[0]

    crash(lake, "erase", "--table", table.id, "--key", str(subject), at="erase:after_delete")

    lake.refresh(name_of(table))
    result = erase(lake.spark, table, catalog=CATALOG, keys=[str(subject)], who="fault-suite")
    assert result.verified
    history = lake.spark.sql(
        f"SELECT count(*) FROM lakeloader.lakeloader_audit.erasures WHERE table_id = '{table.id}'"
    ).first()[0]
    assert history == 1  # the killed erasure never wrote its audit record; the re-run did
    assert lake.run_here(table).files == 0
    del expected[subject]
    check(lake, table, work, "SIGKILL during an erasure", expected)


def test_killed_after_the_commit_then_history_expires_the_files_are_still_known(lake):
    """The input log must learn of files whose commit outlived a killed run, or expiring that
    commit's snapshot makes the next run load them again (an append table doubles them)."""
    table = lake.add(
        spec(mode="append", keys=[], maintenance={"snapshots": {"older_than_days": 1e-9, "retain_last": 1}})
    )
    work = oracle.workload(36, events=40, replays=0, redeliveries=0)
    first, second = halves(work)
    land(lake, table, first)
    crash(lake, "run", "--table", table.id, at="after_commit")
    lake.run_here(table)
    land(lake, table, second)
    lake.run_here(table)
    lake.refresh(name_of(table))
    (maintained,) = maintain_tables(lake.spark, [table], catalog=CATALOG)
    assert maintained.status == "ok", maintained.error

    assert lake.run_here(table).files == 0
    expected = sorted(c.row for f in work.files for c in f.changes)
    diff = oracle.compare(
        rows(lake, table),
        expected,
        faults=work.faults + Counter({"SIGKILL after commit, then snapshot expiry": 1}),
        changes=work.changes,
    )
    assert diff.clean, diff
