"""The emulator's warm Spark drivers (lakeloader_dev.emulator.drivers): Spark runs one after another
share a driver JVM, each with a SparkContext of its own; a run that fails, or a switch, gives the
next run a new JVM, as Glue gives every run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lakeloader_dev.emulator import drivers
from lakeloader_dev.emulator.runtime import EmulatorProcesses

pytestmark = pytest.mark.e2e

# Leaves its SparkContext running, as a Glue script does: the process's exit is the run's end.
SCRIPT = """
import sys
from pyspark.sql import SparkSession
builder = SparkSession.builder.master("local[1]").appName(sys.argv[2]).config("spark.ui.enabled", "false")
spark = builder.getOrCreate()
print("jvm", spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
print("app", spark.sparkContext.appName, spark.range(3).count())
sys.exit(int(sys.argv[1]))
"""


@pytest.fixture
def runtime(tmp_path: Path):
    runtime = EmulatorProcesses("http://127.0.0.1:1", tmp_path, spark_slots=1)
    (tmp_path / "job.py").write_text(SCRIPT)
    yield runtime
    runtime.stop()


def run(runtime: EmulatorProcesses, name: str, exit_code: int = 0) -> int:
    """The run's driver JVM, by pid; the run must have ended with ``exit_code`` after its Spark job."""
    run_dir = runtime.workdir / name
    run_dir.mkdir()
    error = runtime.run_spark_script(
        runtime.workdir / "job.py",
        [str(exit_code), name],
        python_path=[],
        env={},
        run_dir=run_dir,
        log_path=run_dir / "driver.log",
        timeout=300,
    )
    log = (run_dir / "driver.log").read_text()
    assert f"app {name} 3" in log, log
    assert (error is None) == (exit_code == 0), error
    return int(re.search(r"^jvm (\d+)$", log, re.MULTILINE).group(1))


def test_runs_one_after_another_share_a_jvm_each_with_its_own_spark_context(
    runtime: EmulatorProcesses,
) -> None:
    first = run(runtime, "first")
    assert run(runtime, "second") == first  # and the first run's SparkContext, left running, was stopped


def test_a_failed_run_takes_its_jvm_with_it(runtime: EmulatorProcesses) -> None:
    failed = run(runtime, "failed", exit_code=1)
    assert run(runtime, "after") != failed


def test_the_switch_gives_every_run_its_own_jvm(
    runtime: EmulatorProcesses, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(drivers.WARM_ENV, "0")
    assert run(runtime, "one") != run(runtime, "two")
