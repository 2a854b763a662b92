"""A dev stage's table bucket is emptied when the stack is deleted, so `cdk destroy` succeeds once a job
has created tables (S3 Tables deletes a bucket only when it holds no namespace, and a namespace only
when it holds no table: "DeleteTableBucket", "DeleteNamespace", Amazon S3 Tables API Reference); a prod
stage keeps its bucket (DeletionPolicy Retain) and has no such resource."""

from __future__ import annotations

import pytest

from tests.infra.iam_eval import ACCOUNT, REGION, allowed, role_statements

CONFIG = "tests/fixtures/s3_tables/tables.yaml"
BUCKET_ARN = f"arn:aws:s3tables:{REGION}:{ACCOUNT}:bucket/lakeloader-dev-tables"


@pytest.fixture(scope="module")
def dev_s3t(synth):
    return synth("dev", config=CONFIG)


def test_a_dev_stage_empties_its_table_bucket_before_cloudformation_deletes_it(dev_s3t):
    (logical, teardown), *rest = dev_s3t.resources("Custom::LakeloaderTableBucketTeardown").items()
    assert rest == []
    bucket = dev_s3t.logical_id(dev_s3t.stack.table_bucket.bucket)
    namespaces = [dev_s3t.logical_id(n) for n in dev_s3t.stack.table_bucket.namespaces.values()]
    # CloudFormation deletes in the reverse order of DependsOn: this resource's Delete runs first
    assert {bucket, *namespaces} <= set(teardown["DependsOn"])
    assert teardown["Properties"]["TableBucketArn"] == {"Fn::GetAtt": [bucket, "TableBucketARN"]}
    assert dev_s3t.template_json["Resources"][bucket]["DeletionPolicy"] == "Delete"


def test_the_teardown_function_may_empty_its_bucket_and_nothing_else(dev_s3t):
    (role,) = [
        logical
        for logical, r in dev_s3t.resources("AWS::IAM::Role").items()
        if "TableBucketTeardown" in logical or "S3TablesTeardown" in logical
    ]
    statements = role_statements(dev_s3t.template_json, role)
    table = f"{BUCKET_ARN}/table/0b1c2d3e-aaaa-4bbb-8ccc-123456789012"
    for action, resource in [
        ("s3tables:ListNamespaces", BUCKET_ARN),
        ("s3tables:ListTables", BUCKET_ARN),
        ("s3tables:DeleteNamespace", BUCKET_ARN),
        ("s3tables:DeleteTable", table),
    ]:
        assert allowed(statements, action, resource), (action, resource)
    other = f"arn:aws:s3tables:{REGION}:{ACCOUNT}:bucket/someone-elses-tables"
    assert not allowed(statements, "s3tables:DeleteTable", f"{other}/table/x")
    assert not allowed(statements, "s3tables:DeleteTableBucket", BUCKET_ARN)


def test_a_prod_stage_keeps_its_table_bucket(synth):
    prod = synth("prod", config=CONFIG)
    assert prod.resources("Custom::LakeloaderTableBucketTeardown") == {}
    bucket = prod.logical_id(prod.stack.table_bucket.bucket)
    assert prod.template_json["Resources"][bucket]["DeletionPolicy"] == "Retain"
