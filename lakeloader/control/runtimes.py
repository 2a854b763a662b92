"""The runtime matrix: the one place that names the versions the cloud and the laptop run.

A stage picks a runtime by name (cdk.json's `"runtime": "glue-6.0"`); its Glue jobs, its EMR
Serverless application, the job bundle's wheels and the laptop's Spark and jars all follow that row.
`tests/unit/test_versions.py` fails when anything pinned to a row drifts from it (table: README
"Runtimes"). Stdlib only: the Lambda bundle, `cdk synth` and the jobs all import it.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import os
import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Runtime:
    """One row: what AWS runs for a Glue version, and the EMR Serverless release that matches it."""

    name: str
    glue_version: str
    spark: str
    scala: str
    iceberg: str
    python: str
    # The EMR Serverless release whose Spark and Iceberg are the ones above (AWS release pages).
    emr_release_label: str
    # The Hadoop client that the runtime's PySpark bundles: hadoop-aws must be the same version.
    hadoop: str
    # Whether AWS captures the jobs' lineage by default ("Lineage for AWS Glue ETL jobs": Glue 6.1+
    # registers the OpenLineage listener with the amazon_glue_api transport): infra.lineage.
    aws_lineage: bool
    # Does this Glue version offer Graviton (arm64) workers, the `G.*X.GRAVITON`/`R.*X.GRAVITON` types?
    graviton: bool = False
    # The Python this project's machines run the row's local suites on, where the row's own cannot be had
    # (Glue 6.1's 3.14 is not installable here: docs/deploy.md, "Runtimes"); None: the row's Python.
    local_python: str | None = None

    @property
    def spark_line(self) -> str:
        """`3.5.6` -> `3.5`, the Spark line Iceberg's runtime jar is built for."""
        return ".".join(self.spark.split(".")[:2])

    @property
    def iceberg_line(self) -> str:
        return ".".join(self.iceberg.split(".")[:2])

    @property
    def wheel_python_tag(self) -> str:
        """`3.13` -> `cp313`: the job bundle's wheels are built for this CPython."""
        return "cp" + self.python.replace(".", "")

    @property
    def laptop_python(self) -> str:
        """The Python of the row's local virtualenv (the Makefile's RUNTIME_PYTHON_<name>)."""
        return self.local_python or self.python

    @property
    def emr_python(self) -> str:
        """The image's interpreter of this Python, which the EMR venv's `bin/python` links to
        (infra.packed_venv.emr_venv_archive; the runs name `./environment/bin/python`)."""
        return f"/usr/bin/python{self.python}"

    @property
    def merge_reports_counts(self) -> bool:
        """Spark 4.1+ with Iceberg 1.11+ records a MERGE's row counts in its snapshot summary."""
        return _version(self.spark) >= (4, 1) and _version(self.iceberg) >= (1, 11)


RUNTIMES = {
    runtime.name: runtime
    for runtime in (
        # AWS Glue 5.1 release notes; EMR 7.12.0 bundles Spark 3.5.6 and Iceberg 1.10.0.
        Runtime(
            name="glue-5.1",
            glue_version="5.1",
            spark="3.5.6",
            scala="2.12",
            iceberg="1.10.0",
            python="3.11",
            emr_release_label="emr-7.12.0",
            hadoop="3.3.4",
            aws_lineage=False,
        ),
        # "Migrating AWS Glue for Spark jobs to AWS Glue version 6.0"; emr-spark-8.1.0 bundles
        # Spark 4.1.1-amzn-0, Iceberg 1.11.0-amzn-0 and Python 3.11 and 3.13.
        Runtime(
            name="glue-6.0",
            glue_version="6.0",
            spark="4.1.1",
            scala="2.13",
            iceberg="1.11.0",
            python="3.13",
            emr_release_label="emr-spark-8.1.0",
            hadoop="3.4.2",
            aws_lineage=False,
        ),
        # "Migrating AWS Glue for Spark jobs to AWS Glue version 6.1": Spark 4.1.3, Python 3.14, Scala
        # 2.13.17, Hadoop unchanged, Graviton workers (the default when a job sets no WorkerType).
        # emr-spark-8.2.0 bundles Spark 4.1.3-amzn-0 and Iceberg 1.11.0-amzn-0: the Iceberg of this row
        # (docs/deploy.md, "Runtimes", says where each figure comes from).
        Runtime(
            name="glue-6.1",
            glue_version="6.1",
            spark="4.1.3",
            scala="2.13",
            iceberg="1.11.0",
            python="3.14",
            emr_release_label="emr-spark-8.2.0",
            hadoop="3.4.2",
            aws_lineage=True,
            graviton=True,
            local_python="3.13",
        ),
    )
}

# The default for a stage that names no runtime, and for the laptop without RUNTIME: the one the
# whole suite runs on (README "Runtimes" says why it is not yet glue-6.0).
DEFAULT_RUNTIME = "glue-5.1"
# Environment variable naming the laptop's runtime where the installed PySpark does not say it.
RUNTIME_ENV = "LAKELOADER_RUNTIME"

# What the job bundle's wheels are built for, per worker architecture: Graviton workers are arm64.
X86_64, AARCH64 = "x86_64", "aarch64"
WHEEL_PLATFORMS = {X86_64: "manylinux2014_x86_64", AARCH64: "manylinux2014_aarch64"}
GRAVITON_SUFFIX = ".GRAVITON"


def worker_architecture(worker_type: str) -> str:
    """`G.1X.GRAVITON` -> aarch64, `G.1X` -> x86_64: the CPU a Glue worker type runs on."""
    return AARCH64 if worker_type.endswith(GRAVITON_SUFFIX) else X86_64


# EMR Serverless: where its images keep the bundled Iceberg runtime jar (same path on 7.x and 8.x).
EMR_ICEBERG_JAR = "/usr/share/aws/iceberg/lib/iceberg-spark3-runtime.jar"


class UnknownRuntimeError(ValueError):
    """A runtime name that is not a row of the matrix."""


def runtime(name: str) -> Runtime:
    """The row called `name`, or an error listing the rows there are."""
    try:
        return RUNTIMES[name]
    except KeyError:
        raise UnknownRuntimeError(
            f"runtime {name!r} is not one lakeloader runs on; choose one of {', '.join(RUNTIMES)}"
        ) from None


def local() -> Runtime:
    """The runtime this process runs as: $LAKELOADER_RUNTIME, else the row of the installed PySpark
    (each runtime's virtualenv has its own), else the default."""
    if os.environ.get(RUNTIME_ENV):
        return runtime(os.environ[RUNTIME_ENV])
    return _installed_spark_runtime() or RUNTIMES[DEFAULT_RUNTIME]


@functools.cache
def _installed_spark_runtime() -> Runtime | None:
    try:
        spark = importlib.metadata.version("pyspark")
    except importlib.metadata.PackageNotFoundError:
        spark = _pyspark_version_file()  # e.g. under `python -S`, which hides site-packages' metadata
    return next((row for row in RUNTIMES.values() if row.spark == spark), None)


def _pyspark_version_file() -> str | None:
    """`pyspark/version.py`'s version, read without importing PySpark (a JVM-less import is slow)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.origin:
        return None
    text = (Path(spec.origin).parent / "version.py").read_text()
    found = re.search(r"__version__(?::\s*str)?\s*=\s*['\"]([^'\"]+)['\"]", text)
    return found[1] if found else None


def emr_release(label: str) -> tuple[int, int, int]:
    """`emr-7.12.0` -> (7, 12, 0); `emr-spark-8.1.0` -> (8, 1, 0)."""
    found = re.fullmatch(r"emr-(?:spark-)?(\d+)\.(\d+)\.(\d+)", label)
    if not found:
        raise ValueError(f"{label!r} is not an EMR release label (emr-7.12.0, emr-spark-8.1.0)")
    major, minor, patch = (int(part) for part in found.groups())
    return major, minor, patch


# The first EMR release that captures Spark lineage by default ("Lineage for Amazon EMR").
EMR_LINEAGE_RELEASE = (8, 2, 0)


def emr_captures_lineage(label: str) -> bool:
    """Whether EMR release `label` registers AWS's OpenLineage listener by default (emr-spark-8.2.0+)."""
    return emr_release(label) >= EMR_LINEAGE_RELEASE


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".")[:2])
