"""What most constructs need of a stage besides their own settings: its names and how long it keeps things.

The stack (infra.stack) builds both from the `Stage` model once and hands each construct these and
its own few settings, never the whole model.
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.settings_base import SettingsError

LONGEST_REGION = "ap-southeast-5"  # 14 characters, as long as any region name
MAX_ROLE_NAME = 64


@dataclass(frozen=True, kw_only=True)
class StageNames:
    """How a stage names its resources: ``<project>-<stage>-<what>``, Glue databases
    ``<database_prefix><database>``."""

    project: str
    stage: str
    configured_database_prefix: str | None = None  # the stage's `database_prefix` setting

    @property
    def database_prefix(self) -> str:
        """What the stage puts before a config database name to get its Glue database name."""
        configured = self.configured_database_prefix
        return f"{self.glue_prefix}_" if configured is None else configured

    @property
    def prefix(self) -> str:
        return f"{self.project}-{self.stage}"

    @property
    def glue_prefix(self) -> str:
        """The same prefix in the form Glue database names accept (lower case, underscores)."""
        return self.prefix.replace("-", "_")

    def resource_name(self, what: str) -> str:
        """``<project>-<stage>-<what>``: the name of a stage-scoped resource."""
        return f"{self.prefix}-{what}"

    def role_name(self, what: str) -> str:
        """``<project>-<stage>-<what>-<region>``: IAM names are account-wide, so a stage deployed to
        two regions of one account needs the region in its role names. Checked at synth (64 characters,
        with the longest region name)."""
        from aws_cdk import Aws

        name = self.resource_name(what)
        if len(f"{name}-{LONGEST_REGION}") > MAX_ROLE_NAME:
            raise SettingsError(
                f"role name {name}-<region> can exceed IAM's {MAX_ROLE_NAME} characters: shorten "
                "lakeloader:project or the stage name"
            )
        return f"{name}-{Aws.REGION}"

    def glue_database(self, database: str) -> str:
        """The Glue database of the config's `database` in this stage (local runs use the bare name)."""
        return f"{self.database_prefix}{database}"


@dataclass(frozen=True, kw_only=True)
class Retention:
    """Whether the stage's data outlives its stack (prod) or goes with it (dev), and its logs' retention."""

    retain: bool
    log_retention_days: int
