"""The one DynamoDB attribute-value codec: plain Python values <-> low-level typed attributes.

The ledger and the config store both talk to DynamoDB through a low-level boto3 client
(the Lambda bundle ships no boto3 resource layer); this is the only place that spells the
``{"S": ...}``/``{"N": ...}`` shapes. Standard library and botocore only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from botocore.exceptions import ClientError


def to_attribute(value: Any) -> dict[str, Any]:
    """A Python value as a typed attribute: str, bool, int/float, None, mappings (M) and lists (L)."""
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, str):
        return {"S": value}
    if isinstance(value, int | float):
        return {"N": str(value)}
    if value is None:
        return {"NULL": True}
    if isinstance(value, Mapping):
        return {"M": encode_item(value)}
    if isinstance(value, list | tuple):
        return {"L": [to_attribute(v) for v in value]}
    raise TypeError(f"cannot store a {type(value).__name__} in DynamoDB: {value!r}")


def from_attribute(value: Mapping[str, Any]) -> Any:
    """A typed attribute as a Python value; numbers come back int when they are whole in the text."""
    ((kind, raw),) = value.items()
    if kind == "S":
        return raw
    if kind == "N":
        try:
            return int(raw)
        except ValueError:
            return float(raw)
    if kind == "BOOL":
        return bool(raw)
    if kind == "NULL":
        return None
    if kind == "M":
        return decode_item(raw)
    if kind == "L":
        return [from_attribute(v) for v in raw]
    raise TypeError(f"unsupported DynamoDB attribute type {kind!r}")


def encode_item(item: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """A dict of plain values as a DynamoDB item (or ExpressionAttributeValues)."""
    return {str(name): to_attribute(value) for name, value in item.items()}


def decode_item(item: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """A DynamoDB item as a dict of plain values."""
    return {name: from_attribute(value) for name, value in item.items()}


def is_condition_failure(exc: ClientError) -> bool:
    """Whether a write failed only because its ConditionExpression did not hold."""
    return exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"
