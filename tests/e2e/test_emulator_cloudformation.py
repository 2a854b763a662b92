"""The emulator's CloudFormation, over real HTTP without Spark: custom resources get string
properties and a crashing handler fails the stack; buckets get their versioning."""

from __future__ import annotations

import json

import boto3
import pytest

from lakeloader_dev.emulator import Emulator

pytestmark = pytest.mark.e2e


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
