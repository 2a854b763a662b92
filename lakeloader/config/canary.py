"""The canary tables every stage deploys, so `lakeloader verify` proves the path a user's file takes
without touching a user's table: one per engine, under a reserved raw prefix and a Glue database of
their own. The stack adds them to the config it deploys (infra.stack); a user's table may not use
their prefix, ids or database.

The prefix does not start with `_` or `.`: the jobs pass over such path parts as hidden files
(lakeloader.spark.inputs).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from lakeloader.config import ConfigError, LakeConfig, TableConfig

CANARY_PREFIX = "lakeloader-canary/"
CANARY_DATABASE = "lakeloader_canary"
CANARY_SCHEMA = {"canary_id": "string", "landed_at": "string", "engine": "string", "row_no": "int"}
CANARY_ROWS = 3


def canary_id(engine: str) -> str:
    return f"{CANARY_DATABASE}.{engine}"


def canary_table(engine: str) -> TableConfig:
    """The canary of one engine: JSON lines appended as they come, run at once on arrival (no batching
    window, STANDARD workers: a verify should not wait for the stage's cheaper settings)."""
    return TableConfig.model_validate(
        {
            "id": canary_id(engine),
            "engine": engine,
            "source": {
                "prefix": f"{CANARY_PREFIX}{engine}/",
                "format": "json",
                "cdc": "none",
                "schema": CANARY_SCHEMA,
            },
            "target": {"database": CANARY_DATABASE, "table": engine},
            "mode": "append",
            "trigger": {"min_interval_seconds": 0, "execution_class": "STANDARD"},
        }
    )


CANARY_ENGINES = ("glue", "emr")


def is_canary(table: TableConfig) -> bool:
    return table.id in {canary_id(engine) for engine in CANARY_ENGINES}


def with_canaries(lake: LakeConfig) -> LakeConfig:
    """The config as a stage deploys it: the user's tables, then the canaries. A user's table that
    takes the canaries' prefix, id or database is refused, naming it."""
    for table in lake.tables:
        clashes = {
            "its id": is_canary(table),
            "its source.prefix": table.source.prefix.startswith(CANARY_PREFIX),
            "its target.database": table.target.database == CANARY_DATABASE,
        }
        clash = next((what for what, found in clashes.items() if found), None)
        if clash:
            raise ConfigError(
                f"table {table.id!r}: {clash} is reserved for the stage's canary tables "
                f"({CANARY_PREFIX}, database {CANARY_DATABASE}; docs/deploy.md#verify)"
            )
    return lake.model_copy(update={"tables": [*lake.tables, *(canary_table(e) for e in CANARY_ENGINES)]})


def canary_file(token: str, engine: str, now: datetime | None = None) -> bytes:
    """The canary change file: CANARY_ROWS JSON lines carrying `token`, which no other file has."""
    landed = (now or datetime.now(UTC)).isoformat()
    rows = [
        {"canary_id": token, "landed_at": landed, "engine": engine, "row_no": n} for n in range(CANARY_ROWS)
    ]
    return "".join(json.dumps(row) + "\n" for row in rows).encode()
