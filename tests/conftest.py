"""Shared fixtures. The SparkSession is built once per test session (local[2], Iceberg on disk)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def pytest_configure(config: pytest.Config) -> None:
    from tests import timing

    timing.register(config)


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which names each test after its group
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that synthesizes the app (its fixtures reach tests/infra's `synth`) is marked `synth`, so
    `make check` can leave out every synth without each test saying so. On xdist workers each test
    is put in its lane's group (tests/lanes.py), which `--dist loadgroup` hands to one worker whole."""
    from tests.lanes import lane_of

    grouped = bool(getattr(config, "workerinput", None))
    for item in items:
        if "synth" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.synth)
        if grouped:
            item.add_marker(pytest.mark.xdist_group(lane_of(item.nodeid)))


# The fault suite's figures (tests/faults/oracle.STATS) are gathered where its tests run: an xdist
# worker hands its lines over as it finishes, and the run's summary prints them.
_FAULT_FIGURES: list[str] = []


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["fault_figures"] = _fault_figure_lines()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    _FAULT_FIGURES.extend(getattr(node, "workeroutput", {}).get("fault_figures", []))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    lines = _FAULT_FIGURES or _fault_figure_lines()
    if lines:
        terminalreporter.section("fault suite: the tables against the oracle")
        for line in lines:
            terminalreporter.write_line(line)


def _fault_figure_lines() -> list[str]:
    from tests.faults.oracle import STATS

    return STATS.lines() if STATS.cases else []


# Test-only settings of the session that runs every Spark test of its lane, 10 minutes of many small
# jobs on tiny data. Each measured on 2 cores, quiet, five Spark modules (tests/spark: merge,
# tombstones, scd2, commit_guarantees, erase) one run after the other, in alternating pairs:
# * the throughput collector: 219 and 236 s, 318 and 344 CPU-s, against the JVM's default G1's 235
#   and 247 s, 352 and 372 CPU-s (lakeloader_dev.jvm: why the JIT stays at its default here);
# * no whole-stage code generation: 218 and 206 s, 313 and 299 CPU-s, against 238 and 251 s, 344 and
#   362 CPU-s. Each query's generated Java is compiled before it runs, and on a few rows that costs
#   more than it saves. Results do not depend on it; what runs with Spark's defaults, as Glue and EMR
#   run: the emulator's Glue and EMR runs (tests/e2e), the CLI's and the fault suite's subprocesses.
# * expressions interpreted, not compiled (`spark.sql.codegen.factoryMode`, the switch Spark's own
#   suites test both ways with; 41 Janino compilations of a small loop become 1): 164 and 165 s, 234
#   CPU-s each, against 172 s and 250 CPU-s each (2026-11-30, the same five modules). What runs with
#   Spark's defaults, as above, keeps compiling them.
# * C2 (the JIT's optimizing tier) only for methods 4x as hot as its defaults require: C2's compiler
#   thread was the JVM's busiest after the driver's own (51 of 145 CPU-s in test_merge and
#   test_tombstones), compiling code a 10-minute session runs too little to pay back. tests/spark and
#   tests/faults, three runs at once (2026-11-30, 2 cores): 788 CPU-s against 827 with the defaults
#   (C2 86 against 143, the driver's threads 243 against 230); 10x as hot: 792. C1-only was dearer
#   (lakeloader_dev.jvm).
TIER4_ONLY_HOTTER = (
    "-XX:Tier4InvocationThreshold=20000 -XX:Tier4MinInvocationThreshold=2400"
    " -XX:Tier4CompileThreshold=60000 -XX:Tier4BackEdgeThreshold=160000"
)
SESSION_JVM_OPTIONS = f"-XX:+UseParallelGC {TIER4_ONLY_HOTTER}"
SESSION_CONF = {
    "spark.driver.extraJavaOptions": SESSION_JVM_OPTIONS,
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from lakeloader.spark.session import SparkSettings, build_session
    from lakeloader_dev.jars import spark_conf

    warehouse = tmp_path_factory.mktemp("warehouse")
    session = build_session(
        SparkSettings(
            warehouse=str(warehouse),
            app_name="lakeloader-tests",
            shuffle_partitions=2,
            extra_conf={**spark_conf(), **SESSION_CONF},
        )
    )
    yield session
    session.stop()


_names = itertools.count(1)


class RawZone:
    """A raw folder for one test, and helpers to write files the way exporters do."""

    def __init__(self, root: Path):
        self.root = root

    def write_parquet(self, name: str, rows: list[dict], schema: Any = None) -> Path:
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
        return path

    def write_text(self, name: str, text: str) -> Path:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def write_json(self, name: str, rows: list[dict]) -> Path:
        return self.write_text(name, "".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture
def raw(tmp_path: Path) -> RawZone:
    return RawZone(tmp_path / "raw")


@pytest.fixture
def make_table(raw: RawZone) -> Callable[..., Any]:
    """A TableConfig with a unique target, whose source prefix is `src/` under this test's raw zone."""
    from lakeloader.config import TableConfig

    def build(**overrides: Any) -> TableConfig:
        n = next(_names)
        spec: dict[str, Any] = {
            "id": f"test.t{n}",
            "source": {"prefix": "src/", "format": "parquet", "cdc": "dms"},
            "target": {"database": f"db{n}", "table": "t"},
            "keys": ["id"],
        }
        for key, value in overrides.items():
            if isinstance(value, dict) and isinstance(spec.get(key), dict):
                spec[key] = {**spec[key], **value}
            else:
                spec[key] = value
        return TableConfig.model_validate(spec)

    return build


@pytest.fixture
def cli(spark: Any, monkeypatch: pytest.MonkeyPatch):
    """`lakeloader ARGS` in this process: main(argv) with its output captured, its Spark a new session
    (``getOrCreate`` answers it) so that the command's settings and catalog end with the call."""
    import contextlib
    import io
    import subprocess

    from pyspark.sql import SparkSession

    from lakeloader.cli import main

    monkeypatch.chdir(ROOT)

    def call(*args: str) -> subprocess.CompletedProcess:
        out, err = io.StringIO(), io.StringIO()
        previous = SparkSession._instantiatedSession
        SparkSession._instantiatedSession = spark.newSession()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(list(args))
        finally:
            SparkSession._instantiatedSession = previous
        return subprocess.CompletedProcess(["lakeloader", *args], code, out.getvalue(), err.getvalue())

    return call
