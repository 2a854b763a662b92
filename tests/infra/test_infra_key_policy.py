"""Every key-policy statement for an AWS service principal is the one that principal's AWS page shows:
its actions, and no condition key the page does not show (a condition AWS does not promise to send
denies the service, and the failure shows up only in a real account: a table bucket that cannot create
tables, notifications dropped silently).

The documented statements, written out here rather than imported from infra (the code under test):

* `logs.<region>.amazonaws.com` -- CloudWatch Logs, "Encrypt log data in CloudWatch Logs using AWS Key
  Management Service", step 2 (https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html):
  kms:Encrypt*, Decrypt*, ReEncrypt*, GenerateDataKey*, Describe*, conditioned on `ArnLike
  kms:EncryptionContext:aws:logs:arn` (the log groups);
* `cloudwatch.amazonaws.com` and `events.amazonaws.com` -- Amazon SNS, "Enable compatibility between
  event sources from AWS services and encrypted topics"
  (https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html#compatibility-with-aws-services),
  and for alarms AWS re:Post "How do I configure a CloudWatch alarm with an encrypted SNS topic?"
  (https://repost.aws/knowledge-center/cloudwatch-configure-alarm-sns): kms:Decrypt and
  kms:GenerateDataKey*, no condition;
* `maintenance.s3tables.amazonaws.com` -- Amazon S3, "Permission requirements for S3 Tables SSE-KMS
  encryption", "Granting the S3 Tables maintenance service principal permissions to your KMS key"
  (https://docs.aws.amazon.com/AmazonS3/latest/userguide/s3-tables-kms-permissions.html):
  kms:GenerateDataKey and kms:Decrypt, conditioned on `StringLike kms:EncryptionContext:aws:s3:arn`
  `<table bucket ARN>/*` only.
"""

from __future__ import annotations

import pytest

from tests.infra.cdk_helpers import CREATED_VPC, READERS, with_settings
from tests.infra.iam_eval import ACCOUNT, REGION, Resolver

S3_TABLES_CONFIG = "tests/fixtures/s3_tables/tables.yaml"
TABLE_BUCKET_ARN = f"arn:aws:s3tables:{REGION}:{ACCOUNT}:bucket/lakeloader-dev-tables"
PUBLISHER = (["kms:Decrypt", "kms:GenerateDataKey*"], {})
DOCUMENTED = {
    f"logs.{REGION}.amazonaws.com": (
        ["kms:Decrypt*", "kms:Describe*", "kms:Encrypt*", "kms:GenerateDataKey*", "kms:ReEncrypt*"],
        {"ArnLike": {"kms:EncryptionContext:aws:logs:arn": f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:*"}},
    ),
    "cloudwatch.amazonaws.com": PUBLISHER,
    "events.amazonaws.com": PUBLISHER,
    "maintenance.s3tables.amazonaws.com": (
        ["kms:Decrypt", "kms:GenerateDataKey"],
        {"StringLike": {"kms:EncryptionContext:aws:s3:arn": f"{TABLE_BUCKET_ARN}/*"}},
    ),
}


def service_statements(built) -> dict[str, tuple[list[str], dict]]:
    """Service principal -> (its actions, its conditions resolved) in the stage key's policy."""
    (key,) = built.resources("AWS::KMS::Key").values()
    resolve = Resolver(built.template_json)
    found = {}
    for statement in key["Properties"]["KeyPolicy"]["Statement"]:
        service = statement.get("Principal", {}).get("Service")
        if service is None:
            continue
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        conditions = {
            operator: {name: resolve(value) for name, value in keys.items()}
            for operator, keys in statement.get("Condition", {}).items()
        }
        # CDK's SNS rule target adds its own copy of the EventBridge statement: a copy must be the same
        assert found.setdefault(resolve(service), (sorted(actions), conditions)) == (
            sorted(actions),
            conditions,
        ), f"{service}: two different statements"
    return found


@pytest.mark.parametrize("lake_formation", ["false", "true"])
def test_each_service_principals_key_statement_is_the_one_its_aws_page_shows(synth, lake_formation):
    """Every principal the key names is one of the documented ones, with the page's actions and
    conditions exactly; the S3 Tables stage with readers and a created VPC names them all."""
    built = synth(
        "dev",
        config=S3_TABLES_CONFIG,
        lake_formation=lake_formation,
        **with_settings("dev", readers=READERS, network=CREATED_VPC),
    )
    found = service_statements(built)
    assert set(found) == set(DOCUMENTED), "a service principal without its documented statement here"
    for service, documented in DOCUMENTED.items():
        assert found[service] == documented, service
