"""The runtime matrix: the one place that names the versions the cloud and the laptop run.

Infra, `requirements.txt`'s pyspark and `lakeloader_dev.jars` follow it; `tests/unit/test_versions.py`
fails when any of them drifts (table: README "Architecture"). Stdlib only: the Lambda bundle, `cdk
synth` and the jobs all import it.
"""

from __future__ import annotations

GLUE_VERSION = "5.1"
EMR_RELEASE_LABEL = "emr-7.12.0"
# The oldest EMR release whose bundled Iceberg is on the ICEBERG_LINE (7.12: 1.10.0).
EMR_MIN_RELEASE = (7, 12)
SPARK_VERSION = "3.5.6"
SCALA_VERSION = "2.12"
ICEBERG_VERSION = "1.10.0"
ICEBERG_LINE = "1.10"  # major.minor every runtime must share
LOCAL_ICEBERG_JAR_VERSION = "1.10.2"
PYTHON_VERSION = "3.11"

# What the job bundle's wheels are built for: the runtimes' CPython and platform.
WHEEL_PLATFORM = "manylinux2014_x86_64"
WHEEL_PYTHON_TAG = "cp311"

# EMR Serverless: the Iceberg jar and the Python 3.11 interpreter its images document.
EMR_ICEBERG_JAR = "/usr/share/aws/iceberg/lib/iceberg-spark3-runtime.jar"
EMR_PYTHON = "/usr/bin/python3.11"


# What each Glue version runs (AWS Glue release notes): GLUE_VERSION must name a row whose Spark
# and Iceberg are the ones above, or the jobs would run code tested against other versions.
GLUE_RUNTIMES = {
    "5.0": {"spark": "3.5.4", "iceberg": "1.7.1", "python": "3.11"},
    "5.1": {"spark": "3.5.6", "iceberg": "1.10.0", "python": "3.11"},
}


def emr_release(label: str) -> tuple[int, int, int]:
    """`emr-7.12.0` -> (7, 12, 0)."""
    major, minor, patch = label.removeprefix("emr-").split(".")
    return int(major), int(minor), int(patch)
