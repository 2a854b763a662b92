"""Glue job runs for the emulator: the job's deployed script, run on local Spark.

The job's ``GlueVersion`` must be the runtime this emulator runs (``runtimes.local()``: the virtualenv's
PySpark and jars); a job of the other runtime fails its run naming the virtualenv that runs it. The
script and its ``--extra-py-files`` are fetched from the emulator's S3 and the ``awsglue`` shim goes on
PYTHONPATH. The job's Python packages come as its Glue version takes them: ``--additional-python-modules``
installed as Glue 5 installs them, on top of the packages Glue's image provides; or
``--python-virtual-env`` (Glue 6.0), a packed virtual environment unpacked and its site-packages put on
the path in place of the image's packages (only Spark's pyspark and py4j stay). The script runs as
``python script.py --JOB_NAME .. --JOB_RUN_ID .. <DefaultArguments + run Arguments>`` through
:meth:`EmulatorProcesses.run_spark_script`.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import io
import shlex
import shutil
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

from lakeloader.control import runtimes
from lakeloader.control.contract import S3_TABLES_CATALOG
from lakeloader.spark.session import S3_TABLES_ENV
from lakeloader_dev.emulator.runtime import (
    SHIM_DIR,
    EmulatorProcesses,
    SparkRun,
    WrongRuntimeError,
    fetch,
    glue_runtime,
    uris,
)
from lakeloader_dev.emulator.stand_in import stand_in_site_packages, stands_in

AWSGLUE_SHIM = SHIM_DIR / "glue"  # `awsglue.utils.getResolvedOptions`, for Glue runs only
# What Glue's image still provides a job whose --python-virtual-env replaces its Python environment:
# Spark's own Python side.
GLUE_SPARK_MODULES = ["pyspark", "py4j"]


def run_glue_job(runtime: EmulatorProcesses, job: Any, job_run: Any, s3_get) -> None:
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
    runtime: EmulatorProcesses, job: Any, job_run: Any, s3_get, run_dir: Path, log_path: Path
) -> str | None:
    try:
        row = glue_runtime(getattr(job, "glue_version", None))
    except WrongRuntimeError as exc:
        log_path.write_text(f"Glue job {job.name}: {exc}\n")
        return f"Glue job {job.name}: {exc}"
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
    venv = arguments.get("--python-virtual-env", "").strip()
    if venv:  # replaces Glue's Python environment, boto3 and all: only Spark's own modules stay
        python_path.append(str(_glue_venv(runtime, venv, s3_get)))
    image = GLUE_SPARK_MODULES if venv else glue_image_modules()
    argv = ["--JOB_NAME", job.name, "--JOB_RUN_ID", job_run.job_run_id]
    for key, value in arguments.items():
        argv += [key if key.startswith("--") else f"--{key}", str(value)]
    timeout_minutes = float(getattr(job, "timeout", None) or 60)
    env = {runtimes.RUNTIME_ENV: row.name}  # the job's runtimes.local(): no dist-info on -S
    bucket = s3_tables_warehouse(arguments.get("--conf", ""))
    if bucket:  # the deployed job's S3 Tables catalog, rebuilt against the emulator by spark.session
        env[S3_TABLES_ENV] = bucket
    return runtime.run_spark_script(
        script,
        argv,
        python_path=python_path,
        env=env,
        run_dir=run_dir,
        log_path=log_path,
        timeout=timeout_minutes * 60,
        image=image,
    )


def s3_tables_warehouse(conf: str) -> str | None:
    """The table bucket ARN a Glue job's `--conf` gives its S3 Tables catalog (infra.processing), if any."""
    key = f"spark.sql.catalog.{S3_TABLES_CATALOG}.warehouse="
    for setting in conf.split(" --conf "):
        if setting.strip().startswith(key):
            return setting.strip()[len(key) :]
    return None


def _glue_modules(
    runtime: EmulatorProcesses, modules: list[str], options: list[str], s3_get, run_dir: Path, log_path: Path
) -> Path:
    """``--additional-python-modules`` as Glue 5 installs them: pip with the job's installer
    options, from wheels on S3 (``.whl`` files, or one ``.gluewheels.zip`` holding
    ``wheels/requirements.txt``), into a folder on the script's path. Installed once per
    distinct set of wheels (a run reuses it), compiled as pip compiles by default: a run loads their
    bytecode instead of compiling them again (0.3 s of each run's CPU, pydantic's mostly). A
    requirement that is not an S3 wheel would need a package index at job start, which the emulator
    refuses, as a job without network access would fail."""
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
        pip = [runtime.python, "-m", "pip", "install", "--quiet", "--target", str(staging)]
        rc = runtime.run_process(
            [*pip, *options, *requirements], runtime.base_env(), run_dir, log_path, timeout=600
        )
        if rc != 0:
            raise RuntimeError(f"pip install of --additional-python-modules failed (exit {rc})")
        target.parent.mkdir(parents=True, exist_ok=True)
        staging.rename(target)
    return target


def _glue_venv(runtime: EmulatorProcesses, uri: str, s3_get) -> Path:
    """``--python-virtual-env s3://.../venv.tar.gz``, as Glue 6.0 takes it: the packed virtual
    environment (venv-pack's layout) unpacked, once per distinct archive, and its
    ``lib/pythonX.Y/site-packages``, which must be for this Python. Its ``bin/python`` links to the
    platform's interpreter (/usr/bin/python3.13); here the emulator's Python runs the script with that
    site-packages on its path. The venv's own ``awsglue`` (AWSGlueDataplanePython 6.0.0) comes after
    the emulator's shim: its package imports ``pyspark.core.rdd``, which only PySpark 4 has (on 4.1 its
    ``getResolvedOptions`` runs, adding Glue's reserved options to the result), and the rest of it
    calls Glue's own JVM classes."""
    if not uri.startswith("s3://"):
        raise RuntimeError(f"--python-virtual-env {uri}: not an archive on S3")
    blob = s3_get(uri)
    target = runtime.workdir / "glue-venvs" / hashlib.sha256(blob).hexdigest()[:16]
    with runtime.install_lock:
        if not target.exists():
            staging = Path(tempfile.mkdtemp(prefix=".glue-venv-", dir=runtime.workdir))
            try:
                with tarfile.open(fileobj=io.BytesIO(blob), mode="r:*") as archive:
                    # "tar", not "data": a packed venv's bin/python3.X is an absolute link to the
                    # platform's interpreter; names are still kept inside the folder
                    archive.extractall(staging, filter="tar")
            except (tarfile.TarError, OSError) as exc:
                shutil.rmtree(staging, ignore_errors=True)
                raise RuntimeError(f"--python-virtual-env {uri}: not a packed virtual env: {exc}") from None
            target.parent.mkdir(parents=True, exist_ok=True)
            staging.rename(target)
    found = sorted(p for p in target.glob("lib/python3*/site-packages") if p.is_dir())
    python = f"python{sys.version_info.major}.{sys.version_info.minor}"
    if not found:
        raise RuntimeError(f"--python-virtual-env {uri}: no lib/python3*/site-packages in the archive")
    if found[0].parent.name != python and stands_in(found[0].parent.name):
        with runtime.install_lock:
            return stand_in_site_packages(found[0], runtime.workdir)
    if found[0].parent.name != python:
        raise RuntimeError(
            f"--python-virtual-env {uri}: a venv for {found[0].parent.name}, and this emulator's Python "
            f"is {python} ({runtimes.local().name})"
        )
    return found[0]


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
