"""What every part of the ledger shares: the DynamoDB client, the two table names and the clock."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, TypeVar

from botocore.exceptions import ClientError

from lakeloader.control.dynamodb import decode_item, is_condition_failure

R = TypeVar("R")

DEFAULT_RUN_RETENTION_DAYS = 90
MAX_ERROR_CHARS = 4000
# Conditional writes of a batch's objects in flight at once (botocore keeps 10 connections a client):
# each is a round trip, and a 1,000-object run claims and finishes 1,000 (benchmarks/RESULTS.md).
WRITES_IN_FLIGHT = 8
# Segments of a Scan of a whole table read at once (a stage's status reads both tables whole).
SCAN_SEGMENTS = 4


class LedgerError(RuntimeError):
    """The ledger could not do what was asked (the message says which table/object)."""


class LockLostError(LedgerError):
    """A run no longer holds its table's lock (it expired and another run took it)."""


def utc_now_iso(now: float | None = None) -> str:
    """ISO-8601 UTC with milliseconds, e.g. 2024-05-01T12:00:00.123Z."""
    moment = datetime.fromtimestamp(time.time() if now is None else now, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def clip_error(text: str | None) -> str | None:
    """An error text short enough for an item: its head and its tail (where the cause usually is)."""
    if text is None:
        return None
    text = str(text)
    if len(text) <= MAX_ERROR_CHARS:
        return text
    head = MAX_ERROR_CHARS * 2 // 3
    tail = MAX_ERROR_CHARS - head - 20
    return f"{text[:head]}\n...[truncated]...\n{text[-tail:]}"


def record_from_item(cls: type[R], item: Mapping[str, Any], **defaults: Any) -> R:
    """A ledger dataclass from a DynamoDB item: its fields by name, ``defaults`` where the item has none."""
    data = decode_item(item)
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    return cls(**{**defaults, **{k: v for k, v in data.items() if k in names and v is not None}})


class LedgerTables:
    """The ledger table (objects) and the run-history table (runs, locks, windows) of one stage.

    ``client`` is a low-level ``boto3.client("dynamodb")``. ``clock`` returns epoch seconds
    (tests pass a fake one to age locks). ``page_size`` caps the items one Query reads
    (default: DynamoDB's 1 MB pages).
    """

    def __init__(
        self,
        client: Any,
        ledger_table: str,
        runs_table: str,
        *,
        clock: Callable[[], float] = time.time,
        run_retention_days: int = DEFAULT_RUN_RETENTION_DAYS,
        page_size: int | None = None,
    ) -> None:
        self.client = client
        self.page_size = page_size
        self.ledger_table = ledger_table
        self.runs_table = runs_table
        self.clock = clock
        self.run_retention_days = run_retention_days

    def conditional_write(self, write: Callable[..., Any], **kwargs: Any) -> dict[str, Any] | None:
        """Run one conditional DynamoDB write: its response, or None when its condition did not hold."""
        try:
            return write(**kwargs)
        except ClientError as exc:
            if is_condition_failure(exc):
                return None
            raise

    def conditional_writes(
        self, write: Callable[..., Any], requests: Sequence[dict[str, Any]]
    ) -> list[dict[str, Any] | None]:
        """`conditional_write` of each request (its keyword arguments), WRITES_IN_FLIGHT at a time; the
        responses in the requests' order. Each is a conditional write of its own item, so sending them
        together changes no outcome. On an error, others may have been written, as those before it
        were when they went one by one."""
        if len(requests) <= 1:
            return [self.conditional_write(write, **request) for request in requests]
        with ThreadPoolExecutor(max_workers=min(WRITES_IN_FLIGHT, len(requests))) as pool:
            return list(pool.map(lambda request: self.conditional_write(write, **request), requests))

    def scan(self, table_name: str, attributes: Sequence[str]) -> list[dict[str, Any]]:
        """Every item of one of the two tables, strongly consistent, with only `attributes`: a parallel
        Scan of SCAN_SEGMENTS segments, one request per 1 MB page whatever the number of tables the
        items belong to. (A projection reads as much; it sends less back.)"""
        names = {f"#a{index}": name for index, name in enumerate(attributes)}

        def segment(number: int) -> list[dict[str, Any]]:
            kwargs: dict[str, Any] = {
                "TableName": table_name,
                "ConsistentRead": True,
                "Segment": number,
                "TotalSegments": SCAN_SEGMENTS,
                "ProjectionExpression": ", ".join(names),
                "ExpressionAttributeNames": names,
            }
            if self.page_size:
                kwargs["Limit"] = self.page_size
            items: list[dict[str, Any]] = []
            while True:
                response = self.client.scan(**kwargs)
                items.extend(response.get("Items", []))
                if not response.get("LastEvaluatedKey"):
                    return items
                kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]

        with ThreadPoolExecutor(max_workers=SCAN_SEGMENTS) as pool:
            return [item for items in pool.map(segment, range(SCAN_SEGMENTS)) for item in items]
