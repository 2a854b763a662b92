"""Storage: key rotation, bucket encryption, versioning, public access, TLS, lifecycle, removal."""

from __future__ import annotations

from aws_cdk.assertions import Match

from tests.infra.cdk_helpers import join, logical_ids, stage_settings

LAKE_BUCKETS = ["Raw", "Curated", "Quarantine", "Assets"]
BLOCK_ALL_PUBLIC_ACCESS = {
    "BlockPublicAcls": True,
    "BlockPublicPolicy": True,
    "IgnorePublicAcls": True,
    "RestrictPublicBuckets": True,
}


def bucket_id(synth, name: str) -> str:
    return synth.logical_id(getattr(synth.stack.storage, name.lower()))


def test_kms_key_rotates_and_has_stage_alias(stage_synth):
    stage_synth.template.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})
    stage_synth.template.has_resource_properties(
        "AWS::KMS::Alias", {"AliasName": f"alias/lakeloader-{stage_synth.stage}"}
    )


def test_lake_buckets_use_the_stage_key_versioning_and_block_public_access(stage_synth):
    key_id = stage_synth.logical_id(stage_synth.stack.storage.key)
    for name in LAKE_BUCKETS:
        props = stage_synth.template_json["Resources"][bucket_id(stage_synth, name)]["Properties"]
        rule = props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]
        assert rule["ServerSideEncryptionByDefault"] == {
            "SSEAlgorithm": "aws:kms",
            "KMSMasterKeyID": {"Fn::GetAtt": [key_id, "Arn"]},
        }, name
        assert rule["BucketKeyEnabled"] is True
        assert props["VersioningConfiguration"] == {"Status": "Enabled"}
        assert props["PublicAccessBlockConfiguration"] == BLOCK_ALL_PUBLIC_ACCESS
        assert props["LoggingConfiguration"]["DestinationBucketName"] == {
            "Ref": bucket_id(stage_synth, "access_logs")
        }
        assert join(props["BucketName"]).startswith(f"lakeloader-{stage_synth.stage}-{name.lower()}-")


def test_access_log_bucket_uses_sse_s3_versioning_and_blocks_public_access(dev):
    props = dev.template_json["Resources"][bucket_id(dev, "access_logs")]["Properties"]
    assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0][
        "ServerSideEncryptionByDefault"
    ] == {"SSEAlgorithm": "AES256"}
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    assert props["PublicAccessBlockConfiguration"] == BLOCK_ALL_PUBLIC_ACCESS  # CDK writes none unless asked


def test_every_bucket_policy_denies_plain_http_and_old_tls(stage_synth):
    policies = stage_synth.resources("AWS::S3::BucketPolicy")
    buckets = {p["Properties"]["Bucket"]["Ref"] for p in policies.values()}
    assert buckets == {bucket_id(stage_synth, n) for n in [*LAKE_BUCKETS, "access_logs"]}
    for policy in policies.values():
        denies = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
        assert {"Bool": {"aws:SecureTransport": "false"}} in [s["Condition"] for s in denies]
        assert {"NumericLessThan": {"s3:TlsVersion": 1.2}} in [s["Condition"] for s in denies]


def test_raw_lifecycle_moves_to_colder_storage_after_configured_days(stage_synth):
    transition = stage_settings(stage_synth.stage)["raw_transition"]
    props = stage_synth.template_json["Resources"][bucket_id(stage_synth, "raw")]["Properties"]
    rules = {r["Id"]: r for r in props["LifecycleConfiguration"]["Rules"]}
    assert rules["raw-to-colder-storage"]["Transitions"] == [
        {"StorageClass": transition["storage_class"], "TransitionInDays": transition["days"]}
    ]


def test_noncurrent_versions_expire_in_every_lake_bucket(stage_synth):
    days = stage_settings(stage_synth.stage)["noncurrent_version_expiration_days"]
    for name in LAKE_BUCKETS:
        props = stage_synth.template_json["Resources"][bucket_id(stage_synth, name)]["Properties"]
        expirations = [
            r.get("NoncurrentVersionExpiration", {}).get("NoncurrentDays")
            for r in props["LifecycleConfiguration"]["Rules"]
        ]
        assert days in expirations, name


def test_dev_destroys_and_empties_buckets(dev):
    for name in [*LAKE_BUCKETS, "access_logs"]:
        resource = dev.template_json["Resources"][bucket_id(dev, name)]
        assert resource["DeletionPolicy"] == "Delete"
    assert len(dev.resources("Custom::S3AutoDeleteObjects")) == 5
    dev.template.has_resource("AWS::KMS::Key", {"DeletionPolicy": "Delete"})


def test_prod_retains_buckets_tables_and_key(prod):
    for name in [*LAKE_BUCKETS, "access_logs"]:
        assert prod.template_json["Resources"][bucket_id(prod, name)]["DeletionPolicy"] == "Retain"
    assert prod.resources("Custom::S3AutoDeleteObjects") == {}
    prod.template.has_resource("AWS::KMS::Key", {"DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain"})
    prod.template.all_resources("AWS::DynamoDB::Table", {"DeletionPolicy": "Retain"})
    prod.template.all_resources_properties("AWS::DynamoDB::Table", {"DeletionProtectionEnabled": True})


def test_key_policy_lets_cloudwatch_logs_encrypt_only_this_accounts_log_groups(dev):
    dev.template.has_resource_properties(
        "AWS::KMS::Key",
        {
            "KeyPolicy": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Sid": "AllowCloudWatchLogsOfThisAccount",
                                "Condition": {
                                    "ArnLike": {"kms:EncryptionContext:aws:logs:arn": Match.any_value()}
                                },
                            }
                        )
                    ]
                )
            }
        },
    )


def test_storage_keeps_its_logical_ids(dev):
    """A renamed bucket or key construct is a new bucket or key on the next deploy (a retained one left
    behind, its data with it). The template snapshots pin these too; make mutate leaves them out."""
    assert logical_ids(dev, "Storage") == [
        "StorageAccessLogs96FB524C",
        "StorageAccessLogsAutoDeleteObjectsCustomResource1BC7586B",
        "StorageAccessLogsPolicyB327A790",
        "StorageAssets320D2163",
        "StorageAssetsAutoDeleteObjectsCustomResourceA398E1D4",
        "StorageAssetsPolicy78C408CC",
        "StorageCurated8783DDC7",
        "StorageCuratedAutoDeleteObjectsCustomResourceE921D4A3",
        "StorageCuratedPolicy3BBEC1BD",
        "StorageKeyAlias8B3EFC24",
        "StorageKeyBAA9457B",
        "StorageQuarantine381A7D7C",
        "StorageQuarantineAutoDeleteObjectsCustomResource68583914",
        "StorageQuarantinePolicy25BF76F8",
        "StorageRaw7E344C76",
        "StorageRawAllowBucketNotificationsTolakeloaderdevTriggersArrivalFunctionC573A256E30E9CBC",
        "StorageRawAutoDeleteObjectsCustomResource830A6E3E",
        "StorageRawNotifications6A5DAAA6",
        "StorageRawNotificationsHandlerPolicy64FE3133",
        "StorageRawPolicy99BA170A",
    ]
