"""A small batch costs a bounded number of Spark jobs (issue 11: fixed cost dominates small batches).

The count is deterministic -- it follows from the plan, not from timing -- so a ceiling can be a
test. `python -m benchmarks.jobs` lists the jobs one by one (benchmarks/RESULTS.md).
"""

from __future__ import annotations

import gc
from datetime import datetime

import pyarrow as pa
import pytest

from lakeloader.engine import apply_batch, merge, merge_without_commit_counts
from lakeloader.spark.inputs import list_inputs
from lakeloader.spark.session import CATALOG

pytestmark = pytest.mark.spark

MAX_JOBS = 6  # 5 without tombstones; a batch with deletes appends its tombstones (one job)
# Calls into the driver's JVM (py4j round trips) of the test's three batches, by PySpark's major
# version: 3,129-3,138 and 2,216-2,383 on 2026-11-30 at 19:20 UTC, with the read's metrics built as
# SQL text (lakeloader.engine.cdc), against 3,788-4,030 and 2,829-3,287 with them built as Column
# objects; before that day's earlier changes, 4,530-4,815 and 5,752-5,767 with the metrics read entry
# by entry (lakeloader.spark.session.Metrics) and on PySpark 4 every call's call site recorded
# (lakeloader.spark.session.NO_CALL_SITES). Each change alone takes its runtime over its ceiling.
MAX_JVM_CALLS = {"3": 3_500, "4": 2_650}
DMS = pa.schema(
    [("Op", pa.string()), ("id", pa.int64()), ("name", pa.string()), ("last_update_time", pa.timestamp("us"))]
)
T0 = datetime(2026, 11, 1, 8, 0, 0)


def jobs_of(spark, table, raw, run_id: str):
    """The run's result and the number of Spark jobs it started."""
    context = spark.sparkContext
    context.setLocalProperty("spark.jobGroup.id", run_id)
    try:
        result = apply_batch(spark, table, list_inputs(str(raw.root), "src/"), catalog=CATALOG, run_id=run_id)
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    return result, len(context.statusTracker().getJobIdsForGroup(run_id))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("one_task_rows", "max_jobs"),
    [(merge_without_commit_counts.ONE_TASK_TARGET_ROWS, MAX_JOBS), (0, MAX_JOBS + 1)],
    ids=["matches-read-in-classification", "large-table-matches-broadcast"],
)
def test_a_small_batch_runs_at_most_six_spark_jobs(
    spark, raw, make_table, monkeypatch, one_task_rows, max_jobs
):
    """Into a table above merge_without_commit_counts.ONE_TASK_TARGET_ROWS rows (0 here), the batch's
    matches are broadcast: one job more, the same result. The batches' calls into the driver's JVM are
    counted too: each py4j round trip costs the driver 0.2-0.3 ms on this laptop, a fixed cost like a
    Spark job's."""
    import py4j.clientserver
    import pyspark

    monkeypatch.setattr(merge_without_commit_counts, "ONE_TASK_TARGET_ROWS", one_task_rows)
    table = make_table()  # a new table's defaults (merge-on-read)
    base = [{"Op": "I", "id": i, "name": f"n{i}", "last_update_time": T0} for i in range(100)]
    raw.write_parquet("src/20261101-0800.parquet", base, DMS)
    jobs_of(spark, table, raw, f"create-{table.id}")  # creating the table is not the steady state

    calls = 0
    send = py4j.clientserver.ClientServerConnection.send_command

    def counted(self, command):
        nonlocal calls
        calls += 1
        return send(self, command)

    gc.collect()  # py4j frees the earlier tests' Java objects now, not on these batches' count
    monkeypatch.setattr(py4j.clientserver.ClientServerConnection, "send_command", counted)

    for batch in range(1, 4):  # the second batch on meets the tombstones the first one's deletes left
        stamp = T0.replace(minute=batch)
        changes = [{"Op": "U", "id": i, "name": f"u{batch}", "last_update_time": stamp} for i in range(0, 30)]
        changes += [{"Op": "D", "id": 30 + batch, "name": None, "last_update_time": stamp}]
        changes += [
            {"Op": "I", "id": 1000 * batch + i, "name": "new", "last_update_time": stamp} for i in range(5)
        ]
        raw.write_parquet(f"src/20261101-09{batch:02d}.parquet", changes, DMS)
        result, jobs = jobs_of(spark, table, raw, f"batch{batch}-{table.id}")
        assert (result.files, result.inserted, result.updated, result.deleted) == (1, 5, 30, 1)
        assert jobs <= max_jobs, f"batch {batch}: {jobs} Spark jobs (python -m benchmarks.jobs lists them)"
    ceiling = MAX_JVM_CALLS[pyspark.__version__.split(".")[0]]
    assert calls <= ceiling, f"{calls:,} calls into the JVM in three batches (at most {ceiling:,})"


@pytest.mark.slow
def test_a_batch_reports_every_phase_the_benchmark_profiles(spark, raw, make_table):
    """`python -m benchmarks.merge` times a batch's phases from the engine's progress messages: a batch
    with a delete passes through every one, in order, and none goes unrecognised."""
    from benchmarks.engines import PHASE_MARKS

    table = make_table()
    raw.write_parquet(
        "src/20261101-0800.parquet", [{"Op": "I", "id": 1, "name": "a", "last_update_time": T0}], DMS
    )
    apply_batch(spark, table, list_inputs(str(raw.root), "src/"), catalog=CATALOG, run_id="create")
    later = T0.replace(minute=5)
    changes = [
        {"Op": "U", "id": 1, "name": "b", "last_update_time": later},
        {"Op": "D", "id": 2, "name": None, "last_update_time": later},
    ]
    raw.write_parquet("src/20261101-0900.parquet", changes, DMS)
    phases: list[str] = []

    def progress(message: str) -> None:  # as the benchmark reads them: the first prefix that matches
        phases.extend(next(([name] for prefix, name in PHASE_MARKS if message.startswith(prefix)), []))

    apply_batch(
        spark, table, list_inputs(str(raw.root), "src/"), catalog=CATALOG, run_id="run", progress=progress
    )
    # Where the MERGE counts itself (Spark 4.1+), no batch is classified first.
    skipped = {"classify+probe"} if merge.counts_in_commit(spark) else set()
    assert phases == [name for _, name in PHASE_MARKS if name not in skipped]
