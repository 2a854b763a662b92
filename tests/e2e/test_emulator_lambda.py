"""The emulator's Lambda, over real HTTP without Spark: functions run in a subprocess (and reach the
emulator back through AWS_ENDPOINT_URL); S3 notifications invoke them asynchronously with
quote_plus-encoded keys."""

from __future__ import annotations

import json
import time

import boto3
import pytest

from lakeloader_dev.emulator import Emulator

pytestmark = pytest.mark.e2e


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
