"""Identifier quoting: every name from data or config goes through here."""

from __future__ import annotations

from datetime import UTC, datetime


def quote(name: str) -> str:
    """Quote one identifier for Spark SQL (backticks, embedded backticks doubled)."""
    return "`" + name.replace("`", "``") + "`"


def qualified(*parts: str) -> str:
    """`catalog`.`database`.`table` from its parts."""
    return ".".join(quote(p) for p in parts)


def literal(value: str) -> str:
    """A Spark SQL string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def value_literal(value: object) -> str:
    """A Spark SQL literal for a plain value: booleans, numbers, else its text as a string literal."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        return repr(value)
    return literal(str(value))


def count_equal(column: str, value: str) -> str:
    """An aggregate (SQL): how many rows hold `value` (a string) in `column`."""
    return f"sum(CAST({quote(column)} = {literal(value)} AS BIGINT))"


def in_lists(values: dict[str, list[str]], qualifier: str = "") -> str:
    """`col IN (v, ...)` for each column, ANDed: `values` maps a column to SQL literals of every value
    it takes; `qualifier` (e.g. "t.") goes before each quoted column."""
    return " AND ".join(f"{qualifier}{quote(column)} IN ({', '.join(v)})" for column, v in values.items())


def tblproperties(properties: dict[str, str]) -> str:
    """`TBLPROPERTIES (...)` of table properties, keys and values as string literals."""
    return "TBLPROPERTIES (" + ", ".join(f"{literal(k)}={literal(v)}" for k, v in properties.items()) + ")"


def timestamp_literal(moment: datetime) -> str:
    """A Spark TIMESTAMP literal for an aware datetime, independent of the session time zone."""
    utc = moment.astimezone(UTC)
    return f"TIMESTAMP '{utc:%Y-%m-%d %H:%M:%S.%f}+00:00'"
