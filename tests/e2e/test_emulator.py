"""The embedded emulator's extensions of moto, each over real HTTP, without Spark (seconds, not minutes).

Lambda functions run in a subprocess (and reach the emulator back through
AWS_ENDPOINT_URL), S3 notifications invoke them asynchronously with quote_plus-encoded
keys, Glue runs execute the job's script from S3 with merged arguments and end
SUCCEEDED or FAILED with an ErrorMessage, EMR Serverless runs execute the entry point with
the application's spark-defaults (py-files, archives, driver environment) and end SUCCESS
or FAILED with stateDetails.
"""

from __future__ import annotations

import io
import json
import tarfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from lakeloader_dev.emulator import Emulator, aws_env

pytestmark = pytest.mark.e2e

ROLE = "arn:aws:iam::123456789012:role/test"

HANDLER = """
import json, os, boto3

def handler(event, context):
    s3 = boto3.client("s3")
    keys = [r["s3"]["object"]["key"] for r in event.get("Records", [])]
    key = "seen/" + context.aws_request_id
    s3.put_object(Bucket=os.environ["OUT_BUCKET"], Key=key, Body=json.dumps(keys))
    if event.get("fail"):
        raise ValueError("asked to fail")
    if event.get("ResourceProperties", {}).get("fail") == "true":  # CloudFormation: strings only
        raise ValueError(f"custom resource asked to fail: {event['ResourceProperties']}")
    return {"keys": keys, "function": context.function_name, "env": os.environ.get("GREETING")}
"""

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


def _zip(files: dict[str, str | bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def emulator() -> Iterator[Emulator]:
    with pytest.MonkeyPatch.context() as patch, Emulator() as emu:
        for name, value in aws_env(emu.endpoint).items():
            patch.setenv(name, value)
        yield emu


@pytest.fixture(scope="module")
def function(emulator: Emulator) -> str:
    boto3.client("s3").create_bucket(Bucket="out")
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}
        ],
    }
    boto3.client("iam").create_role(RoleName="test", AssumeRolePolicyDocument=json.dumps(trust))
    boto3.client("lambda").create_function(
        FunctionName="echo",
        Runtime="python3.12",
        Role=ROLE,
        Handler="index.handler",
        Code={"ZipFile": _zip({"index.py": HANDLER})},
        Environment={"Variables": {"OUT_BUCKET": "out", "GREETING": "hello"}},
        Timeout=30,
    )
    return "echo"


def test_lambda_runs_the_deployed_code_in_a_subprocess(function: str) -> None:
    response = boto3.client("lambda").invoke(FunctionName=function, Payload=json.dumps({"Records": []}))
    payload = json.loads(response["Payload"].read())
    assert payload == {"keys": [], "function": "echo", "env": "hello"}


def test_lambda_function_error_is_reported(function: str) -> None:
    response = boto3.client("lambda").invoke(FunctionName=function, Payload=json.dumps({"fail": True}))
    assert response.get("FunctionError")
    payload = json.loads(response["Payload"].read())
    assert payload["errorType"] == "ValueError" and payload["errorMessage"] == "asked to fail"


def test_s3_notification_invokes_lambda_with_encoded_keys(emulator: Emulator, function: str) -> None:
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="landing")
    arn = boto3.client("lambda").get_function(FunctionName=function)["Configuration"]["FunctionArn"]
    s3.put_bucket_notification_configuration(
        Bucket="landing",
        NotificationConfiguration={
            "LambdaFunctionConfigurations": [{"LambdaFunctionArn": arn, "Events": ["s3:ObjectCreated:*"]}]
        },
    )
    before = len(emulator.journal.invocations)
    s3.put_object(Bucket="landing", Key="a dir/file+1.csv", Body=b"x")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(emulator.journal.invocations) == before:
        time.sleep(0.2)
    (record,) = emulator.journal.invocations[before:]
    assert record.trigger == "s3" and record.ok
    assert record.result["keys"] == ["a+dir%2Ffile%2B1.csv"]  # as AWS sends them: quote_plus
    assert record.keys == ["a dir/file+1.csv"]


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
        GlueVersion="5.0",
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


def _wheel(name: str, body: str) -> bytes:
    """A minimal pure-Python wheel of one module."""
    info = f"{name}-1.0.dist-info"
    files = {
        f"{name}/__init__.py": body,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in [*files, f"{info}/RECORD"])
    return _zip(files)


def test_glue_run_installs_additional_python_modules_from_s3_wheels_without_an_index(glue_job: str) -> None:
    s3, glue = boto3.client("s3"), boto3.client("glue")
    wheels = _zip(
        {
            "wheels/requirements.txt": "tinydep==1.0\n",
            "wheels/tinydep-1.0-py3-none-any.whl": _wheel("tinydep", "WHO = 'shipped wheel'\n"),
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
        GlueVersion="5.0",
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


def test_custom_resource_gets_string_properties_and_a_crash_fails_the_stack(function: str) -> None:
    from lakeloader_dev.emulator.deploy import DeployError, wait_for_stack

    arn = boto3.client("lambda").get_function(FunctionName=function)["Configuration"]["FunctionArn"]
    template = {
        "Resources": {
            "Broken": {
                "Type": "Custom::Thing",
                # the echo handler raises on "fail" (CloudFormation sends it as the string "true")
                # and never answers the ResponseURL: the stack must fail, not hang
                "Properties": {"ServiceToken": arn, "fail": True, "Count": 3},
            }
        }
    }
    cfn = boto3.client("cloudformation")
    cfn.create_stack(StackName="broken", TemplateBody=json.dumps(template))
    with pytest.raises(DeployError, match="Broken: custom resource handler echo failed") as failure:
        wait_for_stack(cfn, "broken", timeout=60, failures=None)
    assert "'Count': '3'" in str(failure.value)  # the handler saw CloudFormation's string properties


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


def _tar_gz(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.fixture(scope="module")
def emr_application(emulator: Emulator) -> str:
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="emr-code")
    s3.put_object(Bucket="emr-code", Key="ingest.py", Body=EMR_ENTRY_POINT.encode())
    s3.put_object(Bucket="emr-code", Key="lib.zip", Body=_zip({"helper.py": "WHO = 'py-files zip'\n"}))
    s3.put_object(
        Bucket="emr-code", Key="deps.tar.gz", Body=_tar_gz({"yaml/__init__.py": "__version__ = 'archive'\n"})
    )
    emr = boto3.client("emr-serverless")
    application = emr.create_application(
        name="spark",
        releaseLabel="emr-7.12.0",
        type="SPARK",
        runtimeConfiguration=[
            {
                "classification": "spark-defaults",
                "properties": {
                    "spark.submit.pyFiles": "s3://emr-code/lib.zip",
                    "spark.archives": "s3://emr-code/deps.tar.gz#deps",
                    "spark.emr-serverless.driverEnv.PYTHONPATH": "./deps",
                    "spark.emr-serverless.driverEnv.PYSPARK_PYTHON": "/usr/bin/python3.11",
                    "spark.emr-serverless.driverEnv.GREETING": "from the application",
                },
            }
        ],
    )["applicationId"]
    assert emr.list_job_runs(applicationId=application)["jobRuns"] == []  # moto raised here
    return application


def _start_emr(application: str, arguments: list[str], **extra) -> str:
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
    assert "PYSPARK_PYTHON=/usr/bin/python3.9" in details and "/usr/bin/python3.11" in details


# --- lakeloader erase on a versioned bucket (no Spark: the purge of old object versions) ---------


def test_erase_purges_every_noncurrent_version_under_the_table_location(emulator: Emulator) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from lakeloader.erase import purge_noncurrent_versions, remaining_versions

    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="curated")
    s3.put_bucket_versioning(Bucket="curated", VersioningConfiguration={"Status": "Enabled"})
    table, neighbour = "warehouse/crm.db/customers/", "warehouse/crm.db/customers_v2/"
    # files deleted by maintenance: more than a page of ListObjectVersions and a DeleteObjects batch
    old = [f"{table}data/{n:05}.parquet" for n in range(1100)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda key: s3.put_object(Bucket="curated", Key=key, Body=b"the subject"), old))
    for start in (0, 1000):  # a delete marker hides each one; its version stays readable
        batch = [{"Key": key} for key in old[start : start + 1000]]
        s3.delete_objects(Bucket="curated", Delete={"Objects": batch})
    for body in (b"v1", b"v2"):  # a rewritten object: v1 noncurrent
        s3.put_object(Bucket="curated", Key=f"{table}metadata/version-hint.text", Body=body)
    s3.put_object(Bucket="curated", Key=f"{table}data/current.parquet", Body=b"kept")
    for body in (b"a", b"b"):
        s3.put_object(Bucket="curated", Key=f"{neighbour}data/x.parquet", Body=body)

    assert remaining_versions(f"s3://curated/{table}") == 1100 + 1100 + 1
    assert purge_noncurrent_versions("s3://curated/warehouse/crm.db/customers") == 2201

    listed = s3.list_object_versions(Bucket="curated", Prefix=table)
    assert "DeleteMarkers" not in listed
    assert sorted((v["Key"], v["IsLatest"]) for v in listed["Versions"]) == [
        (f"{table}data/current.parquet", True),
        (f"{table}metadata/version-hint.text", True),
    ]
    current = s3.get_object(Bucket="curated", Key=f"{table}metadata/version-hint.text")["Body"].read()
    assert current == b"v2"
    assert remaining_versions(f"s3://curated/{table}") == 0
    # the prefix ends at the table's folder: another table whose name starts the same is untouched
    assert len(s3.list_object_versions(Bucket="curated", Prefix=neighbour)["Versions"]) == 2


def test_cloudformation_bucket_gets_its_versioning(emulator: Emulator) -> None:
    from lakeloader_dev.emulator.deploy import wait_for_stack

    template = {
        "Resources": {
            "Versioned": {
                "Type": "AWS::S3::Bucket",
                "Properties": {"BucketName": "versioned", "VersioningConfiguration": {"Status": "Enabled"}},
            },
            "Plain": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": "plain"}},
        }
    }
    cfn = boto3.client("cloudformation")
    cfn.create_stack(StackName="buckets", TemplateBody=json.dumps(template))
    wait_for_stack(cfn, "buckets", timeout=60, failures=None)
    s3 = boto3.client("s3")
    assert s3.get_bucket_versioning(Bucket="versioned").get("Status") == "Enabled"
    assert "Status" not in s3.get_bucket_versioning(Bucket="plain")
