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
jobs (benchmarks, a big local load, the test suite's own session) do not use this.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

SUBMIT_OPTS_ENV = "SPARK_SUBMIT_OPTS"
SHORT_JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


def short_jvm_env(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The environment entries that start a short-lived Spark driver with ``SHORT_JVM_OPTIONS``."""
    given = environ.get(SUBMIT_OPTS_ENV, "").strip()
    return {SUBMIT_OPTS_ENV: " ".join([*SHORT_JVM_OPTIONS, *([given] if given else [])])}
