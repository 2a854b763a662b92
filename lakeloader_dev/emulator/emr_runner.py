"""EMR Serverless job runs for the emulator: the run's entry point, run on local Spark.

The application's release must be on the line of the runtime this emulator runs (``runtimes.local()``);
an application of the other runtime fails its runs naming the virtualenv that runs them.

The entry point, ``spark.submit.pyFiles``/``--py-files`` and ``spark.archives``/``--archives``
(unpacked, as YARN/EMR unpack them) are fetched from the emulator's S3, and the entry point runs
with its ``entryPointArguments`` through :meth:`EmulatorProcesses.run_spark_script`, on the Python
packages the EMR Serverless image provides. A packed virtual environment named as
``PYSPARK_PYTHON=./environment/bin/python`` (what the stack ships) puts its site-packages on the
driver's path, once checked to be of the runtime's Python.
"""

from __future__ import annotations

import os
import shlex
import shutil
import time
from pathlib import Path
from typing import Any

from lakeloader.control import runtimes
from lakeloader_dev.emulator.runtime import (
    EmulatorProcesses,
    SparkRun,
    WrongRuntimeError,
    emr_runtime,
    fetch,
    uris,
)
from lakeloader_dev.emulator.stand_in import stand_in_site_packages, stands_in

DRIVER_ENV = "spark.emr-serverless.driverEnv."
# What EMR Serverless's Python (the runtime's: 3.11 on emr-7.12.0, 3.13 on emr-spark-8.1.0) provides a
# job beyond the standard library: Spark's own pyspark and py4j. Everything else (pydantic, PyYAML,
# boto3) must come from the job's archive or py-files.
EMR_IMAGE_MODULES = ["pyspark", "py4j"]
SUBMIT_FLAGS = {
    "--py-files": "spark.submit.pyFiles",
    "--archives": "spark.archives",
    "--jars": "spark.jars",
    "--files": "spark.files",
}


def run_emr_job(runtime: EmulatorProcesses, application: Any, job_run: Any, s3_get) -> None:
    """Run one EMR Serverless job run to completion (on its own thread); sets the run's state."""
    driver = (job_run.job_driver or {}).get("sparkSubmit") or {}
    record = SparkRun(
        "emr",
        job_run.name or job_run.id,
        job_run.id,
        list(driver.get("entryPointArguments") or []),
        time.time(),
    )
    runtime.track_run(
        record,
        job_run.set_state,
        "RUNNING",
        ("SUCCESS", "FAILED"),
        lambda run_dir, log_path: _emr_subprocess(runtime, application, job_run, s3_get, run_dir, log_path),
    )


def _emr_subprocess(
    runtime: EmulatorProcesses, application: Any, job_run: Any, s3_get, run_dir: Path, log_path: Path
) -> str | None:
    try:
        row = emr_runtime(getattr(application, "release_label", None) or "")
    except WrongRuntimeError as exc:
        message = f"EMR Serverless application {getattr(application, 'name', '')}: {exc}"
        log_path.write_text(message + "\n")
        return message
    driver = (job_run.job_driver or {}).get("sparkSubmit")
    if not driver:
        return f"unsupported job driver {sorted(job_run.job_driver or {})}: the emulator runs sparkSubmit"
    conf = emr_spark_conf(application, job_run)
    script = fetch(s3_get, driver["entryPoint"], run_dir)
    py_files = uris(conf.get("spark.submit.pyFiles", ""))
    python_path = [str(fetch(s3_get, uri, run_dir / "py-files")) for uri in py_files]
    for uri in uris(conf.get("spark.archives", "")):
        _unpack_archive(s3_get, uri, run_dir)
    env = {k.removeprefix(DRIVER_ENV): v for k, v in conf.items() if k.startswith(DRIVER_ENV)}
    python_path += _archive_python_path(env, run_dir)
    env["EMR_SERVERLESS_JOB_RUN_ID"] = job_run.id
    env[runtimes.RUNTIME_ENV] = row.name  # the job's lakeloader.control.runtimes.local(): no dist-info on -S
    return runtime.run_spark_script(
        script,
        [str(a) for a in driver.get("entryPointArguments") or []],
        python_path=python_path,
        image=EMR_IMAGE_MODULES,
        env=env,
        run_dir=run_dir,
        log_path=log_path,
        timeout=float(job_run.execution_timeout_minutes or 720) * 60,
    )


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
    inside an archive (a packed virtual environment: its site-packages). The image's Python of the
    runtime this process runs (``runtimes.local()``: ``/usr/bin/python3.11`` on glue-5.1's emr-7.12.0,
    ``/usr/bin/python3.13`` on glue-6.0's emr-spark-8.1.0) is this venv's Python here; an application
    of the other runtime would ship wheels this Python cannot load, and is refused."""
    runtime = runtimes.local()
    found: list[str] = []
    for entry in (env.pop("PYTHONPATH", "") or "").split(os.pathsep):
        if entry:
            found.append(str(run_dir / entry) if not os.path.isabs(entry) else entry)
    for name in ("PYSPARK_DRIVER_PYTHON", "PYSPARK_PYTHON"):
        interpreter = env.pop(name, "")
        if os.path.isabs(interpreter) and interpreter != runtime.emr_python:
            raise ValueError(
                f"{name}={interpreter}: this emulator runs runtime {runtime.name}, whose EMR Serverless "
                f"image's Python is {runtime.emr_python}, and only that one (set {runtimes.RUNTIME_ENV} "
                "or use that runtime's virtualenv for another)"
            )
        if interpreter and not os.path.isabs(interpreter):  # ./environment/bin/python
            root = (run_dir / interpreter).parent.parent
            _check_venv_python(name, interpreter, root, runtime)
            for site in sorted(root.glob("lib/python3*/site-packages")):
                if stands_in(site.parent.name):  # glue-6.1's 3.14 venv, run on the 3.13 standing in
                    site = stand_in_site_packages(site, run_dir.parent)
                if str(site) not in found:
                    found.append(str(site))
    env.pop("JAVA_HOME", None)
    return found


def _check_venv_python(name: str, interpreter: str, root: Path, runtime: runtimes.Runtime) -> None:
    """A packed virtual environment (``spark.archives=...#environment``, ``PYSPARK_PYTHON=./environment/
    bin/python``, as AWS documents for EMR Serverless) runs here on this venv's Python, in place of the
    image's interpreter its ``bin/python`` links to: its ``pyvenv.cfg`` must name the runtime's Python
    (its wheels are built for that one), and its site-packages must be there."""
    config = root / "pyvenv.cfg"
    if not config.is_file():
        raise ValueError(f"{name}={interpreter}: no packed virtual environment there (no {config.name})")
    fields = dict(
        (key.strip(), value.strip())
        for key, _, value in (line.partition("=") for line in config.read_text().splitlines())
    )
    version = ".".join(fields.get("version", "").split(".")[:2])
    if version != runtime.python:
        raise ValueError(
            f"{name}={interpreter}: a virtual environment of Python {version or '?'}, but this emulator runs "
            f"runtime {runtime.name}, whose EMR Serverless Python is {runtime.python} (set "
            f"{runtimes.RUNTIME_ENV} or use that runtime's virtualenv for another)"
        )
    if not list(root.glob(f"lib/python{version}/site-packages")):
        raise ValueError(f"{name}={interpreter}: the environment has no lib/python{version}/site-packages")


def _unpack_archive(s3_get, uri: str, run_dir: Path) -> Path:
    """``spark.archives`` entry ``s3://.../deps.tar.gz#alias``: unpacked into the driver's working
    directory under ``alias`` (or the file's name), as Spark does."""
    location, _, alias = uri.partition("#")
    archive = fetch(s3_get, location, run_dir / "archives")
    target = run_dir / (alias or archive.name)
    # A packed venv links bin/python to the image's interpreter (/usr/bin/python3.x), outside the
    # folder: unpacked as Spark unpacks it (the "tar" filter keeps such links; "data" refuses them).
    if archive.name.endswith((".tar.gz", ".tgz", ".tar")):
        shutil.unpack_archive(str(archive), str(target), filter="tar")
    else:
        shutil.unpack_archive(str(archive), str(target))
    return target
