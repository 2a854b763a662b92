"""SIGKILL of a drain that holds its table's lock, with the ledger on moto over HTTP: the run record
reads `abandoned` once the lease lapsed, the next drain records it so, and every file is merged once."""

from __future__ import annotations

import sys
from pathlib import Path

import boto3
import pytest

sys.path.append(str(Path(__file__).resolve().parents[1]))  # tests/ -> aws_fixtures
import aws_fixtures  # noqa: E402
from aws_fixtures import create_dynamodb_table, unique_name  # noqa: E402

from lakeloader.control.ledger import DEFAULT_LOCK_TTL_SECONDS, Ledger, ObjectRef  # noqa: E402
from lakeloader.jobs import drain  # noqa: E402
from lakeloader.spark.inputs import InputFile  # noqa: E402
from lakeloader.spark.session import CATALOG  # noqa: E402
from tests.faults import oracle  # noqa: E402
from tests.faults.test_crash import KILLED, check, land, spec  # noqa: E402

pytestmark = pytest.mark.spark
moto_server = aws_fixtures.moto_server
aws_endpoint = aws_fixtures.aws_endpoint


def test_a_killed_drain_reads_abandoned_after_its_lease_and_the_next_drain_loads_every_file_once(
    lake, aws_endpoint, monkeypatch
):
    table = lake.add(spec())
    work = oracle.workload(37, events=60)
    land(lake, table, work.files)
    client = boto3.client("dynamodb")
    ledger_table = create_dynamodb_table(client, unique_name("ledger"), "table_id", "object_id")
    runs_table = create_dynamodb_table(
        client, unique_name("runs"), "table_id", "run_id", ttl_attribute="expires_at"
    )
    ledger = Ledger(client, ledger_table, runs_table)
    for path in sorted((lake.raw / table.source.prefix).iterdir()):
        key = f"{table.source.prefix}{path.name}"
        ledger.record_object(table.id, ObjectRef("raw", key, etag=path.name), correlation_id="landed")

    process = lake.start_module(
        "tests.faults.drain_process",
        str(lake.config),
        str(lake.raw),
        ledger_table,
        runs_table,
        table.id,
        crash_at="after_read",
    )
    code, out, err = lake.finish(process)
    assert code == KILLED, f"expected the drain to die after reading; exit {code}\n{out}\n{err[-3000:]}"

    [dead] = ledger.list_runs(table.id)
    assert dead.status == "running"  # its lease has not lapsed: it may be alive
    later = Ledger(
        client, ledger_table, runs_table, clock=lambda: ledger.clock() + DEFAULT_LOCK_TTL_SECONDS + 60
    )
    assert later.get_run(table.id, dead.run_id).status == "abandoned"

    monkeypatch.setattr(
        drain,
        "_input_file",
        lambda obj, raw_root: InputFile(name=obj.key, uri=str(lake.raw / obj.key), size=0, version=obj.etag),
    )
    result = drain.drain_table(lake.spark, table, later, catalog=CATALOG, raw_root="s3://raw/", cid="next")

    assert result.status == "ok" and result.files == len(work.files), result
    runs = {r.run_id: r.status for r in ledger.list_runs(table.id)}
    assert runs[dead.run_id] == "abandoned" and sorted(runs.values()) == ["abandoned", "succeeded"]
    check(lake, table, work, "SIGKILL of a drain holding the lock")
