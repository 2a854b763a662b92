"""The emulator's Glue and Step Functions, over real HTTP without Spark: Glue runs execute the job's
script from S3 with merged arguments and end SUCCEEDED or FAILED with an ErrorMessage; a state
machine's Glue task runs the job to completion."""

from __future__ import annotations

import json
import time
from pathlib import Path

import boto3
import pytest

from lakeloader.control import runtimes
from lakeloader_dev.emulator import Emulator
from tests.e2e.emulated import ROLE, tar_gz, wheel, zip_bytes

pytestmark = pytest.mark.e2e

GLUE_SCRIPT = """
import sys
import boto3
from awsglue.utils import getResolvedOptions

args = getResolvedOptions(sys.argv, ["out_bucket", "message", "JOB_RUN_ID"])
if args["message"] == "fail":
    print("lakeloader: demo.table: the input file is malformed", file=sys.stderr)
    sys.exit(1)
out = boto3.client("s3")
out.put_object(Bucket=args["out_bucket"], Key="glue/" + args["JOB_RUN_ID"], Body=args["message"])
"""


@pytest.fixture(scope="module")
def glue_job(emulator: Emulator) -> str:
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="scripts")
    s3.create_bucket(Bucket="out")
    s3.put_object(Bucket="scripts", Key="job.py", Body=GLUE_SCRIPT.encode())
    boto3.client("glue").create_job(
        Name="demo",
        Role=ROLE,
        Command={"Name": "glueetl", "ScriptLocation": "s3://scripts/job.py"},
        DefaultArguments={"--out_bucket": "out", "--message": "default"},
        ExecutionProperty={"MaxConcurrentRuns": 2},
        GlueVersion=runtimes.local().glue_version,
    )
    return "demo"


def _wait_run(job: str, run_id: str, timeout: float = 60) -> dict:
    glue = boto3.client("glue")
    deadline = time.monotonic() + timeout
    while True:
        run = glue.get_job_run(JobName=job, RunId=run_id)["JobRun"]
        if run["JobRunState"] in ("SUCCEEDED", "FAILED") or time.monotonic() > deadline:
            return run
        assert run["JobRunState"] in ("STARTING", "RUNNING")
        time.sleep(0.3)


def test_glue_run_executes_the_script_with_merged_arguments(glue_job: str) -> None:
    run_id = boto3.client("glue").start_job_run(JobName=glue_job, Arguments={"--message": "from the run"})[
        "JobRunId"
    ]
    run = _wait_run(glue_job, run_id)
    assert run["JobRunState"] == "SUCCEEDED", run.get("ErrorMessage")
    assert run["Arguments"] == {"--out_bucket": "out", "--message": "from the run"}
    body = boto3.client("s3").get_object(Bucket="out", Key=f"glue/{run_id}")["Body"].read()
    assert body == b"from the run"


def test_glue_run_failure_carries_the_error_message(glue_job: str) -> None:
    run_id = boto3.client("glue").start_job_run(JobName=glue_job, Arguments={"--message": "fail"})["JobRunId"]
    run = _wait_run(glue_job, run_id)
    assert run["JobRunState"] == "FAILED"
    assert run["ErrorMessage"] == "lakeloader: demo.table: the input file is malformed"


GLUE_MODULES_SCRIPT = """
import importlib.util, sys
import boto3  # Glue's image provides it
import tinydep  # from --additional-python-modules
from awsglue.utils import getResolvedOptions

args = getResolvedOptions(sys.argv, ["JOB_RUN_ID"])
seen = f"{tinydep.WHO} pydantic={importlib.util.find_spec('pydantic') is not None}"
boto3.client("s3").put_object(Bucket="out", Key="modules/" + args["JOB_RUN_ID"], Body=seen)
"""


def test_glue_run_installs_additional_python_modules_from_s3_wheels_without_an_index(glue_job: str) -> None:
    s3, glue = boto3.client("s3"), boto3.client("glue")
    wheels = zip_bytes(
        {
            "wheels/requirements.txt": "tinydep==1.0\n",
            "wheels/tinydep-1.0-py3-none-any.whl": wheel("tinydep", "WHO = 'shipped wheel'\n"),
        }
    )
    s3.put_object(Bucket="scripts", Key="modules.py", Body=GLUE_MODULES_SCRIPT.encode())
    s3.put_object(Bucket="scripts", Key="deps.gluewheels.zip", Body=wheels)
    glue.create_job(
        Name="modules",
        Role=ROLE,
        Command={"Name": "glueetl", "ScriptLocation": "s3://scripts/modules.py"},
        DefaultArguments={
            "--additional-python-modules": "s3://scripts/deps.gluewheels.zip",
            "--python-modules-installer-option": "--no-index",
        },
        GlueVersion=runtimes.local().glue_version,
    )
    run_id = glue.start_job_run(JobName="modules")["JobRunId"]
    run = _wait_run("modules", run_id, timeout=120)
    assert run["JobRunState"] == "SUCCEEDED", run.get("ErrorMessage")
    seen = s3.get_object(Bucket="out", Key=f"modules/{run_id}")["Body"].read()
    assert seen == b"shipped wheel pydantic=False"  # the venv's packages are not the job's
    # a requirement that is not a wheel on S3 needs the package index: refused, as without network
    failed = glue.start_job_run(JobName="modules", Arguments={"--additional-python-modules": "pydantic==2.0"})
    run = _wait_run("modules", failed["JobRunId"], timeout=120)
    assert run["JobRunState"] == "FAILED" and "needs a package index" in run["ErrorMessage"], run


GLUE_VENV_SCRIPT = """
import importlib.util, json, sys
import tinyvenv  # from the packed virtual environment
from awsglue.utils import getResolvedOptions  # the emulator's shim, not the venv's awsglue

args = getResolvedOptions(sys.argv, ["JOB_RUN_ID"])
found = {name: importlib.util.find_spec(name) is not None for name in ("boto3", "pydantic", "pyspark")}
print("RESULT " + json.dumps({"who": tinyvenv.WHO, **found}))
"""


def packed_venv(python: str, modules: dict[str, str]) -> bytes:
    """A virtual environment as venv-pack packs one: site-packages of ``python`` (``3.13``), links to the
    platform's interpreter."""
    site = f"lib/python{python}/site-packages"
    files = {f"{site}/{name}/__init__.py": body for name, body in modules.items()}
    files["pyvenv.cfg"] = f"home = /usr/bin\ninclude-system-site-packages = false\nversion = {python}\n"
    interpreter = f"python{python}"
    links = {f"bin/{interpreter}": f"/usr/bin/{interpreter}", "bin/python": interpreter, "lib64": "lib"}
    return tar_gz(files, links)


def test_glue_run_takes_its_packages_from_a_packed_virtual_env(emulator: Emulator, glue_job: str) -> None:
    """--python-virtual-env (Glue 6.0): the job imports what the venv holds and nothing of Glue's image but
    Spark's pyspark (no boto3 the venv lacks); the emulator's awsglue shim comes before the venv's own
    (the real one needs Glue's Spark); a venv built for another Python fails the run, saying so."""
    s3, glue = boto3.client("s3"), boto3.client("glue")
    python = runtimes.local().python
    real_awsglue = "raise ImportError('the real awsglue: it needs Glue\\'s own PySpark')\n"
    s3.put_object(Bucket="scripts", Key="venv.py", Body=GLUE_VENV_SCRIPT.encode())
    s3.put_object(
        Bucket="scripts",
        Key="venv.tar.gz",
        Body=packed_venv(python, {"tinyvenv": "WHO = 'packed venv'\n", "awsglue": real_awsglue}),
    )
    s3.put_object(Bucket="scripts", Key="venv39.tar.gz", Body=packed_venv("3.9", {"tinyvenv": "WHO = 1\n"}))
    glue.create_job(
        Name="venv",
        Role=ROLE,
        Command={"Name": "glueetl", "ScriptLocation": "s3://scripts/venv.py"},
        DefaultArguments={"--python-virtual-env": "s3://scripts/venv.tar.gz"},
        GlueVersion=runtimes.local().glue_version,
    )
    run_id = glue.start_job_run(JobName="venv")["JobRunId"]
    run = _wait_run("venv", run_id, timeout=120)
    assert run["JobRunState"] == "SUCCEEDED", run.get("ErrorMessage")
    (record,) = [r for r in emulator.journal.glue_runs if r.run_id == run_id]
    (line,) = [line for line in Path(record.log_path).read_text().splitlines() if line.startswith("RESULT ")]
    found = json.loads(line.removeprefix("RESULT "))
    assert found == {"who": "packed venv", "boto3": False, "pydantic": False, "pyspark": True}

    other = glue.start_job_run(
        JobName="venv", Arguments={"--python-virtual-env": "s3://scripts/venv39.tar.gz"}
    )
    run = _wait_run("venv", other["JobRunId"], timeout=120)
    assert run["JobRunState"] == "FAILED", run
    assert "a venv for python3.9" in run["ErrorMessage"] and f"python{python}" in run["ErrorMessage"], run


def test_glue_job_of_another_runtime_fails_its_run_naming_the_virtualenv(glue_job: str) -> None:
    """A job whose GlueVersion is the other runtime's would run on this venv's Spark: its run fails, in
    one line that says which virtualenv runs it; a Glue version lakeloader has no runtime for fails too."""
    other = next(row for row in runtimes.RUNTIMES.values() if row != runtimes.local())
    here = runtimes.local().name
    glue = boto3.client("glue")
    for version, expected in (
        (other.glue_version, [f"is runtime {other.name}", f"RUNTIME={other.name}", f"-c runtime={here}"]),
        ("4.0", ["not a runtime lakeloader runs on", f"-c runtime={here}"]),
    ):
        name = f"other-{version}"
        glue.create_job(
            Name=name,
            Role=ROLE,
            Command={"Name": "glueetl", "ScriptLocation": "s3://scripts/job.py"},
            DefaultArguments={"--out_bucket": "out", "--message": "never runs"},
            GlueVersion=version,
        )
        run = _wait_run(name, glue.start_job_run(JobName=name)["JobRunId"])
        assert run["JobRunState"] == "FAILED", run
        message = run["ErrorMessage"]
        assert "\n" not in message and f"GlueVersion {version}" in message, message
        assert all(part in message for part in expected), message


def test_step_functions_execution_runs_a_glue_job_to_completion(glue_job: str) -> None:
    definition = {
        "StartAt": "Run",
        "States": {
            "Run": {
                "Type": "Task",
                "Resource": "arn:aws:states:::glue:startJobRun.sync",
                "Parameters": {"JobName": glue_job, "Arguments": {"--message": "from step functions"}},
                "End": True,
            }
        },
    }
    sfn = boto3.client("stepfunctions")
    machine = sfn.create_state_machine(name="maintain", definition=json.dumps(definition), roleArn=ROLE)
    execution = sfn.start_execution(stateMachineArn=machine["stateMachineArn"], input="{}")["executionArn"]
    deadline = time.monotonic() + 90
    while True:
        described = sfn.describe_execution(executionArn=execution)
        if described["status"] != "RUNNING" or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert described["status"] == "SUCCEEDED", described
    output = json.loads(described["output"])
    assert output["JobRunState"] == "SUCCEEDED"
