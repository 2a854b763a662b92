"""Writers (`writers:`): a DMS endpoint's or an S3 sink's role may land files under its raw prefixes, with
the stage's key through S3, and do nothing else. Evaluated with IAM's wildcard and condition rules
(tests/infra/iam_eval.py); what a writer needs is written out here, from AWS's pages, not imported
from infra.writers (the code under test)."""

from __future__ import annotations

import pytest

from infra.settings import SettingsError
from tests.infra.cdk_helpers import WRITERS, synthesize, with_settings
from tests.infra.iam_eval import ACCOUNT, REGION, Resolver, allowed, managed_policies

DMS = WRITERS[0]["role_arn"]
EXPORTER = "arn:aws:iam::123456789012:role/erp-exporter"
# each kind once: the shared writers with their kinds, and a writer of another kind (the default)
KINDS = [
    {**WRITERS[0], "kind": "dms"},
    {**WRITERS[1], "kind": "kafka_connect"},
    {"role_arn": EXPORTER, "prefixes": ["erp/"]},
]
# Through S3 only, for the raw bucket only: the context S3 gives KMS for an object of a bucket with
# S3 Bucket Keys on.
VIA_S3 = "s3.us-east-1.amazonaws.com"


@pytest.fixture(scope="module")
def built(synth):
    return synth("dev", **with_settings("dev", writers=KINDS))


def names(built) -> dict[str, str]:
    resolve = Resolver(built.template_json)
    storage = built.stack.storage
    return {
        "raw": resolve(built.stack.resolve(storage.raw.bucket_name)),
        "curated": resolve(built.stack.resolve(storage.curated.bucket_name)),
        "key": resolve(built.stack.resolve(storage.key.key_arn)),
    }


def policy(built, role: str):
    return managed_policies(built.template_json)[f"lakeloader-dev-writer-{role}"]


def through_s3(raw: str) -> dict[str, str]:
    return {"kms:ViaService": VIA_S3, "kms:EncryptionContext:aws:s3:arn": f"arn:aws:s3:::{raw}"}


def test_a_dms_endpoint_may_land_files_under_its_prefixes(built):
    """Using Amazon S3 as a target for AWS Database Migration Service, prerequisites
    (https://docs.aws.amazon.com/dms/latest/userguide/CHAP_Target.S3.html): the service-access role
    puts, tags and deletes objects under BucketFolder and lists the bucket; with EncryptionMode SSE_KMS
    the key must let it encrypt (ServerSideEncryptionKmsKeyId, S3Settings)."""
    n = names(built)
    _, statements = policy(built, "dms-s3-target")
    raw = f"arn:aws:s3:::{n['raw']}"
    for prefix in ("crm/", "sales/"):
        obj = f"{raw}/{prefix}public/customers/20260101-120000000.parquet"
        for action in ("s3:PutObject", "s3:PutObjectTagging", "s3:DeleteObject"):
            assert allowed(statements, action, obj), (action, obj)
    # the prerequisites grant ListBucket on the bucket: DMS lists with prefixes of its own choosing
    for listed in ("crm/public/", "crm", "", "dms-connection-test/"):
        assert allowed(statements, "s3:ListBucket", raw, {"s3:prefix": listed}), listed
    assert allowed(statements, "s3:ListBucket", raw)
    assert allowed(statements, "kms:GenerateDataKey", n["key"], through_s3(n["raw"]))


def test_an_s3_sink_may_upload_in_parts_under_its_prefix(built):
    """Amazon S3 User Guide, "Multipart upload API and permissions"
    (https://docs.aws.amazon.com/AmazonS3/latest/userguide/mpuoverview.html): a multipart upload with
    SSE-KMS needs kms:GenerateDataKey and kms:Decrypt of the uploader, and s3:AbortMultipartUpload
    to abandon one. An S3 sink connector writes every file that way."""
    n = names(built)
    _, statements = policy(built, "msk-s3-sink")
    obj = f"arn:aws:s3:::{n['raw']}/shop/events/partition=0/shop.events+0+0000000000.json"
    assert allowed(statements, "s3:PutObject", obj)
    assert allowed(statements, "s3:AbortMultipartUpload", obj)
    assert allowed(statements, "kms:GenerateDataKey", n["key"], through_s3(n["raw"]))
    assert allowed(statements, "kms:Decrypt", n["key"], through_s3(n["raw"]))


def test_a_kafka_connect_sink_may_list_and_resume_its_multipart_uploads(built):
    """An S3 sink connector (`kind: kafka_connect`) lists its multipart uploads and their parts to
    resume or abandon them after a restart: s3:ListBucketMultipartUploads on the bucket,
    s3:ListMultipartUploadParts and s3:AbortMultipartUpload on its objects (Confluent, "Amazon S3
    Sink Connector for Confluent Platform", IAM policy,
    https://docs.confluent.io/kafka-connectors/s3-sink/current/overview.html; Amazon S3 User Guide,
    "Multipart upload API and permissions", https://docs.aws.amazon.com/AmazonS3/latest/userguide/mpuoverview.html).
    It lists only its own folder, given with or without the trailing `/`."""
    n = names(built)
    _, statements = policy(built, "msk-s3-sink")
    raw = f"arn:aws:s3:::{n['raw']}"
    obj = f"{raw}/shop/events/partition=0/shop.events+0+0000000000.json"
    assert allowed(statements, "s3:ListBucketMultipartUploads", raw)
    assert allowed(statements, "s3:ListMultipartUploadParts", obj)
    assert allowed(statements, "s3:AbortMultipartUpload", obj)
    assert not allowed(statements, "s3:ListMultipartUploadParts", f"{raw}/crm/x.json")
    for listed in ("shop/events", "shop/events/", "shop/events/partition=0/"):
        assert allowed(statements, "s3:ListBucket", raw, {"s3:prefix": listed}), listed
    assert not allowed(statements, "s3:GetObject", obj)


def test_the_prefix_condition_accepts_the_folder_with_and_without_its_slash(built):
    """A client lists a folder as `erp/` or `erp` (the AWS CLI's `s3 ls s3://bucket/erp` sends the
    latter); both are the writer's own. A sibling (`erpx`) and the bucket's root are not."""
    n = names(built)
    _, statements = policy(built, "erp-exporter")
    raw = f"arn:aws:s3:::{n['raw']}"
    for listed in ("erp", "erp/", "erp/2026/"):
        assert allowed(statements, "s3:ListBucket", raw, {"s3:prefix": listed}), listed
    for listed in ("erpx", "er", "", "crm/"):
        assert not allowed(statements, "s3:ListBucket", raw, {"s3:prefix": listed}), listed
    assert not allowed(statements, "s3:ListBucket", raw)


def test_each_kind_adds_only_what_its_writer_needs(built):
    base = {"s3:PutObject", "s3:PutObjectTagging", "s3:DeleteObject", "s3:AbortMultipartUpload"}
    base |= {"s3:ListBucket", "kms:GenerateDataKey", "kms:Decrypt"}
    sink = {"s3:ListBucketMultipartUploads", "s3:ListMultipartUploadParts"}
    for role, expected in (("dms-s3-target", base), ("msk-s3-sink", base | sink), ("erp-exporter", base)):
        _, statements = policy(built, role)
        assert {a for s in statements for a in s.actions} == expected, role
        assert all(s.effect == "Allow" for s in statements)


def test_a_writer_may_do_nothing_else(built):
    n = names(built)
    raw, curated = f"arn:aws:s3:::{n['raw']}", f"arn:aws:s3:::{n['curated']}"
    _, statements = policy(built, "erp-exporter")
    denied = [
        ("s3:PutObject", f"{raw}/shop/events/x.json"),  # another writer's prefix
        ("s3:PutObject", f"{raw}/erpx/x.parquet"),  # a sibling of its prefix
        ("s3:PutObject", f"{raw}/x.parquet"),
        ("s3:GetObject", f"{raw}/erp/public/customers/LOAD00000001.parquet"),  # it cannot read back
        ("s3:GetObjectVersion", f"{raw}/erp/public/customers/LOAD00000001.parquet"),
        ("s3:PutObject", f"{curated}/warehouse/x.parquet"),
        ("s3:DeleteObject", f"{curated}/warehouse/x.parquet"),
        ("s3:PutBucketPolicy", raw),
        ("kms:Decrypt", f"arn:aws:kms:{REGION}:{ACCOUNT}:key/another-key"),
    ]
    assert [d for d in denied if allowed(statements, *d, through_s3(n["raw"]))] == []
    assert not allowed(statements, "s3:ListBucket", raw, {"s3:prefix": "shop/"})
    # the stage's key only through S3, and only for the raw bucket
    assert not allowed(statements, "kms:Decrypt", n["key"])
    assert not allowed(statements, "kms:GenerateDataKey", n["key"], {"kms:ViaService": VIA_S3})
    assert not allowed(
        statements, "kms:Decrypt", n["key"], {**through_s3(n["raw"]), "kms:ViaService": "glue.x"}
    )
    assert not allowed(statements, "kms:Decrypt", n["key"], through_s3(n["curated"]))


def test_every_writer_has_its_own_policy_on_its_own_role(built):
    assert policy(built, "dms-s3-target")[0]["Roles"] == ["dms-s3-target"]
    assert policy(built, "msk-s3-sink")[0]["Roles"] == ["msk-s3-sink"]
    assert policy(built, "erp-exporter")[0]["Roles"] == ["erp-exporter"]


def test_no_writers_no_writer_policy(dev):
    assert not [name for name in managed_policies(dev.template_json) if "-writer-" in name]


@pytest.mark.parametrize(
    "writers, message",
    [
        ([{"role_arn": DMS, "prefixes": ["crm"]}], r"writers\.0\.prefixes: 'crm' is not a raw-bucket folder"),
        ([{"role_arn": DMS, "prefixes": ["/crm/"]}], r"'/crm/' is not a raw-bucket folder"),
        ([{"role_arn": DMS, "prefixes": []}], r"writers\.0\.prefixes"),
        ([{"role_arn": DMS, "prefixes": ["a/"], "kind": "glue"}], r"writers\.0\.kind"),
        (
            [{"role_arn": DMS, "prefixes": ["a/"]}, {"role_arn": DMS, "prefixes": ["b/"]}],
            "role name 'dms-s3-target' appears twice",
        ),
    ],
)
def test_inconsistent_writers_fail_synth_with_one_line(tmp_path, writers, message):
    with pytest.raises(SettingsError, match=message) as raised:
        synthesize(tmp_path, "dev", **with_settings("dev", writers=writers))
    assert "\n" not in str(raised.value)
