"""`cdk destroy` of a dev stage whose S3 Tables table bucket holds a table, on the embedded emulator:
the stack's delete sends its custom resources CloudFormation's Delete (the emulator does, as
CloudFormation does), the teardown resource empties the bucket, and the namespaces and the bucket
then go. The emulator refuses to delete a namespace that holds a table, or a bucket that holds a
namespace, as S3 Tables does ("DeleteNamespace", "DeleteTableBucket", Amazon S3 Tables API Reference),
so without the teardown this delete fails."""

from __future__ import annotations

import time

import boto3
import pytest

from lakeloader_dev.emulator import Emulator
from tests.e2e.conftest import E2E_CONTEXT

pytestmark = pytest.mark.e2e

NAMESPACE = "s3t_crm"  # tests/e2e/tables.yaml's S3 Tables database


def test_destroying_a_dev_stage_empties_its_table_bucket_and_succeeds(emulator: Emulator) -> None:
    from lakeloader_dev.emulator import patches_cloudformation
    from lakeloader_dev.emulator.deploy import deploy

    deployment = deploy(
        endpoint=emulator.endpoint,
        context=E2E_CONTEXT,
        failures=patches_cloudformation.CFN_FAILURES.get,
        timeout=400,
    )
    s3tables = boto3.client("s3tables")
    (bucket,) = [
        b["arn"] for b in s3tables.list_table_buckets()["tableBuckets"] if b["name"].endswith("-tables")
    ]
    # what a job's first run does: a table in the stack's namespace
    s3tables.create_table(tableBucketARN=bucket, namespace=NAMESPACE, name="customers", format="ICEBERG")

    cfn = boto3.client("cloudformation")
    stack_id = cfn.describe_stacks(StackName=deployment.stack_name)["Stacks"][0]["StackId"]
    cfn.delete_stack(StackName=deployment.stack_name)
    deadline = time.monotonic() + 120
    while (
        status := cfn.describe_stacks(StackName=stack_id)["Stacks"][0]["StackStatus"]
    ) != "DELETE_COMPLETE":
        assert status != "DELETE_FAILED" and time.monotonic() < deadline, status
        time.sleep(0.5)
    assert [b for b in s3tables.list_table_buckets()["tableBuckets"] if b["arn"] == bucket] == []
    runs = [i for i in emulator.journal.invocations if i.function.endswith("-table-bucket-teardown")]
    assert [i.ok for i in runs] == [True, True], runs  # its Create, then its Delete
    assert runs[-1].result["deleted"] == [f"table {NAMESPACE}.customers", f"namespace {NAMESPACE}"]
