"""Issue 67's acceptance on a laptop: one `sources:` entry over a raw prefix of 20 DMS Parquet tables,
keys from a map that misses one. `lakeloader run` loads 19; the 20th is listed as held with the line to
add, and loads once its keys are added; every file is loaded exactly once."""

from __future__ import annotations

import json
from datetime import datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

pytestmark = pytest.mark.spark

TABLES = [f"t{n:02d}" for n in range(1, 21)]
HELD = "app.t20"


def write_dms_files(raw) -> None:
    """Per table: a full load of 3 rows and a CDC file updating one, deleting one, inserting one."""
    for name in TABLES:
        folder = raw / "erp" / "app" / name
        (folder / "2026" / "01" / "02").mkdir(parents=True)
        at = datetime(2026, 1, 1)
        load = pa.table(
            {
                "id": pa.array([1, 2, 3], pa.int64()),
                "label": [f"{name}-a", f"{name}-b", f"{name}-c"],
                "last_update_time": [at, at, at],
            }
        )
        pq.write_table(load, folder / "LOAD00000001.parquet")
        later = datetime(2026, 1, 2, 12)
        changes = pa.table(
            {
                "Op": ["U", "D", "I"],
                "id": pa.array([1, 2, 4], pa.int64()),
                "label": [f"{name}-a2", f"{name}-b", f"{name}-d"],
                "last_update_time": [later, later, later],
            }
        )
        pq.write_table(changes, folder / "2026" / "01" / "02" / "20260102-120000000.parquet")


def test_one_source_entry_loads_nineteen_tables_and_holds_the_one_without_keys(cli, tmp_path):
    raw = tmp_path / "raw"
    write_dms_files(raw)
    source = {
        "id": "erp",
        "prefix": "erp/",
        "format": "parquet",
        "cdc": "dms",
        "layout": "<schema>/<table>/",
        "defaults": {"sequence_by": "last_update_time", "target": {"database": "erp_<schema>"}},
        "keys": {f"app.{name}": ["id"] for name in TABLES if f"app.{name}" != HELD},
    }
    path = tmp_path / "tables.yaml"
    path.write_text(yaml.safe_dump({"raw_root": str(raw), "sources": [source]}, sort_keys=False))
    args = ("--config", str(path), "--warehouse", str(tmp_path / "warehouse"))

    run = cli("run", *args)
    assert run.returncode == 0, run.stdout + run.stderr
    statuses = {
        line.split()[0]: line.split()[1] for line in run.stdout.splitlines() if line.startswith("app.")
    }
    assert statuses == {f"app.{name}": "ok" for name in TABLES if f"app.{name}" != HELD}
    assert f"! {HELD}: held (" in run.stdout
    assert f"add under sources 'erp' -> keys: \"{HELD}\": [<key column>, ...]" in run.stdout

    def rows(table: str) -> list[dict]:
        done = cli("sql", *args, f"SELECT id, label FROM erp_app.{table} ORDER BY id")
        assert done.returncode == 0, done.stderr
        return [json.loads(line) for line in done.stdout.splitlines()]

    assert rows("t07") == [
        {"id": 1, "label": "t07-a2"},
        {"id": 3, "label": "t07-c"},
        {"id": 4, "label": "t07-d"},
    ]

    # the one line added: the held table loads, its files were kept; nothing else loads twice
    source["keys"][HELD] = ["id"]
    path.write_text(yaml.safe_dump({"raw_root": str(raw), "sources": [source]}, sort_keys=False))
    again = cli("run", *args)
    assert again.returncode == 0, again.stdout + again.stderr
    statuses = {
        line.split()[0]: line.split()[1:3] for line in again.stdout.splitlines() if line.startswith("app.")
    }
    assert statuses[HELD] == ["ok", "2"]
    assert all(s == ["skipped", "0"] for t, s in statuses.items() if t != HELD), again.stdout
    assert "held" not in again.stdout
    assert rows("t20") == [
        {"id": 1, "label": "t20-a2"},
        {"id": 3, "label": "t20-c"},
        {"id": 4, "label": "t20-d"},
    ]
