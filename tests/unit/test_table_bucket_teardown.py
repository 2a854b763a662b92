"""A dev stage's table bucket emptied on the stack's delete (control.table_bucket_teardown), against
moto's S3 Tables in process: every table and every namespace deleted, another bucket untouched, and
nothing done on Create or Update. S3 Tables deletes a bucket only once it holds no namespace, and a
namespace only once it holds no table ("DeleteTableBucket", "DeleteNamespace", Amazon S3 Tables API
Reference)."""

from __future__ import annotations

import boto3
import pytest
from moto import mock_aws

from lakeloader.control import table_bucket_teardown
from tests.aws_fixtures import AWS_TEST_ENV


@pytest.fixture
def s3tables(monkeypatch):
    for name, value in AWS_TEST_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        yield boto3.client("s3tables")


def bucket_with_tables(client, name: str) -> str:
    arn = client.create_table_bucket(name=name)["arn"]
    for namespace, tables in {"crm": ["customers", "orders"], "sales": ["lines"], "empty": []}.items():
        client.create_namespace(tableBucketARN=arn, namespace=[namespace])
        for table in tables:
            client.create_table(tableBucketARN=arn, namespace=namespace, name=table, format="ICEBERG")
    return arn


def contents(client, arn: str) -> dict[str, list[str]]:
    namespaces = [n["namespace"][0] for n in client.list_namespaces(tableBucketARN=arn)["namespaces"]]
    return {
        ns: sorted(t["name"] for t in client.list_tables(tableBucketARN=arn, namespace=ns)["tables"])
        for ns in namespaces
    }


def delete(arn: str) -> dict:
    return {"RequestType": "Delete", "ResourceProperties": {"TableBucketArn": arn}}


def test_the_stacks_delete_empties_its_bucket_and_only_its_bucket(s3tables):
    mine, other = bucket_with_tables(s3tables, "lakeloader-dev-tables"), bucket_with_tables(s3tables, "other")
    done = table_bucket_teardown.handle(delete(mine), s3tables=s3tables)
    assert contents(s3tables, mine) == {}
    assert sorted(done["deleted"]) == sorted(
        ["table crm.customers", "table crm.orders", "table sales.lines"]
        + ["namespace crm", "namespace sales", "namespace empty"]
    )
    assert contents(s3tables, other) == {"crm": ["customers", "orders"], "empty": [], "sales": ["lines"]}
    s3tables.delete_table_bucket(tableBucketARN=mine)  # what CloudFormation does next


@pytest.mark.parametrize("request_type", ["Create", "Update"])
def test_create_and_update_delete_nothing(s3tables, request_type):
    mine = bucket_with_tables(s3tables, "lakeloader-dev-tables")
    event = {**delete(mine), "RequestType": request_type}
    assert table_bucket_teardown.handle(event, s3tables=s3tables) == {"deleted": []}
    assert contents(s3tables, mine)["crm"] == ["customers", "orders"]
