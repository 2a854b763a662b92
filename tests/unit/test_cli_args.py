"""The CLI's overrides of the config file, without Spark: a deployed stage's database prefix."""

from __future__ import annotations

from pathlib import Path

from lakeloader.cli import build_parser, configure

CONFIG = str(Path(__file__).resolve().parents[2] / "config" / "tables.yaml")


def test_database_prefix_points_every_table_at_the_stage_database() -> None:
    args = build_parser().parse_args(
        ["erase", "--config", CONFIG, "--table", "crm.customers", "--key", "1"]
        + ["--database-prefix", "ll_dev_"]
    )
    config = configure(args)
    assert {t.target.database for t in config.tables} == {"ll_dev_crm", "ll_dev_sales", "ll_dev_inventory"}
    assert {t.id for t in config.tables} >= {"crm.customers"}  # ids, the ledger's keys, stay as configured


def test_without_a_prefix_the_config_names_stand() -> None:
    config = configure(
        build_parser().parse_args(["maintain", "--config", CONFIG, "--warehouse", "s3://b/w/"])
    )
    assert {t.target.database for t in config.tables} == {"crm", "sales", "inventory"}
    assert config.warehouse == "s3://b/w/"
