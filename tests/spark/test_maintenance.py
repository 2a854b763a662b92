"""Table maintenance on real Iceberg tables, and maintenance colliding with a merge."""

from __future__ import annotations

import os
import threading
import time
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pytest

from lakeloader.engine import apply_batch
from lakeloader.jobs.maintenance import maintain_table, sort_order_sql, summary_table
from lakeloader.spark.inputs import list_inputs
from lakeloader.spark.session import CATALOG

# slow (make check leaves it out): compaction, rewrites, expiry and orphan removal on real tables
pytestmark = [pytest.mark.spark, pytest.mark.slow]

T0 = datetime(2026, 11, 1, 8, 0, 0)
DMS = pa.schema(
    [("Op", pa.string()), ("id", pa.int64()), ("name", pa.string()), ("last_update_time", pa.timestamp("us"))]
)
MOR = {
    "write.merge.mode": "merge-on-read",
    "write.delete.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
}
FAST_RETRY = {"attempts": 6, "base_seconds": 0.2, "max_seconds": 2, "jitter": 0.5}


def change(op: str, id_: int, name: str, minute: int) -> dict:
    return {
        "Op": op,
        "id": id_,
        "name": name,
        "last_update_time": T0.replace(minute=minute % 60, hour=8 + minute // 60),
    }


def name_of(table) -> str:
    return f"{CATALOG}.{table.target.database}.{table.target.table}"


def load(spark, table, raw, file: str, batch: list[dict], run_id: str = "r", progress=lambda m: None):
    raw.write_parquet(f"src/{file}.parquet", batch, DMS)
    files = list_inputs(str(raw.root), table.source.prefix)
    return apply_batch(spark, table, files, catalog=CATALOG, run_id=run_id, progress=progress)


def rows(spark, table) -> list[tuple]:
    return [tuple(r) for r in spark.sql(f"SELECT id, name FROM {name_of(table)} ORDER BY id").collect()]


def count(spark, table, metadata: str) -> int:
    return spark.sql(f"SELECT * FROM {name_of(table)}.{metadata}").count()


def test_maintain_compacts_rewrites_deletes_expires_and_removes_orphans(spark, raw, make_table):
    table = make_table(
        target={"properties": MOR},
        maintenance={
            "compaction": {"min_input_files": 2, "target_file_size_mb": 64},
            "snapshots": {"older_than_days": 0.000001, "retain_last": 1},
            "orphan_files": {"older_than_hours": 24},
            "commit_retry": {"num_retries": 7},
            "retry": FAST_RETRY,
        },
    )
    for n in range(4):
        load(spark, table, raw, f"2026110{n}-0900", [change("I", 10 * n + i, f"v{n}", n) for i in range(3)])
    load(spark, table, raw, "20261105-0900", [change("U", 0, "updated", 10), change("D", 11, "x", 10)])
    expected = rows(spark, table)
    files_before, deletes_before = count(spark, table, "data_files"), count(spark, table, "delete_files")
    assert files_before >= 5 and deletes_before >= 1
    # an orphan: a file nobody committed, older than the 24 h minimum
    orphan = (
        Path(
            spark.sql(f"DESCRIBE TABLE EXTENDED {name_of(table)}")
            .where("col_name = 'Location'")
            .first()
            .data_type.removeprefix("file:")
        )
        / "data"
        / "crashed-writer.parquet"
    )
    orphan.write_bytes(b"not committed")
    old = time.time() - 3 * 86400
    os.utime(orphan, (old, old))

    # a where scope that matches nothing rewrites nothing
    scoped = table.model_copy(
        update={
            "maintenance": table.maintenance.model_copy(
                update={
                    "compaction": table.maintenance.compaction.model_copy(update={"where": "id > 1000"}),
                    "orphan_files": table.maintenance.orphan_files.model_copy(update={"enabled": False}),
                }
            )
        }
    )
    first = maintain_table(spark, scoped, catalog=CATALOG)
    assert first.status == "ok"
    assert {s.step: s.counts.get("rewritten_data_files_count", 0) for s in first.steps}[
        "rewrite_data_files"
    ] == 0

    messages: list[str] = []
    result = maintain_table(spark, table, catalog=CATALOG, progress=messages.append)
    assert result.status == "ok", summary_table([result])
    steps = {s.step: s for s in result.steps}
    assert list(steps) == [
        "commit_retry_properties",
        "drop_stale_audit_branches",
        "rewrite_data_files",
        "rewrite_position_delete_files",
        "rewrite_manifests",
        "expire_snapshots",
        "remove_orphan_files",
        "purge_tombstones",
    ]
    assert steps["rewrite_data_files"].counts["rewritten_data_files_count"] >= 5
    assert steps["remove_orphan_files"].counts["orphan_files_removed"] == 1 and not orphan.exists()
    assert rows(spark, table) == expected
    assert count(spark, table, "data_files") < files_before
    assert count(spark, table, "snapshots") == 1  # retain_last 1, everything else older than the cut-off
    props = {r.key: r.value for r in spark.sql(f"SHOW TBLPROPERTIES {name_of(table)}").collect()}
    assert props["commit.retry.num-retries"] == "7" and props["commit.retry.max-wait-ms"] == "60000"
    assert any("rewrite_data_files: ok" in m for m in messages)
    text = summary_table([result])
    assert table.id in text and "ok" in text


def test_sort_order_is_quoted_and_resolved(spark, raw, make_table):
    assert sort_order_sql("ID desc nulls last, zorder(a, Name)", ["id", "a", "name"]) == (
        "`id` DESC NULLS LAST, zorder(`a`, `name`)"
    )
    table = make_table(
        maintenance={
            "compaction": {"min_input_files": 2, "sort_order": "name DESC"},
            "orphan_files": {"enabled": False},
        }
    )
    for n in range(3):
        load(spark, table, raw, f"2026110{n}-0900", [change("I", n, f"name{n}", n)])
    result = maintain_table(spark, table, catalog=CATALOG)
    assert result.status == "ok", summary_table([result])
    assert {s.step: s for s in result.steps}["rewrite_data_files"].counts["rewritten_data_files_count"] == 3
    assert [r.name for r in spark.sql(f"SELECT name FROM {name_of(table)}").collect()] == [
        "name2",
        "name1",
        "name0",
    ]


def test_compaction_between_audit_and_publish_is_retried(spark, raw, make_table):
    """Deterministic interleaving: compaction commits to main after the merge wrote its audit branch
    and before it publishes; the fast-forward conflicts, the whole write is retried and both succeed."""
    table = make_table(
        quality={"rules": [{"not_null": ["name"]}]},
        maintenance={
            "compaction": {"min_input_files": 2},
            "retry": FAST_RETRY,
            "snapshots": {"enabled": False},
            "orphan_files": {"enabled": False},
        },
    )
    for n in range(3):
        load(spark, table, raw, f"2026110{n}-0900", [change("I", n, f"v{n}", n)])
    compactions = []

    def progress(message: str) -> None:
        if message.startswith("publishing") and not compactions:
            compactions.append(maintain_table(spark, table, catalog=CATALOG))

    messages: list[str] = []
    result = load(
        spark,
        table,
        raw,
        "20261105-0900",
        [change("U", 1, "new", 20), change("I", 9, "nine", 20)],
        progress=lambda m: (messages.append(m), progress(m)),
    )
    assert compactions[0].status == "ok"
    assert {s.step: s for s in compactions[0].steps}["rewrite_data_files"].counts[
        "rewritten_data_files_count"
    ] >= 3
    assert result.files == 1 and result.quality.action == "passed"
    assert any("concurrent commit" in m and "attempt 2/6" in m for m in messages)
    assert rows(spark, table) == [(0, "v0"), (1, "new"), (2, "v2"), (9, "nine")]
    assert [r.name for r in spark.sql(f"SELECT name FROM {name_of(table)}.refs").collect()] == ["main"]


def test_compaction_in_one_thread_while_merges_commit_in_another(spark, raw, make_table):
    """Two Python threads share the SparkSession (PySpark pins each to its own JVM thread)."""
    table = make_table(
        target={"properties": MOR},  # every merge adds data and delete files: compaction always has work
        maintenance={
            "compaction": {"min_input_files": 2},
            "rewrite_delete_files": False,
            "rewrite_manifests": False,
            "snapshots": {"enabled": False},
            "orphan_files": {"enabled": False},
            "retry": FAST_RETRY,
        },
    )
    for n in range(3):
        load(spark, table, raw, f"2026110{n}-0900", [change("I", 10 * n + i, "v0", n) for i in range(5)])
    errors: list[BaseException] = []
    merged, merging = threading.Event(), threading.Event()
    merge_messages: list[str] = []
    compactions = []

    def merge_progress(message: str) -> None:
        merge_messages.append(message)
        if message.startswith("merging into"):  # the MERGE statement starts now: start a compaction with it
            merging.set()

    def merge_thread() -> None:
        try:
            for k in range(1, 5):  # every batch updates every row
                batch = [change("U", 10 * n + i, f"v{k}", 10 * k) for n in range(3) for i in range(5)]
                load(
                    spark,
                    table,
                    raw,
                    f"2026111{k}-0900",
                    batch,
                    run_id=f"m{k}",
                    progress=merge_progress,
                )
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
        finally:
            merged.set()

    def compaction_thread() -> None:
        try:
            while not merged.is_set():
                if merging.wait(timeout=0.5):
                    merging.clear()
                    compactions.append(maintain_table(spark, table, catalog=CATALOG))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=merge_thread), threading.Thread(target=compaction_thread)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    assert not errors, errors
    assert compactions and all(c.status == "ok" for c in compactions), summary_table(compactions)
    assert rows(spark, table) == [(10 * n + i, "v4") for n in range(3) for i in range(5)]
    retries = sum(1 for m in merge_messages if "concurrent commit" in m)
    retries += sum(s.attempts - 1 for c in compactions for s in c.steps)
    print(f"{len(compactions)} compaction run(s), {retries} retried conflict(s)")
