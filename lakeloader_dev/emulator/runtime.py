"""What the emulator runs outside moto, each in a subprocess: the process and Spark-script machinery.

* ``lambda_runner``: Lambda invocations (the function's deployed code zip).
* ``glue_runner``: Glue job runs (the job's deployed script, with the ``awsglue`` shim).
* ``emr_runner``: EMR Serverless job runs (the entry point with the application's spark-defaults).

Glue and EMR scripts run through :meth:`EmulatorProcesses.run_spark_script` with LAKELOADER_EMULATED=1, so
``lakeloader.spark.session`` builds a local Spark whose catalog (contract.GLUE_CATALOG) is Iceberg's
GlueCatalog + S3FileIO against the emulator. The emulator keeps a journal (``Journal``) of
invocations and runs: the demo prints it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lakeloader.control import runtimes
from lakeloader.jobs import lineage
from lakeloader.spark.session import JARS_ENV
from lakeloader_dev.emulator import drivers
from lakeloader_dev.jars import spark_conf
from lakeloader_dev.jvm import SUBMIT_OPTS_ENV, short_jvm_env

SHIM_DIR = Path(__file__).resolve().parent / "shim"
DEV_STUB = SHIM_DIR / "dev"  # a `lakeloader_dev` that raises ImportError, first on every run's PYTHONPATH
TEST_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
}
_PASS_THROUGH = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "TMPDIR",
    "JAVA_HOME",
    "SPARK_LOCAL_IP",
    "LAKELOADER_CACHE",
    lineage.FILE_ENV,  # the demo's and a user's lineage file (lakeloader.jobs.lineage)
)


class WrongRuntimeError(RuntimeError):
    """A job of a runtime (Glue version, EMR release) other than the one this emulator's Spark is."""


def venv_of(row: runtimes.Runtime) -> str:
    """The checkout's virtualenv of a runtime, as the Makefile names it (RUNTIME=...)."""
    return ".venv" if row.name == runtimes.DEFAULT_RUNTIME else f".venv-{row.name}"


def wrong_runtime(what: str, row: runtimes.Runtime | None, local: runtimes.Runtime) -> WrongRuntimeError:
    """One line: what the job asks for, what this emulator runs, and which virtualenv runs the job."""
    here = f"this emulator runs {local.name} (Spark {local.spark}, Python {local.python}, {venv_of(local)})"
    if row is None:
        known = ", ".join(r.name for r in runtimes.RUNTIMES.values())
        return WrongRuntimeError(
            f"{what}: not a runtime lakeloader runs on ({known}); {here}: deploy with -c runtime={local.name}"
        )
    return WrongRuntimeError(
        f"{what} is runtime {row.name} (Spark {row.spark}), but {here} and would run it on the wrong "
        f"Spark: run it from {venv_of(row)} (make setup RUNTIME={row.name}, then make test or make demo "
        f"RUNTIME={row.name}), or deploy the stage with -c runtime={local.name}"
    )


def glue_runtime(glue_version: str | None) -> runtimes.Runtime:
    """The runtime of a Glue job's ``GlueVersion``, if it is the one this emulator runs (``runtimes.local()``:
    its virtualenv's PySpark and jars); else WrongRuntimeError."""
    local = runtimes.local()
    row = next((r for r in runtimes.RUNTIMES.values() if r.glue_version == glue_version), None)
    if row != local:
        raise wrong_runtime(f"GlueVersion {glue_version}", row, local)
    return local


def emr_runtime(release_label: str) -> runtimes.Runtime:
    """The runtime of an EMR Serverless application's release (its own or a later one of the same Spark
    and Iceberg line, as synth allows), if it is the one this emulator runs; else WrongRuntimeError."""
    from infra.settings_emr import emr_release_problem

    local = runtimes.local()
    try:
        rows = [r for r in runtimes.RUNTIMES.values() if emr_release_problem(release_label, r) is None]
    except ValueError as exc:  # not an EMR release label at all
        raise WrongRuntimeError(f"release {release_label}: {exc}") from None
    if local not in rows:
        raise wrong_runtime(f"EMR release {release_label}", rows[0] if rows else None, local)
    return local


@dataclass
class Invocation:
    function: str
    request_id: str
    trigger: str
    started: float
    seconds: float = 0.0
    ok: bool = True
    result: Any = None
    error: str | None = None
    keys: list[str] = field(default_factory=list)  # S3 keys named by the event, if any


@dataclass
class SparkRun:
    """One Glue or EMR Serverless job run the emulator executed."""

    engine: str  # "glue" | "emr"
    job: str  # the Glue job's name, or the EMR run's name
    run_id: str
    arguments: dict[str, str] | list[str]  # Glue Arguments, or EMR entryPointArguments
    started: float
    state: str = "STARTING"
    seconds: float = 0.0
    error: str | None = None
    log_path: str = ""


@dataclass
class Journal:
    """Everything the emulator ran, in order (thread-safe appends)."""

    invocations: list[Invocation] = field(default_factory=list)
    runs: list[SparkRun] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    listeners: list[Any] = field(default_factory=list)

    @property
    def glue_runs(self) -> list[SparkRun]:
        return [run for run in self.runs if run.engine == "glue"]

    @property
    def emr_runs(self) -> list[SparkRun]:
        return [run for run in self.runs if run.engine == "emr"]

    def add_invocation(self, record: Invocation) -> None:
        with self.lock:
            self.invocations.append(record)
        self.emit("lambda", record)

    def emit(self, kind: str, record: Any) -> None:
        for listener in list(self.listeners):
            with contextlib.suppress(Exception):  # a printing listener must never break the emulator
                listener(kind, record)


class EmulatorProcesses:
    """The subprocesses of one emulator (its endpoint and work folder): what the runners start."""

    def __init__(self, endpoint: str, workdir: Path, region: str = "us-east-1", spark_slots: int = 1) -> None:
        self.endpoint = endpoint
        self.workdir = workdir
        self.region = region
        self.journal = Journal()
        self.python = sys.executable
        self.extract_lock = threading.Lock()  # unpacking code and images into the work folder
        self.install_lock = threading.Lock()  # pip installs of Glue's --additional-python-modules
        # Spark runs (Glue and EMR together) at a time: each is a JVM on this machine
        self.spark_slots = threading.BoundedSemaphore(max(1, spark_slots))
        self.processes: set[subprocess.Popen] = set()
        self.drivers = drivers.Drivers(workdir, max(1, spark_slots))  # JVMs kept between Spark runs
        self.async_threads: list[threading.Thread] = []

    def base_env(self) -> dict[str, str]:
        env = {k: os.environ[k] for k in _PASS_THROUGH if k in os.environ}
        env.update(TEST_CREDENTIALS)
        env.update(
            {
                "AWS_REGION": self.region,
                "AWS_DEFAULT_REGION": self.region,
                "AWS_ENDPOINT_URL": self.endpoint,
                "PYTHONUNBUFFERED": "1",
                "PYTHONDONTWRITEBYTECODE": "1",
            }
        )
        return env

    def run_process(
        self, cmd: list[str], env: dict[str, str], cwd: Path, log_path: Path, timeout: float
    ) -> int:
        """Run `cmd` with its output appended to `log_path`; its exit code (-9: killed at `timeout`)."""
        with open(log_path, "ab") as log:
            process = subprocess.Popen(cmd, env=env, cwd=str(cwd), stdout=log, stderr=subprocess.STDOUT)
            self.processes.add(process)
            try:
                return process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                return -9
            finally:
                self.processes.discard(process)

    def stop(self) -> None:
        for process in list(self.processes):
            if process.poll() is None:
                process.terminate()
        self.drivers.stop()

    def track_run(
        self, record: SparkRun, set_state: Any, running: str, done: tuple[str, str], body: Any
    ) -> None:
        """Journal ``record``, wait for a Spark slot, run ``body(run_dir, log_path)`` -> error or None,
        and move the run's API state: ``running``, then ``done[0]`` (ok) or ``done[1]`` with the error."""
        with self.journal.lock:
            self.journal.runs.append(record)
        run_dir = self.workdir / record.engine / record.run_id
        run_dir.mkdir(parents=True, exist_ok=True)
        log_path = run_dir / "driver.log"
        record.log_path = str(log_path)
        with self.spark_slots:
            set_state(running, None)
            record.state = running
            self.journal.emit(record.engine, record)
            try:
                error = body(run_dir, log_path)
            except Exception as exc:  # noqa: BLE001 - any emulator failure fails the run, visibly
                error = f"emulator could not run the job: {type(exc).__name__}: {exc}"
        record.seconds = time.time() - record.started
        record.error = error
        record.state = done[1] if error else done[0]
        set_state(record.state, error)
        self.journal.emit(record.engine, record)

    def run_spark_script(
        self,
        script: Path,
        argv: list[str],
        *,
        python_path: list[str],
        env: dict[str, str],
        run_dir: Path,
        log_path: Path,
        timeout: float,
        image: list[str] | None = None,
    ) -> str | None:
        """Run a PySpark script as Glue/EMR would, on local Spark; returns its error line or None.

        The ``lakeloader_dev`` stub comes first on PYTHONPATH (a shipped import of the dev package
        fails as on AWS), then ``python_path``; LAKELOADER_EMULATED=1 makes ``lakeloader.spark.session``
        build a local session whose Glue catalog points at the emulator. With ``image`` (the
        top-level modules the platform's Python provides), the script runs with ``python -S``: no
        site-packages, only the standard library, those modules and ``python_path``, so a
        dependency the job does not ship fails to import as it would on the platform.
        """
        launch = driver_launch()
        full_env = self.base_env()
        full_env.update(env)
        full_env.update(
            {
                "PYTHONPATH": os.pathsep.join(
                    [str(DEV_STUB), *python_path, *([str(self._image_dir(image))] if image else [])]
                ),
                "LAKELOADER_EMULATED": "1",
                "SPARK_LOCAL_IP": "127.0.0.1",
                "PYSPARK_PYTHON": self.python,
                "LAKELOADER_DRIVER_MEMORY": launch.memory,
                JARS_ENV: launch.jars,
                SUBMIT_OPTS_ENV: launch.options,
            }
        )
        python = [self.python, "-S"] if image else [self.python]
        cmd = [*python, str(script), *argv]
        if drivers.enabled():
            rc = self._run_in_warm_driver(cmd, full_env, launch, run_dir, log_path, timeout)
        else:
            rc = self.run_process(cmd, full_env, run_dir, log_path, timeout=timeout)
        if rc == 0:
            return None
        return _error_from_log(log_path, rc)

    def take_driver(self, launch: drivers.Launch | None = None) -> drivers.Driver:
        """A Spark driver JVM kept between runs (``drivers``), started as a run's PySpark would start it
        (``driver_launch()`` unless given); hand it back with ``self.drivers.give_back``."""
        env = {**self.base_env(), "SPARK_LOCAL_IP": "127.0.0.1"}
        return self.drivers.take(launch or driver_launch(), env)

    def _run_in_warm_driver(
        self,
        cmd: list[str],
        env: dict[str, str],
        launch: drivers.Launch,
        run_dir: Path,
        log_path: Path,
        timeout: float,
    ) -> int:
        """``run_process`` with the script's SparkContext built in a driver JVM from ``take_driver``,
        started as ``launch`` says (the run's own settings); the JVM's Spark log goes to the run's."""
        driver = self.take_driver(launch)
        with open(log_path, "ab") as log:
            driver.log_to(log)
            rc = -1
            try:
                rc = self.run_process(cmd, {**env, **driver.env()}, run_dir, log_path, timeout=timeout)
            finally:  # before the log closes: the JVM's output stops going to it
                self.drivers.give_back(driver, reusable=rc == 0)
        return rc

    def _image_dir(self, modules: list[str]) -> Path:
        """A folder of links to the venv's copies of ``modules``: what a platform's Python provides."""
        target = self.workdir / "images" / "-".join(modules)
        with self.extract_lock:
            if not target.exists():
                tmp = Path(tempfile.mkdtemp(prefix=".image-", dir=self.workdir))
                for module in modules:
                    spec = importlib.util.find_spec(module)
                    assert spec is not None and spec.origin, module
                    origin = Path(spec.origin)
                    source = origin.parent if origin.name == "__init__.py" else origin
                    (tmp / source.name).symlink_to(source)
                target.parent.mkdir(parents=True, exist_ok=True)
                tmp.rename(target)
        return target


def driver_memory() -> str:
    """A Glue or EMR run's driver memory here (LAKELOADER_DRIVER_MEMORY, else 1g)."""
    return os.environ.get("LAKELOADER_DRIVER_MEMORY", "1g")


def driver_launch() -> drivers.Launch:
    """How a Glue or EMR run's driver JVM starts here, whether its own or a kept one: its memory, the
    jars Glue/EMR provide (built here: the deployed zip holds no jar assembly) and short-lived JVM
    options (a job run here is a minute on small data: start its JVM cheaply)."""
    return drivers.Launch(
        driver_memory(), spark_conf().get("spark.jars", ""), short_jvm_env()[SUBMIT_OPTS_ENV]
    )


def uris(value: str) -> list[str]:
    """A comma-separated list of S3 URIs (``--extra-py-files``, ``spark.archives``, ...)."""
    return [uri.strip() for uri in value.split(",") if uri.strip()]


def fetch(s3_get, uri: str, folder: Path) -> Path:
    """Download s3://bucket/key into ``folder`` (kept under its own name)."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / (Path(uri.split("#", 1)[0]).name or "file")
    target.write_bytes(s3_get(uri.split("#", 1)[0]))
    return target


def _error_from_log(log_path: Path, rc: int) -> str:
    """Glue's ErrorMessage: the script's last error line (a traceback's last line, or a lakeloader: line)."""
    lines = [line.strip() for line in log_path.read_text(errors="replace").splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith("lakeloader:"):
            return line[:2000]
    for line in reversed(lines):
        if ":" in line and "Error" in line.split(":", 1)[0]:
            return line[:2000]
    tail = lines[-1] if lines else "no output"
    return f"script exited with code {rc}: {tail}"[:2000]
