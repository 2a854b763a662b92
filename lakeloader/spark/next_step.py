"""The command a message tells its user to run next, spelled so it can be copied: completed with how
this process's user names the tables' config -- `--config FILE` on the command line, `--stage NAME`
in a deployed stage's job. The entry point says it once (`address`); the engine only asks. Spark-free.
"""

from __future__ import annotations

import shlex

_address: list[str] = []  # one process, one config: set by the CLI or the job before any table runs


def address(*options: str) -> None:
    """How the user names this process's config, e.g. ("--config", "config/tables.yaml")."""
    _address[:] = options


def rebuild_command(table_id: str) -> str:
    """`lakeloader rebuild` of one table, as this process's user would type it."""
    where = shlex.join(_address) if _address else "--config FILE"  # a library caller's: unknown
    return f"lakeloader rebuild --table {shlex.quote(table_id)} {where}"
