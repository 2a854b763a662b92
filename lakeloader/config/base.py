"""What every config model shares: strict parsing, the name rule and the user-facing error."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ConfigError(ValueError):
    """A configuration the user wrote is invalid; the message says where."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
