"""The scenario of test_s3_to_iceberg.py: the files of its two upload waves and how they land, and the
calls its tests make (an S3 notification straight to the arrival Lambda, the Glue runs of a table,
the `lakeloader` command line in-process). The fixtures and the assertions stay in the test module.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3

from lakeloader.cli.stage import DeployedStage
from lakeloader.control.contract import ARG_TABLE_ID, glue_arg
from lakeloader_dev.emulator.loop import lakeloader, upload, wait_for_objects

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "raw"
CUSTOMERS_LOAD = "crm/public/customers/LOAD00000001.parquet"
CUSTOMERS_CDC = [
    "crm/public/customers/2026/11/01/20261101-100000000.parquet",
    "crm/public/customers/2026/11/01/20261101-110000000.parquet",
]
ORDERS_LOAD = "sales/public/order_lines/LOAD00000001.csv"
ORDERS_CDC = "sales/public/order_lines/20261101-100500000.csv"
PRODUCTS = ["inventory/products/products-0001.json", "inventory/products/products-0002.json"]
BAD_KEY = "crm/audit/events/LOAD00000001.parquet"
REVIEWS_LOAD = "shop/public/reviews/LOAD00000001.parquet"
REVIEWS_CDC = "shop/public/reviews/2026/11/01/20261101-100000000.parquet"
STOCK = [
    "inventory/public/stock/partition=0/inventory.public.stock+0+0000000000.json",
    "inventory/public/stock/partition=0/inventory.public.stock+0+0000000003.json",
]
UNKNOWN_KEY = "crm/public/no_such_table/export 2026+11.csv"  # a space and a '+': quote_plus in the event


def s3_event(bucket: str, key: str, etag: str, size: int) -> dict[str, Any]:
    """The S3 notification record AWS sends (the key quote_plus-encoded)."""
    from urllib.parse import quote_plus

    return {
        "Records": [
            {
                "eventVersion": "2.1",
                "eventSource": "aws:s3",
                "awsRegion": "us-east-1",
                "eventTime": "2026-11-01T12:00:00.000Z",
                "eventName": "ObjectCreated:Put",
                "s3": {
                    "s3SchemaVersion": "1.0",
                    "bucket": {"name": bucket, "arn": f"arn:aws:s3:::{bucket}"},
                    "object": {"key": quote_plus(key), "size": size, "eTag": etag},
                },
            }
        ]
    }


def invoke_arrival(e2e, event: dict[str, Any]) -> dict[str, Any]:
    response = boto3.client("lambda").invoke(
        FunctionName=e2e.stack.arrival_function, Payload=json.dumps(event)
    )
    payload = json.loads(response["Payload"].read())
    assert "FunctionError" not in response, payload
    return payload


def parquet(rows: list[dict[str, Any]]) -> bytes:
    """A DMS-style Parquet file (full load: no ``Op`` column; CDC: ``Op`` first)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    buffer = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(rows), buffer)
    return buffer.getvalue().to_pybytes()


def review(review_id: int, rating: int, minute: int, op: str | None = None) -> dict[str, Any]:
    from datetime import datetime

    row = {"review_id": review_id, "product_id": f"P-{review_id}", "rating": rating}
    row["last_update_time"] = datetime(2026, 11, 1, 9, minute)
    return {"Op": op, **row} if op else row


def stock_events(*events: tuple) -> bytes:
    """Debezium PostgreSQL envelopes as the S3 sink writes them (tests/fixtures/debezium)."""
    from tests.spark.debezium_events import decimal_bytes, lines, postgres

    changes = [
        None if e is None else postgres(e[0], e[1], e[2], e[3], e[3] * 10, balance=decimal_bytes(e[4]))
        for e in events
    ]
    return lines(changes).encode()


def ingest_runs(e2e) -> list[dict[str, Any]]:
    return boto3.client("glue").get_job_runs(JobName=e2e.stack.ingest_job, MaxResults=200)["JobRuns"]


def runs_of(e2e, table_id: str) -> list[dict[str, Any]]:
    """The table's ingest runs, oldest first."""
    runs = [r for r in ingest_runs(e2e) if r.get("Arguments", {}).get(glue_arg(ARG_TABLE_ID)) == table_id]
    return sorted(runs, key=lambda r: r["StartedOn"])


def land_wave1(stack: DeployedStage) -> dict[str, dict[str, str]]:
    """Wave 1: three tables' full loads, a malformed file, an unknown prefix, an EMR table's load and
    Debezium envelopes, landed together; each table's objects' statuses once their runs end."""
    files = [
        (EXAMPLES / CUSTOMERS_LOAD, CUSTOMERS_LOAD),
        (EXAMPLES / ORDERS_LOAD, ORDERS_LOAD),
        (EXAMPLES / PRODUCTS[0], PRODUCTS[0]),
        (b"this is not a parquet file\n", BAD_KEY),
        (b"id,name\n1,x\n", UNKNOWN_KEY),
        (parquet([review(1, 5, 0), review(2, 3, 0), review(3, 1, 0)]), REVIEWS_LOAD),
        (stock_events(("r", 1, "bolts", 1000, "12.50"), ("r", 2, "nuts", 1000, "3.05")), STOCK[0]),
    ]
    upload(stack, files)
    return wait_for_objects(
        stack,
        {
            "crm.customers": [CUSTOMERS_LOAD],
            "sales.order_lines": [ORDERS_LOAD],
            "inventory.products": [PRODUCTS[0]],
            "audit.events": [BAD_KEY],
            "shop.reviews": [REVIEWS_LOAD],
            "inventory.stock": [STOCK[0]],
        },
        timeout=1200,  # five Spark runs, two at a time, on a busy 2-core machine: minutes each
        progress=print,
        fail_fast=True,  # a failed run raises its error at once instead of waiting out the timeout
        expected_failures={"audit.events"},  # the malformed file
    )


def land_wave2(stack: DeployedStage) -> dict[str, dict[str, str]]:
    """Wave 2: the CDC batches (updates, deletes, a new column, a Kafka tombstone), after wave 1."""
    upload(stack, [(EXAMPLES / key, key) for key in [*CUSTOMERS_CDC, ORDERS_CDC, PRODUCTS[1]]])
    upload(stack, [(parquet([review(2, 4, 5, "U"), review(3, 1, 5, "D")]), REVIEWS_CDC)])
    stock = stock_events(("u", 1, "bolts", 2000, "11.99"), ("d", 2, "nuts", 2001, "3.05"), None)
    upload(stack, [(stock, STOCK[1])])
    return wait_for_objects(
        stack,
        {
            "crm.customers": CUSTOMERS_CDC,
            "sales.order_lines": [ORDERS_CDC],
            "inventory.products": [PRODUCTS[1]],
            "shop.reviews": [REVIEWS_CDC],
            "inventory.stock": [STOCK[1]],
        },
        timeout=1200,  # five Spark runs, two at a time, on a busy 2-core machine: minutes each
        progress=print,
        fail_fast=True,
    )


def status_of(table_id: str) -> dict[str, Any]:
    code, out = lakeloader("status", "--stage", "dev", "--table", table_id, "--json")
    (status,) = json.loads(out)
    assert code == (0 if status["healthy"] else 1)
    return status


def audit_event(n: int) -> dict[str, Any]:
    from datetime import datetime

    return {"event_id": n, "kind": "login", "last_update_time": datetime(2026, 11, 2, 8, n)}
