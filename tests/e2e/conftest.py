"""The e2e fixtures: a deployed lakeloader stack on an AWS endpoint.

* AWS_ENDPOINT_URL set (LocalStack or any compatible endpoint): the suite deploys the
  app there (synth + assets + CloudFormation, like ``python -m lakeloader_dev.local deploy``), unless
  LAKELOADER_E2E_STACK names a stack already deployed with ``-c config=tests/e2e/tables.yaml``.
* otherwise: the embedded emulator (``lakeloader_dev.emulator``) starts in this process.

Module-scoped (each suite is one module), so the AWS environment it exports ends with it. The
emulator's own tests (test_emulator_*.py) use ``emulator`` (a bare embedded emulator) and
``function`` (an echo Lambda function on it) instead of a deployed stack.
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

from tests.e2e.emulated import ROLE, zip_bytes

ROOT = Path(__file__).resolve().parents[2]
E2E_CONFIG = "tests/e2e/tables.yaml"
TEST_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
}


@dataclass
class E2E:
    stack: Any  # lakeloader.stage.DeployedStage
    endpoint: str
    emulator: Any | None  # the embedded Emulator, or None against an external endpoint
    env: dict[str, str]


@pytest.fixture(scope="module")
def e2e() -> Iterator[E2E]:
    from lakeloader.stage import DeployedStage

    external = os.environ.get("AWS_ENDPOINT_URL")
    with pytest.MonkeyPatch.context() as patch:
        emulator = None
        if external:
            for name, value in TEST_CREDENTIALS.items():
                if name not in os.environ:
                    patch.setenv(name, value)
            patch.setenv("AWS_REGION", os.environ.get("AWS_REGION", "us-east-1"))
            patch.setenv("AWS_DEFAULT_REGION", os.environ.get("AWS_REGION", "us-east-1"))
            endpoint = external
        else:
            from lakeloader_dev.emulator import Emulator, aws_env

            emulator = Emulator().start()
            endpoint = emulator.endpoint
            for name, value in aws_env(endpoint).items():
                patch.setenv(name, value)
        patch.delenv("AWS_PROFILE", raising=False)
        try:
            existing = os.environ.get("LAKELOADER_E2E_STACK")
            if existing:
                stack = DeployedStage.from_stack(existing)
            else:
                from lakeloader_dev.emulator import patches
                from lakeloader_dev.emulator.deploy import deploy

                deployment = deploy(
                    endpoint=endpoint,
                    context={"config": E2E_CONFIG},
                    failures=patches.CFN_FAILURES.get if emulator else None,
                    timeout=300,
                )
                stack = DeployedStage.from_outputs(deployment.outputs)
            yield E2E(stack=stack, endpoint=endpoint, emulator=emulator, env=dict(os.environ))
        finally:
            if emulator is not None:
                emulator.stop()


@pytest.fixture(scope="module")
def emulator() -> Iterator[Any]:
    """A bare embedded emulator, its endpoint in this module's AWS environment."""
    from lakeloader_dev.emulator import Emulator, aws_env

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
    if event.get("fail"):
        raise ValueError("asked to fail")
    if event.get("ResourceProperties", {}).get("fail") == "true":  # CloudFormation: strings only
        raise ValueError(f"custom resource asked to fail: {event['ResourceProperties']}")
    return {"keys": keys, "function": context.function_name, "env": os.environ.get("GREETING")}
"""


@pytest.fixture(scope="module")
def function(emulator) -> str:
    """The echo function: records the S3 keys of its event in the `out` bucket, fails when asked."""
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
