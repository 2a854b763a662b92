"""A dev stage's table bucket emptied when the stack is deleted (lakeloader.control.table_bucket_teardown), so
that `cdk destroy` succeeds once a job has created a table: S3 Tables deletes a bucket only when it
holds no namespace, and a namespace only when it holds no table. A custom resource whose Delete runs
before CloudFormation deletes the namespaces and the bucket (it depends on them). Only where the
bucket goes with the stack (`removal: destroy`); a prod stage keeps its bucket and its tables.
"""

from __future__ import annotations

from aws_cdk import CustomResource, Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from infra.functions import PythonFunction, lambda_source
from infra.nag import acknowledge_wildcards
from infra.s3_tables import TableBucket
from infra.settings_names import Retention, StageNames
from lakeloader.control import contract, table_bucket_teardown

FUNCTION_NAME = "table-bucket-teardown"


class TableBucketTeardown(Construct):
    """The teardown Lambda, its S3 Tables permissions and its custom resource."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        names: StageNames,
        retention: Retention,
        bucket: TableBucket,
        key: kms.IKey,
    ) -> None:
        super().__init__(scope, construct_id)
        self.function = PythonFunction(
            self,
            "Function",
            names=names,
            retention=retention,
            name=FUNCTION_NAME,
            description="Empties the stage's S3 Tables table bucket when the stack is deleted (dev stages)",
            source_dir=lambda_source("table_bucket_teardown"),
            key=key,
            environment={contract.ENV_LOG_LEVEL: "INFO"},
            timeout=Duration.minutes(10),
        )
        role = self.function.role
        role.add_to_policy(
            iam.PolicyStatement(
                sid="EmptyTableBucket",
                actions=["s3tables:ListNamespaces", "s3tables:ListTables", "s3tables:DeleteNamespace"],
                resources=[bucket.arn],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="DeleteTables", actions=["s3tables:DeleteTable"], resources=[bucket.tables_arn]
            )
        )
        acknowledge_wildcards(
            role,
            [f"Resource::<{Stack.of(self).get_logical_id(bucket.bucket)}.TableBucketARN>/table/*"],
            reason="The stack's delete drops every table of the stage's own (dev) table bucket, whose ids "
            "S3 Tables assigns at run time.",
        )
        self.resource = CustomResource(
            self,
            "Empty",
            service_token=self.function.function.function_arn,
            resource_type="Custom::LakeloaderTableBucketTeardown",
            properties={table_bucket_teardown.PROPERTY_BUCKET: bucket.arn},
            service_timeout=Duration.minutes(15),
        )
        # its Delete runs first: before the namespaces, the bucket, and the function's own role
        self.resource.node.add_dependency(role, bucket.bucket, *bucket.namespaces.values())
