"""An EMR Serverless run on the emulator with the Python environment the stack ships.

The stack gives its EMR Serverless application a packed virtual environment in `spark.archives`
(`#environment`) and runs driver and executors on `./environment/bin/python`, as AWS's "Using Python
libraries with EMR Serverless" documents
(https://docs.aws.amazon.com/emr/latest/EMR-Serverless-UserGuide/using-python-libraries.html). The
emulator's run of it imports the job's dependencies from that environment alone.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import boto3
import pytest

from infra.emr import emr_venv_conf
from infra.packed_venv import emr_venv_archive
from lakeloader.control import runtimes
from lakeloader_dev.emulator import Emulator
from tests.e2e.emulated import ROLE

pytestmark = pytest.mark.e2e

ENTRY_POINT = """
import json
import boto3, pydantic, yaml
print("RESULT " + json.dumps({m.__name__: m.__file__ for m in (boto3, pydantic, yaml)}))
"""


def test_an_emr_run_imports_the_jobs_dependencies_from_the_shipped_venv(emulator: Emulator) -> None:
    """The application's spark-defaults are the stack's own (emr_venv_conf) and the archive is the
    stack's EMR venv for this runtime: the run succeeds, and boto3, pydantic and PyYAML come from
    ./environment/lib/python3.x/site-packages of the run's working folder."""
    runtime = runtimes.local()
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="emr-venv-code")
    s3.put_object(Bucket="emr-venv-code", Key="probe.py", Body=ENTRY_POINT.encode())
    s3.put_object(
        Bucket="emr-venv-code", Key="venv.tar.gz", Body=emr_venv_archive(runtime=runtime).read_bytes()
    )
    emr = boto3.client("emr-serverless")
    application = emr.create_application(
        name="venv",
        releaseLabel=runtime.emr_release_label,
        type="SPARK",
        runtimeConfiguration=[
            {
                "classification": "spark-defaults",
                "properties": emr_venv_conf("s3://emr-venv-code/venv.tar.gz"),
            }
        ],
    )["applicationId"]
    run_id = emr.start_job_run(
        applicationId=application,
        executionRoleArn=ROLE,
        name="venv-probe",
        jobDriver={"sparkSubmit": {"entryPoint": "s3://emr-venv-code/probe.py"}},
    )["jobRunId"]
    deadline = time.monotonic() + 120
    while True:
        run = emr.get_job_run(applicationId=application, jobRunId=run_id)["jobRun"]
        if run["state"] in ("SUCCESS", "FAILED") or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert run["state"] == "SUCCESS", run.get("stateDetails")
    (record,) = [r for r in emulator.journal.emr_runs if r.run_id == run_id]
    (line,) = [x for x in Path(record.log_path).read_text().splitlines() if x.startswith("RESULT ")]
    origins = json.loads(line.removeprefix("RESULT "))
    site = f"/environment/lib/python{runtime.python}/site-packages/"
    assert all(site in origin for origin in origins.values()), origins
