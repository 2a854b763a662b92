"""One run drains several tables at once in one Spark session (lakeloader.jobs.drain.drain_tables).

Real: Spark and Iceberg (local catalog), the merge, the ledger on moto's DynamoDB over HTTP, the
thread pool. Only where a ledger object's bytes live is mapped (`drain._input_file`): on AWS they
are s3:// objects, here files in the test's raw folder. What must hold when tables share a session
at the same time: each commit carries its own table's run id and input files (Iceberg's commit
properties are per thread), and one table's bad file fails that table alone.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import boto3
import pyarrow as pa
import pytest

sys.path.append(str(Path(__file__).resolve().parents[1]))  # tests/ -> aws_fixtures
import aws_fixtures  # noqa: E402
from aws_fixtures import create_dynamodb_table, unique_name  # noqa: E402

from lakeloader.control.ledger import Ledger, ObjectRef  # noqa: E402
from lakeloader.iceberg.table_state import SUMMARY_FILE_NAMES, SUMMARY_RUN_ID  # noqa: E402
from lakeloader.jobs import drain  # noqa: E402
from lakeloader.spark.inputs import InputFile  # noqa: E402
from lakeloader.spark.session import CATALOG  # noqa: E402

pytestmark = pytest.mark.spark
moto_server = aws_fixtures.moto_server
aws_endpoint = aws_fixtures.aws_endpoint
FULL = pa.schema([("id", pa.int64()), ("name", pa.string()), ("last_update_time", pa.timestamp("us"))])


@pytest.fixture
def ledger(aws_endpoint) -> Ledger:
    client = boto3.client("dynamodb", endpoint_url=aws_endpoint, region_name="us-east-1")
    objects = create_dynamodb_table(client, unique_name("ledger"), "table_id", "object_id")
    runs = create_dynamodb_table(
        client, unique_name("runs"), "table_id", "run_id", ttl_attribute="expires_at"
    )
    return Ledger(client, objects, runs)


def record_and_read_locally(ledger, raw, tables, monkeypatch) -> None:
    """The tables' files in the ledger as the trigger records them; the drain reads them from disk."""
    for table in tables:
        for path in sorted((raw.root / table.source.prefix).iterdir()):
            key = f"{table.source.prefix}{path.name}"
            ledger.record_object(table.id, ObjectRef("raw", key, etag=path.name), correlation_id="c")
    monkeypatch.setattr(
        drain,
        "_input_file",
        lambda obj, raw_root: InputFile(name=obj.key, uri=str(raw.root / obj.key), size=0, version=obj.etag),
    )


@pytest.mark.slow
def test_tables_drained_side_by_side_commit_their_own_files_and_fail_alone(
    spark, raw, make_table, ledger, monkeypatch
):
    from datetime import datetime

    tables = [make_table(source={"prefix": f"src/{name}/"}) for name in ("a", "b", "c")]
    good_a, good_b, bad = tables
    for table, rows in ((good_a, 3), (good_b, 5)):
        for n in (1, 2):
            data = [
                {"id": i, "name": f"{table.id}-{n}", "last_update_time": datetime(2026, 11, 1, 8, n)}
                for i in range(rows)
            ]
            raw.write_parquet(f"{table.source.prefix}LOAD{n:08d}.parquet", data, schema=FULL)
    raw.write_text(f"{bad.source.prefix}LOAD00000001.parquet", "not a parquet file")
    record_and_read_locally(ledger, raw, tables, monkeypatch)

    results = drain.drain_tables(
        spark, tables, ledger, catalog=CATALOG, raw_root="s3://raw/", cid="cid", parallel=3
    )

    assert [r.status for r in results] == ["ok", "ok", "failed"]
    assert "LOAD00000001.parquet" in results[2].error
    for table, rows in ((good_a, 3), (good_b, 5)):
        name = f"{CATALOG}.{table.target.database}.{table.target.table}"
        assert spark.sql(f"SELECT count(*), max(name) FROM {name}").first() == (rows, f"{table.id}-2")
        (run,) = ledger.list_runs(table.id)
        assert run.status == "succeeded"
        summaries = [r.summary for r in spark.sql(f"SELECT summary FROM {name}.snapshots").collect()]
        mine = [s for s in summaries if s.get(SUMMARY_RUN_ID)]
        assert mine and all(s[SUMMARY_RUN_ID] == run.run_id for s in mine)
        files = {f for s in mine for f in json.loads(s[SUMMARY_FILE_NAMES])}
        assert files and all(f.startswith(table.source.prefix) for f in files), files
        assert {o.status for o in ledger.objects(table.id)} == {"done"}
    (failed,) = ledger.objects(bad.id)
    assert failed.status == "failed" and "LOAD00000001.parquet" in failed.error
    assert ledger.list_runs(bad.id)[0].status == "failed"
    assert all(ledger.get_lock(t.id) is None for t in tables)


@pytest.mark.slow
def test_a_file_with_bad_input_is_set_aside_and_the_rest_of_its_batch_commits(
    spark, raw, make_table, ledger, monkeypatch
):
    """Real merge, real ledger: the batch of three files fails on the middle one's NULL key; the drain
    sets that file aside (failed, its error) and commits the other two in the next batch."""
    from datetime import datetime

    table = make_table(source={"prefix": "src/poison/"})
    for n, key in ((1, 1), (2, None), (3, 3)):
        row = {"id": key, "name": f"file {n}", "last_update_time": datetime(2026, 11, 1, 8, n)}
        raw.write_parquet(f"{table.source.prefix}LOAD{n:08d}.parquet", [row], schema=FULL)
    record_and_read_locally(ledger, raw, [table], monkeypatch)

    result = drain.drain_table(spark, table, ledger, catalog=CATALOG, raw_root="s3://raw/", cid="cid")

    name = f"{CATALOG}.{table.target.database}.{table.target.table}"
    assert sorted(tuple(r) for r in spark.sql(f"SELECT id, name FROM {name}").collect()) == [
        (1, "file 1"),
        (3, "file 3"),
    ]
    objects = {o.key.rsplit("/", 1)[1]: o for o in ledger.objects(table.id)}
    assert objects["LOAD00000001.parquet"].status == objects["LOAD00000003.parquet"].status == "done"
    bad = objects["LOAD00000002.parquet"]
    assert bad.status == "failed" and "key column is NULL" in bad.error and "LOAD00000002" in bad.error
    assert result.status == "failed" and result.inserted == 2


@pytest.mark.slow
def test_a_keys_change_stops_the_drain_until_a_rebuild_run_re_keys_the_table_from_the_ledger(
    spark, raw, make_table, ledger, monkeypatch
):
    """The job side of `lakeloader rebuild --stage`: the run refuses the new keys (files kept), the
    rebuild run builds the table from every object the ledger holds but the skipped one, and the
    ledger records them done by the rebuild."""
    from datetime import datetime

    table = make_table(source={"prefix": "src/r/"})
    for n, region in ((1, "eu"), (2, "us")):
        row = {"id": 1, "name": region, "last_update_time": datetime(2026, 11, 1, 8, n)}
        raw.write_parquet(f"src/r/LOAD{n:08d}.parquet", [row], schema=FULL)
    raw.write_text("src/r/LOAD00000003.parquet", "test data, skipped by an operator")
    record_and_read_locally(ledger, raw, [table], monkeypatch)
    skipped = [o for o in ledger.objects(table.id) if o.key.endswith("3.parquet")]
    ledger.skip(table.id, skipped, note="test data")
    assert (
        drain.drain_table(spark, table, ledger, catalog=CATALOG, raw_root="s3://raw/", cid="c").status == "ok"
    )

    rekeyed = make_table(
        id=table.id, source={"prefix": "src/r/"}, target=table.target.model_dump(), keys=["id", "name"]
    )
    refused = drain.drain_table(spark, rekeyed, ledger, catalog=CATALOG, raw_root="s3://raw/", cid="c")
    assert refused.status == "skipped"  # nothing new to load: the refusal waits for the next batch
    raw.write_parquet(
        "src/r/LOAD00000004.parquet",
        [{"id": 2, "name": "eu", "last_update_time": datetime(2026, 11, 1, 9)}],
        schema=FULL,
    )
    record_and_read_locally(ledger, raw, [table], monkeypatch)
    refused = drain.drain_table(spark, rekeyed, ledger, catalog=CATALOG, raw_root="s3://raw/", cid="c")
    assert refused.status == "failed" and "lakeloader rebuild --table" in refused.error

    rebuilt = drain.drain_table(
        spark, rekeyed, ledger, catalog=CATALOG, raw_root="s3://raw/", cid="c", rebuild=True
    )

    assert rebuilt.status == "ok", rebuilt.error
    name = f"{CATALOG}.{table.target.database}.{table.target.table}"
    assert sorted(tuple(r) for r in spark.sql(f"SELECT id, name FROM {name}").collect()) == [
        (1, "eu"),
        (1, "us"),
        (2, "eu"),
    ]
    statuses = {o.key.rsplit("/", 1)[1]: (o.status, o.run_id) for o in ledger.objects(table.id)}
    [run] = ledger.list_runs(table.id, limit=1)
    assert statuses == {
        "LOAD00000001.parquet": ("done", run.run_id),
        "LOAD00000002.parquet": ("done", run.run_id),
        "LOAD00000003.parquet": ("skipped", None),
        "LOAD00000004.parquet": ("done", run.run_id),
    }
