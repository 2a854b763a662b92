"""`lakeloader run` with a lineage file: each table's OpenLineage events (lakeloader.jobs.lineage), checked
field by field and against the pinned openlineage-python's models (tests/lineage_events.py)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import yaml

from tests.lineage_events import check_event

TABLE = {
    "id": "shop.customers",
    "source": {"prefix": "shop/customers/", "format": "parquet", "cdc": "dms"},
    "target": {"database": "shop", "table": "customers"},
    "keys": ["id"],
    "sequence_by": "last_update_time",
}


def events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_runs_write_start_and_complete_per_table(cli, raw, tmp_path):
    """A full load, then a DMS CDC file (an insert, an update, a delete): each run's START and COMPLETE,
    the first in the config's lineage.file, the second in --lineage-file's."""
    at = datetime(2026, 11, 1, 12)
    raw.write_parquet(
        "shop/customers/LOAD00000001.parquet",
        [{"id": i, "name": n, "last_update_time": at} for i, n in ((1, "Ada"), (2, "Grace"), (3, "Alan"))],
    )
    config_path = tmp_path / "tables.yaml"
    config_path.write_text(
        yaml.safe_dump(
            {
                "raw_root": str(raw.root),
                "warehouse": str(tmp_path / "warehouse"),
                "lineage": {"file": str(tmp_path / "lineage" / "events.jsonl")},
                "tables": [TABLE],
            }
        )
    )
    first = cli("run", "--config", str(config_path))
    assert first.returncode == 0, first.stderr
    later = datetime(2026, 11, 2, 12)
    raw.write_parquet(
        "shop/customers/2026/11/02/cdc-0001.parquet",
        [
            {"Op": "U", "id": 1, "name": "Ada L.", "last_update_time": later},
            {"Op": "D", "id": 2, "name": "Grace", "last_update_time": later},
            {"Op": "I", "id": 4, "name": "Ken", "last_update_time": later},
        ],
    )
    second = cli("run", "--config", str(config_path), "--lineage-file", str(tmp_path / "second.jsonl"))
    assert second.returncode == 0, second.stderr

    start, complete = events(tmp_path / "lineage" / "events.jsonl")
    start2, complete2 = events(tmp_path / "second.jsonl")  # --lineage-file over the config's file
    for event in (start, complete, start2, complete2):
        check_event(event)
    assert [e["eventType"] for e in (start, complete, start2, complete2)] == ["START", "COMPLETE"] * 2
    assert start["run"]["runId"] == complete["run"]["runId"] != start2["run"]["runId"]
    for event in (start, complete, start2, complete2):
        assert (event["job"]["namespace"], event["job"]["name"]) == (
            "lakeloader",
            "lakeloader.ingest.shop.customers",
        )
        assert event["job"]["facets"]["jobType"]["jobType"] == "INGEST"
        assert event["inputs"] == [{"namespace": "file", "name": f"{raw.root}/shop/customers/", "facets": {}}]
        # the table by its catalog name in the catalog's warehouse, not its data path
        [output] = event["outputs"]
        assert (output["namespace"], output["name"]) == (f"file://{tmp_path}/warehouse", "shop.customers")
    schema = complete2["outputs"][0]["facets"]["schema"]["fields"]
    assert [(f["name"], f["type"]) for f in schema] == [
        ("id", "bigint"),
        ("name", "string"),
        ("last_update_time", "timestamp_ntz"),
    ]
    counts = [
        {
            k: e["run"]["facets"]["lakeloader"][k]
            for k in ("status", "files", "inserted", "updated", "deleted")
        }
        for e in (complete, complete2)
    ]
    assert counts == [
        {"status": "ok", "files": 1, "inserted": 3, "updated": 0, "deleted": 0},
        {"status": "ok", "files": 1, "inserted": 1, "updated": 1, "deleted": 1},
    ]
    assert complete2["run"]["facets"]["lakeloader"]["rawFiles"] == [
        "shop/customers/2026/11/02/cdc-0001.parquet"
    ]
    assert complete2["run"]["facets"]["lakeloader"]["snapshotId"] > 0
    assert start2["run"]["facets"] == {} and "schema" not in start["outputs"][0]["facets"]


def test_maintain_and_erase_say_what_they_are(cli, raw, tmp_path):
    """`maintain` and `erase` write their events to the config's lineage.file: the table as output, no
    input (they rewrite what they read), job types MAINTENANCE and ERASURE, erase's deleted count."""
    at = datetime(2026, 11, 1, 12)
    raw.write_parquet(
        "shop/customers/LOAD00000001.parquet",
        [{"id": i, "name": n, "last_update_time": at} for i, n in ((1, "Ada"), (2, "Grace"))],
    )
    lineage_file = tmp_path / "events.jsonl"
    config_path = tmp_path / "tables.yaml"
    config_path.write_text(
        yaml.safe_dump(
            {
                "raw_root": str(raw.root),
                "warehouse": str(tmp_path / "warehouse"),
                "lineage": {"file": str(lineage_file)},
                "tables": [TABLE],
            }
        )
    )
    for args in (("run",), ("maintain",), ("erase", "--table", TABLE["id"], "--key", "2")):
        done = cli(*args, "--config", str(config_path))
        assert done.returncode == 0, (args, done.stderr)

    found = events(lineage_file)
    for event in found:
        check_event(event)
    finished = {e["job"]["name"]: e for e in found if e["eventType"] != "START"}
    assert sorted(finished) == [
        f"lakeloader.{verb}.shop.customers" for verb in ("erase", "ingest", "maintain")
    ]
    for verb, job_type in (("maintain", "MAINTENANCE"), ("erase", "ERASURE")):
        event = finished[f"lakeloader.{verb}.shop.customers"]
        assert event["eventType"] == "COMPLETE"
        assert event["job"]["facets"]["jobType"]["jobType"] == job_type
        assert event["inputs"] == []
        assert [o["name"] for o in event["outputs"]] == ["shop.customers"]
        assert "schema" in event["outputs"][0]["facets"]
    assert finished["lakeloader.erase.shop.customers"]["run"]["facets"]["lakeloader"]["deleted"] == 1
