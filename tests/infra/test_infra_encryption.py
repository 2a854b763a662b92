"""Encryption (`encryption.customer_managed_key`): everything that stores data is encrypted with the stage's
customer-managed key (the stack's own, or yours by ARN), never with an AWS-managed one."""

from __future__ import annotations

import json

import pytest

from infra.settings import SettingsError
from tests.infra.cdk_helpers import CREATED_VPC, READERS, synthesize, with_settings

YOUR_KEY = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
# Where each resource type names its key. The access-log bucket is the one exception: S3 server access
# logging delivers only to SSE-S3 buckets (docs/deploy.md).
KEY_OF = {
    "AWS::S3::Bucket": lambda p: p["BucketEncryption"]["ServerSideEncryptionConfiguration"][0][
        "ServerSideEncryptionByDefault"
    ].get("KMSMasterKeyID"),
    "AWS::DynamoDB::Table": lambda p: p["SSESpecification"]["KMSMasterKeyId"],
    "AWS::SQS::Queue": lambda p: p["KmsMasterKeyId"],
    "AWS::SNS::Topic": lambda p: p["KmsMasterKeyId"],
    "AWS::Logs::LogGroup": lambda p: p["KmsKeyId"],
    "AWS::Glue::SecurityConfiguration": lambda p: p["EncryptionConfiguration"]["S3Encryptions"][0][
        "KmsKeyArn"
    ],
    "AWS::EMRServerless::Application": lambda p: p["MonitoringConfiguration"]["S3MonitoringConfiguration"][
        "EncryptionKeyArn"
    ],
    "AWS::Athena::WorkGroup": lambda p: p["WorkGroupConfiguration"]["ResultConfiguration"][
        "EncryptionConfiguration"
    ]["KmsKey"],
}
EVERYTHING = {"readers": READERS, "network": CREATED_VPC}


def keys_used(built) -> dict[str, object]:
    """Logical id -> the key each data-holding resource names (None: not KMS)."""
    found = {}
    for logical, resource in built.template_json["Resources"].items():
        props = resource.get("Properties", {})
        if resource["Type"] in KEY_OF:
            found[logical] = KEY_OF[resource["Type"]](props)
        elif resource["Type"] == "AWS::Lambda::Function" and props.get("Environment"):
            found[logical] = props.get("KmsKeyArn")
    return found


def access_logs(built) -> str:
    return built.logical_id(built.stack.storage.access_logs)


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_everything_that_holds_data_uses_the_stage_key(synth, stage):
    built = synth(stage, **with_settings(stage, **EVERYTHING))
    key = {"Fn::GetAtt": [built.logical_id(built.stack.storage.key), "Arn"]}
    used = keys_used(built)
    assert used.pop(access_logs(built)) is None
    assert {k for k, v in used.items() if v != key} == set()
    kinds = {built.template_json["Resources"][k]["Type"] for k in used}
    assert kinds == {*KEY_OF, "AWS::Lambda::Function"}, "every kind is checked at least once"


@pytest.mark.synth
def test_your_key_replaces_the_stacks_everywhere_and_its_policy_statements_are_output(tmp_path):
    built = synthesize(
        tmp_path, "prod", **with_settings("prod", encryption={"customer_managed_key": YOUR_KEY}, **EVERYTHING)
    )
    assert built.resources("AWS::KMS::Key") == {}
    used = keys_used(built)
    assert used.pop(access_logs(built)) is None
    assert {k for k, v in used.items() if v != YOUR_KEY} == set()
    outputs = built.template_json["Outputs"]
    assert outputs["KmsKeyArn"]["Value"] == YOUR_KEY
    statements = json.loads(json.dumps(built.stack.resolve(outputs["KeyPolicyStatements"]["Value"])))
    assert "AllowCloudWatchLogsOfThisAccount" in str(statements)
    assert "AllowCloudWatchAlarms" in str(statements)
    assert "AllowEventBridgeRules" in str(statements)


def test_the_stacks_own_key_needs_no_statements_output(prod):
    assert "KeyPolicyStatements" not in prod.template_json["Outputs"]


@pytest.mark.parametrize(
    "value, message",
    [
        (False, "customer_managed_key: false is not offered"),
        ("alias/mine", "'alias/mine' is not a KMS key ARN"),
    ],
)
def test_an_unusable_key_setting_fails_synth_with_one_line(tmp_path, value, message):
    with pytest.raises(SettingsError, match=message) as raised:
        synthesize(tmp_path, "dev", **with_settings("dev", encryption={"customer_managed_key": value}))
    assert "\n" not in str(raised.value)
