"""JVM options for short-lived local Spark drivers: the test suite's subprocesses and the emulator's
Glue and EMR runs, each a JVM that lives a minute or less on small data.

Such a JVM spends most of its CPU starting up, loading Spark's and Iceberg's classes and compiling
them with C2 on background threads. ``-XX:TieredStopAtLevel=1`` keeps the JIT at C1 (quick to
compile, slower code: a poor trade only for long jobs), ``-XX:+UseSerialGC`` collects a small heap
on one thread. Measured on 2 cores (a session, then CREATE, INSERT, MERGE and SELECT on an Iceberg
table), the process tree's CPU-seconds: 35-41 with the JVM's defaults, 17-22 with these.

spark-submit hands ``SPARK_SUBMIT_OPTS`` to the driver JVM it starts; options already in the
environment come after these, so a caller can override them
(``-XX:TieredStopAtLevel=4 -XX:-UseSerialGC``: the JVM's defaults). Long
jobs (benchmarks, a big local load, the test suite's own session) do not use this. For the test
session it was measured (2026-11-29, 2 cores, quiet, tests/spark one run after the other): 30 modules
took 580 s and 776 CPU-seconds with these options against 465 s and 618 with the JVM's defaults; only
the first module or two were cheaper, before C2's code pays for its compiling.

Class-data sharing: ``python -m lakeloader_dev.jvm`` dumps the classes a small Iceberg job loads
into an archive under ``.lakeloader/jvm/`` (once per JDK and PySpark; 140 MB, a job's time); while
it exists, every short-lived driver maps those classes instead of loading and verifying them from
the jars. Measured as above: 17-19 CPU-seconds with the options alone, 11.6-12.4 with the archive.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

SUBMIT_OPTS_ENV = "SPARK_SUBMIT_OPTS"
SHORT_JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
_QUIET = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")  # an archive that does not fit is skipped, silently


def short_jvm_env(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The environment entries that start a short-lived Spark driver with ``SHORT_JVM_OPTIONS``."""
    given = environ.get(SUBMIT_OPTS_ENV, "").strip()
    archive = class_archive()
    shared = [f"-XX:SharedArchiveFile={archive}", *_QUIET] if archive.is_file() else []
    return {SUBMIT_OPTS_ENV: " ".join([*SHORT_JVM_OPTIONS, *shared, *([given] if given else [])])}


def class_archive() -> Path:
    """This checkout's class-data archive of Spark's and Iceberg's classes (beside the jar cache),
    named after the JDK, PySpark and jars it was dumped from: another JDK, Spark or jar set finds none."""
    from lakeloader_dev.jars import cache_dir, runtime_jars

    java = Path(shutil.which("java", path=_java_path()) or "java").resolve()
    jars = ",".join(jar.coordinates for jar in runtime_jars())
    spark = importlib.metadata.version("pyspark")
    stamp = f"{java}|{java.stat().st_mtime_ns if java.exists() else 0}|{spark}|{jars}"
    return cache_dir().parent / "jvm" / f"spark-{hashlib.sha256(stamp.encode()).hexdigest()[:12]}.jsa"


def _java_path() -> str:
    home = os.environ.get("JAVA_HOME")
    return os.pathsep.join([*([str(Path(home) / "bin")] if home else []), os.environ.get("PATH", "")])


DUMP_JOB = """
import sys, tempfile
from lakeloader.spark.session import SparkSettings, build_session
from lakeloader_dev.jars import spark_conf
spark = build_session(SparkSettings(warehouse=tempfile.mkdtemp(), app_name="class-archive",
                                    extra_conf=spark_conf()))
spark.sql("CREATE TABLE t (id BIGINT, v STRING) USING iceberg TBLPROPERTIES ('format-version'='2')")
spark.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
spark.createDataFrame([(1, "x"), (3, "y")], "id long, v string").createOrReplaceTempView("changes")
spark.sql("MERGE INTO t USING changes c ON t.id = c.id WHEN MATCHED THEN UPDATE SET * "
          "WHEN NOT MATCHED THEN INSERT *")
spark.sql("DELETE FROM t WHERE id = 2")
assert spark.table("t").count() == 2
spark.stop()
"""


def build_class_archive() -> Path:
    """Dump the classes a small Iceberg job loads into ``class_archive()`` (once; about a job's time)."""
    target = class_archive()
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "LAKELOADER_SPARK_MASTER": "local[1]"}
    env[SUBMIT_OPTS_ENV] = " ".join([*SHORT_JVM_OPTIONS, f"-XX:ArchiveClassesAtExit={partial}", *_QUIET])
    done = subprocess.run([sys.executable, "-c", DUMP_JOB], env=env, capture_output=True, text=True)
    if done.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        raise RuntimeError(
            f"dumping the class archive failed (exit {done.returncode}):\n{done.stderr[-3000:]}"
        )
    partial.rename(target)
    return target


if __name__ == "__main__":
    print(build_class_archive())
