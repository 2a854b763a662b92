"""The message of a refused keys change tells the user the rebuild command for the very config they ran,
and that command, pasted as it is, rebuilds the table with the new keys. `lakeloader` in this process
(main(argv), each call on a new SparkSession of the suite's JVM), on the shipped examples."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest

# slow (make check leaves it out): a run, a refused run and the rebuild the hint names
pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def test_the_hint_of_a_keys_change_is_the_command_that_rebuilds_the_table(cli, tmp_path):
    def lakeloader(*args: str) -> tuple[int, str]:
        done = cli(*args)
        return done.returncode, done.stdout + done.stderr

    raw, warehouse = tmp_path / "raw", str(tmp_path / "warehouse")
    customers = raw / "crm/public/customers"
    customers.mkdir(parents=True)
    shutil.copy(ROOT / "examples/raw/crm/public/customers/LOAD00000001.parquet", customers)  # no NULL email
    text = (ROOT / "examples/tables.yaml").read_text().replace("raw_root: examples/raw", f"raw_root: {raw}")
    assert text.count("keys: [customer_id]") == 1
    first, edited = tmp_path / "tables.yaml", tmp_path / "edited tables.yaml"  # a space: the hint quotes it
    first.write_text(text)
    code, out = lakeloader(
        "run", "--config", str(first), "--table", "crm.customers", "--warehouse", warehouse
    )
    assert code == 0, out

    edited.write_text(text.replace("keys: [customer_id]", "keys: [customer_id, email]"))
    shutil.copy(customers / "LOAD00000001.parquet", customers / "LOAD00000002.parquet")  # a new file to load
    code, out = lakeloader(
        "run", "--config", str(edited), "--table", "crm.customers", "--warehouse", warehouse
    )

    hint = f"lakeloader rebuild --table crm.customers --config '{edited}' --warehouse {warehouse}"
    assert code == 1 and hint in out, out
    code, out = lakeloader(*shlex.split(hint)[1:])
    assert code == 0 and "crm.customers: rebuilt from" in out, out
    code, out = lakeloader(
        "sql", "--config", str(edited), "--warehouse", warehouse, "SHOW TBLPROPERTIES crm.customers"
    )
    properties = {row["key"]: row["value"] for row in map(json.loads, out.splitlines())}
    assert json.loads(properties["lakeloader.keys"]) == ["customer_id", "email"], out
