"""What a stage makes of the lake config at synth: the tables and sources as the stage deploys them
(its batching defaults and target storage filled in), and the refusals that need both the stage and
the config (FLEX tables on workers that cannot run FLEX, format-3 tables the runtime or a reader
cannot take). The stage's own settings are checked in infra.settings."""

from __future__ import annotations

from typing import Any

from infra.settings import FLEX_WORKER_TYPES, BatchingSettings, SettingsError, Stage, flex_refusal
from lakeloader.config import LakeConfig, TableConfig
from lakeloader.config.format_versions import Reader, format_version_problems
from lakeloader.config.sources import SourceConfig
from lakeloader.config.target import s3_tables_problems


def check_flex_tables(stage: Stage, lake: LakeConfig) -> None:
    """Refuse tables whose runs are FLEX when the ingest job's workers cannot run FLEX."""
    worker_type = stage.settings.ingest.worker_type
    flex = [t.id for t in lake.tables if t.engine == "glue" and t.trigger.execution_class == "FLEX"]
    if flex and worker_type not in FLEX_WORKER_TYPES:
        raise SettingsError(
            f"cdk.json context lakeloader:stages.{stage.name}.ingest.worker_type: "
            + flex_refusal(f"table {flex[0]} has trigger.execution_class FLEX;", worker_type)
        )


def check_format_versions(stage: Stage, lake: LakeConfig) -> None:
    """Refuse format-3 tables the stage's runtime does not run, or that a reader reads through Athena."""
    readers = [Reader(r.role_name, r.tables, r.engines) for r in stage.settings.readers]
    problems = format_version_problems(lake.tables, stage.runtime, readers)
    if problems:
        raise SettingsError(f"cdk.json context lakeloader:stages.{stage.name}: {problems[0]}")


def with_stage_defaults(lake: LakeConfig, batching: BatchingSettings, *, storage: str = "glue") -> LakeConfig:
    """The config as the stage deploys it: a table's trigger settings it does not spell out (window,
    execution class) come from the stage's batching defaults, its target.storage from the stage's
    target_storage (checked against S3 Tables' rules when that makes it s3_tables)."""

    def deployed(table: TableConfig) -> TableConfig:
        trigger, given = table.trigger, table.trigger.model_fields_set
        update: dict[str, Any] = {}
        if "min_interval_seconds" not in given:
            update["min_interval_seconds"] = batching.window_seconds
        if "execution_class" not in given and table.engine == "glue":
            update["execution_class"] = batching.execution_class
        if update:
            table = table.model_copy(update={"trigger": trigger.model_copy(update=update)})
        if "storage" not in table.target.model_fields_set and table.target.storage != storage:
            table = table.model_copy(update={"target": table.target.model_copy(update={"storage": storage})})
            problems = s3_tables_problems(table) if storage == "s3_tables" else []
            if problems:
                raise SettingsError(
                    f"table {table.id!r} takes the stage's target_storage s3_tables: "
                    + "; ".join(problems)
                    + " (fix the table, or give it target.storage: glue)"
                )
        return table

    def deployed_source(source: SourceConfig) -> SourceConfig:
        """The same defaults for the tables a source finds, where its defaults leave them out."""
        defaults = dict(source.defaults)
        trigger = dict(defaults.get("trigger") or {})
        trigger.setdefault("min_interval_seconds", batching.window_seconds)
        if defaults.get("engine", "glue") == "glue":
            trigger.setdefault("execution_class", batching.execution_class)
        target = dict(defaults.get("target") or {})
        target.setdefault("storage", storage)
        return source.model_copy(update={"defaults": {**defaults, "trigger": trigger, "target": target}})

    return lake.model_copy(
        update={
            "tables": [deployed(t) for t in lake.tables],
            "sources": [deployed_source(s) for s in lake.sources],
        }
    )
