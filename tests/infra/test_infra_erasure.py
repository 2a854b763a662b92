"""The operators' erasure policy (`<project>-<stage>-erase`): enough for `lakeloader erase`, nothing more.

What erase calls, read from lakeloader/jobs/erase.py and Iceberg's GlueCatalog/S3FileIO: GetDatabase,
GetTable, UpdateTable on the stage's tables (load, DELETE, rewrite, expire: commits); CreateDatabase
and CreateTable for its audit table; Get/Put/Delete/AbortMultipartUpload on warehouse objects;
ListBucket for the orphan-file listing; ListBucketVersions and DeleteObjectVersion for the purge of
old object versions (prefix-scoped); the curated bucket's KMS key. Evaluated with IAM's wildcard
and condition rules (tests/infra/iam_eval.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from lakeloader.control.contract import AUDIT_DATABASE
from tests.infra.iam_eval import ACCOUNT, REGION, Resolver, Statement, allowed, managed_policies

GLUE = f"arn:aws:glue:{REGION}:{ACCOUNT}"
# What erase calls, written out here rather than imported from infra.erasure (the code under test).
TABLE_ACTIONS = ["glue:GetDatabase", "glue:GetTable", "glue:UpdateTable"]
AUDIT_ACTIONS = [*TABLE_ACTIONS, "glue:CreateDatabase", "glue:CreateTable"]
WAREHOUSE_OBJECT_ACTIONS = [
    "s3:GetObject",
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:AbortMultipartUpload",
    "s3:DeleteObjectVersion",
]
WAREHOUSE_LIST_ACTIONS = ["s3:ListBucket", "s3:ListBucketVersions"]


def erase_policy(synth) -> tuple[str, list[Statement]]:
    found = [(name, statements) for name, (_, statements) in managed_policies(synth.template_json).items()
             if name.endswith("-erase")]  # fmt: skip
    assert len(found) == 1, "expected one <project>-<stage>-erase managed policy"
    return found[0]


def lake(synth) -> dict[str, Any]:
    resolve = Resolver(synth.template_json)
    stack = synth.stack
    databases = sorted(stack.catalog.database_names)
    return {
        "curated": resolve(synth.stack.resolve(stack.storage.curated.bucket_name)),
        "raw": resolve(synth.stack.resolve(stack.storage.raw.bucket_name)),
        "key": resolve(synth.stack.resolve(stack.storage.key.key_arn)),
        "databases": databases,
    }


@pytest.fixture(params=["dev", "prod"])
def erasure(request, synth):
    built = synth(request.param)
    name, statements = erase_policy(built)
    return built, name, statements, lake(built)


def test_the_policy_is_named_for_the_stage_and_is_not_attached_to_anything(erasure):
    built, name, _, _ = erasure
    assert name == f"lakeloader-{built.stage}-erase"
    (props,) = [
        p["Properties"]
        for p in built.resources("AWS::IAM::ManagedPolicy").values()
        if p["Properties"].get("ManagedPolicyName") == name
    ]
    assert not {"Roles", "Users", "Groups"} & set(props), "operators attach it themselves"


def test_it_allows_every_call_erase_makes(erasure):
    _, _, statements, names = erasure
    curated, key = names["curated"], names["key"]
    table_prefix = f"warehouse/{names['databases'][0]}.db/customers/"
    needs = [(a, f"{GLUE}:catalog") for a in TABLE_ACTIONS]
    for database in names["databases"]:
        needs += [(a, f"{GLUE}:database/{database}") for a in TABLE_ACTIONS]
        needs += [(a, f"{GLUE}:table/{database}/customers") for a in TABLE_ACTIONS]
    needs += [(a, f"{GLUE}:database/{AUDIT_DATABASE}") for a in AUDIT_ACTIONS]
    needs += [(a, f"{GLUE}:table/{AUDIT_DATABASE}/erasures") for a in AUDIT_ACTIONS]
    data_file = f"arn:aws:s3:::{curated}/{table_prefix}data/00000-1.parquet"
    needs += [(a, data_file) for a in WAREHOUSE_OBJECT_ACTIONS]
    needs += [("kms:Decrypt", key), ("kms:GenerateDataKey", key)]
    missing = [need for need in needs if not allowed(statements, *need)]
    for action in WAREHOUSE_LIST_ACTIONS:
        if not allowed(statements, action, f"arn:aws:s3:::{curated}", {"s3:prefix": table_prefix}):
            missing.append((action, f"{curated} prefix {table_prefix}"))
    assert missing == []


def test_it_allows_nothing_outside_the_warehouse_and_the_stages_tables(erasure):
    _, _, statements, names = erasure
    curated, raw = names["curated"], names["raw"]
    denied = [
        ("s3:DeleteObjectVersion", f"arn:aws:s3:::{raw}/crm/public/customers/LOAD00000001.parquet"),
        ("s3:DeleteObjectVersion", f"arn:aws:s3:::{curated}/elsewhere/file"),
        ("s3:PutBucketVersioning", f"arn:aws:s3:::{curated}"),
        ("s3:PutLifecycleConfiguration", f"arn:aws:s3:::{curated}"),
        ("glue:DeleteTable", f"{GLUE}:table/{names['databases'][0]}/customers"),
        ("glue:CreateDatabase", f"{GLUE}:database/{names['databases'][0]}"),
        ("glue:UpdateTable", f"{GLUE}:table/someone_elses_db/customers"),
        ("kms:Decrypt", f"arn:aws:kms:{REGION}:{ACCOUNT}:key/another-key"),
    ]
    assert [d for d in denied if allowed(statements, *d)] == []
    for prefix in ("", "crm/", "warehouseX/"):
        context = {"s3:prefix": prefix}
        assert not allowed(statements, "s3:ListBucketVersions", f"arn:aws:s3:::{curated}", context), prefix
    actions = {a for s in statements for a in s.actions}
    assert actions == {*AUDIT_ACTIONS, *WAREHOUSE_OBJECT_ACTIONS, *WAREHOUSE_LIST_ACTIONS, "kms:Decrypt",
                       "kms:GenerateDataKey"}  # fmt: skip
