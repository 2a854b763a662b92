"""The runtime matrix (lakeloader.runtimes) and everything pinned to it agree.

A failure here means one side moved without the other: what ships to AWS would no longer run
the Spark and Iceberg that the local tests run. (The synthesized Glue version and EMR release
are checked against the same module in tests/infra/test_infra_versions.py.)
"""

from __future__ import annotations

import json
import re
from importlib.metadata import version
from pathlib import Path

from lakeloader import runtimes
from lakeloader_dev import jars

REPO = Path(__file__).resolve().parents[2]
SPARK_SCALA = r"iceberg-spark-runtime-(?P<spark>\d+\.\d+)_(?P<scala>\d+\.\d+)"
RUNTIME_JAR = re.compile(SPARK_SCALA + r"-(?P<iceberg>[\d.]+)\.jar")
MAVEN_RUNTIME = re.compile(r"org\.apache\.iceberg:" + SPARK_SCALA + r":(?P<iceberg>[\d.]+)")


def spark_line() -> str:
    return ".".join(runtimes.SPARK_VERSION.split(".")[:2])


def test_requirements_pin_pyspark_to_the_runtimes_spark():
    pins = re.findall(r"^pyspark==(\S+)", (REPO / "requirements.txt").read_text(), flags=re.MULTILINE)
    assert pins == [runtimes.SPARK_VERSION]


def test_installed_pyspark_is_the_runtimes_spark():
    assert version("pyspark") == runtimes.SPARK_VERSION, "reinstall: pip install -r requirements.txt"


def test_local_iceberg_runtime_jar_is_on_the_iceberg_line_for_spark_3_5_scala_2_12():
    found = RUNTIME_JAR.fullmatch(jars._ICEBERG_RUNTIME)
    assert found, jars._ICEBERG_RUNTIME
    assert (found["spark"], found["scala"]) == (spark_line(), runtimes.SCALA_VERSION) == ("3.5", "2.12")
    assert found["iceberg"] == runtimes.LOCAL_ICEBERG_JAR_VERSION
    assert found["iceberg"].startswith(f"{runtimes.ICEBERG_LINE}.")


def test_maven_fallback_asks_for_the_same_line():
    found = MAVEN_RUNTIME.search(jars.MAVEN_PACKAGES)
    assert found, jars.MAVEN_PACKAGES
    assert (found["spark"], found["scala"]) == (spark_line(), runtimes.SCALA_VERSION)
    assert found["iceberg"].startswith(f"{runtimes.ICEBERG_LINE}.")


def test_cdk_json_stages_run_the_matrix_emr_release():
    stages = json.loads((REPO / "cdk.json").read_text())["context"]["lakeloader:stages"]
    assert {name: s["emr"]["release_label"] for name, s in stages.items()} == dict.fromkeys(
        stages, runtimes.EMR_RELEASE_LABEL
    )


def test_the_matrix_is_self_consistent():
    assert runtimes.ICEBERG_VERSION.startswith(f"{runtimes.ICEBERG_LINE}.")
    assert runtimes.emr_release(runtimes.EMR_RELEASE_LABEL)[:2] >= runtimes.EMR_MIN_RELEASE
    assert runtimes.PYTHON_VERSION.replace(".", "") == runtimes.WHEEL_PYTHON_TAG.removeprefix("cp")
    assert runtimes.EMR_PYTHON.endswith(f"python{runtimes.PYTHON_VERSION}")


def test_the_glue_version_runs_the_matrix_spark_iceberg_and_python():
    runtime = runtimes.GLUE_RUNTIMES[runtimes.GLUE_VERSION]
    assert runtime == {
        "spark": runtimes.SPARK_VERSION,
        "iceberg": runtimes.ICEBERG_VERSION,
        "python": runtimes.PYTHON_VERSION,
    }, f"Glue {runtimes.GLUE_VERSION} runs {runtime}: the local runtime must follow it"
    assert runtimes.ICEBERG_VERSION.startswith(runtimes.ICEBERG_LINE + ".")
