"""`make test`'s two lanes (tests/lanes.py): a suite runs whole on one xdist worker, and the log's
module lines and the fault suite's figures still come out of a two-worker run.

Each case runs pytest on two workers over a small tree that carries this suite's own conftest,
lanes and timing plugin: the grouping is what keeps the e2e stack deployed once and the fault suite on
the Spark lane's session, so it is checked as xdist really schedules it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.lanes import AWS_LANE, SPARK_LANE, lane_of

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parents[2]

RECORD = """
import json, os
from pathlib import Path

def record(name):
    with open(Path(os.environ["LANES_RECORD"]), "a") as out:
        out.write(json.dumps([name, os.environ.get("PYTEST_XDIST_WORKER", "")]) + "\\n")
"""


def test_each_suite_has_its_lane() -> None:
    assert [lane_of(f"tests/{suite}/test_x.py::test_y") for suite in ("spark", "faults")] == [SPARK_LANE] * 2
    assert {lane_of(f"tests/{suite}/test_x.py::test_y") for suite in ("e2e", "infra", "unit")} == {AWS_LANE}
    assert lane_of("tests/test_top.py::test_y") == AWS_LANE
    assert lane_of("tests/spark/test_snapshot_run.py::test_y") == AWS_LANE  # moved: the lanes' balance


# Tests some modules have besides their three recording ones: the Spark lane ends last, 2 s after the
# other, and a fault test counts a case as the oracle would.
EXTRA_TESTS = {
    "spark/test_spark_2.py": "def test_last():\n    import time; time.sleep(2)\n",
    "faults/test_faults_0.py": "def test_counted():\n    from tests.faults.oracle import STATS\n"
    "    STATS.cases += 1\n    STATS.rows_expected += 7\n",
}


@pytest.fixture
def suite_tree(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The small tree; its tests record (module, xdist worker) in ``record.jsonl``."""
    tests = pytester.path / "tests"
    (tests / "faults").mkdir(parents=True)
    for name in ("conftest.py", "lanes.py", "timing.py", "faults/oracle.py"):
        shutil.copy(ROOT / "tests" / name, tests / name)
    (tests / "record.py").write_text(RECORD)
    pytester.makeini("[pytest]\npythonpath = .\n")
    for suite, modules in {"spark": 3, "faults": 2, "e2e": 2, "unit": 3}.items():
        (tests / suite).mkdir(exist_ok=True)
        for n in range(modules):
            module = f"{suite}/test_{suite}_{n}.py"
            recording = "".join(f"def test_{i}():\n    record('tests/{module}')\n" for i in range(3))
            (tests / module).write_text(
                "from tests.record import record\n" + recording + EXTRA_TESTS.get(module, "")
            )
    monkeypatch.setenv("LANES_RECORD", str(pytester.path / "record.jsonl"))
    return pytester.path


def test_a_suite_runs_whole_on_one_worker_and_the_log_names_each_lanes_modules(
    pytester: pytest.Pytester, suite_tree: Path
) -> None:
    result = pytester.runpytest_subprocess(
        "tests", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=32)

    workers: dict[str, set[str]] = {}
    for line in (suite_tree / "record.jsonl").read_text().splitlines():
        module, worker = json.loads(line)
        workers.setdefault(lane_of(module), set()).add(worker)
    assert len(workers[SPARK_LANE]) == len(workers[AWS_LANE]) == 1
    assert workers[SPARK_LANE] != workers[AWS_LANE]

    out = result.stdout.str()
    assert "spark: tests/faults/test_faults_0.py" in out
    assert "aws: tests/unit/test_unit_2.py" in out
    assert "(before it: tests/spark/test_spark_0.py" in out
    assert "the two lanes overlapping" in out
    walls = {
        line.split()[0]: float(line.split()[1]) for line in out.splitlines() if line.startswith("  tests/")
    }
    assert walls["tests/spark/test_spark_2.py"] >= 2.0
    assert walls["tests/unit/test_unit_2.py"] < 1.0  # a lane that ends first ends with its last test
    figures = out.split("fault suite: the tables against the oracle", 1)[1]  # from the Spark lane's worker
    assert "cases checked against the oracle: 1\n" in figures and "rows expected: 7\n" in figures


def test_one_process_has_one_lane_and_no_lane_names(pytester: pytest.Pytester, suite_tree: Path) -> None:
    result = pytester.runpytest_subprocess("tests/spark", "tests/unit", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=19)
    out = result.stdout.str()
    assert "] tests/unit/test_unit_0.py   (before it: tests/spark/test_spark_2.py" in out
    assert "spark:" not in out and "overlapping" not in out and "fault suite" not in out
