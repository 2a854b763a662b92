"""Glue job runs for the emulator: the job's deployed script, run on local Spark.

The script and its ``--extra-py-files`` are fetched from the emulator's S3, the ``awsglue`` shim
goes on PYTHONPATH, ``--additional-python-modules`` are installed as Glue 5 installs them, and the
script runs as ``python script.py --JOB_NAME .. --JOB_RUN_ID .. <DefaultArguments + run Arguments>``
through :meth:`Runtime.run_spark_script`, on the Python packages Glue's image provides.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import io
import shlex
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

from lakeloader_dev.emulator.runtime import SHIM_DIR, Runtime, SparkRun, fetch, uris

AWSGLUE_SHIM = SHIM_DIR / "glue"  # `awsglue.utils.getResolvedOptions`, for Glue runs only


def run_glue_job(runtime: Runtime, job: Any, job_run: Any, s3_get) -> None:
    """Run one Glue job run to completion (called on its own thread); sets the run's state."""
    record = SparkRun("glue", job.name, job_run.job_run_id, dict(job_run.arguments or {}), time.time())
    runtime.track_run(
        record,
        job_run.set_state,
        "RUNNING",
        ("SUCCEEDED", "FAILED"),
        lambda run_dir, log_path: _glue_subprocess(runtime, job, job_run, s3_get, run_dir, log_path),
    )


def _glue_subprocess(
    runtime: Runtime, job: Any, job_run: Any, s3_get, run_dir: Path, log_path: Path
) -> str | None:
    command = job.command or {}
    script_uri = command.get("ScriptLocation", "")
    if command.get("Name", "glueetl") not in ("glueetl", "pythonshell", "gluestreaming"):
        return f"unsupported Glue command {command.get('Name')!r}"
    script = run_dir / (Path(script_uri).name or "script.py")
    script.write_bytes(s3_get(script_uri))
    arguments = dict(job_run.arguments or {})
    python_path = [str(AWSGLUE_SHIM)]
    for uri in uris(arguments.get("--extra-py-files", "")):
        python_path.append(str(fetch(s3_get, uri, run_dir / "py-files")))
    modules = uris(arguments.get("--additional-python-modules", ""))
    if modules:
        options = shlex.split(arguments.get("--python-modules-installer-option", ""))
        python_path.append(str(_glue_modules(runtime, modules, options, s3_get, run_dir, log_path)))
    argv = ["--JOB_NAME", job.name, "--JOB_RUN_ID", job_run.job_run_id]
    for key, value in arguments.items():
        argv += [key if key.startswith("--") else f"--{key}", str(value)]
    timeout_minutes = float(getattr(job, "timeout", None) or 60)
    return runtime.run_spark_script(
        script,
        argv,
        python_path=python_path,
        env={},
        run_dir=run_dir,
        log_path=log_path,
        timeout=timeout_minutes * 60,
        image=glue_image_modules(),
    )


def _glue_modules(
    runtime: Runtime, modules: list[str], options: list[str], s3_get, run_dir: Path, log_path: Path
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
    target = runtime.workdir / "glue-modules" / digest
    with runtime.install_lock:
        if target.exists():
            return target
        source = Path(tempfile.mkdtemp(prefix=".wheels-", dir=runtime.workdir))
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
        staging = Path(tempfile.mkdtemp(prefix=".glue-modules-", dir=runtime.workdir))
        pip = [runtime.python, "-m", "pip", "install", "--quiet", "--no-compile", "--target", str(staging)]
        rc = runtime.run_process(
            [*pip, *options, *requirements], runtime.base_env(), run_dir, log_path, timeout=600
        )
        if rc != 0:
            raise RuntimeError(f"pip install of --additional-python-modules failed (exit {rc})")
        target.parent.mkdir(parents=True, exist_ok=True)
        staging.rename(target)
    return target


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
