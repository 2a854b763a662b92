"""Warm Spark drivers for the emulator's Glue and EMR runs: a JVM kept between runs.

A job run here is a Python process whose PySpark starts a JVM, and on small data most of a run is
that JVM starting, loading Spark's and Iceberg's classes and compiling them. A ``Driver`` is the JVM
PySpark would start (``spark-submit pyspark-shell``, the same jars, driver memory and JVM options),
started by the emulator and kept: a run's Python connects to it through PySpark's own
``PYSPARK_GATEWAY_PORT``/``PYSPARK_GATEWAY_SECRET`` and builds its SparkContext, with the run's whole
Spark configuration, in it. When the run's process has exited, the emulator stops whatever
SparkContext it left, and the JVM waits for the next run. One run at a time per JVM: the runtime's
Spark slots bound how many there are.

What a run can still see of the runs before it (the differences from Glue, which starts a JVM per
run): Hadoop's FileSystem cache and the JVM's log level, and classes already loaded and compiled. A
run that does not exit 0, or outlives its timeout, takes its JVM with it: the next run starts a new
one. ``LAKELOADER_EMULATOR_WARM_JVM=0`` starts a JVM per run, as Glue does.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import struct
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, NamedTuple

from lakeloader_dev.jvm import SUBMIT_OPTS_ENV

WARM_ENV = "LAKELOADER_EMULATOR_WARM_JVM"
GATEWAY_PORT_ENV = "PYSPARK_GATEWAY_PORT"
GATEWAY_SECRET_ENV = "PYSPARK_GATEWAY_SECRET"
RUNS_PER_JVM = 25  # then a fresh JVM: bounds whatever a run leaves behind in it
START_TIMEOUT_SECONDS = 120


def enabled() -> bool:
    return os.environ.get(WARM_ENV, "1") != "0"


class Launch(NamedTuple):
    """What fixes a driver JVM when it starts, as PySpark passes it to spark-submit: runs that ask for
    the same may share one."""

    memory: str
    jars: str  # comma-separated, as spark.jars
    options: str  # the JVM's options (SPARK_SUBMIT_OPTS)


class Driver:
    """One Spark driver JVM waiting for runs: PySpark's gateway, started as PySpark starts it."""

    def __init__(self, launch: Launch, env: dict[str, str], workdir: Path) -> None:
        from pyspark.find_spark_home import _find_spark_home

        self.launch = launch
        self.runs = 0
        self._log: IO[bytes] | None = None
        self._gateway = None
        self._log_lock = threading.Lock()
        command = [str(Path(_find_spark_home()) / "bin" / "spark-submit"), "--driver-memory", launch.memory]
        command += [*(["--jars", launch.jars] if launch.jars else []), "pyspark-shell"]
        self.cwd = Path(tempfile.mkdtemp(prefix="driver-", dir=workdir))  # the JVM's relative paths
        conn_info = self.cwd / "gateway"
        self.process = subprocess.Popen(
            command,
            env={**env, SUBMIT_OPTS_ENV: launch.options, "_PYSPARK_DRIVER_CONN_INFO_PATH": str(conn_info)},
            cwd=str(self.cwd),
            stdin=subprocess.PIPE,  # PySpark's gateway exits when its stdin closes: kept open until stop()
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        threading.Thread(target=self._pump, name=f"driver-{self.process.pid}", daemon=True).start()
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while not conn_info.exists():  # written elsewhere and renamed: whole once it is there
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the Spark driver JVM did not start ({' '.join(command)})")
            time.sleep(0.05)
        blob = conn_info.read_bytes()  # PySpark's layout: the port, then the secret's length and bytes
        self.port, length = struct.unpack("!ii", blob[:8])
        self.secret = blob[8 : 8 + length].decode()

    def env(self) -> dict[str, str]:
        """What a run's environment needs to build its SparkContext in this JVM."""
        return {GATEWAY_PORT_ENV: str(self.port), GATEWAY_SECRET_ENV: self.secret}

    def log_to(self, log: IO[bytes] | None) -> None:
        """Send the JVM's output (Spark's log) to a run's log, or nowhere between runs."""
        with self._log_lock:
            self._log = log

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._log_lock, contextlib.suppress(ValueError, OSError):  # the pipe is always drained
                if self._log is not None:
                    self._log.write(line)
                    self._log.flush()

    def reset(self) -> bool:
        """Stop the SparkContext a finished run left in this JVM; False when the JVM cannot take another."""
        if self.process.poll() is not None:
            return False
        try:
            jvm = self._connect().jvm
            contexts = getattr(getattr(jvm.org.apache.spark, "SparkContext$"), "MODULE$")  # private[spark]
            active = contexts.getActive()
            if active.isDefined():
                active.get().stop()
            jvm.org.apache.spark.sql.SparkSession.clearDefaultSession()
            jvm.org.apache.spark.sql.SparkSession.clearActiveSession()
            return not contexts.getActive().isDefined()
        except Exception:  # noqa: BLE001 - a JVM that cannot answer is replaced, never reused
            return False

    def _connect(self):
        if self._gateway is None:
            from py4j.clientserver import ClientServer, JavaParameters, PythonParameters

            self._gateway = ClientServer(
                java_parameters=JavaParameters(port=self.port, auth_token=self.secret, auto_convert=True),
                python_parameters=PythonParameters(port=0, eager_load=False),
            )
        return self._gateway

    def stop(self) -> None:
        if self._gateway is not None:
            with contextlib.suppress(Exception):  # the JVM is being killed either way
                self._gateway.close()
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.cwd, ignore_errors=True)


class Drivers:
    """The idle driver JVMs of one emulator, by ``Launch``."""

    def __init__(self, workdir: Path, slots: int) -> None:
        self.workdir = workdir
        self.slots = slots
        self._idle: list[Driver] = []
        self._lock = threading.Lock()

    def take(self, launch: Launch, env: dict[str, str]) -> Driver:
        """An idle driver started with ``launch``, or a new one (a cold start, as a run without them)."""
        with self._lock:
            for driver in self._idle:
                if driver.launch == launch:
                    self._idle.remove(driver)
                    return driver
        return Driver(launch, env, self.workdir)

    def give_back(self, driver: Driver, reusable: bool) -> None:
        """After a run: keep the driver for the next run if it can take one, else stop it."""
        driver.log_to(None)
        driver.runs += 1
        if reusable and driver.runs < RUNS_PER_JVM and driver.reset():
            with self._lock:
                if len(self._idle) < self.slots:
                    self._idle.append(driver)
                    return
        driver.stop()

    def stop(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for driver in idle:
            driver.stop()
