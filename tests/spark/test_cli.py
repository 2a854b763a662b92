"""The `lakeloader` command as a user runs it, on the shipped examples.

Its own behaviour (commands, output, exit codes) runs in this process through ``main(argv)``, each
call on a new SparkSession of the suite's JVM: SQL settings and catalogs of its own, as a new process
would have, without a JVM start per command. What ``lakeloader`` (not ``cli``) calls proves that the
command works as a process of its own: validation and errors without Spark, a run with its own JVM.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lakeloader_dev.jvm import short_jvm_env

# slow (make check leaves it out): every command end to end, on the shipped examples
pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def lakeloader(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """`python -m lakeloader.cli ARGS`: a process of its own (a JVM of its own when it needs Spark)."""
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", **short_jvm_env()}
    return subprocess.run(
        [sys.executable, "-m", "lakeloader.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_tables_validates_and_lists_without_spark():
    done = lakeloader("tables", "--config", "examples/tables.yaml")
    assert done.returncode == 0, done.stderr
    assert "crm.customers" in done.stdout and "keys=['order_id', 'line_no']" in done.stdout


def test_invalid_config_is_one_clear_error(tmp_path):
    bad = tmp_path / "tables.yaml"
    bad.write_text(
        "tables:\n  - id: x.y\n    source: {prefix: x/, format: avro}\n    target: {database: x, table: y}\n"
    )
    done = lakeloader("run", "--config", str(bad))
    assert done.returncode == 2
    assert "table 'x.y' -> source.format: Input should be 'parquet', 'csv' or 'json'" in done.stderr
    assert "Traceback" not in done.stderr


def test_run_then_sql_on_the_examples_gives_the_expected_rows(cli, tmp_path):
    warehouse = str(tmp_path / "warehouse")
    # One run loads everything; a second run must find nothing new.
    run = cli("run", "--config", "examples/tables.yaml", "--warehouse", warehouse)
    assert run.returncode == 0, run.stderr
    assert "crm.customers" in run.stdout and "failed" not in run.stdout
    # a rebuild from the same raw files, same config: the same rows (checked below), nothing loaded twice
    rebuild = cli(
        "rebuild", "--config", "examples/tables.yaml", "--warehouse", warehouse, "--table", "crm.customers"
    )
    assert rebuild.returncode == 0, rebuild.stderr
    assert "crm.customers: rebuilt from" in rebuild.stdout, rebuild.stdout

    query = "SELECT customer_id, name, email, tier FROM crm.customers ORDER BY customer_id"
    sql = cli("sql", "--config", "examples/tables.yaml", "--warehouse", warehouse, query)
    assert sql.returncode == 0, sql.stderr
    rows = [json.loads(line) for line in sql.stdout.splitlines()]
    assert rows == [
        {"customer_id": 1, "name": "Ada Lovelace", "email": "ada@example.org", "tier": None},
        {"customer_id": 2, "name": "Grace", "email": "grace.hopper@example.com", "tier": None},
        {"customer_id": 4, "name": "Barbara", "email": "barbara@example.com", "tier": None},
        {"customer_id": 5, "name": "Donald", "email": "donald@example.com", "tier": None},
        {"customer_id": 6, "name": "Alan", "email": "alan@example.com", "tier": "gold"},
        {"customer_id": 7, "name": "Ken", "email": "ken@example.net", "tier": "silver"},
    ]

    lines = cli(
        "sql",
        "--config",
        "examples/tables.yaml",
        "--warehouse",
        warehouse,
        "SELECT order_id, line_no, quantity FROM sales.order_lines ORDER BY order_id, line_no",
    )
    assert [tuple(json.loads(x).values()) for x in lines.stdout.splitlines()] == [
        (100, 1, 2),
        (100, 2, 3),
        (102, 1, 1),
        (103, 1, 7),
    ]

    missing = cli(
        "sql", "--config", "examples/tables.yaml", "--warehouse", warehouse, "SELECT * FROM crm.nope"
    )
    assert missing.returncode == 2 and "TABLE_OR_VIEW_NOT_FOUND" in missing.stderr
    assert "Traceback" not in missing.stderr

    again = cli("run", "--config", "examples/tables.yaml", "--warehouse", warehouse)
    assert again.returncode == 0 and again.stdout.count("skipped") == 3


def test_debezium_envelopes_through_the_cli(cli, tmp_path):
    """`cdc: debezium_envelope` as a user runs it: wrapped PostgreSQL events with a Kafka tombstone,
    then a file with an undecodable decimal, which fails the table with one line and exit code 1.
    The first run is a process of its own (its own JVM): the command as installed, on Spark."""
    from tests.spark.debezium_events import decimal_bytes, lines, postgres

    raw = tmp_path / "raw" / "inventory" / "public" / "stock"
    raw.mkdir(parents=True)
    config = tmp_path / "tables.yaml"
    config.write_text(
        f"raw_root: {tmp_path / 'raw'}\nwarehouse: {tmp_path / 'warehouse'}\ntables:\n"
        "  - id: inventory.stock\n"
        "    source: {prefix: inventory/public/stock/, format: json, cdc: debezium_envelope}\n"
        "    target: {database: inventory, table: stock}\n"
        "    keys: [id]\n"
    )
    events = [
        postgres("r", 1, "bolts", 1000, 10, balance=decimal_bytes("12.50")),
        postgres("r", 2, "nuts", 1000, 11, balance=decimal_bytes("3.05")),
        postgres("u", 1, "bolts", 2000, 20, balance=decimal_bytes("11.99")),
        postgres("d", 2, "nuts", 2001, 21),
        None,
    ]
    (raw / "stock+0+0000000000.json").write_text(lines(events))
    run = lakeloader("run", "--config", str(config))
    assert run.returncode == 0, run.stderr

    query = "SELECT id, first_name, balance FROM inventory.stock ORDER BY id"
    sql = cli("sql", "--config", str(config), query)
    assert sql.returncode == 0, sql.stderr
    assert [json.loads(line) for line in sql.stdout.splitlines()] == [
        {"id": 1, "first_name": "bolts", "balance": "11.99"}
    ]

    (raw / "stock+0+0000000005.json").write_text(lines([postgres("c", 3, "x", 3000, 30, balance="%%")]))
    bad = cli("run", "--config", str(config))
    assert bad.returncode == 1
    said = bad.stdout + bad.stderr
    assert "file 'inventory/public/stock/stock+0+0000000005.json', column 'balance'" in said
    assert "value '%%' does not decode" in said
