"""The table configuration model: one typed model, validated once (keys: README "The config file").

Imported by the CLI, the Spark jobs and `cdk synth`, so it must not import PySpark. Every
validation error names the config file, the table id and the field. `python -m lakeloader.config`
regenerates config/tables.schema.json.
"""

from lakeloader.config.base import IDENTIFIER, ConfigError
from lakeloader.config.lake import LakeConfig, json_schema, load_config, parse_config, write_json_schema
from lakeloader.config.policies import (
    SORT_TERM,
    CommitRetry,
    CompactionSettings,
    MaintenanceConfig,
    OrphanFiles,
    PartialUpdates,
    ReconcileSettings,
    RetrySettings,
    SnapshotRetention,
    TombstoneSettings,
    TriggerConfig,
)
from lakeloader.config.rules import RULE_KINDS, BetweenRule, InSetRule, QualityConfig, QualityRule, RegexRule
from lakeloader.config.source import CsvOptions, Source
from lakeloader.config.table import TableConfig
from lakeloader.config.target import NEW_TABLE_PROPERTIES, PARTITION_TRANSFORM, Scd2Options, Target

__all__ = [
    "IDENTIFIER",
    "NEW_TABLE_PROPERTIES",
    "PARTITION_TRANSFORM",
    "RULE_KINDS",
    "SORT_TERM",
    "BetweenRule",
    "CommitRetry",
    "CompactionSettings",
    "ConfigError",
    "CsvOptions",
    "InSetRule",
    "LakeConfig",
    "MaintenanceConfig",
    "OrphanFiles",
    "PartialUpdates",
    "ReconcileSettings",
    "QualityConfig",
    "QualityRule",
    "RegexRule",
    "RetrySettings",
    "Scd2Options",
    "SnapshotRetention",
    "Source",
    "TableConfig",
    "Target",
    "TombstoneSettings",
    "TriggerConfig",
    "json_schema",
    "load_config",
    "parse_config",
    "write_json_schema",
]
