"""The e2e fixtures: a deployed lakeloader stack on an AWS endpoint.

* AWS_ENDPOINT_URL set (LocalStack or any compatible endpoint): the suite deploys the
  app there (synth + assets + CloudFormation, like ``python -m lakeloader_dev.local deploy``), unless
  LAKELOADER_E2E_STACK names a stack already deployed with ``-c config=tests/e2e/tables.yaml -c
  max_attempts=1 -c runtime=<this venv's runtime>`` (E2E_CONTEXT: the e2e stage quarantines a file at
  its first failure, so one run shows a bad file's whole path; and runs on the runtime whose Spark
  this process reads its tables with: glue-6.0 from .venv-glue-6.0).
* otherwise: the embedded emulator (``lakeloader_dev.emulator``) starts in this process.

The stack is deployed once for the package (``deployed``: a deploy is a CDK synth, asset uploads and
a CloudFormation stack, about two minutes on 2 cores) and shared by every module that asks for
``e2e``; each module's scenarios use tables and databases of their own. ``e2e`` is module-scoped and
exports the stack's AWS environment for that module only, so nothing leaks into other suites. The
emulator's own tests (test_emulator_*.py) use ``emulator`` (a bare embedded emulator) and ``function``
(an echo Lambda function on it) instead of a deployed stack; moto's backends are process-global, so
``emulator`` first stops a shared stack that is up (the next ``e2e`` module deploys it again).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from lakeloader.control import runtimes
from tests.e2e.emulated import ROLE, zip_bytes

ROOT = Path(__file__).resolve().parents[2]
E2E_CONFIG = "tests/e2e/tables.yaml"
# what the suite deploys with (-c KEY=VALUE): the stage on the laptop's runtime, the only one the
# embedded emulator runs Glue and EMR jobs on (lakeloader.control.runtimes.local(): this venv's PySpark)
E2E_CONTEXT = {"config": E2E_CONFIG, "max_attempts": "1", "runtime": runtimes.local().name}
TEST_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
}


@dataclass
class E2E:
    stack: Any  # lakeloader.cli.stage.DeployedStage
    endpoint: str
    emulator: Any | None  # the embedded Emulator, or None against an external endpoint
    env: dict[str, str]


class SharedStack:
    """The stack the e2e modules share: deployed on first use, stopped by ``close``."""

    def __init__(self) -> None:
        self.deployed: E2E | None = None  # env: only the variables a module exports while it runs

    def get(self) -> E2E:
        if self.deployed is None:
            self.deployed = self._deploy()
        return self.deployed

    def close(self) -> None:
        if self.deployed is not None and self.deployed.emulator is not None:
            self.deployed.emulator.stop()
        self.deployed = None

    @staticmethod
    def _deploy() -> E2E:
        from lakeloader.cli.stage import DeployedStage

        external = os.environ.get("AWS_ENDPOINT_URL")
        with pytest.MonkeyPatch.context() as patch:
            emulator = None
            exported: dict[str, str] = {}
            if external:
                exported = {name: os.environ.get(name, value) for name, value in TEST_CREDENTIALS.items()}
                region = os.environ.get("AWS_REGION", "us-east-1")
                exported.update({"AWS_REGION": region, "AWS_DEFAULT_REGION": region})
                endpoint = external
            else:
                from lakeloader_dev.emulator import Emulator, aws_env

                emulator = Emulator()
                exported = aws_env("")  # set before start, so the emulator's defaults end with this block
                for name, value in exported.items():
                    patch.setenv(name, value)
                emulator.start()
                endpoint = emulator.endpoint
                exported = aws_env(endpoint)
            for name, value in exported.items():
                patch.setenv(name, value)
            patch.delenv("AWS_PROFILE", raising=False)
            try:
                existing = os.environ.get("LAKELOADER_E2E_STACK")
                if existing:
                    stack = DeployedStage.from_stack(existing)
                else:
                    from lakeloader_dev.emulator import patches_cloudformation
                    from lakeloader_dev.emulator.deploy import deploy

                    deployment = deploy(
                        endpoint=endpoint,
                        context=E2E_CONTEXT,
                        failures=patches_cloudformation.CFN_FAILURES.get if emulator else None,
                        timeout=300,
                    )
                    stack = DeployedStage.from_outputs(deployment.outputs)
            except BaseException:
                if emulator is not None:
                    emulator.stop()
                raise
        return E2E(stack=stack, endpoint=endpoint, emulator=emulator, env=exported)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """This package's tests on a bare emulator first, then those on the shared stack, so that the
    stack is deployed once; the rest of the session keeps its order."""
    here = Path(__file__).parent
    slots = [i for i, item in enumerate(items) if here in item.path.parents]
    on_stack = [items[i] for i in slots]
    on_stack.sort(key=lambda item: "e2e" in getattr(item, "fixturenames", ()))
    for i, item in zip(slots, on_stack, strict=True):
        items[i] = item


@pytest.fixture(scope="package")
def deployed() -> Iterator[SharedStack]:
    shared = SharedStack()
    yield shared
    shared.close()


@pytest.fixture(scope="module")
def e2e(deployed: SharedStack) -> Iterator[E2E]:
    """The shared stack, its AWS environment exported for this module (``env``: the whole environment)."""
    stack = deployed.get()
    with pytest.MonkeyPatch.context() as patch:
        for name, value in stack.env.items():
            patch.setenv(name, value)
        patch.delenv("AWS_PROFILE", raising=False)
        yield E2E(stack=stack.stack, endpoint=stack.endpoint, emulator=stack.emulator, env=dict(os.environ))


@pytest.fixture(scope="module")
def emulator(deployed: SharedStack) -> Iterator[Any]:
    """A bare embedded emulator, its endpoint in this module's AWS environment."""
    from lakeloader_dev.emulator import Emulator, aws_env

    deployed.close()  # one emulator at a time in a process
    with pytest.MonkeyPatch.context() as patch, Emulator() as emu:
        for name, value in aws_env(emu.endpoint).items():
            patch.setenv(name, value)
        yield emu


HANDLER = """
import json, os, boto3

def handler(event, context):
    s3 = boto3.client("s3")
    keys = [r["s3"]["object"]["key"] for r in event.get("Records", [])]
    key = "seen/" + context.aws_request_id
    s3.put_object(Bucket=os.environ["OUT_BUCKET"], Key=key, Body=json.dumps(keys))
    if event.get("fail") or any(key.startswith("fail") for key in keys):
        raise ValueError("asked to fail")
    if event.get("ResourceProperties", {}).get("fail") == "true":  # CloudFormation: strings only
        raise ValueError(f"custom resource asked to fail: {event['ResourceProperties']}")
    return {"keys": keys, "function": context.function_name, "env": os.environ.get("GREETING")}
"""


@pytest.fixture(scope="module")
def function(emulator) -> str:
    """The echo function: records the S3 keys of its event in the `out` bucket, fails when asked (an
    event with `fail`, or an object key starting with it)."""
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
        Code={"ZipFile": zip_bytes({"index.py": HANDLER})},
        Environment={"Variables": {"OUT_BUCKET": "out", "GREETING": "hello"}},
        Timeout=30,
    )
    return "echo"
