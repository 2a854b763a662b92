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

The emulator keeps a journal (``Journal``) of invocations and runs: the demo prints it.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
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

from lakeloader.spark import JARS_ENV
from lakeloader_dev.jars import spark_conf

SHIM_DIR = Path(__file__).resolve().parent / "shim"
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
class GlueRun:
    job: str
    run_id: str
    arguments: dict[str, str]
    started: float
    state: str = "STARTING"
    seconds: float = 0.0
    error: str | None = None
    log_path: str = ""


@dataclass
class Journal:
    """Everything the emulator ran, in order (thread-safe appends)."""

    invocations: list[Invocation] = field(default_factory=list)
    glue_runs: list[GlueRun] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    listeners: list[Any] = field(default_factory=list)

    def emit(self, kind: str, record: Any) -> None:
        for listener in list(self.listeners):
            with contextlib.suppress(Exception):  # a printing listener must never break the emulator
                listener(kind, record)


class Runtime:
    """Runs Lambda handlers and Glue scripts for one emulator (its endpoint and work folder)."""

    def __init__(self, endpoint: str, workdir: Path, region: str = "us-east-1", glue_slots: int = 1) -> None:
        self.endpoint = endpoint
        self.workdir = workdir
        self.region = region
        self.journal = Journal()
        self.python = sys.executable
        self._extract_lock = threading.Lock()
        self.glue_slots = threading.BoundedSemaphore(max(1, glue_slots))
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

    # ----------------------------------------------------------------- Glue

    def run_glue_job(self, job: Any, job_run: Any, s3_get) -> None:
        """Run one Glue job run to completion (called on its own thread); sets the run's state."""
        record = GlueRun(job.name, job_run.job_run_id, dict(job_run.arguments or {}), time.time())
        with self.journal.lock:
            self.journal.glue_runs.append(record)
        run_dir = self.workdir / "glue" / job_run.job_run_id
        run_dir.mkdir(parents=True, exist_ok=True)
        log_path = run_dir / "driver.log"
        record.log_path = str(log_path)
        with self.glue_slots:
            job_run.set_state("RUNNING")
            record.state = "RUNNING"
            self.journal.emit("glue", record)
            try:
                error = self._glue_subprocess(job, job_run, s3_get, run_dir, log_path)
            except Exception as exc:  # noqa: BLE001 - any emulator failure fails the run, visibly
                error = f"emulator could not run the job: {type(exc).__name__}: {exc}"
        record.seconds = time.time() - record.started
        record.error = error
        record.state = "FAILED" if error else "SUCCEEDED"
        job_run.set_state(record.state, error)
        self.journal.emit("glue", record)

    def _glue_subprocess(self, job: Any, job_run: Any, s3_get, run_dir: Path, log_path: Path) -> str | None:
        command = job.command or {}
        script_uri = command.get("ScriptLocation", "")
        if command.get("Name", "glueetl") not in ("glueetl", "pythonshell", "gluestreaming"):
            return f"unsupported Glue command {command.get('Name')!r}"
        script = run_dir / (Path(script_uri).name or "script.py")
        script.write_bytes(s3_get(script_uri))
        arguments = dict(job_run.arguments or {})
        python_path = [str(SHIM_DIR)]
        for uri in filter(None, (u.strip() for u in arguments.get("--extra-py-files", "").split(","))):
            target = run_dir / "py-files" / Path(uri).name
            target.parent.mkdir(exist_ok=True)
            target.write_bytes(s3_get(uri))
            python_path.append(str(target))
        argv = ["--JOB_NAME", job.name, "--JOB_RUN_ID", job_run.job_run_id]
        for key, value in arguments.items():
            argv += [key if key.startswith("--") else f"--{key}", str(value)]
        env = self.base_env()
        env.update(
            {
                "PYTHONPATH": os.pathsep.join(python_path),
                "LAKELOADER_EMULATED": "1",
                "SPARK_LOCAL_IP": "127.0.0.1",
                "PYSPARK_PYTHON": self.python,
                "LAKELOADER_DRIVER_MEMORY": os.environ.get("LAKELOADER_DRIVER_MEMORY", "1g"),
                "GLUE_JOB_NAME": job.name,
                "GLUE_JOB_RUN_ID": job_run.job_run_id,
                # the jars Glue provides, built here: the deployed zip holds no jar assembly
                JARS_ENV: spark_conf().get("spark.jars", ""),
            }
        )
        timeout_minutes = float(getattr(job, "timeout", None) or 60)
        rc = self._run(
            [self.python, str(script), *argv], env, run_dir, log_path, timeout=timeout_minutes * 60
        )
        if rc == 0:
            return None
        return _error_from_log(log_path, rc)


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
