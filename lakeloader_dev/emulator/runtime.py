"""What the emulator runs outside moto: Lambda invocations and Glue job runs, each in a subprocess.

* Lambda (Python runtimes): the function's deployed code zip is extracted once per code
  digest; ``lambda_bootstrap`` imports the handler and calls it with the event and a
  context object. Environment: the function's variables, the emulator's endpoint as
  AWS_ENDPOINT_URL, test credentials, the region. The venv's Python runs it (its boto3
  stands in for the Lambda runtime's).
* Glue (``glueetl``): the job's deployed script and ``--extra-py-files`` are fetched from
  the emulator's S3, the ``awsglue`` shim goes on PYTHONPATH, and the script runs as
  ``python script.py --JOB_NAME .. --JOB_RUN_ID .. <DefaultArguments + run Arguments>``
  with LAKELOADER_EMULATED=1, so ``lakeloader.spark`` builds a local Spark whose
  ``glue_catalog`` is Iceberg's GlueCatalog + S3FileIO against the emulator.
* EMR Serverless (``sparkSubmit``): the entry point, ``spark.submit.pyFiles``/``--py-files``
  and ``spark.archives``/``--archives`` (unpacked, as YARN/EMR unpack them) are fetched
  from the emulator's S3, and the entry point runs with its ``entryPointArguments`` the
  same way (:meth:`Runtime.run_spark_script` is shared by both).

The emulator keeps a journal (``Journal``) of invocations and runs: the demo prints it.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import io
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote_plus

from lakeloader import versions
from lakeloader.spark import JARS_ENV
from lakeloader_dev.jars import spark_conf

SHIM_DIR = Path(__file__).resolve().parent / "shim"
DEV_STUB = SHIM_DIR / "dev"  # a `lakeloader_dev` that raises ImportError, first on every run's PYTHONPATH
AWSGLUE_SHIM = SHIM_DIR / "glue"  # `awsglue.utils.getResolvedOptions`, for Glue runs only
BOOTSTRAP = Path(__file__).resolve().parent / "lambda_bootstrap.py"
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
)


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

    def emit(self, kind: str, record: Any) -> None:
        for listener in list(self.listeners):
            with contextlib.suppress(Exception):  # a printing listener must never break the emulator
                listener(kind, record)


class Runtime:
    """Runs Lambda handlers and Glue/EMR Spark scripts for one emulator (its endpoint and work folder)."""

    def __init__(self, endpoint: str, workdir: Path, region: str = "us-east-1", spark_slots: int = 1) -> None:
        self.endpoint = endpoint
        self.workdir = workdir
        self.region = region
        self.journal = Journal()
        self.python = sys.executable
        self._extract_lock = threading.Lock()
        self._install_lock = threading.Lock()
        # Spark runs (Glue and EMR together) at a time: each is a JVM on this machine
        self.spark_slots = threading.BoundedSemaphore(max(1, spark_slots))
        self.processes: set[subprocess.Popen] = set()
        self.async_threads: list[threading.Thread] = []

    # ------------------------------------------------------------------ env

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

    def _run(self, cmd: list[str], env: dict[str, str], cwd: Path, log_path: Path, timeout: float) -> int:
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

    # --------------------------------------------------------------- Lambda

    def _code_dir(self, fn: Any) -> Path:
        digest = (getattr(fn, "code_digest", "") or uuid.uuid4().hex)[:16]
        target = self.workdir / "lambda" / f"{fn.function_name}-{digest}"
        with self._extract_lock:
            if not target.exists():
                tmp = Path(tempfile.mkdtemp(prefix=".extract-", dir=self.workdir))
                with zipfile.ZipFile(io.BytesIO(fn.code_bytes)) as archive:
                    archive.extractall(tmp)
                target.parent.mkdir(parents=True, exist_ok=True)
                tmp.rename(target)
        return target

    def invoke_lambda(self, fn: Any, event: Any, trigger: str = "invoke") -> tuple[str, bool, str]:
        """Run the handler once; returns (payload JSON, errored, logs) like moto's Docker executor."""
        request_id = str(uuid.uuid4())
        record = Invocation(fn.function_name, request_id, trigger, time.time())
        if isinstance(event, str | bytes):
            event = json.loads(event or "{}")
        if isinstance(event, dict):
            for item in event.get("Records") or []:
                key = (
                    ((item.get("s3") or {}).get("object") or {}).get("key")
                    if isinstance(item, dict)
                    else None
                )
                if key:
                    record.keys.append(unquote_plus(key))
        runtime = fn.run_time or ""
        if not runtime.startswith("python"):
            message = f"the emulator runs Python Lambda functions only; {fn.function_name} is {runtime}"
            record.ok, record.error = False, message
            self._journal_invocation(record)
            return json.dumps({"errorType": "Runtime.Unsupported", "errorMessage": message}), True, message
        run_dir = self.workdir / "invocations" / request_id
        run_dir.mkdir(parents=True)
        event_path, result_path, log_path = (
            run_dir / "event.json",
            run_dir / "result.json",
            run_dir / "log.txt",
        )
        event_path.write_text(json.dumps(event))
        env = self.base_env()
        env.update({k: str(v) for k, v in (fn.environment_vars or {}).items()})
        env.update(
            {
                "AWS_LAMBDA_FUNCTION_NAME": fn.function_name,
                "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(fn.memory_size),
                "AWS_LAMBDA_FUNCTION_TIMEOUT": str(fn.timeout),
                "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
                "AWS_EXECUTION_ENV": f"AWS_Lambda_{runtime}",
                "LAKELOADER_EMULATOR_REQUEST_ID": request_id,
                "LAKELOADER_EMULATOR_FUNCTION_ARN": fn.function_arn,
            }
        )
        code_dir = self._code_dir(fn)
        # -I: neither PYTHONPATH nor the bootstrap's folder on sys.path; the code folder comes first.
        cmd = [
            self.python,
            "-I",
            str(BOOTSTRAP),
            str(code_dir),
            fn.handler,
            str(event_path),
            str(result_path),
        ]
        rc = self._run(cmd, env, run_dir, log_path, timeout=float(fn.timeout) + 30)
        logs = log_path.read_text(errors="replace") if log_path.exists() else ""
        record.seconds = time.time() - record.started
        if result_path.exists():
            outcome = json.loads(result_path.read_text())
        else:
            outcome = {"ok": False, "errorType": "Runtime.ExitError", "errorMessage": f"exit code {rc}"}
        if outcome.get("ok"):
            record.result = outcome.get("result")
            payload, errored = json.dumps(record.result), False
        else:
            record.ok = False
            record.error = f"{outcome.get('errorType')}: {outcome.get('errorMessage')}"
            payload = json.dumps({k: outcome.get(k) for k in ("errorType", "errorMessage", "stackTrace")})
            errored = True
        self._journal_invocation(record)
        return payload, errored, logs

    def _journal_invocation(self, record: Invocation) -> None:
        with self.journal.lock:
            self.journal.invocations.append(record)
        self.journal.emit("lambda", record)

    # ------------------------------------------------------- Spark scripts (Glue and EMR)

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
        fails as on AWS), then ``python_path``; LAKELOADER_EMULATED=1 makes ``lakeloader.spark``
        build a local session whose ``glue_catalog`` points at the emulator. With ``image`` (the
        top-level modules the platform's Python provides), the script runs with ``python -S``: no
        site-packages, only the standard library, those modules and ``python_path``, so a
        dependency the job does not ship fails to import as it would on the platform.
        """
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
                "LAKELOADER_DRIVER_MEMORY": os.environ.get("LAKELOADER_DRIVER_MEMORY", "1g"),
                # the jars Glue/EMR provide, built here: the deployed zip holds no jar assembly
                JARS_ENV: spark_conf().get("spark.jars", ""),
            }
        )
        python = [self.python, "-S"] if image else [self.python]
        rc = self._run([*python, str(script), *argv], full_env, run_dir, log_path, timeout=timeout)
        if rc == 0:
            return None
        return _error_from_log(log_path, rc)

    def _image_dir(self, modules: list[str]) -> Path:
        """A folder of links to the venv's copies of ``modules``: what a platform's Python provides."""
        target = self.workdir / "images" / "-".join(modules)
        with self._extract_lock:
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

    # ----------------------------------------------------------------- Glue

    def run_glue_job(self, job: Any, job_run: Any, s3_get) -> None:
        """Run one Glue job run to completion (called on its own thread); sets the run's state."""
        record = SparkRun("glue", job.name, job_run.job_run_id, dict(job_run.arguments or {}), time.time())
        self.track_run(
            record,
            lambda state, error: job_run.set_state(state, error),
            "RUNNING",
            ("SUCCEEDED", "FAILED"),
            lambda run_dir, log_path: self._glue_subprocess(job, job_run, s3_get, run_dir, log_path),
        )

    def _glue_subprocess(self, job: Any, job_run: Any, s3_get, run_dir: Path, log_path: Path) -> str | None:
        command = job.command or {}
        script_uri = command.get("ScriptLocation", "")
        if command.get("Name", "glueetl") not in ("glueetl", "pythonshell", "gluestreaming"):
            return f"unsupported Glue command {command.get('Name')!r}"
        script = run_dir / (Path(script_uri).name or "script.py")
        script.write_bytes(s3_get(script_uri))
        arguments = dict(job_run.arguments or {})
        python_path = [str(AWSGLUE_SHIM)]
        for uri in _uris(arguments.get("--extra-py-files", "")):
            python_path.append(str(_fetch(s3_get, uri, run_dir / "py-files")))
        modules = _uris(arguments.get("--additional-python-modules", ""))
        if modules:
            options = shlex.split(arguments.get("--python-modules-installer-option", ""))
            python_path.append(str(self._glue_modules(modules, options, s3_get, run_dir, log_path)))
        argv = ["--JOB_NAME", job.name, "--JOB_RUN_ID", job_run.job_run_id]
        for key, value in arguments.items():
            argv += [key if key.startswith("--") else f"--{key}", str(value)]
        timeout_minutes = float(getattr(job, "timeout", None) or 60)
        return self.run_spark_script(
            script,
            argv,
            python_path=python_path,
            env={"GLUE_JOB_NAME": job.name, "GLUE_JOB_RUN_ID": job_run.job_run_id},
            run_dir=run_dir,
            log_path=log_path,
            timeout=timeout_minutes * 60,
            image=glue_image_modules(),
        )

    def _glue_modules(
        self, modules: list[str], options: list[str], s3_get, run_dir: Path, log_path: Path
    ) -> Path:
        """``--additional-python-modules`` as Glue 5 installs them: pip with the job's installer
        options, from wheels on S3 (``.whl`` files, or one ``.gluewheels.zip`` holding
        ``wheels/requirements.txt``), into a folder on the script's path. Installed once per
        distinct set of wheels (a run reuses it); a requirement that is not an S3 wheel would need
        a package index at job start, which the emulator refuses, as a job without network access
        would fail."""
        not_s3 = [m for m in modules if not m.startswith("s3://")]
        if not_s3:
            raise RuntimeError(
                f"--additional-python-modules {', '.join(not_s3)}: not a wheel on S3; installing it "
                "needs a package index at job start"
            )
        blobs = {uri: s3_get(uri) for uri in modules}
        digest = hashlib.sha256(repr((sorted(blobs.items()), options)).encode()).hexdigest()[:16]
        target = self.workdir / "glue-modules" / digest
        with self._install_lock:
            if target.exists():
                return target
            source = Path(tempfile.mkdtemp(prefix=".wheels-", dir=self.workdir))
            requirements: list[str] = []
            for uri, blob in blobs.items():
                name = Path(uri).name
                if name.endswith(".gluewheels.zip"):
                    with zipfile.ZipFile(io.BytesIO(blob)) as archive:
                        archive.extractall(source)
                    requirements += ["--find-links", str(source / "wheels")]
                    requirements += ["-r", str(source / "wheels" / "requirements.txt")]
                else:
                    (source / name).write_bytes(blob)
                    requirements.append(str(source / name))
            staging = Path(tempfile.mkdtemp(prefix=".glue-modules-", dir=self.workdir))
            pip = [self.python, "-m", "pip", "install", "--quiet", "--no-compile", "--target", str(staging)]
            rc = self._run([*pip, *options, *requirements], self.base_env(), run_dir, log_path, timeout=600)
            if rc != 0:
                raise RuntimeError(f"pip install of --additional-python-modules failed (exit {rc})")
            target.parent.mkdir(parents=True, exist_ok=True)
            staging.rename(target)
        return target

    # ------------------------------------------------------- EMR Serverless

    def run_emr_job(self, application: Any, job_run: Any, s3_get) -> None:
        """Run one EMR Serverless job run to completion (on its own thread); sets the run's state."""
        driver = (job_run.job_driver or {}).get("sparkSubmit") or {}
        record = SparkRun(
            "emr",
            job_run.name or job_run.id,
            job_run.id,
            list(driver.get("entryPointArguments") or []),
            time.time(),
        )
        self.track_run(
            record,
            job_run.set_state,
            "RUNNING",
            ("SUCCESS", "FAILED"),
            lambda run_dir, log_path: self._emr_subprocess(application, job_run, s3_get, run_dir, log_path),
        )

    def _emr_subprocess(
        self, application: Any, job_run: Any, s3_get, run_dir: Path, log_path: Path
    ) -> str | None:
        driver = (job_run.job_driver or {}).get("sparkSubmit")
        if not driver:
            return f"unsupported job driver {sorted(job_run.job_driver or {})}: the emulator runs sparkSubmit"
        conf = emr_spark_conf(application, job_run)
        script = _fetch(s3_get, driver["entryPoint"], run_dir)
        py_files = _uris(conf.get("spark.submit.pyFiles", ""))
        python_path = [str(_fetch(s3_get, uri, run_dir / "py-files")) for uri in py_files]
        for uri in _uris(conf.get("spark.archives", "")):
            _unpack_archive(s3_get, uri, run_dir)
        env = {k.removeprefix(DRIVER_ENV): v for k, v in conf.items() if k.startswith(DRIVER_ENV)}
        python_path += _archive_python_path(env, run_dir)
        env["EMR_SERVERLESS_JOB_RUN_ID"] = job_run.id
        return self.run_spark_script(
            script,
            [str(a) for a in driver.get("entryPointArguments") or []],
            python_path=python_path,
            image=EMR_IMAGE_MODULES,
            env=env,
            run_dir=run_dir,
            log_path=log_path,
            timeout=float(job_run.execution_timeout_minutes or 720) * 60,
        )


def glue_image_modules() -> list[str]:
    """What Glue 5.1's Python provides a job: Spark's pyspark and py4j, and the packages
    requirements-job.txt marks ``# glue-provided`` (boto3, ...), the venv's copies of them."""
    from infra.packaging import job_pins

    modules = ["pyspark", "py4j"]
    for pin in job_pins():
        if pin.glue_provided:
            modules += _top_level_modules(pin.name)
    return modules


def _top_level_modules(distribution: str) -> list[str]:
    """The importable top-level names an installed distribution provides (``python-dateutil`` ->
    ``dateutil``)."""
    dist = importlib.metadata.distribution(distribution)
    listed = (dist.read_text("top_level.txt") or "").split()
    if listed:
        return listed
    names = {
        Path(str(f)).parts[0].removesuffix(".py")
        for f in dist.files or []
        if not str(f).startswith(("..", "/")) and ".dist-info" not in str(f) and str(f).endswith(".py")
    }
    return sorted(n for n in names if n.isidentifier())


DRIVER_ENV = "spark.emr-serverless.driverEnv."
# What EMR Serverless's python3.11 provides a job beyond the standard library: Spark's own pyspark
# and py4j. Everything else (pydantic, PyYAML, boto3) must come from the job's archive or py-files.
EMR_IMAGE_MODULES = ["pyspark", "py4j"]
SUBMIT_FLAGS = {
    "--py-files": "spark.submit.pyFiles",
    "--archives": "spark.archives",
    "--jars": "spark.jars",
    "--files": "spark.files",
}


def emr_spark_conf(application: Any, job_run: Any) -> dict[str, str]:
    """The run's Spark properties as EMR Serverless merges them: the application's ``spark-defaults``,
    then the run's ``configurationOverrides``, then ``sparkSubmitParameters`` (``--conf k=v``,
    ``--py-files``, ``--archives``, ``--jars``, ``--files``)."""
    conf: dict[str, str] = {}
    for configurations in (
        getattr(application, "runtime_configuration", None) or [],
        ((job_run.configuration_overrides or {}).get("applicationConfiguration") or []),
    ):
        for item in configurations:
            if item.get("classification", item.get("Classification")) == "spark-defaults":
                properties = item.get("properties", item.get("Properties")) or {}
                conf.update({key: str(value) for key, value in properties.items()})
    driver = (job_run.job_driver or {}).get("sparkSubmit") or {}
    tokens = shlex.split(driver.get("sparkSubmitParameters") or "")
    for flag, value in zip(tokens, tokens[1:], strict=False):
        if flag == "--conf" and "=" in value:
            key, _, setting = value.partition("=")
            conf[key] = setting
        elif flag in SUBMIT_FLAGS:
            conf[SUBMIT_FLAGS[flag]] = value
    return conf


def _archive_python_path(env: dict[str, str], run_dir: Path) -> list[str]:
    """Where the driver imports unpacked archives from, as the run's ``driverEnv`` says, and pops the
    settings the emulator replaces: ``PYTHONPATH`` entries (relative ones name folders of the driver's
    working directory, where archives are unpacked), and a ``PYSPARK_PYTHON``/``PYSPARK_DRIVER_PYTHON``
    inside an archive (a packed virtual environment: its site-packages). The image's Python
    (``/usr/bin/python3.11``) is the venv's here."""
    found: list[str] = []
    for entry in (env.pop("PYTHONPATH", "") or "").split(os.pathsep):
        if entry:
            found.append(str(run_dir / entry) if not os.path.isabs(entry) else entry)
    for name in ("PYSPARK_DRIVER_PYTHON", "PYSPARK_PYTHON"):
        interpreter = env.pop(name, "")
        if os.path.isabs(interpreter) and interpreter != versions.EMR_PYTHON:
            raise ValueError(
                f"{name}={interpreter}: the EMR Serverless image's documented Python 3.11 is "
                f"{versions.EMR_PYTHON}; this emulator runs only that one"
            )
        if interpreter and not os.path.isabs(interpreter):  # ./environment/bin/python
            root = (run_dir / interpreter).parent.parent
            found += [str(p) for p in sorted(root.glob("lib/python3*/site-packages")) if str(p) not in found]
    env.pop("JAVA_HOME", None)
    return found


def _uris(value: str) -> list[str]:
    return [uri.strip() for uri in value.split(",") if uri.strip()]


def _fetch(s3_get, uri: str, folder: Path) -> Path:
    """Download s3://bucket/key into ``folder`` (kept under its own name)."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / (Path(uri.split("#", 1)[0]).name or "file")
    target.write_bytes(s3_get(uri.split("#", 1)[0]))
    return target


def _unpack_archive(s3_get, uri: str, run_dir: Path) -> Path:
    """``spark.archives`` entry ``s3://.../deps.tar.gz#alias``: unpacked into the driver's working
    directory under ``alias`` (or the file's name), as Spark does."""
    location, _, alias = uri.partition("#")
    archive = _fetch(s3_get, location, run_dir / "archives")
    target = run_dir / (alias or archive.name)
    shutil.unpack_archive(str(archive), str(target))
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
