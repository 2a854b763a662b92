"""`lakeloader reconcile` as a user types it, in this process (lakeloader.cli.main): the config form,
and the --stage form on a stage whose stack, config, ledger and run tables live on moto (its warehouse a
local folder), where a repair holds the table's lock and is recorded in the stage's run history."""

from __future__ import annotations

import json
from datetime import datetime

import boto3
import pyarrow as pa
import pytest

from lakeloader.cli.stage import DeployedStage
from lakeloader.config import parse_config
from tests.unit import stage_world
from tests.unit.stage_world import create_dynamodb_table, unique_name

pytestmark = pytest.mark.spark
moto_server, aws_endpoint = stage_world.moto_server, stage_world.aws_endpoint

FULL = pa.schema([("id", pa.int64()), ("name", pa.string()), ("last_update_time", pa.timestamp("us"))])
TABLE = {
    "id": "crm.people",
    "source": {"prefix": "people/", "format": "parquet", "cdc": "dms"},
    "target": {"database": "crm", "table": "people"},
    "keys": ["id"],
}


def full_load(raw, name: str, people: dict[int, str]) -> None:
    at = datetime(2026, 11, 1, 8, 0)
    raw.write_parquet(name, [{"id": k, "name": v, "last_update_time": at} for k, v in people.items()], FULL)


@pytest.fixture
def lake(tmp_path, raw):
    """A config file over this test's raw zone and warehouse, the table loaded from {1, 2, 3}, and an
    export of the source that differs: 2 renamed, 3 gone, 4 new."""
    config = tmp_path / "tables.yaml"
    warehouse = tmp_path / "warehouse"
    config.write_text(json.dumps({"raw_root": str(raw.root), "warehouse": str(warehouse), "tables": [TABLE]}))
    full_load(raw, "people/LOAD00000001.parquet", {1: "ann", 2: "bob", 3: "cy"})
    full_load(raw, "../export/LOAD00000001.parquet", {1: "ann", 2: "rob", 4: "dee"})
    return config, warehouse, str(raw.root.parent / "export")


@pytest.mark.slow
def test_reconcile_reports_repairs_and_then_finds_the_table_equal(cli, lake):
    config, _, export = lake
    assert cli("run", "--config", str(config)).returncode == 0
    reconcile = ("reconcile", "--config", str(config), "--table", "crm.people", "--snapshot", export)

    found = cli(*reconcile, "--json")
    assert found.returncode == 1, found.stderr
    report = json.loads(found.stdout)
    assert [report[k]["count"] for k in ("missing", "extra", "different")] == [1, 1, 1]
    assert report["different"]["samples"] == [{"id": 2}] and report["repaired"] is None
    assert "comparing 3 snapshot row(s)" in found.stderr  # progress, on stderr

    repaired = cli(*reconcile, "--repair", "--samples", "0")
    assert repaired.returncode == 1, repaired.stderr  # it differed: the report says what was repaired
    assert "repaired in one commit" in repaired.stdout
    assert "1 inserted, 1 updated, 1 deleted" in repaired.stdout

    again = cli(*reconcile)
    assert again.returncode == 0 and again.stdout.rstrip().endswith("EQUAL"), again.stdout

    unknown = cli("reconcile", "--config", str(config), "--table", "crm.nope", "--snapshot", export)
    assert unknown.returncode == 2 and "crm.nope" in unknown.stderr


def test_help_names_both_forms(capsys):
    from lakeloader.cli import main

    with pytest.raises(SystemExit) as done:
        main(["reconcile", "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "--config FILE | --stage NAME" in out and "--repair" in out and "--samples N" in out


def deploy(warehouse) -> tuple[str, DeployedStage]:
    """A stage on moto whose deployed config holds TABLE, its databases prefixed `stg_`."""
    dynamodb = boto3.client("dynamodb")
    deployed = DeployedStage(
        raw_bucket="raw",
        warehouse=str(warehouse),
        config_table=stage_world.config_table(dynamodb, parse_config({"tables": [TABLE]})),
        ledger_table=create_dynamodb_table(dynamodb, unique_name("ledger"), "table_id", "object_id"),
        runs_table=create_dynamodb_table(dynamodb, unique_name("runs"), "table_id", "run_id"),
        ingest_job="ingest",
        arrival_function="arrival",
        database_prefix="stg_",
    )
    return stage_world.publish(deployed), deployed


@pytest.mark.slow
def test_stage_form_repairs_as_a_recorded_run_holding_the_table_lock(cli, lake, aws_endpoint):
    config, warehouse, export = lake
    name, deployed = deploy(warehouse)
    # the stage's table as its job wrote it: database stg_crm
    assert cli("run", "--config", str(config), "--database-prefix", "stg_").returncode == 0
    reconcile = ("reconcile", "--stage", name, "--table", "crm.people", "--snapshot", export)
    ledger = deployed.ledger()

    ledger.acquire_lock("crm.people", "a-job-run")
    busy = cli(*reconcile, "--repair")
    assert busy.returncode == 2 and "another run holds the table lock" in busy.stderr
    assert ledger.list_runs("crm.people") == []
    ledger.release_lock("crm.people", "a-job-run")

    repaired = cli(*reconcile, "--repair")
    assert repaired.returncode == 1, repaired.stderr
    (run,) = ledger.list_runs("crm.people")
    assert run.status == "succeeded" and run.engine == "reconcile" and run.snapshot_id is not None
    assert {k: run.counts[k] for k in ("missing", "extra", "different", "inserted", "deleted")} == {
        "missing": 1,
        "extra": 1,
        "different": 1,
        "inserted": 1,
        "deleted": 1,
    }
    assert ledger.get_lock("crm.people") is None

    report = cli(*reconcile)  # a report is no run
    assert report.returncode == 0 and len(ledger.list_runs("crm.people")) == 1
