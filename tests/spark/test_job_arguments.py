"""The ingest job's arguments reach the drain of every table it runs: `ingest_main` given what the EMR
entry point parses from its command line (lakeloader.jobs.args.emr_args; Glue's resolve to the same
keys), as the S3-arrival Lambda starts it.

Real: the argument parsing, the config table, ledger and run history on moto's DynamoDB (HTTP),
`ingest_main`, the drain, the merge, the rebuild and the erasure audit on Spark and Iceberg. Two
things are mapped, not stubbed: the job's session is the test session (its catalog named as on
Glue/EMR, a Hadoop catalog on disk), and a ledger object's bytes are read from the test's raw folder
(tests/spark/test_parallel_tables.py does the same).
"""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path

import boto3
import pyarrow as pa
import pytest

sys.path.append(str(Path(__file__).resolve().parents[1]))  # tests/ -> aws_fixtures
import aws_fixtures  # noqa: E402
from aws_fixtures import create_dynamodb_table, unique_name  # noqa: E402

import lakeloader.spark.session  # noqa: E402
from lakeloader.config import LakeConfig  # noqa: E402
from lakeloader.config.items import config_items  # noqa: E402
from lakeloader.control.contract import GLUE_CATALOG, INGEST_OPTIONAL_ARGS  # noqa: E402
from lakeloader.control.dynamodb import encode_item  # noqa: E402
from lakeloader.control.ledger import DONE, FAILED, QUARANTINED, Ledger  # noqa: E402
from lakeloader.engine import tombstones  # noqa: E402
from lakeloader.jobs import main as jobs  # noqa: E402
from lakeloader.jobs.args import emr_args  # noqa: E402
from lakeloader.spark.session import table_exists  # noqa: E402
from tests.spark.test_parallel_tables import record_and_read_locally  # noqa: E402
from tests.spark.test_shaping import WIDE, wide  # noqa: E402

# slow (make check leaves it out): the ingest job end to end on the ledger and run history
pytestmark = [pytest.mark.spark, pytest.mark.slow]
moto_server = aws_fixtures.moto_server
aws_endpoint = aws_fixtures.aws_endpoint
PREFIX = "stage_dev_"
DMS = pa.schema(
    [("Op", pa.string()), ("id", pa.int64()), ("name", pa.string()), ("last_update_time", pa.timestamp("us"))]
)


def change(op: str, id_: int, name: str | None, minute: int) -> dict:
    return {"Op": op, "id": id_, "name": name, "last_update_time": datetime(2026, 11, 1, 8, minute)}


@pytest.fixture(scope="module")
def job_catalog(spark, tmp_path_factory) -> str:
    """The catalog name the deployed job's --conf uses, on the test session (a Hadoop catalog)."""
    warehouse = tmp_path_factory.mktemp("job-warehouse")
    settings = lakeloader.spark.session.SparkSettings(runtime="emr", warehouse=str(warehouse))
    for name, value in lakeloader.spark.session.local_conf(settings).items():
        if name.startswith(f"spark.sql.catalog.{GLUE_CATALOG}") and not spark.conf.get(name, None):
            spark.conf.set(name, value)
    return GLUE_CATALOG


class Job:
    """One stage's tables on moto and the ingest job's command line."""

    def __init__(self, tables, raw, monkeypatch, spark) -> None:
        self.dynamodb = boto3.client("dynamodb")
        self.config_table = create_dynamodb_table(self.dynamodb, unique_name("config"), "table_id")
        self.configure(tables)
        objects = create_dynamodb_table(self.dynamodb, unique_name("ledger"), "table_id", "object_id")
        runs = create_dynamodb_table(
            self.dynamodb, unique_name("runs"), "table_id", "run_id", ttl_attribute="expires_at"
        )
        self.ledger = Ledger(self.dynamodb, objects, runs)
        self.tables, self.raw, self.monkeypatch = tables, raw, monkeypatch
        self.sessions: list = []

        def build_session(settings):
            self.sessions.append(settings)
            return spark

        monkeypatch.setattr(lakeloader.spark.session, "build_session", build_session)

    def configure(self, tables) -> None:
        for item in config_items(LakeConfig(tables=tables)):
            self.dynamodb.put_item(TableName=self.config_table, Item=encode_item(item))

    def run(self, *options: str) -> int:
        """`emr_steps/ingest.py --config-table ... OPTIONS` after recording the files that landed."""
        record_and_read_locally(self.ledger, self.raw, self.tables, self.monkeypatch)
        argv = [
            "ingest.py",
            "--config-table", self.config_table,
            "--ledger-table", self.ledger.ledger_table,
            "--runs-table", self.ledger.runs_table,
            "--raw-root", "s3://raw/",
            "--warehouse", "s3://curated/warehouse/",
            "--database-prefix", PREFIX,
            "--correlation-id", "cid-1",
            *options,
        ]  # fmt: skip
        code = jobs.ingest_main(emr_args(argv, INGEST_OPTIONAL_ARGS), runtime="emr")
        assert self.sessions[-1].runtime == "emr"
        return code

    def statuses(self, table) -> dict[str, str]:
        return {o.key.rsplit("/", 1)[1]: o.status for o in self.ledger.objects(table.id)}


def target(table) -> str:
    return f"{GLUE_CATALOG}.{PREFIX}{table.target.database}.{table.target.table}"


def rows(spark, table) -> list[tuple]:
    return sorted(tuple(r) for r in spark.sql(f"SELECT id, name FROM {target(table)}").collect())


@pytest.fixture
def two_tables(make_table):
    return [make_table(source={"prefix": f"src/{n}/"}) for n in ("a", "b")]


def test_max_attempts_and_the_database_prefix_reach_every_table(
    spark, job_catalog, raw, two_tables, monkeypatch, aws_endpoint
):
    """With --max-attempts 1 a file with bad rows is quarantined at its first failure, in each table;
    every table lands in its stage database. With the default (3) the same failure leaves it failed."""
    for table in two_tables:
        raw.write_parquet(f"{table.source.prefix}0800.parquet", [change("I", 1, "a", 0)], DMS)
        raw.write_parquet(f"{table.source.prefix}0801.parquet", [change("I", None, "x", 1)], DMS)
    job = Job(two_tables, raw, monkeypatch, spark)

    assert job.run("--max-attempts", "1", "--parallel-tables", "2") == 1  # a file failed: the run says so

    for table in two_tables:
        assert job.statuses(table) == {"0800.parquet": DONE, "0801.parquet": QUARANTINED}
        assert rows(spark, table) == [(1, "a")]
        assert not table_exists(spark, f"{GLUE_CATALOG}.{table.target.database}.{table.target.table}")

    for table in two_tables:
        raw.write_parquet(f"{table.source.prefix}0802.parquet", [change("I", None, "y", 2)], DMS)
    assert job.run() == 1
    for table in two_tables:
        assert job.statuses(table)["0802.parquet"] == FAILED


def test_a_rebuild_through_the_arguments_is_refused_while_erasures_are_on_record(
    spark, job_catalog, raw, two_tables, monkeypatch, aws_endpoint, capsys
):
    from lakeloader.jobs.erase import erase

    for table in two_tables:
        raw.write_parquet(
            f"{table.source.prefix}0800.parquet", [change("I", 1, "a", 0), change("I", 2, "b", 0)], DMS
        )
    job = Job(two_tables, raw, monkeypatch, spark)
    assert job.run() == 0
    erased, other = two_tables
    prefixed = jobs.with_database_prefix([erased], PREFIX)[0]
    erase(spark, prefixed, catalog=GLUE_CATALOG, keys=["2"], who="test")
    capsys.readouterr()

    assert job.run("--rebuild", "true") == 1
    assert "erasure(s) on record" in capsys.readouterr().err
    assert rows(spark, erased) == [(1, "a")]  # the erased subject is not back
    assert job.ledger.list_runs(erased.id, limit=1)[0].status == "failed"
    assert job.ledger.list_runs(other.id, limit=1)[0].status == "succeeded"  # no erasure: rebuilt
    assert rows(spark, other) == [(1, "a"), (2, "b")]

    assert job.run("--rebuild", "true", "--raw-zone-erased", "true") == 0
    assert rows(spark, erased) == [(1, "a"), (2, "b")]  # what the raw zone held: the operator's call
    (run,) = job.ledger.list_runs(erased.id, limit=1)
    assert {(o.status, o.run_id) for o in job.ledger.objects(erased.id)} == {(DONE, run.run_id)}


def test_a_rebuild_from_files_without_deletes_leaves_no_tombstones(
    spark, job_catalog, raw, make_table, monkeypatch, aws_endpoint
):
    """The tombstones become the rebuild's own: none when its files hold no delete. Here the soft
    deletes (delete_when) left a tombstone; the config drops delete_when and the rebuild, with the
    config as it is now, reads those rows as plain updates: no tombstone may stay behind."""
    soft = make_table(source={"prefix": "src/t/"}, delete_when="is_deleted = true")
    raw.write_parquet("src/t/0800.parquet", [wide("I", 1, "a", 0), wide("I", 2, "b", 0)], WIDE)
    raw.write_parquet("src/t/0900.parquet", [wide("U", 2, "b", 30, deleted=True)], WIDE)
    job = Job([soft], raw, monkeypatch, spark)
    assert job.run() == 0
    side = tombstones.side_table(target(soft), jobs.with_database_prefix([soft], PREFIX)[0])
    assert [tuple(r) for r in spark.sql(f"SELECT id FROM {side}").collect()] == [(2,)]
    assert rows(spark, soft) == [(1, "a")]

    plain = soft.model_copy(update={"delete_when": None})
    job.configure([plain])
    assert job.run("--rebuild", "true") == 0

    assert rows(spark, plain) == [(1, "a"), (2, "b")]
    assert not table_exists(spark, side) or spark.table(side).count() == 0
