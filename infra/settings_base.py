"""What every model of the stage settings shares: unknown keys refused, values frozen.

(The table config, config/tables.yaml, has its own base in lakeloader/config/base.py: cdk.json's
settings are infra's alone; what infra reads of the runtime's code, and why: docs/architecture.md.)
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class SettingsModel(BaseModel):
    """A part of a stage's settings in cdk.json: a key it does not know fails synth."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class SettingsError(ValueError):
    """The cdk.json context is invalid; the message names the key."""
