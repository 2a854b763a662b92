"""What the Spark verbs of the `lakeloader` command line share: the config file with the command line's
overrides (configure), a SparkSession on its warehouse or a deployed stage's (spark_session), and JSON
for what Spark returns (json_default)."""

from __future__ import annotations

import argparse
from datetime import date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from lakeloader.config import LakeConfig, load_config

if TYPE_CHECKING:
    from lakeloader.cli.stage import DeployedStage


def configure(args: argparse.Namespace, *, find_tables: bool = True) -> LakeConfig:
    """The config file with the command line's overrides: warehouse, raw root, database prefix; with
    `find_tables`, the tables its sources hold today beside the declared ones (what was found and
    held: `args.discovery`)."""
    from lakeloader.spark import next_step

    config = load_config(args.config)
    if getattr(args, "raw_root", None):
        config = config.model_copy(update={"raw_root": args.raw_root})
    if find_tables:
        config, args.discovery = config.with_found_tables()
    warehouse = ["--warehouse", args.warehouse] if getattr(args, "warehouse", None) else []
    next_step.address("--config", args.config, *warehouse)  # a hint's command acts on the same tables
    overrides: dict[str, Any] = {"warehouse": args.warehouse} if getattr(args, "warehouse", None) else {}
    if getattr(args, "database_prefix", ""):
        from lakeloader.jobs.main import with_database_prefix

        overrides["tables"] = with_database_prefix(config.tables, args.database_prefix)
    return config.model_copy(update=overrides) if overrides else config


def spark_session(config: LakeConfig | DeployedStage, app_name: str):
    """A SparkSession on the config's (or the deployed stage's) warehouse, and its catalog."""
    from lakeloader.spark.session import SparkSettings, build_session

    settings = SparkSettings(warehouse=config.warehouse, app_name=app_name)
    return build_session(settings), settings.catalog


def lineage_log(config: LakeConfig, path: str | None = None):
    """Where the verb's OpenLineage events go: `path` (--lineage-file), else the config's lineage.file,
    else $LAKELOADER_LINEAGE_FILE, else nowhere (lakeloader.jobs.lineage)."""
    from lakeloader.jobs.lineage import open_log

    chosen = path or (config.lineage.file if config.lineage else None)
    return open_log(chosen, warehouse=config.warehouse, raw_root=config.raw_root)


def json_default(value: Any) -> Any:
    """JSON for the values Spark rows and reports hold: dates, decimals, bytes."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return value.hex()
    return str(value)
