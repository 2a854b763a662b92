"""A file that cannot be read (truncated, zero bytes, a broken gzip) is named alone, set aside, and never
blocks its table: lakeloader.engine.unreadable finds it after a read failed naming no file, and
`lakeloader run` loads the others, lists it with its reason, exits 1, and retries it next time.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
import yaml

from lakeloader.engine.unreadable import find_unreadable
from lakeloader.iceberg import commit
from lakeloader.jobs.load import run_tables
from lakeloader.spark.errors import UnreadableFilesError
from lakeloader.spark.inputs import list_inputs
from lakeloader.spark.session import CATALOG
from tests.spark.merge_batches import DMS, FULL, at, change, load, rows

pytestmark = pytest.mark.spark

LOAD = "src/LOAD00000001.parquet"
CDC = ["src/20261101-0900.parquet", "src/20261101-1000.parquet", "src/20261101-1100.parquet"]
# The Parquet reader's own root cause of a truncated file: Spark 3.5 says it "is not a Parquet file",
# Spark 4.1 that its "footer is too large".
PARQUET_CAUSE = re.compile(r"is not a Parquet file|footer is too large")


def truncate(path: Path) -> None:
    """As an interrupted upload leaves a file: its first half."""
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def land_batch(raw) -> None:
    """A full load of keys 1-3, then three CDC files: update 2; update 3 (to be cut); insert 4, delete 1."""
    raw.write_parquet(LOAD, [{"id": i, "name": f"n{i}", "last_update_time": at(0)} for i in (1, 2, 3)], FULL)
    raw.write_parquet(CDC[0], [change("U", 2, "two", 1)], DMS)
    raw.write_parquet(CDC[1], [change("U", 3, "three", 2)], DMS)
    raw.write_parquet(CDC[2], [change("I", 4, "n4", 3), change("D", 1, None, 3)], DMS)


class Lake:
    """A config file on the session's warehouse, run as `lakeloader run` through the CLI's own `main`
    in this process (tests/conftest.py's `cli`)."""

    def __init__(self, spark, cli, raw, table_spec: dict, config: Path):
        self.cli, self.config = cli, config
        warehouse = spark.conf.get(f"spark.sql.catalog.{CATALOG}.warehouse")
        tables = [table_spec]
        config.write_text(
            yaml.safe_dump({"raw_root": str(raw.root), "warehouse": warehouse, "tables": tables})
        )

    def run(self, *args: str) -> tuple[int, str]:
        done = self.cli("run", "--config", str(self.config), *args)
        return done.returncode, done.stdout


def read(spark, table) -> list[tuple]:
    """The table's rows as this session sees them after a command committed in a session of its own."""
    spark.sql(f"REFRESH TABLE {CATALOG}.{table.target.database}.{table.target.table}")
    return rows(spark, table)


@pytest.fixture
def lake(spark, cli, raw, make_table, tmp_path) -> tuple[Lake, object]:
    table = make_table()
    spec = table.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    return Lake(spark, cli, raw, spec, tmp_path / "tables.yaml"), table


def input_log(spark, table) -> list[tuple]:
    spark.sql(f"REFRESH TABLE {CATALOG}.lakeloader_meta.input_files")
    query = (
        f"SELECT name, status, reason FROM {CATALOG}.lakeloader_meta.input_files "
        f"WHERE table_id = '{table.id}' AND status IN ('set_aside', 'skipped') ORDER BY logged_at, name"
    )
    return [tuple(r) for r in spark.sql(query).collect()]


@pytest.mark.slow
def test_a_truncated_file_is_set_aside_the_others_load_and_the_fixed_file_loads_next_run(spark, raw, lake):
    lake, table = lake
    land_batch(raw)
    truncate(raw.root / CDC[1])

    code, out = lake.run()

    assert code == 1
    # every good file applied: 1 deleted, 2 updated, 4 inserted; 3 waits for its file
    assert read(spark, table) == [(2, "two"), (3, "n3"), (4, "n4")]
    errors = [line for line in out.splitlines() if line.startswith("!")]
    named = [line for line in errors if f"file '{CDC[1]}': cannot be read" in line]
    assert named and PARQUET_CAUSE.search(named[0]), out
    for other in (LOAD, CDC[0], CDC[2]):  # the error names the guilty file only
        assert other not in out, out
    (aside,) = input_log(spark, table)
    assert aside[:2] == (CDC[1], "set_aside") and PARQUET_CAUSE.search(aside[2])

    raw.write_parquet(CDC[1], [change("U", 3, "three", 2)], DMS)  # re-exported under the same name
    code, out = lake.run()

    assert code == 0, out
    assert read(spark, table) == [(2, "two"), (3, "three"), (4, "n4")]


@pytest.mark.slow
def test_run_skip_gives_up_a_file_for_good_with_its_reason(spark, raw, lake):
    lake, table = lake
    land_batch(raw)
    truncate(raw.root / CDC[1])

    code, out = lake.run("--skip", str(raw.root / CDC[1]), "--reason", "lost upstream")

    assert code == 0, out
    assert read(spark, table) == [(2, "two"), (3, "n3"), (4, "n4")]
    assert input_log(spark, table) == [(CDC[1], "skipped", "lost upstream")]
    assert lake.run()[0] == 0  # a later run does not take it again
    assert lake.run("--skip", str(raw.root / CDC[1]))[0] == 2  # no --reason


def truncated_gzip_json(raw, name: str) -> None:
    data = gzip.compress(
        b"".join(json.dumps({"id": i, "name": f"n{i}"}).encode() + b"\n" for i in range(200))
    )
    (raw.root / name).write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize(
    ("fmt", "spoil"),
    [
        ("parquet", lambda raw, name: (raw.root / name).write_bytes(b"")),  # a zero-byte object
        ("parquet", lambda raw, name: truncate(raw.root / name)),
        ("json", truncated_gzip_json),
    ],
    ids=["zero-byte parquet", "truncated parquet", "truncated gzip json"],
)
@pytest.mark.slow
def test_the_finder_names_exactly_the_unreadable_files(spark, raw, make_table, fmt, spoil):
    table = make_table(source={"format": fmt, "cdc": "none"})
    suffix = ".parquet" if fmt == "parquet" else ".json.gz"
    names = [f"src/part-{n}{suffix}" for n in range(6)]
    for n, name in enumerate(names):
        good = [{"id": n, "name": f"n{n}"}]
        if fmt == "parquet":
            raw.write_parquet(name, good)
        else:
            raw.write_text(name, "")  # its folder
            (raw.root / name).write_bytes(gzip.compress(json.dumps(good[0]).encode() + b"\n"))
    for bad in (names[1], names[4]):
        spoil(raw, bad)

    with pytest.raises(UnreadableFilesError) as error:
        load(spark, table, raw)

    assert list(error.value.reasons) == [names[1], names[4]]
    assert all(error.value.reasons.values())  # each with the reader's reason


def test_files_that_only_fail_together_are_not_called_unreadable(spark, raw, make_table):
    """Two files each readable alone whose schemas cannot be merged: neither is unreadable (the footers'
    check names the later one as a column conflict instead: tests/spark/test_column_conflicts.py)."""
    table = make_table(source={"format": "parquet", "cdc": "none"})
    raw.write_parquet("src/part-0.parquet", [{"id": 1, "name": "a"}])
    raw.write_parquet("src/part-1.parquet", [{"id": 2, "name": 5}])

    with pytest.raises(Exception) as error:
        load(spark, table, raw)

    assert not isinstance(error.value, UnreadableFilesError), error.value


def test_the_finder_reads_each_file_whole_so_a_gzip_csv_cut_after_its_first_rows_is_unreadable(
    spark, raw, make_table
):
    """A gzip CSV cut short still opens and yields its first rows; only reading every row finds it
    broken. The finder reads each file whole, so it names that file, and only it."""
    table = make_table(source={"format": "csv", "cdc": "none"})
    names = [f"src/part-{n}.csv.gz" for n in range(4)]
    for n, name in enumerate(names):
        lines = ["id,name", *(f"{n * 10_000 + i},n{i}" for i in range(5_000))]
        raw.write_text(name, "")  # its folder
        (raw.root / name).write_bytes(gzip.compress("\n".join(lines).encode()))
    truncate(raw.root / names[2])
    cut = str(raw.root / names[2])
    assert spark.read.option("header", "true").csv(cut).limit(1).count() == 1  # its start reads

    found = find_unreadable(spark, table, list_inputs(str(raw.root), table.source.prefix))

    assert list(found) == [names[2]] and found[names[2]]


def test_a_file_a_run_sets_aside_is_logged_set_aside_with_its_reason_and_retried(spark, raw, make_table):
    """On a run without a ledger (the laptop's `lakeloader run`), the input log records a file set aside
    as `set_aside` with the reader's reason, not as consumed: the next run takes it again."""
    table = make_table(source={"format": "parquet", "cdc": "none"})
    raw.write_parquet("src/part-0.parquet", [{"id": 1, "name": "a"}])
    raw.write_text("src/part-1.parquet", "")  # a zero-byte object

    (result,) = run_tables(
        spark,
        [table],
        {table.id: list_inputs(str(raw.root), table.source.prefix)},
        catalog=CATALOG,
        run_id="run-1",
        progress=lambda message: None,
        log_consumed=True,
    )

    assert result.status == "failed" and list(result.bad_files) == ["src/part-1.parquet"]
    ((name, status, reason),) = input_log(spark, table)
    assert (name, status) == ("src/part-1.parquet", commit.SET_ASIDE) and reason == result.bad_files[name]
    consumed = commit.logged_file_ids(spark, CATALOG, table.id)
    files = {f.name: commit.file_id(f) for f in list_inputs(str(raw.root), table.source.prefix)}
    assert files["src/part-0.parquet"] in consumed and files["src/part-1.parquet"] not in consumed
