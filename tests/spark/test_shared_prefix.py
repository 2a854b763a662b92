"""One CDC feed, two tables (issue 65 item 4): a `merge` table keeps the current rows and an `scd2` table
their history, both reading the same raw prefix. Each records what it consumed on its own, so both load
every file and a second run finds nothing new for either."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


def test_a_merge_table_and_its_scd2_history_load_from_the_same_files(cli, tmp_path):
    config = yaml.safe_load((ROOT / "examples" / "tables.yaml").read_text())
    [current] = [t for t in config["tables"] if t["id"] == "crm.customers"]
    history = {  # docs/sources.md's example, as a user pastes it beside crm.customers
        "id": "crm.customers_history",
        "source": {"prefix": current["source"]["prefix"], "format": "parquet", "cdc": "dms"},
        "target": {"database": "crm", "table": "customers_history"},
        "keys": ["customer_id"],
        "sequence_by": "last_update_time",
        "mode": "scd2",
    }
    config["tables"] = [current, history]
    config["raw_root"] = str(ROOT / "examples" / "raw")
    path = tmp_path / "tables.yaml"
    path.write_text(yaml.safe_dump(config))
    args = ("--config", str(path), "--warehouse", str(tmp_path / "warehouse"))

    run = cli("run", *args)
    assert run.returncode == 0, run.stdout + run.stderr
    files = {
        line.split()[0]: int(line.split()[2])
        for line in run.stdout.splitlines()
        if line.startswith("crm.customers")
    }
    raw_files = [p for p in (ROOT / "examples" / "raw" / "crm" / "public" / "customers").rglob("*.parquet")]
    assert files == {"crm.customers": len(raw_files), "crm.customers_history": len(raw_files)}

    def rows(query: str) -> list[dict]:
        done = cli("sql", *args, query)
        assert done.returncode == 0, done.stderr
        return [json.loads(line) for line in done.stdout.splitlines()]

    live = rows("SELECT customer_id, name, email FROM crm.customers ORDER BY customer_id")
    current_versions = rows(
        "SELECT customer_id, name, email FROM crm.customers_history WHERE is_current ORDER BY customer_id"
    )
    assert live and current_versions == live
    versions = rows("SELECT count(*) AS n FROM crm.customers_history")[0]["n"]
    assert versions > len(live)  # the history kept the versions the current table replaced

    again = cli("run", *args)
    assert again.returncode == 0, again.stderr
    assert "skipped" in again.stdout and " ok " not in again.stdout, again.stdout
