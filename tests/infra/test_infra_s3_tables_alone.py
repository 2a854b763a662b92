"""The table bucket's rules of test_infra_s3_tables and test_infra_key_policy, against the TableBucket
construct alone: the stage's storage, two job roles and the bucket in an empty stack, seconds instead of a
stage's synth, so `make check` and `make mutate` (MUTATE_INFRA_TESTS: each infra mutant runs every test of
its set) run them. test_infra_s3_tables runs the same tests against a whole stage, where the stack wires
the construct to the stage's real job roles."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template

from infra.app import cdk_json_context
from infra.s3_tables import TableBucket
from infra.settings import resolve_stage
from infra.stack import storage_settings
from infra.storage import LakeStorage
from lakeloader.config import load_config
from tests.infra.cdk_helpers import Synth, with_settings
from tests.infra.test_infra_key_policy import DOCUMENTED, service_statements

# collected here too, where `s3t` is the construct alone (pytest resolves a test's fixtures in the
# module that collects it)
from tests.infra.test_infra_s3_tables import (  # noqa: F401
    CONFIG,
    only,
    test_job_roles_get_what_the_catalog_and_maintain_call_and_nothing_else,
    test_job_roles_read_the_bucket_but_do_not_manage_it,
    test_job_roles_write_tables_in_the_stage_bucket_only,
    test_one_namespace_per_database_of_s3_tables_tables,
    test_table_bucket_is_encrypted_with_the_stage_key,
    test_table_bucket_policy_names_the_job_roles,
    test_the_table_buckets_resources_keep_their_logical_ids,
    test_unreferenced_file_removal_follows_the_stage_settings,
)


def table_bucket_alone(stage_name: str, **settings) -> Synth:
    """The table bucket of tests/fixtures/s3_tables/tables.yaml with the stage's storage and two job
    roles standing in for the stage's Glue and EMR roles, granted and named in its policy as the stack's
    processing does it."""
    stack = Stack(App(context=cdk_json_context()), "TableBucket")
    context = {**cdk_json_context(), **with_settings(stage_name, **settings), "stage": stage_name}
    stage = resolve_stage(context)
    stack.storage = LakeStorage(stack, "Storage", settings=storage_settings(stage))
    stack.table_bucket = TableBucket(
        stack,
        "S3Tables",
        names=stage.names,
        retention=stage.retention,
        settings=stage.settings.s3_tables,
        lake=load_config(CONFIG),
        storage=stack.storage,
    )
    roles = [
        iam.Role(stack, name, assumed_by=iam.ServicePrincipal(service))
        for name, service in (
            ("GlueJobRole", "glue.amazonaws.com"),
            ("EmrJobRole", "emr-serverless.amazonaws.com"),
        )
    ]
    for role in roles:
        stack.table_bucket.grant_jobs(role)
    stack.table_bucket.add_policy()
    stack.processing = SimpleNamespace(glue_role=roles[0], emr_role=roles[1])
    template_json = Template.from_stack(stack).to_json()
    return Synth(stage_name, None, stack, None, None, template_json, Template.from_json(template_json))


@pytest.fixture(scope="module")
def s3t() -> Synth:
    return table_bucket_alone("dev")


def test_the_table_bucket_alone_takes_both_removal_windows_from_the_stage():
    """The stage's own days, not AWS's defaults, each in its own field: unreferenced_days 4 (an
    unreferenced file turns noncurrent), noncurrent_days 12 (a noncurrent file is deleted)."""
    alone = table_bucket_alone("dev", s3_tables={"unreferenced_days": 4, "noncurrent_days": 12})
    _, bucket = only(alone, "AWS::S3Tables::TableBucket")
    assert bucket["Properties"]["UnreferencedFileRemoval"] == {
        "Status": "Enabled",
        "UnreferencedDays": 4,
        "NoncurrentDays": 12,
    }


def test_a_dev_stages_table_bucket_goes_with_its_stack_and_a_prod_stages_outlives_it(s3t):
    """The stage's retention (test_infra_s3_tables_teardown asserts both on whole stages)."""
    prod = table_bucket_alone("prod")
    for stage, deletion_policy in ((s3t, "Delete"), (prod, "Retain")):
        _, bucket = only(stage, "AWS::S3Tables::TableBucket")
        assert bucket["DeletionPolicy"] == bucket["UpdateReplacePolicy"] == deletion_policy, stage.stage


def test_the_key_lets_s3_tables_maintenance_in_for_this_table_bucket_only(s3t):
    """The statement test_infra_key_policy takes from "Permission requirements for S3 Tables SSE-KMS
    encryption": the maintenance principal's actions, on the key itself (`*` in a key policy), for
    objects of this table bucket only."""
    principal = "maintenance.s3tables.amazonaws.com"
    assert service_statements(s3t)[principal] == DOCUMENTED[principal]
    (key,) = s3t.resources("AWS::KMS::Key").values()
    [statement] = [
        s
        for s in key["Properties"]["KeyPolicy"]["Statement"]
        if s.get("Principal", {}).get("Service") == principal
    ]
    assert (statement["Effect"], statement["Resource"]) == ("Allow", "*")
