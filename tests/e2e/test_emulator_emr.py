"""The emulator's EMR Serverless, over real HTTP without Spark: runs execute the entry point with the
application's spark-defaults (py-files, archives, driver environment) and end SUCCESS or FAILED
with stateDetails."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import boto3
import pytest

from lakeloader.control import runtimes
from lakeloader_dev.emulator import Emulator
from tests.e2e.emulated import ROLE, tar_gz, zip_bytes

pytestmark = pytest.mark.e2e


EMR_ENTRY_POINT = """
import importlib.util, json, os, sys
import helper  # from spark.submit.pyFiles
import yaml  # from the archive: the venv's PyYAML is not visible
try:
    import lakeloader_dev  # noqa: F401
    dev = "importable"
except ImportError as exc:
    dev = str(exc)
args = sys.argv[1:]
if args[:1] == ["fail"]:
    print("lakeloader: demo.emr: the input file is malformed", file=sys.stderr)
    sys.exit(1)
body = {"args": args, "helper": helper.WHO, "yaml": yaml.__version__, "dev": dev,
        "boto3": importlib.util.find_spec("boto3") is not None,
        "pyspark": importlib.util.find_spec("pyspark") is not None,
        "greeting": os.environ.get("GREETING"), "emulated": os.environ.get("LAKELOADER_EMULATED")}
print("RESULT " + json.dumps(body))
"""


@pytest.fixture(scope="module")
def emr_application(emulator: Emulator) -> str:
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="emr-code")
    s3.put_object(Bucket="emr-code", Key="ingest.py", Body=EMR_ENTRY_POINT.encode())
    s3.put_object(Bucket="emr-code", Key="lib.zip", Body=zip_bytes({"helper.py": "WHO = 'py-files zip'\n"}))
    s3.put_object(
        Bucket="emr-code", Key="deps.tar.gz", Body=tar_gz({"yaml/__init__.py": "__version__ = 'archive'\n"})
    )
    emr = boto3.client("emr-serverless")
    application = emr.create_application(
        name="spark",
        releaseLabel=runtimes.local().emr_release_label,
        type="SPARK",
        runtimeConfiguration=[
            {
                "classification": "spark-defaults",
                "properties": {
                    "spark.submit.pyFiles": "s3://emr-code/lib.zip",
                    "spark.archives": "s3://emr-code/deps.tar.gz#deps",
                    "spark.emr-serverless.driverEnv.PYTHONPATH": "./deps",
                    "spark.emr-serverless.driverEnv.PYSPARK_PYTHON": runtimes.local().emr_python,
                    "spark.emr-serverless.driverEnv.GREETING": "from the application",
                },
            }
        ],
    )["applicationId"]
    assert emr.list_job_runs(applicationId=application)["jobRuns"] == []  # moto raised here
    return application


def _start_emr(application: str, arguments: list[str], **extra: Any) -> str:
    return boto3.client("emr-serverless").start_job_run(
        applicationId=application,
        executionRoleArn=ROLE,
        name="demo",
        jobDriver={
            "sparkSubmit": {"entryPoint": "s3://emr-code/ingest.py", "entryPointArguments": arguments}
        },
        **extra,
    )["jobRunId"]


def _spark_defaults(properties: dict[str, str]) -> dict:
    """A run's configurationOverrides that sets these spark-defaults over the application's."""
    return {"applicationConfiguration": [{"classification": "spark-defaults", "properties": properties}]}


def _wait_emr(application: str, run_id: str, timeout: float = 60) -> dict:
    emr = boto3.client("emr-serverless")
    deadline = time.monotonic() + timeout
    seen = []
    while True:
        run = emr.get_job_run(applicationId=application, jobRunId=run_id)["jobRun"]
        seen.append(run["state"])
        if run["state"] in ("SUCCESS", "FAILED") or time.monotonic() > deadline:
            run["seen"] = seen
            return run
        assert run["state"] in ("SUBMITTED", "RUNNING"), run
        time.sleep(0.2)


def test_emr_run_executes_the_entry_point_with_the_applications_spark_defaults(
    emulator: Emulator, emr_application: str
) -> None:
    run_id = _start_emr(
        emr_application,
        ["--table-id", "crm.customers"],
        configurationOverrides=_spark_defaults({"spark.emr-serverless.driverEnv.GREETING": "from the run"}),
    )
    run = _wait_emr(emr_application, run_id)
    assert run["state"] == "SUCCESS", run.get("stateDetails")
    assert run["seen"][0] in ("SUBMITTED", "RUNNING")
    (record,) = [r for r in emulator.journal.emr_runs if r.run_id == run_id]
    assert record.state == "SUCCESS" and record.arguments == ["--table-id", "crm.customers"]
    log = Path(record.log_path).read_text().splitlines()
    (line,) = [line for line in log if line.startswith("RESULT ")]
    body = json.loads(line.removeprefix("RESULT "))
    assert body["args"] == ["--table-id", "crm.customers"]
    assert body["helper"] == "py-files zip" and body["yaml"] == "archive"
    # the image's Python: Spark's pyspark, and nothing of the venv the job did not ship
    assert body["pyspark"] is True and body["boto3"] is False
    assert body["greeting"] == "from the run"  # configurationOverrides over the application's defaults
    assert body["emulated"] == "1" and "not shipped" in body["dev"]


def test_emr_run_failure_carries_the_state_details(emr_application: str) -> None:
    run = _wait_emr(emr_application, _start_emr(emr_application, ["fail"]))
    assert run["state"] == "FAILED"
    assert run["stateDetails"] == "lakeloader: demo.emr: the input file is malformed"
    listed = boto3.client("emr-serverless").list_job_runs(applicationId=emr_application)["jobRuns"]
    assert {r["state"] for r in listed} == {"SUCCESS", "FAILED"}


def test_emr_run_on_an_interpreter_the_image_lacks_fails(emr_application: str) -> None:
    run_id = _start_emr(
        emr_application,
        ["--table-id", "crm.customers"],
        configurationOverrides=_spark_defaults(
            {"spark.emr-serverless.driverEnv.PYSPARK_PYTHON": "/usr/bin/python3.9"}
        ),
    )
    run = _wait_emr(emr_application, run_id)
    assert run["state"] == "FAILED"
    details = run["stateDetails"]
    assert "PYSPARK_PYTHON=/usr/bin/python3.9" in details and runtimes.local().emr_python in details


def _other_runtime() -> runtimes.Runtime:
    """The runtime this process does not run (each has its own virtualenv)."""
    return next(row for row in runtimes.RUNTIMES.values() if row != runtimes.local())


def test_emr_application_of_another_runtime_fails_its_runs_naming_the_venv(emr_application: str) -> None:
    """An application on the other runtime's release would run on this venv's Spark: each run fails, in
    one line that says which virtualenv runs it; a label that is no EMR release fails as plainly."""
    other, here = _other_runtime(), runtimes.local().name
    emr = boto3.client("emr-serverless")
    for label, expected in (
        (other.emr_release_label, [f"runtime {other.name}", f"RUNTIME={other.name}", f"-c runtime={here}"]),
        ("emr-6.15.0", ["not a runtime lakeloader runs on", f"-c runtime={here}"]),
    ):
        application = emr.create_application(name=f"spark-{label}", releaseLabel=label, type="SPARK")
        run = _wait_emr(application["applicationId"], _start_emr(application["applicationId"], ["x"]))
        assert run["state"] == "FAILED", run
        details = run["stateDetails"]
        assert "\n" not in details and label in details, details
        assert all(part in details for part in expected), details
