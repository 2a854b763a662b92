"""The writers' rules of test_infra_writers, against the Writers construct alone: the stage's storage and
the writers in an empty stack, seconds instead of a stage's synth, so `make check` and `make mutate`
(MUTATE_INFRA_TESTS: each infra mutant runs every test of its set) run them. test_infra_writers runs
the same tests against a whole stage, where the stack wires the construct."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from aws_cdk import App, Stack
from aws_cdk.assertions import Template

from infra.app import cdk_json_context
from infra.settings import resolve_stage
from infra.stack import storage_settings
from infra.storage import LakeStorage
from infra.writers import Writers, listed_prefixes
from tests.infra.cdk_helpers import with_settings
from tests.infra.iam_eval import allowed

# collected here too, where `built` is the construct alone (pytest resolves a test's fixtures in the
# module that collects it)
from tests.infra.test_infra_writers import (  # noqa: F401
    KINDS,
    VIA_S3,
    names,
    policy,
    test_a_dms_endpoint_may_land_files_under_its_prefixes,
    test_a_kafka_connect_sink_may_list_and_resume_its_multipart_uploads,
    test_a_writer_may_do_nothing_else,
    test_an_s3_sink_may_upload_in_parts_under_its_prefix,
    test_each_kind_adds_only_what_its_writer_needs,
    test_every_writer_has_its_own_policy_on_its_own_role,
    test_the_prefix_condition_accepts_the_folder_with_and_without_its_slash,
    through_s3,
)


@pytest.fixture(scope="module")
def built():
    """The writers construct with the stage's storage, alone in an empty stack."""
    stack = Stack(App(context=cdk_json_context()), "Writers")
    stage = resolve_stage({**cdk_json_context(), **with_settings("dev", writers=KINDS), "stage": "dev"})
    stack.storage = LakeStorage(stack, "Storage", settings=storage_settings(stage))
    stack.writers = Writers(
        stack, "Writers", names=stage.names, writers=stage.settings.writers, storage=stack.storage
    )
    return SimpleNamespace(stack=stack, template_json=Template.from_stack(stack).to_json())


def test_the_writers_construct_alone_grants_the_stage_key_for_multipart_uploads_through_s3_only(built):
    """A multipart upload with SSE-KMS needs kms:GenerateDataKey and kms:Decrypt of the uploader
    (test_an_s3_sink_may_upload_in_parts_under_its_prefix), for every writer: the stage's key, through
    S3, for the raw bucket only."""
    n = names(built)
    for role in ("dms-s3-target", "msk-s3-sink", "erp-exporter"):
        _, statements = policy(built, role)
        for action in ("kms:GenerateDataKey", "kms:Decrypt"):
            assert allowed(statements, action, n["key"], through_s3(n["raw"])), (role, action)
            assert not allowed(statements, action, n["key"], through_s3(n["curated"])), (role, action)
            assert not allowed(statements, action, n["key"], {"kms:ViaService": VIA_S3}), (role, action)


def test_only_the_trailing_slash_is_taken_off_a_listed_folder():
    """`rstrip("/")`, not a set of other characters: a folder ending in any letter (`sales/TAX/`) is
    listed as `sales/TAX` and `sales/TAX/*` (make mutate: `rstrip("XX/XX")` survived every folder the
    writers above have)."""
    assert listed_prefixes(["sales/TAX/", "erp/"]) == ["erp", "erp/*", "sales/TAX", "sales/TAX/*"]
