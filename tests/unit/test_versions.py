"""The runtime matrix (lakeloader.control.runtimes) and everything pinned to it agree.

A failure here means one side moved without the other: what ships to AWS would no longer run
the Spark and Iceberg that the local tests run. (The synthesized Glue version and EMR release
are checked against the same module in tests/infra/test_infra_versions.py; the local jars'
coordinates in tests/unit/test_jars.py.)
"""

from __future__ import annotations

import json
import re
import sys
import zipfile
from importlib.metadata import version
from pathlib import Path

from packaging.requirements import Requirement

from lakeloader.control import runtimes
from lakeloader_dev import jars

REPO = Path(__file__).resolve().parents[2]


def _pyspark_pins(path: Path = REPO / "requirements.txt") -> list[Requirement]:
    lines = path.read_text().splitlines()
    return [Requirement(line.split("#")[0]) for line in lines if line.startswith("pyspark")]


def _spark_installed(runtime: runtimes.Runtime, python: str, constraints: bool) -> list[str]:
    """The PySpark versions among the runtime's Spark line that requirements.txt (and, as the Makefile
    installs it, constraints/<runtime>.txt) let pip install on `python`."""
    env = {"python_version": python, "python_full_version": f"{python}.0"}
    pins = [pin for pin in _pyspark_pins() if pin.marker is None or pin.marker.evaluate(env)]
    if constraints:
        pins += _pyspark_pins(REPO / "constraints" / f"{runtime.name}.txt")
    candidates = [f"{runtime.spark_line}.{patch}" for patch in range(10)] + ["3.5.6"]
    return sorted({v for v in candidates if all(pin.specifier.contains(v) for pin in pins)})


def test_each_runtimes_python_installs_that_runtimes_spark():
    """requirements.txt picks Spark by the interpreter, and the Makefile's constraints/<runtime>.txt
    picks it where two runtimes run on one Python here (glue-6.0 and glue-6.1 on 3.13): each runtime's
    virtualenv gets its Spark alone, on the runtime's own Python as on the one it runs on here."""
    for runtime in runtimes.RUNTIMES.values():
        assert _spark_installed(runtime, runtime.laptop_python, constraints=True) == [runtime.spark], runtime
        assert _spark_installed(runtime, runtime.python, constraints=True) == [runtime.spark], runtime
    # glue-6.1's own Python (3.14) needs no constraints file to get its Spark.
    assert _spark_installed(runtimes.runtime("glue-6.1"), "3.14", constraints=False) == ["4.1.3"]


def test_this_venv_runs_the_local_runtime():
    local = runtimes.local()
    assert version("pyspark") == local.spark, "reinstall: make setup (RUNTIME=...)"
    assert f"{sys.version_info.major}.{sys.version_info.minor}" == local.laptop_python


def test_pyspark_bundles_the_hadoop_that_the_runtimes_hadoop_aws_is_built_for():
    import pyspark

    found = sorted((Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar"))
    assert [p.name for p in found] == [f"hadoop-client-api-{runtimes.local().hadoop}.jar"]


def test_the_local_iceberg_runtime_jar_is_the_runtimes_iceberg_for_its_spark_and_scala():
    runtime = runtimes.local()
    [iceberg] = [p for p in jars.local_jars(runtime) if "iceberg-spark-runtime" in p.name]
    expected = f"iceberg-spark-runtime-{runtime.spark_line}_{runtime.scala}-{runtime.iceberg}.jar"
    assert iceberg.name == expected
    with zipfile.ZipFile(iceberg) as jar:
        build = jar.read("iceberg-build.properties").decode()
    assert f"git.build.version={runtime.iceberg}\n" in build, build


def test_the_makefile_gives_each_runtime_its_python():
    text = (REPO / "Makefile").read_text()
    pythons = dict(re.findall(r"^RUNTIME_PYTHON_(\S+) := (\S+)$", text, flags=re.MULTILINE))
    assert pythons == {name: r.laptop_python for name, r in runtimes.RUNTIMES.items()}
    tests = dict(re.findall(r"^TESTS_(\S+) := (.+?)$", text, flags=re.MULTILINE))
    assert set(tests) == set(runtimes.RUNTIMES)
    assert tests["glue-6.1"] == "$(TESTS_glue-6.0)"
    assert re.search(rf"^RUNTIME \?= {re.escape(runtimes.DEFAULT_RUNTIME)}$", text, flags=re.MULTILINE)


def test_cdk_json_stages_run_their_runtimes_emr_release():
    stages = json.loads((REPO / "cdk.json").read_text())["context"]["lakeloader:stages"]
    for name, stage in stages.items():
        runtime = runtimes.runtime(stage.get("runtime", runtimes.DEFAULT_RUNTIME))
        label = stage.get("emr", {}).get("release_label", runtime.emr_release_label)
        assert label == runtime.emr_release_label, name


def test_the_matrix_is_self_consistent():
    for runtime in runtimes.RUNTIMES.values():
        assert runtime.name == f"glue-{runtime.glue_version}"
        assert runtime.emr_python == f"/usr/bin/python{runtime.python}"
        assert runtime.wheel_python_tag == "cp" + runtime.python.replace(".", "")
        assert runtimes.emr_release(runtime.emr_release_label)
    assert runtimes.DEFAULT_RUNTIME in runtimes.RUNTIMES
    assert [r.merge_reports_counts for r in runtimes.RUNTIMES.values()] == [False, True, True]
    # Only a row with no Python of its own here says which one it runs on instead.
    assert [r.name for r in runtimes.RUNTIMES.values() if r.local_python] == ["glue-6.1"]
    assert [r.name for r in runtimes.RUNTIMES.values() if r.graviton] == ["glue-6.1"]


def test_the_runtime_is_found_from_pyspark_itself_where_its_metadata_is_hidden():
    """Emulated jobs run under `python -S`, where site-packages' metadata is out of sight."""
    assert runtimes._pyspark_version_file() == version("pyspark")
