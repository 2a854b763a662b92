"""What `lakeloader verify` needs of whoever runs it (docs/deploy.md#verify), per mode: the stack's
`<project>-<stage>-verify` policy, evaluated with IAM's wildcard and condition rules
(tests/infra/iam_eval.py) against every call verify and its cleanup make, written out here from
lakeloader/cli/verify.py and canary_cleanup.py rather than imported from infra (the code under test).

Lake Formation mode: a data lake administrator "does not have implicit permissions to drop databases or
alter/drop tables created by others" and has no implicit SELECT ("Implicit Lake Formation permissions",
https://docs.aws.amazon.com/lake-formation/latest/dg/implicit-permissions.html); the job role creates
the canary tables. So `verify_role_arn` gets SELECT, DESCRIBE and DROP on them (a table wildcard, "Granting
permissions on Data Catalog resources", https://docs.aws.amazon.com/lake-formation/latest/dg/granting-catalog-permissions.html).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.infra.cdk_helpers import READERS, with_settings
from tests.infra.iam_eval import ACCOUNT, REGION, Resolver, allowed, managed_policies

OPERATOR = f"arn:aws:iam::{ACCOUNT}:role/operator"
CANARY_DB = "lakeloader_dev_lakeloader_canary"
FILE = "lakeloader-canary/glue/verify-20261202T030000Z-0a1b2c3d.json"


@pytest.fixture(scope="module", params=["iam", "lake_formation"])
def built(synth, request):
    lake_formation = "true" if request.param == "lake_formation" else "false"
    settings = with_settings("dev", readers=READERS, verify_role_arn=OPERATOR)
    return synth("dev", lake_formation=lake_formation, **settings)


def names(built) -> dict[str, str]:
    resolve = Resolver(built.template_json)
    stack = built.stack
    value = lambda token: resolve(stack.resolve(token))  # noqa: E731
    return {
        "raw": value(stack.storage.raw.bucket_name),
        "curated": value(stack.storage.curated.bucket_name),
        "key": value(stack.storage.key.key_arn),
        "config": value(stack.config_store.config_table.table_arn),
        "ledger": value(stack.config_store.ledger_table.table_arn),
        "runs": value(stack.config_store.runs_table.table_arn),
        "job": value(stack.processing.ingest_job.job_name),
        "app": value(stack.processing.emr.application.attr_application_id),
        "dlq": value(stack.triggers.dead_letter_queue.queue_arn),
        "topic": value(stack.alarm_topic.topic.topic_arn),
        "arrival": value(stack.triggers.function.function_name),
        "results": value(stack.readers.results.bucket_name),
    }


def verify_calls(n: dict[str, str]) -> list[tuple[str, str, dict[str, str]]]:
    """(action, resource, request context) of each call of a verify and its cleanup."""
    raw, curated = f"arn:aws:s3:::{n['raw']}", f"arn:aws:s3:::{n['curated']}"
    glue = f"arn:aws:glue:{REGION}:{ACCOUNT}"
    canary = {"dynamodb:LeadingKeys": "lakeloader_canary.glue"}
    table_files = f"warehouse/{CANARY_DB}.db/glue"
    return [
        (
            "cloudformation:DescribeStacks",
            f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/lakeloader-dev/1a2b",
            {},
        ),
        ("dynamodb:Scan", n["config"], {}),  # the deployed config: the canary tables are in it
        ("s3:PutObject", f"{raw}/{FILE}", {}),  # land
        ("kms:GenerateDataKey", n["key"], {}),
        ("dynamodb:Query", n["ledger"], canary),  # arrival Lambda -> ledger
        ("sqs:ReceiveMessage", n["dlq"], {}),
        ("sqs:DeleteMessage", n["dlq"], {}),
        (
            "logs:FilterLogEvents",
            f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/aws/lambda/{n['arrival']}:*",
            {},
        ),
        ("glue:GetJobRuns", f"{glue}:job/{n['job']}", {}),  # job run
        ("glue:GetJob", f"{glue}:job/{n['job']}", {}),
        ("logs:FilterLogEvents", f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/aws-glue/jobs/logs-v2:*", {}),
        (
            "emr-serverless:ListJobRuns",
            f"arn:aws:emr-serverless:{REGION}:{ACCOUNT}:/applications/{n['app']}",
            {},
        ),
        ("dynamodb:GetItem", n["runs"], canary),  # iceberg commit
        ("glue:GetTable", f"{glue}:table/{CANARY_DB}/glue", {}),
        ("glue:GetTable", f"{glue}:database/{CANARY_DB}", {}),
        ("glue:GetTable", f"{glue}:catalog", {}),
        ("s3:GetObject", f"{curated}/{table_files}/metadata/00001-x.metadata.json", {}),
        ("kms:Decrypt", n["key"], {}),
        ("glue:GetDatabase", f"{glue}:database/{CANARY_DB}", {}),  # read through the catalog (pyiceberg)
        ("s3:GetObject", f"{curated}/{table_files}/data/00000-0-x.parquet", {}),
        (
            "athena:StartQueryExecution",
            f"arn:aws:athena:{REGION}:{ACCOUNT}:workgroup/lakeloader-dev-reader-analyst",
            {},
        ),
        (
            "athena:GetQueryExecution",
            f"arn:aws:athena:{REGION}:{ACCOUNT}:workgroup/lakeloader-dev-reader-analyst",
            {},
        ),
        (
            "athena:GetQueryResults",
            f"arn:aws:athena:{REGION}:{ACCOUNT}:workgroup/lakeloader-dev-reader-bi",
            {},
        ),
        ("s3:PutObject", f"arn:aws:s3:::{n['results']}/analyst/q-1.csv", {}),
        ("sns:Publish", n["topic"], {}),  # alarm topic
        ("s3:ListBucketVersions", raw, {"s3:prefix": "lakeloader-canary/"}),  # cleanup: every canary file
        ("s3:DeleteObjectVersion", f"{raw}/{FILE}", {}),
        ("dynamodb:Query", n["runs"], canary),
        ("dynamodb:DeleteItem", n["ledger"], canary),
        ("dynamodb:DeleteItem", n["runs"], canary),
        ("glue:DeleteTable", f"{glue}:table/{CANARY_DB}/glue", {}),
        ("glue:DeleteTable", f"{glue}:database/{CANARY_DB}", {}),
        ("glue:DeleteTable", f"{glue}:catalog", {}),
        ("s3:ListBucket", curated, {"s3:prefix": f"{table_files}/"}),
        ("s3:DeleteObject", f"{curated}/{table_files}/data/00000-0-x.parquet", {}),
    ]


def test_the_verify_policy_allows_every_call_of_a_verify_and_its_cleanup(built):
    policy, statements = managed_policies(built.template_json)["lakeloader-dev-verify"]
    assert policy["Roles"] == ["operator"]
    refused = [
        (a, r) for a, r, context in verify_calls(names(built)) if not allowed(statements, a, r, context)
    ]
    assert refused == []


def test_the_verify_policy_reaches_the_canary_only(built):
    n = names(built)
    _, statements = managed_policies(built.template_json)["lakeloader-dev-verify"]
    raw, curated = f"arn:aws:s3:::{n['raw']}", f"arn:aws:s3:::{n['curated']}"
    glue = f"arn:aws:glue:{REGION}:{ACCOUNT}"
    user = {"dynamodb:LeadingKeys": "crm.customers"}
    refused = [
        ("s3:PutObject", f"{raw}/crm/public/customers/x.parquet", {}),
        ("s3:DeleteObjectVersion", f"{raw}/crm/public/customers/LOAD00000001.parquet", {}),
        ("s3:ListBucketVersions", raw, {"s3:prefix": "crm/"}),
        ("dynamodb:DeleteItem", n["ledger"], user),
        ("dynamodb:Query", n["ledger"], user),
        ("glue:DeleteTable", f"{glue}:table/lakeloader_dev_crm/customers", {}),
        ("s3:DeleteObject", f"{curated}/warehouse/lakeloader_dev_crm.db/customers/data/x.parquet", {}),
        ("s3:GetObject", f"{curated}/warehouse/lakeloader_dev_crm.db/customers/data/x.parquet", {}),
    ]
    assert [(a, r) for a, r, context in refused if allowed(statements, a, r, context)] == []


def test_lake_formation_mode_grants_the_operator_drop_and_select_on_the_canary_tables(built):
    grants = [
        g["Properties"]
        for g in built.resources("AWS::LakeFormation::PrincipalPermissions").values()
        if g["Properties"]["Principal"]["DataLakePrincipalIdentifier"] == OPERATOR
    ]
    if built.stack.node.try_get_context("lake_formation") != "true":
        assert grants == []
        return
    resolve = Resolver(built.template_json)
    by_kind = {next(iter(g["Resource"])): g for g in grants}
    tables = by_kind["Table"]
    assert resolve(tables["Resource"]["Table"]["DatabaseName"]) == CANARY_DB
    assert tables["Resource"]["Table"]["TableWildcard"] == {}
    assert sorted(tables["Permissions"]) == ["DESCRIBE", "DROP", "SELECT"]
    assert tables["PermissionsWithGrantOption"] == []
    assert by_kind["Database"]["Permissions"] == ["DESCRIBE"]
    _, statements = managed_policies(built.template_json)["lakeloader-dev-verify"]
    assert allowed(statements, "lakeformation:GetDataAccess", "*")


DEPLOY_DOC = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"
PERMISSION_WORDS = ("DESCRIBE", "SELECT", "DROP")
CONDITION_KEYS = {"dynamodb:LeadingKeys"}  # named in the table beside the actions they narrow


def documented(mode_column: int) -> tuple[set[str], set[str]]:
    """The IAM actions and Lake Formation permissions docs/deploy.md's verify table lists in a column
    (1: IAM mode, 2: Lake Formation mode, in addition). `glue:GetDatabase`/`GetTable` is two glue
    actions: an action without a service takes the one before it."""
    text = DEPLOY_DOC.read_text()
    table = text[text.index("| hop | IAM mode | Lake Formation mode, in addition |") :].split("\n\n", 1)[0]
    actions: set[str] = set()
    permissions: set[str] = set()
    for row in table.splitlines()[2:]:
        cell = row.strip("|").split(" | ")[mode_column]
        service = ""
        for token in re.findall(r"`([A-Za-z0-9-]+:?[A-Za-z0-9*]*)`", cell):
            if ":" in token:
                service, _, name = token.partition(":")
            else:
                name = token
            if service and name[:1].isupper() and f"{service}:{name}" not in CONDITION_KEYS:
                actions.add(f"{service}:{name}")
        permissions |= {word for word in PERMISSION_WORDS if re.search(rf"\b{word}\b", cell)}
    return actions, permissions


def test_the_docs_list_the_permissions_of_the_verify_policy_and_grants_per_mode(built):
    """docs/deploy.md#verify's table is the policy: each mode's actions are exactly the policy's (plus
    the readers' statements, which the stage here has), and Lake Formation mode's permissions are the
    operator's grants."""
    _, statements = managed_policies(built.template_json)["lakeloader-dev-verify"]
    in_policy = {action for s in statements for action in s.actions}
    iam_mode, _ = documented(1)
    lake_formation, permissions = documented(2)
    if built.stack.node.try_get_context("lake_formation") != "true":
        assert in_policy == iam_mode
        return
    assert in_policy == iam_mode | lake_formation
    granted = {
        p
        for g in built.resources("AWS::LakeFormation::PrincipalPermissions").values()
        if g["Properties"]["Principal"]["DataLakePrincipalIdentifier"] == OPERATOR
        for p in g["Properties"]["Permissions"]
    }
    assert permissions == granted
