"""What every config model shares: strict parsing, the name rule and the user-facing error."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

from lakeloader.control.contract import normalise_prefix

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ConfigError(ValueError):
    """A configuration the user wrote is invalid; the message says where."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def raw_prefix(value: str) -> str:
    """A raw-zone prefix as the Lambda routes keys (contract.normalise_prefix); never empty."""
    value = normalise_prefix(value)
    if not value:
        raise ValueError("prefix must not be empty")
    return value
