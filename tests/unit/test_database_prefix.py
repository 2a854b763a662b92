"""A deployed stage's Glue databases are `<prefix><config database>`: the jobs apply the prefix once.

Real: the config table on moto's DynamoDB over HTTP, `ingest_main`/`maintain_main` loading it, the
SQL names lakeloader derives. Stubbed: the Spark session and the per-table work (drain/maintain),
which only record the tables they are handed; Spark itself is covered by tests/spark and the e2e
suite (which reads the prefixed databases of a deployed stack).
"""

from __future__ import annotations

import sys
from pathlib import Path

import boto3
import pytest

sys.path.append(str(Path(__file__).resolve().parents[1]))  # tests/ -> aws_fixtures
import aws_fixtures  # noqa: E402
from aws_fixtures import create_dynamodb_table, unique_name  # noqa: E402

import lakeloader.jobs.drain  # noqa: E402
import lakeloader.jobs.maintenance  # noqa: E402
import lakeloader.spark.session  # noqa: E402
from lakeloader.config import TableConfig, parse_config  # noqa: E402
from lakeloader.config.items import config_items  # noqa: E402
from lakeloader.control.config_store import PARTITION_KEY  # noqa: E402
from lakeloader.control.dynamodb import encode_item  # noqa: E402
from lakeloader.engine import (
    quality,
    tombstones,  # noqa: E402
)
from lakeloader.jobs import main as jobs
from lakeloader.jobs.load import LoadResult  # noqa: E402
from lakeloader.spark.sql import qualified  # noqa: E402

moto_server = aws_fixtures.moto_server
aws_endpoint = aws_fixtures.aws_endpoint

CONFIG = parse_config(
    {
        "tables": [
            {
                "id": "crm.customers",
                "source": {"prefix": "crm/public/customers/", "format": "parquet", "cdc": "dms"},
                "target": {"database": "crm", "table": "customers"},
                "keys": ["customer_id"],
                "quality": {"rules": [{"not_null": ["customer_id"]}], "on_failure": "quarantine"},
            },
            {
                "id": "sales.orders",
                "source": {"prefix": "sales/orders/", "format": "csv"},
                "target": {"database": "sales", "table": "orders"},
                "keys": ["order_id"],
            },
        ]
    }
)


def test_prefix_moves_every_table_to_its_stage_database():
    prefixed = jobs.with_database_prefix(CONFIG.tables, "lakeloader_dev_")
    assert [t.target.database for t in prefixed] == ["lakeloader_dev_crm", "lakeloader_dev_sales"]
    assert [t.qualified_target for t in prefixed] == [
        "lakeloader_dev_crm.customers",
        "lakeloader_dev_sales.orders",
    ]
    assert [t.model_dump(exclude={"target"}) for t in prefixed] == [
        t.model_dump(exclude={"target"}) for t in CONFIG.tables
    ]
    assert [t.target.database for t in CONFIG.tables] == ["crm", "sales"]  # the config is not changed
    target = qualified("glue_catalog", prefixed[0].target.database, prefixed[0].target.table)
    assert quality.quarantine_name(target, prefixed[0]) == (
        "`glue_catalog`.`lakeloader_dev_crm`.`customers__quarantine`"
    )
    assert tombstones.side_table(f"{target}.`branch_audit_1`", prefixed[0]) == (
        "`glue_catalog`.`lakeloader_dev_crm`.`customers__tombstones`"
    )


def test_no_prefix_keeps_the_config_names():
    assert jobs.with_database_prefix(CONFIG.tables, "") == CONFIG.tables


@pytest.fixture
def job_args(aws_endpoint) -> dict[str, str]:
    dynamodb = boto3.client("dynamodb")
    table = create_dynamodb_table(dynamodb, unique_name("config"), PARTITION_KEY)
    for item in config_items(CONFIG):
        dynamodb.put_item(TableName=table, Item=encode_item(item))
    return {
        "lakeloader_config_table": table,
        "lakeloader_ledger_table": unique_name("ledger"),
        "lakeloader_runs_table": unique_name("runs"),
        "lakeloader_raw_root": "s3://raw/",
        "lakeloader_warehouse": "s3://curated/warehouse/",
        "lakeloader_table_id": "",
        "lakeloader_correlation_id": "cid-1",
    }


@pytest.fixture
def handed(monkeypatch) -> list[TableConfig]:
    """The tables the jobs hand to the per-table work."""
    seen: list[TableConfig] = []
    monkeypatch.setattr(lakeloader.spark.session, "build_session", lambda settings: object())

    def drain(spark, table, ledger, **kwargs):
        seen.append(table)
        return LoadResult(table.id, status="ok")

    def maintain(spark, tables, **kwargs):
        seen.extend(tables)
        return []

    monkeypatch.setattr(lakeloader.jobs.drain, "drain_table", drain)
    monkeypatch.setattr(lakeloader.jobs.maintenance, "maintain_tables", maintain)
    monkeypatch.setattr(lakeloader.jobs.maintenance, "summary_table", lambda results: "")
    return seen


@pytest.mark.parametrize("main", [jobs.ingest_main, jobs.maintain_main])
def test_jobs_address_the_stage_databases(job_args, handed, main):
    assert main({**job_args, "lakeloader_database_prefix": "lakeloader_dev_"}, runtime="glue") == 0
    assert sorted(t.qualified_target for t in handed) == [
        "lakeloader_dev_crm.customers",
        "lakeloader_dev_sales.orders",
    ]


def test_jobs_without_a_prefix_use_the_config_names(job_args, handed):
    assert jobs.ingest_main(job_args, runtime="emr") == 0
    assert sorted(t.qualified_target for t in handed) == ["crm.customers", "sales.orders"]
