"""`lakeloader verify --stage` on the deployed e2e stack: green through every hop (Glue and EMR, since
the e2e config runs shop.reviews on EMR), and with one hop broken on purpose, where the failure must
name that hop, its resource and its log. Each break is undone before the test ends (the stack is
shared with the other e2e modules), and every verify removes its canary, so the tests run in any order.

The breaks are ones the emulator enforces: it checks no IAM policy, so a Lambda without its ledger
grant would still write; a Lambda whose ledger table does not exist fails the same hop for real.
"""

from __future__ import annotations

import contextlib
import io
import time
from collections.abc import Iterator

import boto3
import pytest

from lakeloader.cli import main
from lakeloader.cli.stage import stack_name
from lakeloader.cli.verify import DEAD_LETTER_OUTPUT, stack_outputs
from lakeloader.config import canary
from lakeloader.control.contract import ENV_LEDGER_TABLE

pytestmark = pytest.mark.e2e

GREEN_HOPS = [
    f"{engine}: {hop}"
    for engine in ("glue", "emr")
    for hop in ("land", "arrival Lambda -> ledger", "job run", "iceberg commit", "read through the catalog")
]


def stage_of(e2e) -> str:
    return e2e.stack.config_table.removesuffix("-config").rpartition("-")[2]


def verify(e2e, *args: str) -> tuple[int, str, float]:
    """`lakeloader verify` in this process: exit code, output, wall seconds."""
    out, started = io.StringIO(), time.monotonic()
    with contextlib.redirect_stdout(out):
        code = main(["verify", "--stage", stage_of(e2e), *args])
    seconds = time.monotonic() - started
    print(f"verify {' '.join(args)}: exit {code} in {seconds:.0f} s\n{out.getvalue()}")
    return code, out.getvalue(), seconds


def assert_canary_removed(e2e) -> None:
    stack = e2e.stack
    dead = boto3.client("sqs").receive_message(QueueUrl=dead_letter_queue(e2e), VisibilityTimeout=0)
    assert not dead.get("Messages"), dead["Messages"]
    listed = boto3.client("s3").list_object_versions(Bucket=stack.raw_bucket, Prefix=canary.CANARY_PREFIX)
    assert not listed.get("Versions") and not listed.get("DeleteMarkers")
    for engine in canary.CANARY_ENGINES:
        table_id = canary.canary_id(engine)
        assert stack.ledger().objects(table_id) == []
        assert stack.ledger().get_lock(table_id) is None
        with pytest.raises(boto3.client("glue").exceptions.EntityNotFoundException):
            boto3.client("glue").get_table(
                DatabaseName=stack.glue_database(canary.CANARY_DATABASE), Name=engine
            )


def dead_letter_queue(e2e) -> str:
    """The arrival Lambda's dead-letter queue, as verify finds it (the stack's output)."""
    return stack_outputs(stack_name(stage_of(e2e)))[DEAD_LETTER_OUTPUT]


def settle(e2e) -> None:
    """Let the S3 notification's retries end before a break is undone: a late retry must not meet the
    repaired stack and start a run for a canary the verify removed."""
    if e2e.emulator is None:
        time.sleep(30)
        return
    for thread in list(e2e.emulator.runtime.async_threads):
        thread.join(timeout=120)


@contextlib.contextmanager
def arrival_ledger_table(e2e, name: str) -> Iterator[None]:
    client, function = boto3.client("lambda"), e2e.stack.arrival_function
    variables = client.get_function_configuration(FunctionName=function)["Environment"]["Variables"]
    client.update_function_configuration(
        FunctionName=function, Environment={"Variables": {**variables, ENV_LEDGER_TABLE: name}}
    )
    try:
        yield
    finally:
        settle(e2e)
        client.update_function_configuration(FunctionName=function, Environment={"Variables": variables})


@contextlib.contextmanager
def ingest_script_missing(e2e) -> Iterator[str]:
    location = boto3.client("glue").get_job(JobName=e2e.stack.ingest_job)["Job"]["Command"]["ScriptLocation"]
    bucket, _, key = location.removeprefix("s3://").partition("/")
    s3 = boto3.client("s3")
    script = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    s3.delete_object(Bucket=bucket, Key=key)
    try:
        yield location
    finally:
        settle(e2e)
        s3.put_object(Bucket=bucket, Key=key, Body=script)


def test_verify_follows_the_canary_through_every_hop_then_removes_it(e2e):
    code, out, _seconds = verify(e2e, "--timeout", "900")

    assert code == 0, out
    passed = [line.split(" s  ", 1)[1].split(":", 2) for line in out.splitlines() if line.startswith("ok ")]
    assert [":".join(p[:2]) for p in passed] == [*GREEN_HOPS, "alarm topic: arn"][: len(passed)]
    assert len(passed) == len(GREEN_HOPS) + 1, out
    assert f"{canary.CANARY_ROWS} rows of verify-" in out
    assert "Athena: no reader of the stage queries through Athena" in out
    assert_canary_removed(e2e)


def test_an_arrival_lambda_that_cannot_reach_its_ledger_fails_that_hop_with_its_log(e2e):
    """The hop ends when Lambda gives up on the event (its dead-letter queue), not at the timeout."""
    with arrival_ledger_table(e2e, "no-such-ledger"):
        code, out, seconds = verify(e2e, "--timeout", "120")

    assert code == 1, out
    assert "FAIL glue: arrival Lambda -> ledger" in out
    assert f"resource: Lambda {e2e.stack.arrival_function}" in out
    assert f"log group /aws/lambda/{e2e.stack.arrival_function}:" in out
    assert "ResourceNotFoundException" in out  # the function's own error, from its log
    if e2e.emulator is not None:  # elsewhere Lambda's retries may outlast the timeout (AWS: 3 minutes)
        assert "after its retries: it went to the dead-letter queue" in out and seconds < 120, out
        assert "ResourceNotFoundException" in out.split("dead-letter queue", 1)[1]  # the error it went with
    assert "ok   " in out and "job run" not in out.split("FAIL", 1)[0]
    assert_canary_removed(e2e)


def test_a_job_whose_script_is_missing_fails_the_job_run_hop_naming_the_run(e2e):
    with ingest_script_missing(e2e) as script:
        code, out, _ = verify(e2e, "--timeout", "300")

    assert code == 1, out
    assert "FAIL glue: job run" in out
    assert f"resource: Glue job {e2e.stack.ingest_job} run " in out
    assert "FAILED: " in out and (e2e.emulator is None or script in out)  # the run's own error
    assert "ok   " in out and "glue: arrival Lambda -> ledger" in out.split("FAIL", 1)[0]
    assert_canary_removed(e2e)
