"""The emulator's Lambda, over real HTTP without Spark: functions run in a subprocess (and reach the
emulator back through AWS_ENDPOINT_URL); S3 notifications invoke them asynchronously with
quote_plus-encoded keys; an event whose every attempt fails goes to the function's dead-letter queue."""

from __future__ import annotations

import json
import time

import boto3
import pytest

from lakeloader_dev.emulator import Emulator, lambda_runner

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


def test_an_s3_event_that_fails_every_attempt_goes_to_the_dead_letter_queue(
    emulator: Emulator, function: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As Lambda does after an asynchronous invocation's last retry: the event itself, with the
    failed request and its error as message attributes."""
    monkeypatch.setattr(lambda_runner, "ASYNC_RETRY_DELAY_SECONDS", 0.1)
    sqs, client = boto3.client("sqs"), boto3.client("lambda")
    queue = sqs.create_queue(QueueName="echo-dlq")["QueueUrl"]
    attributes = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]
    queue_arn = attributes["QueueArn"]
    client.update_function_configuration(FunctionName=function, DeadLetterConfig={"TargetArn": queue_arn})
    assert client.get_function_configuration(FunctionName=function)["DeadLetterConfig"] == {
        "TargetArn": queue_arn
    }
    arn = client.get_function(FunctionName=function)["Configuration"]["FunctionArn"]
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="failing")
    s3.put_bucket_notification_configuration(
        Bucket="failing",
        NotificationConfiguration={
            "LambdaFunctionConfigurations": [{"LambdaFunctionArn": arn, "Events": ["s3:ObjectCreated:*"]}]
        },
    )
    try:
        before = len(emulator.journal.invocations)
        s3.put_object(Bucket="failing", Key="fail/one.csv", Body=b"x")
        for thread in list(emulator.runtime.async_threads):
            thread.join(timeout=60)
        attempts = emulator.journal.invocations[before:]
        assert [(a.keys, a.ok) for a in attempts] == [(["fail/one.csv"], False)] * 3  # and 2 retries

        (message,) = sqs.receive_message(QueueUrl=queue, MessageAttributeNames=["All"])["Messages"]
        assert json.loads(message["Body"])["Records"][0]["s3"]["object"]["key"] == "fail%2Fone.csv"
        attributes = {k: v["StringValue"] for k, v in message["MessageAttributes"].items()}
        assert attributes == {
            "RequestID": attempts[-1].request_id,
            "ErrorCode": "200",
            "ErrorMessage": "ValueError: asked to fail",
        }
    finally:
        client.update_function_configuration(FunctionName=function, DeadLetterConfig={})


def test_a_scheduled_rule_runs_no_target_for_an_event_on_the_bus(emulator: Emulator, function: str) -> None:
    """On AWS a rule has a schedule or an event pattern, and an event put on the bus reaches only the
    rules whose pattern it matches: the stage's sweep and maintenance schedules (a Lambda and a Step
    Functions target) must neither run nor fail Glue's CreateTable when a job creates a table."""
    arn = boto3.client("lambda").get_function(FunctionName=function)["Configuration"]["FunctionArn"]
    topic = boto3.client("sns").create_topic(Name="every-hour")["TopicArn"]  # a target moto cannot deliver to
    events = boto3.client("events")
    events.put_rule(Name="every-hour", ScheduleExpression="rate(1 hour)")
    events.put_targets(Rule="every-hour", Targets=[{"Id": "fn", "Arn": arn}, {"Id": "topic", "Arn": topic}])
    glue = boto3.client("glue")
    glue.create_database(DatabaseInput={"Name": "scheduled"})
    assert emulator.runtime is not None
    before = len(emulator.runtime.async_threads)  # an asynchronous invocation starts its thread at once
    glue.create_table(DatabaseName="scheduled", TableInput={"Name": "orders"})  # Glue's event, on the bus

    started = [t.name for t in emulator.runtime.async_threads[before:]]
    assert started == [], "a Glue table created ran the scheduled rule's Lambda"
