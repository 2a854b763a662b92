"""Write the sample raw zone under examples/raw (committed; rerun to regenerate).

Three sources, as their exporters write them:

* crm/public/customers/  AWS DMS, Parquet: a full load, then two CDC files with
  updates, deletes, a late change, a delete of a missing key, a delete then
  re-insert, and a new column (`tier`) arriving mid-stream.
* sales/public/order_lines/  AWS DMS, CSV with header: composite key (order_id, line_no).
* inventory/products/  Debezium JSON lines (`__op`, `__source_ts_ms`, `__deleted`).

`python examples/generate.py` (needs pyarrow, a dev requirement).
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

RAW = Path(__file__).resolve().parent / "raw"


def ts(text: str) -> datetime:
    return datetime.fromisoformat(text)


def write_parquet(path: Path, rows: list[dict], schema: pa.Schema) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(rows, schema=schema)
    pq.write_table(table, path, compression="snappy")


def customers() -> None:
    base = RAW / "crm/public/customers"
    fields = [
        ("customer_id", pa.int64()),
        ("name", pa.string()),
        ("email", pa.string()),
        ("country", pa.string()),
        ("last_update_time", pa.timestamp("us")),
    ]
    full = pa.schema(fields)
    cdc = pa.schema([("Op", pa.string()), *fields])
    write_parquet(
        base / "LOAD00000001.parquet",
        [
            {
                "customer_id": 1,
                "name": "Ada",
                "email": "ada@example.com",
                "country": "GB",
                "last_update_time": ts("2026-11-01 08:00:00"),
            },
            {
                "customer_id": 2,
                "name": "Grace",
                "email": "grace@example.com",
                "country": "US",
                "last_update_time": ts("2026-11-01 08:00:00"),
            },
            {
                "customer_id": 3,
                "name": "Edsger",
                "email": "edsger@example.com",
                "country": "NL",
                "last_update_time": ts("2026-11-01 08:00:00"),
            },
            {
                "customer_id": 4,
                "name": "Barbara",
                "email": "barbara@example.com",
                "country": "US",
                "last_update_time": ts("2026-11-01 08:00:00"),
            },
            {
                "customer_id": 5,
                "name": "Donald",
                "email": "donald@example.com",
                "country": "US",
                "last_update_time": ts("2026-11-01 08:00:00"),
            },
        ],
        full,
    )
    write_parquet(
        base / "2026/11/01/20261101-100000000.parquet",
        [
            {
                "Op": "U",
                "customer_id": 2,
                "name": "Grace",
                "email": "grace.hopper@example.com",
                "country": "US",
                "last_update_time": ts("2026-11-01 10:00:00"),
            },
            {
                "Op": "I",
                "customer_id": 6,
                "name": "Alan",
                "email": "alan@example.com",
                "country": "GB",
                "last_update_time": ts("2026-11-01 10:00:01"),
            },
            {
                "Op": "D",
                "customer_id": 3,
                "name": "Edsger",
                "email": "edsger@example.com",
                "country": "NL",
                "last_update_time": ts("2026-11-01 10:00:02"),
            },
            {
                "Op": "U",
                "customer_id": 1,
                "name": "Ada",
                "email": "ada@example.org",
                "country": "GB",
                "last_update_time": ts("2026-11-01 10:00:03"),
            },
            {
                "Op": "U",
                "customer_id": 1,
                "name": "Ada Lovelace",
                "email": "ada@example.org",
                "country": "GB",
                "last_update_time": ts("2026-11-01 10:00:04"),
            },
            {
                "Op": "I",
                "customer_id": 7,
                "name": "Ken",
                "email": "ken@example.com",
                "country": "US",
                "last_update_time": ts("2026-11-01 10:00:05"),
            },
        ],
        cdc,
    )
    drifted = pa.schema([*cdc, ("tier", pa.string())])
    write_parquet(
        base / "2026/11/01/20261101-110000000.parquet",
        [
            {
                "Op": "U",
                "customer_id": 6,
                "name": "Alan",
                "email": "alan@example.com",
                "country": "GB",
                "last_update_time": ts("2026-11-01 11:00:00"),
                "tier": "gold",
            },
            # late: older than the 10:00 update already applied to customer 2
            {
                "Op": "U",
                "customer_id": 2,
                "name": "Grace (stale)",
                "email": "stale@example.com",
                "country": "US",
                "last_update_time": ts("2026-11-01 09:00:00"),
                "tier": None,
            },
            {
                "Op": "D",
                "customer_id": 99,
                "name": None,
                "email": None,
                "country": None,
                "last_update_time": ts("2026-11-01 11:00:01"),
                "tier": None,
            },
            {
                "Op": "D",
                "customer_id": 7,
                "name": "Ken",
                "email": "ken@example.com",
                "country": "US",
                "last_update_time": ts("2026-11-01 11:00:02"),
                "tier": None,
            },
            {
                "Op": "I",
                "customer_id": 7,
                "name": "Ken",
                "email": "ken@example.net",
                "country": "US",
                "last_update_time": ts("2026-11-01 11:00:03"),
                "tier": "silver",
            },
        ],
        drifted,
    )


def order_lines() -> None:
    base = RAW / "sales/public/order_lines"
    base.mkdir(parents=True, exist_ok=True)
    (base / "LOAD00000001.csv").write_text(
        "order_id,line_no,sku,quantity,unit_price,order_date,last_update_time\n"
        "100,1,SKU-1,2,9.99,2026-10-30,2026-11-01 08:00:00\n"
        "100,2,SKU-2,1,24.50,2026-10-30,2026-11-01 08:00:00\n"
        "101,1,SKU-1,5,9.99,2026-10-31,2026-11-01 08:00:00\n"
        "102,1,SKU-3,1,120.00,2026-10-31,2026-11-01 08:00:00\n"
    )
    (base / "20261101-100500000.csv").write_text(
        "Op,order_id,line_no,sku,quantity,unit_price,order_date,last_update_time\n"
        "U,100,2,SKU-2,3,24.50,2026-10-30,2026-11-01 10:05:00\n"
        "D,101,1,SKU-1,5,9.99,2026-10-31,2026-11-01 10:05:01\n"
        "I,103,1,SKU-4,7,3.25,2026-11-01,2026-11-01 10:05:02\n"
    )


def products() -> None:
    base = RAW / "inventory/products"
    base.mkdir(parents=True, exist_ok=True)

    def lines(records: list[dict]) -> str:
        return "".join(json.dumps(r) + "\n" for r in records)

    (base / "products-0001.json").write_text(
        lines(
            [
                {
                    "product_id": "P-1",
                    "name": "Kettle",
                    "price": 39.5,
                    "__op": "r",
                    "__source_ts_ms": 1761984000000,
                    "__deleted": "false",
                },
                {
                    "product_id": "P-2",
                    "name": "Toaster",
                    "price": 25.0,
                    "__op": "r",
                    "__source_ts_ms": 1761984000000,
                    "__deleted": "false",
                },
                {
                    "product_id": "P-3",
                    "name": "Blender",
                    "price": 55.0,
                    "__op": "r",
                    "__source_ts_ms": 1761984000000,
                    "__deleted": "false",
                },
            ]
        )
    )
    (base / "products-0002.json").write_text(
        lines(
            [
                {
                    "product_id": "P-1",
                    "name": "Kettle",
                    "price": 35.0,
                    "__op": "u",
                    "__source_ts_ms": 1761987600000,
                    "__deleted": "false",
                },
                {
                    "product_id": "P-2",
                    "name": "Toaster",
                    "price": 25.0,
                    "__op": "d",
                    "__source_ts_ms": 1761987601000,
                    "__deleted": "true",
                },
                {
                    "product_id": "P-4",
                    "name": "Grinder",
                    "price": 42.0,
                    "__op": "c",
                    "__source_ts_ms": 1761987602000,
                    "__deleted": "false",
                },
            ]
        )
    )


if __name__ == "__main__":
    customers()
    order_lines()
    products()
    print(f"wrote sample raw files under {RAW}")
