"""Readers (`readers:`): a reader's policy allows exactly SELECT on its tables and nothing else.

What a query of a table needs, written out here rather than imported from infra.readers (the code
under test): the catalog reads of the table (Athena, PyIceberg, Spark: GetDatabase, GetTable, ...),
the objects of the table's folder (IAM mode) or Lake Formation's vended credentials (LF mode), the
stage's key, and the reader's own Athena workgroup and results prefix. Evaluated with IAM's wildcard
and condition rules (tests/infra/iam_eval.py).
"""

from __future__ import annotations

import pytest

from infra.settings import SettingsError
from tests.infra.cdk_helpers import READERS, logical_ids, stage_settings, synthesize, with_settings
from tests.infra.iam_eval import ACCOUNT, REGION, Resolver, allowed, managed_policies

GLUE = f"arn:aws:glue:{REGION}:{ACCOUNT}"
ATHENA = f"arn:aws:athena:{REGION}:{ACCOUNT}:workgroup"
ANALYST = f"arn:aws:iam::{ACCOUNT}:role/analyst"
BI = f"arn:aws:iam::{ACCOUNT}:role/team/bi"
# A reader that queries through Spark (EMR, Glue) only: it may read format-3 tables, and needs no workgroup.
SPARK_READER = {
    "role_arn": f"arn:aws:iam::{ACCOUNT}:role/etl-reader",
    "tables": ["crm.*"],
    "engines": ["spark"],
}
READ_CATALOG = ["glue:GetDatabase", "glue:GetTable", "glue:GetTables", "glue:GetPartitions"]
QUERY = ["athena:StartQueryExecution", "athena:GetQueryExecution", "athena:GetQueryResults"]
WRITES = [
    "glue:UpdateTable",
    "glue:CreateTable",
    "glue:DeleteTable",
    "glue:DeleteDatabase",
    "glue:CreateDatabase",
]


@pytest.fixture(scope="module")
def iam_mode(synth):
    return synth("dev", **with_settings("dev", readers=READERS))


@pytest.fixture(scope="module")
def lf_mode(synth):
    readers = [
        {"role_arn": ANALYST, "tables": ["crm.customers"], "exclude_columns": {"crm.customers": ["email"]}}
    ]
    return synth("dev", lake_formation="true", **with_settings("dev", readers=readers))


def names(built) -> dict[str, str]:
    resolve = Resolver(built.template_json)
    storage = built.stack.storage
    return {
        "curated": resolve(built.stack.resolve(storage.curated.bucket_name)),
        "raw": resolve(built.stack.resolve(storage.raw.bucket_name)),
        "results": resolve(built.stack.resolve(built.stack.readers.results.bucket_name)),
        "key": resolve(built.stack.resolve(storage.key.key_arn)),
    }


def policy(built, role: str):
    return managed_policies(built.template_json)[f"lakeloader-dev-reader-{role}"]


def folder(database: str, table: str) -> str:
    return f"warehouse/lakeloader_dev_{database}.db/{table}/"


def test_a_reader_may_run_a_query_of_each_of_its_tables(iam_mode):
    n = names(iam_mode)
    _, statements = policy(iam_mode, "analyst")
    crm = f"{GLUE}:database/lakeloader_dev_crm"
    needs = [(a, f"{GLUE}:catalog") for a in READ_CATALOG] + [(a, crm) for a in READ_CATALOG]
    needs += [(a, f"{GLUE}:table/lakeloader_dev_crm/customers") for a in READ_CATALOG]
    for part in ("data/00000-1.parquet", "metadata/00003-abc.metadata.json", "metadata/snap-1.avro"):
        needs.append(("s3:GetObject", f"arn:aws:s3:::{n['curated']}/{folder('crm', 'customers')}{part}"))
    needs += [(a, f"{ATHENA}/lakeloader-dev-reader-analyst") for a in QUERY]
    results = f"arn:aws:s3:::{n['results']}/analyst/7f1c.csv"
    needs += [("s3:PutObject", results), ("s3:GetObject", results)]
    needs += [("kms:Decrypt", n["key"]), ("kms:GenerateDataKey", n["key"])]
    assert [need for need in needs if not allowed(statements, *need)] == []
    listing = {"s3:prefix": f"{folder('crm', 'customers')}metadata/"}
    assert allowed(statements, "s3:ListBucket", f"arn:aws:s3:::{n['curated']}", listing)
    assert allowed(statements, "s3:ListBucket", f"arn:aws:s3:::{n['results']}", {"s3:prefix": "analyst/"})


def test_a_reader_may_do_nothing_else(iam_mode):
    n = names(iam_mode)
    _, statements = policy(iam_mode, "analyst")
    curated = f"arn:aws:s3:::{n['curated']}"
    denied = [
        # another database's table, and the tombstones (keys of deleted rows) of its own
        ("glue:GetTable", f"{GLUE}:table/lakeloader_dev_sales/order_lines"),
        ("s3:GetObject", f"{curated}/{folder('sales', 'order_lines')}data/1.parquet"),
        ("glue:GetTable", f"{GLUE}:table/lakeloader_dev_crm/customers__tombstones"),
        ("s3:GetObject", f"{curated}/{folder('crm', 'customers__tombstones')}data/1.parquet"),
        ("s3:GetObject", f"arn:aws:s3:::{n['raw']}/crm/public/customers/LOAD00000001.parquet"),
        ("s3:PutObject", f"{curated}/{folder('crm', 'customers')}data/1.parquet"),
        ("s3:DeleteObject", f"{curated}/{folder('crm', 'customers')}data/1.parquet"),
        # another reader's workgroup and results
        ("athena:StartQueryExecution", f"{ATHENA}/lakeloader-dev-reader-bi"),
        ("s3:GetObject", f"arn:aws:s3:::{n['results']}/bi/7f1c.csv"),
        ("kms:Decrypt", f"arn:aws:kms:{REGION}:{ACCOUNT}:key/another-key"),
    ]
    denied += [(a, f"{GLUE}:table/lakeloader_dev_crm/customers") for a in WRITES]
    assert [d for d in denied if allowed(statements, *d)] == []
    assert not allowed(statements, "s3:ListBucket", curated, {"s3:prefix": "warehouse/"})
    for other in ({"s3:prefix": "bi/"}, {"s3:prefix": ""}):  # another reader's results, and all of them
        assert not allowed(statements, "s3:ListBucket", f"arn:aws:s3:::{n['results']}", other), other
    actions = {a for s in statements for a in s.actions}
    writes = {a for a in actions if not a.split(":")[1].startswith(("Get", "List", "BatchGet", "Decrypt"))}
    assert writes == {
        "athena:StartQueryExecution",
        "athena:StopQueryExecution",
        "s3:PutObject",
        "s3:AbortMultipartUpload",
        "kms:GenerateDataKey",
    }, "a reader writes only its own query results"


def test_every_reader_has_its_own_policy_on_its_own_role_and_every_table_by_default(iam_mode):
    n = names(iam_mode)
    props, statements = policy(iam_mode, "bi")
    assert props["Roles"] == ["bi"]
    assert policy(iam_mode, "analyst")[0]["Roles"] == ["analyst"]
    for database, table in (("crm", "customers"), ("sales", "order_lines"), ("inventory", "products")):
        assert allowed(statements, "glue:GetTable", f"{GLUE}:table/lakeloader_dev_{database}/{table}")
        data = f"arn:aws:s3:::{n['curated']}/{folder(database, table)}data/1.parquet"
        assert allowed(statements, "s3:GetObject", data)


def test_a_reader_of_some_tables_of_a_database_gets_them_by_name(synth):
    """tests/e2e/tables.yaml has two tables in inventory: a reader of one may not read the other, and a
    reader of a whole database (granted as one) still may not read its tombstones."""
    built = synth(
        "dev",
        config="tests/e2e/tables.yaml",
        **with_settings("dev", readers=[{"role_arn": ANALYST, "tables": ["inventory.products", "crm.*"]}]),
    )
    n = names(built)
    _, statements = policy(built, "analyst")
    curated = f"arn:aws:s3:::{n['curated']}"
    may = [
        ("glue:GetTable", f"{GLUE}:table/lakeloader_dev_inventory/products"),
        ("s3:GetObject", f"{curated}/{folder('inventory', 'products')}data/1.parquet"),
        ("glue:GetTable", f"{GLUE}:table/lakeloader_dev_crm/customers"),
        ("s3:GetObject", f"{curated}/{folder('crm', 'customers')}data/1.parquet"),
    ]
    may_not = [
        ("glue:GetTable", f"{GLUE}:table/lakeloader_dev_inventory/stock"),
        ("s3:GetObject", f"{curated}/{folder('inventory', 'stock')}data/1.parquet"),
        ("glue:GetTable", f"{GLUE}:table/lakeloader_dev_crm/customers__tombstones"),
        ("s3:GetObject", f"{curated}/{folder('crm', 'customers__tombstones')}data/1.parquet"),
        ("glue:GetTable", f"{GLUE}:table/lakeloader_dev_inventory/products__tombstones"),
    ]
    assert [m for m in may if not allowed(statements, *m)] == []
    assert [m for m in may_not if allowed(statements, *m)] == []


def test_each_workgroup_keeps_its_results_encrypted_in_its_own_prefix_and_they_expire(iam_mode):
    n = names(iam_mode)
    resolve = Resolver(iam_mode.template_json)
    resources = iam_mode.resources("AWS::Athena::WorkGroup").values()
    workgroups = {props["Properties"]["Name"]: props["Properties"] for props in resources}
    assert set(workgroups) == {"lakeloader-dev-reader-analyst", "lakeloader-dev-reader-bi"}
    assert {r.get("DeletionPolicy") for r in resources} == {"Delete"}
    for role in ("analyst", "bi"):
        workgroup = workgroups[f"lakeloader-dev-reader-{role}"]
        # dev is destroyed with its stack (removal: destroy), a workgroup holding saved queries too
        assert (workgroup["State"], workgroup["RecursiveDeleteOption"]) == ("ENABLED", True)
        config = workgroup["WorkGroupConfiguration"]
        assert config["EnforceWorkGroupConfiguration"] is True
        assert config["PublishCloudWatchMetricsEnabled"] is True  # each reader's scans, per workgroup
        assert config["EngineVersion"]["SelectedEngineVersion"] == "Athena engine version 3"
        result = config["ResultConfiguration"]
        assert resolve(result["OutputLocation"]) == f"s3://{n['results']}/{role}/"
        assert result["EncryptionConfiguration"]["EncryptionOption"] == "SSE_KMS"
        assert resolve(result["EncryptionConfiguration"]["KmsKey"]) == n["key"]
    _, bucket = iam_mode.resource(
        "AWS::S3::Bucket", lambda p: resolve(p.get("BucketName", "")) == n["results"]
    )
    (rule,) = bucket["Properties"]["LifecycleConfiguration"]["Rules"]
    assert rule["ExpirationInDays"] == 7
    encryption = bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]
    assert encryption["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms"


def test_a_retained_stage_keeps_its_readers_workgroups_and_their_saved_queries(synth):
    prod = synth("prod", **with_settings("prod", readers=READERS))
    workgroups = prod.resources("AWS::Athena::WorkGroup").values()
    assert [(w.get("DeletionPolicy"), w["Properties"]["RecursiveDeleteOption"]) for w in workgroups] == [
        ("Retain", False),
        ("Retain", False),
    ]


def test_lake_formation_mode_grants_select_without_the_excluded_columns_and_no_s3(lf_mode):
    n = names(lf_mode)
    _, statements = policy(lf_mode, "analyst")
    data = f"arn:aws:s3:::{n['curated']}/{folder('crm', 'customers')}data/1.parquet"
    assert not allowed(statements, "s3:GetObject", data), "Lake Formation vends the data access"
    assert allowed(statements, "lakeformation:GetDataAccess", "*")
    grants = [
        p["Properties"]
        for p in lf_mode.resources("AWS::LakeFormation::PrincipalPermissions").values()
        if p["Properties"]["Principal"]["DataLakePrincipalIdentifier"] == ANALYST
    ]
    by_kind = {next(iter(g["Resource"])): g for g in grants}
    assert set(by_kind) == {"Database"}  # the table's grant waits for the table (test_infra_reader_grants)
    assert by_kind["Database"]["Permissions"] == ["DESCRIBE"]
    (table,) = lf_mode.stack.readers.table_grants
    assert table.permissions == ("SELECT",) and table.principal == ANALYST
    assert (table.database, table.table, table.excluded_columns) == (
        "lakeloader_dev_crm",
        "customers",
        ("email",),
    )


def test_no_readers_no_workgroup_and_no_results_bucket(dev):
    assert dev.resources("AWS::Athena::WorkGroup") == {}
    assert not [n for n in managed_policies(dev.template_json) if "-reader-" in n]


def test_a_reader_that_reads_through_spark_gets_its_tables_and_no_athena_workgroup(synth):
    """`engines: [spark]` (a reader that may read format-3 tables, docs/format-versions.md): the same
    reads of its tables, but no workgroup, no Athena action and no prefix of the results bucket, which
    stays for the Athena reader beside it."""
    mixed = synth("dev", **with_settings("dev", readers=[READERS[0], SPARK_READER]))
    workgroups = mixed.resources("AWS::Athena::WorkGroup").values()
    assert [w["Properties"]["Name"] for w in workgroups] == ["lakeloader-dev-reader-analyst"]
    assert (
        mixed.template_json["Outputs"]["ReaderWorkgroups"]["Value"] == "analyst=lakeloader-dev-reader-analyst"
    )
    n = names(mixed)
    _, statements = policy(mixed, "etl-reader")
    data = f"arn:aws:s3:::{n['curated']}/{folder('crm', 'customers')}data/1.parquet"
    reads = [(a, f"{GLUE}:table/lakeloader_dev_crm/customers") for a in READ_CATALOG] + [
        ("s3:GetObject", data)
    ]
    assert [r for r in reads if not allowed(statements, *r)] == []
    athena = {a for s in statements for a in s.actions if a.startswith("athena:")}
    assert athena == set()
    results = f"arn:aws:s3:::{n['results']}/etl-reader/7f1c.csv"
    assert not allowed(statements, "s3:PutObject", results)
    assert not allowed(statements, "s3:GetObject", results)


def test_a_stage_whose_readers_all_read_through_spark_has_no_workgroup_and_no_results_bucket(synth, dev):
    spark_only = synth("dev", **with_settings("dev", readers=[SPARK_READER]))
    assert spark_only.resources("AWS::Athena::WorkGroup") == {}
    assert spark_only.stack.readers.results is None
    assert len(spark_only.resources("AWS::S3::Bucket")) == len(dev.resources("AWS::S3::Bucket"))
    outputs = spark_only.template_json["Outputs"]
    assert not {"ReaderWorkgroups", "QueryResultsBucketName"} & set(outputs)
    assert "lakeloader-dev-reader-etl-reader" in managed_policies(spark_only.template_json)
    verify_actions = {
        a for s in managed_policies(spark_only.template_json)["lakeloader-dev-verify"][1] for a in s.actions
    }
    assert not {a for a in verify_actions if a.startswith("athena:")}, "verify queries no workgroup"


@pytest.mark.parametrize(
    "readers, settings, message",
    [
        (
            [{"role_arn": ANALYST, "exclude_columns": {"crm.customers": ["email"]}}],
            {},
            r"readers\[0\]\.exclude_columns needs lake_formation: true",
        ),
        (
            [{"role_arn": ANALYST, "tables": ["crm.custmers"]}],
            {},
            r"readers\[0\]\.tables: 'crm.custmers' selects no table of the config; its tables are "
            r"crm\.customers, inventory\.products, lakeloader_canary\.emr, lakeloader_canary\.glue, "
            r"sales\.order_lines$",
        ),
        (
            [
                {
                    "role_arn": ANALYST,
                    "tables": ["crm.*", "inventory.*"],
                    "exclude_columns": {"sales.order_lines": ["sku"]},
                }
            ],
            {"lake_formation": True},
            r"readers\[0\]\.exclude_columns: 'sales.order_lines' is not one of the reader's tables "
            r"\(crm\.customers, inventory\.products\)$",
        ),
        (
            [{"role_arn": ANALYST}, {"role_arn": f"arn:aws:iam::{ACCOUNT}:role/x/analyst"}],
            {},
            "appears twice",
        ),
        ([{"role_arn": "analyst"}], {}, r"readers\.0\.role_arn: String should match pattern"),
    ],
)
def test_inconsistent_readers_fail_synth_with_one_line(tmp_path, readers, settings, message):
    with pytest.raises(SettingsError, match=message) as raised:
        synthesize(tmp_path, "dev", **with_settings("dev", readers=readers, **settings))
    assert "\n" not in str(raised.value)


def test_readers_keep_their_logical_ids(iam_mode, lf_mode):
    """A renamed policy, workgroup or grant is replaced on the next deploy: a reader's role loses its
    policy for the moment between, and a workgroup's query history goes with the old one."""
    assert logical_ids(iam_mode, "Readers") == [
        "ReadersPolicyanalystBACEC795",
        "ReadersPolicybiDBDAE3BC",
        "ReadersQueryResults0ABEAAB8",
        "ReadersQueryResultsAutoDeleteObjectsCustomResourceB1D2E557",
        "ReadersQueryResultsPolicy7D28BD62",
        "ReadersWorkgroupanalyst431C56C9",
        "ReadersWorkgroupbiE27C6A6C",
    ]
    assert logical_ids(lf_mode, "Readers") == [
        "ReadersDatabaseanalystcrm58E5984F",
        "ReadersPolicyanalystBACEC795",
        "ReadersQueryResults0ABEAAB8",
        "ReadersQueryResultsAutoDeleteObjectsCustomResourceB1D2E557",
        "ReadersQueryResultsPolicy7D28BD62",
        "ReadersTableGrantsApply151F4ADC",
        "ReadersTableGrantsFunction8DAA184B",
        "ReadersTableGrantsFunctionLogsCD861DE4",
        "ReadersTableGrantsFunctionRole063E6EF7",
        "ReadersTableGrantsFunctionRoleDefaultPolicy3323AE80",
        "ReadersTableGrantsGrantorlakeloaderdevcrm9D7C9F08",
        "ReadersTableGrantsHourly35B1B9D4",
        "ReadersTableGrantsHourlyAllowEventRulelakeloaderdevReadersTableGrantsFunction40A73857A84E5F2D",
        "ReadersTableGrantsTableCreatedA0784B71",
        "ReadersTableGrantsTableCreatedAllowEventRulelakeloaderdevReadersTableGrantsFunction40A738576D5EF067",
        "ReadersWorkgroupanalyst431C56C9",
    ]


def test_a_database_counts_only_its_glue_tables_when_a_reader_takes_them_all():
    """A database whose other table is in the table bucket: the reader of every Glue table of it gets the
    Glue database whole (granted as `*`, covering its tables to come); one that hides a column, by name."""
    from infra.readers import grant_units
    from lakeloader.config import parse_config

    def table(name: str, storage: str) -> dict:
        source = {"prefix": f"crm/{name}/", "format": "parquet", "cdc": "dms"}
        target = {"database": "crm", "table": name, "storage": storage}
        return {"id": f"crm.{name}", "source": source, "target": target, "keys": ["id"], "mode": "merge",
                "sequence_by": "ts"}  # fmt: skip

    lake = parse_config({"tables": [table("customers", "s3_tables"), table("orders", "glue")]})
    assert grant_units(lake, ["crm.orders"], {}) == {"crm": ["*"]}
    assert grant_units(lake, ["crm.orders"], {"crm.orders": ["price"]}) == {"crm": ["orders"]}


def test_query_results_expire_as_the_stage_says_with_nothing_left_behind(iam_mode):
    """A result set holds table rows: it goes after `query_results_expiration_days`, an overwritten
    one the next day, and so does an upload Athena never finished."""
    bucket = iam_mode.template_json["Resources"][iam_mode.logical_id(iam_mode.stack.readers.results)]
    days = stage_settings("dev").get("query_results_expiration_days", 7)  # cdk.json's, else the default
    assert bucket["Properties"]["LifecycleConfiguration"]["Rules"] == [
        {
            "Id": "expire-query-results",
            "ExpirationInDays": days,
            "NoncurrentVersionExpiration": {"NoncurrentDays": 1},
            "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
            "Status": "Enabled",
        }
    ]


def test_the_reader_grants_lambda_keeps_its_environment_and_logs_under_the_stage_key(lf_mode):
    """Its environment holds the grants (principals, tables, hidden columns): the stage key, as every
    other Lambda's (test_infra_encryption's stages have no grant on a table by name, so no such Lambda)."""
    from tests.infra.test_infra_encryption import keys_used

    key = {"Fn::GetAtt": [lf_mode.logical_id(lf_mode.stack.storage.key), "Arn"]}
    function, _ = lf_mode.resource(
        "AWS::Lambda::Function", lambda p: p.get("FunctionName") == "lakeloader-dev-reader-grants"
    )
    logs, _ = lf_mode.resource(
        "AWS::Logs::LogGroup", lambda p: p.get("LogGroupName") == "/aws/lambda/lakeloader-dev-reader-grants"
    )
    used = keys_used(lf_mode)
    assert (used[function], used[logs]) == (key, key)
