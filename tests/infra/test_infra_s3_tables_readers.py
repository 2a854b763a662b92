"""Readers of the table bucket's tables (`readers:` on a `target.storage: s3_tables` table): what a
query of crm.customers in `lakeloader-dev-tables` needs, and nothing on the bucket for a reader whose
patterns select none of its tables.

What such a query needs, written out here rather than imported from infra (the code under test):

* the Glue reads of the federated catalog's entries (Glue, "Specifying AWS Glue resource ARNs":
  `catalog/s3tablescatalog`, `catalog/s3tablescatalog/<bucket>`, `database/s3tablescatalog/<bucket>/
  <namespace>`, `table/s3tablescatalog/<bucket>/<namespace>/<table>`; "Prerequisites" of the Glue
  S3 Tables integration: GetCatalog, GetDatabase, GetTable);
* IAM mode: on the table bucket GetTableBucket, GetNamespace, ListNamespaces, ListTables, and on the
  table GetTable, GetTableMetadataLocation, GetTableData, whose request carries the condition keys
  `s3tables:namespace` and `s3tables:tableName` ("Actions, resources, and condition keys for Amazon S3
  Tables"); a table's ARN is `<bucket ARN>/table/<table id>`; and kms:Decrypt on the stage's key;
* Lake Formation mode: DESCRIBE on the namespace and SELECT on the table in the catalog
  `<account>:s3tablescatalog/<bucket>`, which the reader-grants Lambda applies (AWS::LakeFormation::
  PrincipalPermissions takes a 12-digit catalog id only).
"""

from __future__ import annotations

import pytest
from cfnlint.api import ManualArgs, lint

from infra.s3_tables_readers import federated_grants
from lakeloader.control import reader_grants
from lakeloader.control.reader_grants import TableGrant
from tests.infra.cdk_helpers import with_settings
from tests.infra.iam_eval import ACCOUNT, REGION, Resolver, allowed, managed_policies, role_statements
from tests.infra.test_infra_cfn_lint import IGNORED, REGIONS
from tests.infra.test_infra_nag import findings

CONFIG = "tests/fixtures/s3_tables/tables.yaml"
ANALYST = f"arn:aws:iam::{ACCOUNT}:role/analyst"
SALES = f"arn:aws:iam::{ACCOUNT}:role/sales"
GLUE = f"arn:aws:glue:{REGION}:{ACCOUNT}"
CHILD = "s3tablescatalog/lakeloader-dev-tables"
BUCKET_ARN = f"arn:aws:s3tables:{REGION}:{ACCOUNT}:bucket/lakeloader-dev-tables"
TABLE_ARN = f"{BUCKET_ARN}/table/8f1c2a7e-0b4d-4e51-9c3a-2d6f0e9b1a47"  # S3 Tables names a table by id
CUSTOMERS = {"s3tables:namespace": "crm", "s3tables:tableName": "customers"}
BUCKET_READS = [
    "s3tables:GetTableBucket",
    "s3tables:GetNamespace",
    "s3tables:ListNamespaces",
    "s3tables:ListTables",
]
TABLE_READS = ["s3tables:GetTable", "s3tables:GetTableMetadataLocation", "s3tables:GetTableData"]
CATALOG_READS = [
    ("glue:GetCatalog", f"{GLUE}:catalog/s3tablescatalog"),
    ("glue:GetCatalog", f"{GLUE}:catalog/{CHILD}"),
    ("glue:GetDatabase", f"{GLUE}:database/{CHILD}/crm"),
    ("glue:GetTable", f"{GLUE}:table/{CHILD}/crm/customers"),
]


def readers(**analyst) -> list[dict]:
    """A reader of crm (whose only table is in the table bucket), and one of sales (in Glue only)."""
    return [{"role_arn": ANALYST, "tables": ["crm.*"], **analyst}, {"role_arn": SALES, "tables": ["sales.*"]}]


@pytest.fixture(scope="module")
def iam_mode(synth):
    return synth("dev", config=CONFIG, **with_settings("dev", readers=readers()))


@pytest.fixture(scope="module")
def lf_mode(synth):
    hidden = {"exclude_columns": {"crm.customers": ["email"]}}
    return synth(
        "dev", config=CONFIG, lake_formation="true", **with_settings("dev", readers=readers(**hidden))
    )


def policy(built, role: str):
    return managed_policies(built.template_json)[f"lakeloader-dev-reader-{role}"][1]


def stage_key(built) -> str:
    return Resolver(built.template_json)(built.stack.resolve(built.stack.storage.key.key_arn))


def test_iam_mode_a_reader_may_query_its_s3_tables_table(iam_mode):
    statements = policy(iam_mode, "analyst")
    needs = [*CATALOG_READS, *[(a, BUCKET_ARN) for a in BUCKET_READS], ("kms:Decrypt", stage_key(iam_mode))]
    assert [n for n in needs if not allowed(statements, *n)] == []
    assert [a for a in TABLE_READS if not allowed(statements, a, TABLE_ARN, CUSTOMERS)] == []


def test_iam_mode_a_reader_reads_only_its_tables_by_name_and_writes_nothing(iam_mode):
    """Not the tombstones' side table beside it, not a table of another namespace, not without the
    condition keys, not another table bucket; no S3 Tables write."""
    statements = policy(iam_mode, "analyst")
    elsewhere = [
        {"s3tables:namespace": "crm", "s3tables:tableName": "customers__tombstones"},
        {"s3tables:namespace": "sales", "s3tables:tableName": "customers"},
        {},
    ]
    assert [c for c in elsewhere if allowed(statements, "s3tables:GetTableData", TABLE_ARN, c)] == []
    other_bucket = f"arn:aws:s3tables:{REGION}:{ACCOUNT}:bucket/someone-elses-tables"
    assert not allowed(statements, "s3tables:GetTableData", f"{other_bucket}/table/x", CUSTOMERS)
    assert not allowed(statements, "s3tables:GetTableBucket", other_bucket)
    assert not allowed(statements, "glue:GetTable", f"{GLUE}:table/{CHILD}/crm/customers__tombstones")
    assert not allowed(
        statements, "glue:GetTable", f"{GLUE}:table/s3tablescatalog/other-tables/crm/customers"
    )
    for action in ("s3tables:PutTableData", "s3tables:UpdateTableMetadataLocation", "s3tables:DeleteTable"):
        assert not allowed(statements, action, TABLE_ARN, CUSTOMERS), action
    assert not allowed(statements, "s3tables:CreateTable", BUCKET_ARN, {"s3tables:namespace": "crm"})


def test_a_reader_of_no_s3_tables_table_gets_nothing_on_the_table_bucket(iam_mode, lf_mode):
    for built in (iam_mode, lf_mode):
        statements = policy(built, "sales")
        assert not [s for s in statements if any(a.startswith("s3tables:") for a in s.actions)]
        assert not [s for s in statements if any("s3tablescatalog" in r for r in s.resources)]
        for action, resource in CATALOG_READS:
            assert not allowed(statements, action, resource), (action, resource)
    grants = reader_grants.decode(
        grants_function(lf_mode)["Environment"]["Variables"][reader_grants.ENV_GRANTS]
    )
    assert not [g for g in grants if g.principal == SALES]


def grants_function(built) -> dict:
    _, function = built.resource(
        "AWS::Lambda::Function", lambda p: p.get("FunctionName") == "lakeloader-dev-reader-grants"
    )
    return function["Properties"]


def test_lake_formation_mode_the_lambda_grants_the_namespace_and_the_table_in_the_federated_catalog(lf_mode):
    """DESCRIBE on the namespace, SELECT on the table without its hidden column, both in the table
    bucket's catalog; the custom resource (each deploy) applies them once the namespaces exist. No
    CloudFormation grant names the federated catalog, and no Glue event rule waits for these tables."""
    env = grants_function(lf_mode)["Environment"]["Variables"]
    assert reader_grants.decode(env[reader_grants.ENV_GRANTS]) == [
        TableGrant(ANALYST, "crm", None, ("DESCRIBE",), (), CHILD),
        TableGrant(ANALYST, "crm", "customers", ("SELECT",), ("email",), CHILD),
    ]
    for props in (
        p["Properties"] for p in lf_mode.resources("AWS::LakeFormation::PrincipalPermissions").values()
    ):
        assert props["Principal"]["DataLakePrincipalIdentifier"] != ANALYST, props
    (custom_id,) = lf_mode.resources("Custom::LakeloaderReaderGrants")
    namespace_id = lf_mode.logical_id(lf_mode.stack.table_bucket.namespaces["crm"])
    assert namespace_id in lf_mode.template_json["Resources"][custom_id].get("DependsOn", [])
    rules = [r["Properties"] for r in lf_mode.resources("AWS::Events::Rule").values()]
    table_created = reader_grants.TABLE_CREATED_DETAIL_TYPE
    assert not [r for r in rules if table_created in str(r.get("EventPattern"))]


def test_lake_formation_mode_a_table_with_no_hidden_column_is_granted_describe_with_select():
    """Lake Formation refuses DESCRIBE beside a column filter, so a table with hidden columns gets SELECT
    alone; every other table gets DESCRIBE too, or the reader's engine cannot see its columns."""
    tables, hidden = {"crm": ["customers", "orders"]}, {"crm.customers": ["email"]}
    assert federated_grants(ANALYST, "lakeloader-dev-tables", tables, hidden) == [
        TableGrant(ANALYST, "crm", None, ("DESCRIBE",), (), CHILD),
        TableGrant(ANALYST, "crm", "customers", ("SELECT",), ("email",), CHILD),
        TableGrant(ANALYST, "crm", "orders", ("SELECT", "DESCRIBE"), (), CHILD),
    ]


def test_lake_formation_mode_the_reader_reads_the_catalog_and_lake_formation_vends_the_data(lf_mode):
    statements = policy(lf_mode, "analyst")
    assert [n for n in CATALOG_READS if not allowed(statements, *n)] == []
    assert allowed(statements, "lakeformation:GetDataAccess", "*")
    assert not [s for s in statements if any(a.startswith("s3tables:") for a in s.actions)]


def test_lake_formation_mode_the_lambda_may_see_the_federated_entries_it_grants(lf_mode):
    function = grants_function(lf_mode)
    statements = role_statements(lf_mode.template_json, function["Role"]["Fn::GetAtt"][0])
    for action, resource in (
        ("glue:GetDatabase", f"{GLUE}:database/{CHILD}/crm"),
        ("glue:GetTable", f"{GLUE}:table/{CHILD}/crm/customers"),
        ("lakeformation:GrantPermissions", "*"),
    ):
        assert allowed(statements, action, resource), action
    assert not allowed(statements, "glue:GetTable", f"{GLUE}:table/{CHILD}/crm/customers__tombstones")
    assert not [s for s in statements if any(a.startswith("s3tables:") for a in s.actions)]


def test_both_modes_pass_cdk_nag_and_cfn_lint(iam_mode, lf_mode):
    for built in (iam_mode, lf_mode):
        assert findings(built.app) == []
        args = ManualArgs(regions=REGIONS, ignore_checks=IGNORED)
        assert [f"{m.rule.id} {m.message}" for m in lint(built.template_path.read_text(), config=args)] == []
