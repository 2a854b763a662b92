"""The fault suite's fixtures. Spark is the session's one SparkSession (tests/conftest.py); jobs that are
killed run as `lakeloader` subprocesses on the same warehouse, so the table they leave behind is what
the next run (in this process) finds.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from lakeloader_dev.jvm import short_jvm_env

ROOT = Path(__file__).resolve().parents[2]


class Lake:
    """A config file for the tables one test uses, on the session Spark's warehouse."""

    def __init__(self, spark: Any, raw: Path, config: Path) -> None:
        self.spark, self.raw, self.config = spark, raw, config
        self.warehouse = spark.conf.get("spark.sql.catalog.lakeloader.warehouse")
        self.tables: list[dict] = []

    def add(self, spec: dict) -> Any:
        """Add a table (a tables.yaml entry) and return its validated TableConfig."""
        from lakeloader.config import TableConfig

        self.tables.append(spec)
        self.config.write_text(
            yaml.safe_dump({"raw_root": str(self.raw), "warehouse": self.warehouse, "tables": self.tables})
        )
        return TableConfig.model_validate(spec)

    def run_here(self, table: Any) -> Any:
        """The next run in this process, as `lakeloader run` makes it (every file under the prefix
        offered, input log kept); fails the test if the table failed."""
        from lakeloader.jobs.load import run_tables
        from lakeloader.spark.inputs import list_inputs
        from lakeloader.spark.session import CATALOG

        self.refresh(f"{CATALOG}.{table.target.database}.{table.target.table}")
        (result,) = run_tables(
            self.spark,
            [table],
            {table.id: list_inputs(str(self.raw), table.source.prefix)},
            catalog=CATALOG,
            run_id=f"here-{uuid.uuid4().hex[:6]}",
            progress=lambda message: None,
            log_consumed=True,
        )
        assert result.status != "failed", result.error
        return result

    def start(self, *args: str, crash_at: str | None = None) -> subprocess.Popen:
        """`lakeloader ARGS --config ...` in its own process group (so nothing it starts outlives it)."""
        command, rest = args[0], args[1:]
        return self.start_module(
            "lakeloader.cli", command, "--config", str(self.config), *rest, crash_at=crash_at
        )

    def start_module(self, module: str, *args: str, crash_at: str | None = None) -> subprocess.Popen:
        """`python -m MODULE ARGS` in its own process group, on this lake's Spark settings."""
        env = {
            **os.environ,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "LAKELOADER_DRIVER_MEMORY": "1g",
            "LAKELOADER_SPARK_MASTER": "local[1]",
            **short_jvm_env(),
        }
        env.pop("LAKELOADER_CRASH_AT", None)
        if crash_at:
            env["LAKELOADER_CRASH_AT"] = crash_at
        return subprocess.Popen(
            [sys.executable, "-m", module, *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def finish(self, process: subprocess.Popen, timeout: float = 300) -> tuple[int, str, str]:
        """Wait for a started process; then end whatever of its group is left (the JVM of a killed run)."""
        try:
            out, err = process.communicate(timeout=timeout)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        return process.returncode, out, err

    def cli(self, *args: str, crash_at: str | None = None) -> tuple[int, str, str]:
        return self.finish(self.start(*args, crash_at=crash_at))

    def refresh(self, *names: str) -> None:
        """What a new process would see: drop cached metadata of tables another process wrote."""
        from pyspark.errors import AnalysisException

        for name in names:
            with contextlib.suppress(AnalysisException):  # not created yet
                self.spark.sql(f"REFRESH TABLE {name}")


@pytest.fixture
def lake(spark: Any, tmp_path: Path) -> Lake:
    return Lake(spark, tmp_path / "raw", tmp_path / "tables.yaml")
