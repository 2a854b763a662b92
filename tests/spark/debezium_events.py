"""Debezium change events built from the documented layouts in tests/fixtures/debezium/."""

from __future__ import annotations

import base64
import copy
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent.parent / "fixtures" / "debezium"
POSTGRES = json.loads((FIXTURES / "postgres_customers_envelope.json").read_text())
MYSQL = json.loads((FIXTURES / "mysql_customers_envelope.json").read_text())


def decimal_bytes(value: str, scale: int = 2) -> str:
    """Kafka Connect's Decimal as the JSON converter writes it: base64 of the unscaled value's
    big-endian two's-complement bytes."""
    unscaled = int(Decimal(value).scaleb(scale))
    return base64.b64encode(unscaled.to_bytes(unscaled.bit_length() // 8 + 1, "big", signed=True)).decode()


def _image(template: dict[str, Any], id_: int, name: str, **values: Any) -> dict[str, Any]:
    return {**template, "id": id_, "first_name": name, **values}


def postgres(
    op: str, id_: int, name: str, ts_ms: int, lsn: int, *, wrapped: bool = True, **values: Any
) -> dict:
    """A PostgreSQL connector event: c/r/u carry the after-image, d the before-image, t neither."""
    event = copy.deepcopy(POSTGRES)
    payload = event["payload"]
    image = _image(payload["after"], id_, name, **values)
    payload["before"], payload["after"] = (image, None) if op == "d" else (None, image)
    if op == "t":
        del payload["before"], payload["after"]
    payload["op"] = op
    payload["source"].update(ts_ms=ts_ms, lsn=lsn, snapshot=op == "r")
    payload["ts_ms"] = ts_ms + 5
    return event if wrapped else payload


def mysql(op: str, id_: int, name: str, ts_ms: int, pos: int, row: int = 0, **values: Any) -> dict:
    """A MySQL connector event (no schema wrapper): the binlog file, position and row order it."""
    event = copy.deepcopy(MYSQL)
    image = _image(event["after"], id_, name, **values)
    event["before"], event["after"] = (image, None) if op == "d" else (None, image)
    event["op"] = op
    event["source"].update(ts_ms=ts_ms, pos=pos, row=row)
    return event


def lines(events: list[dict | None]) -> str:
    """One JSON document per line, as the S3 sink's JsonFormat writes; None is a Kafka tombstone."""
    return "".join(("null" if e is None else json.dumps(e)) + "\n" for e in events)
