"""target.storage: s3_tables at synth (issue 42): the stage's table bucket, its namespaces, its policy,
the key that encrypts it, the job roles that may write only there, and the jobs' Spark settings.

Synthesized with tests/fixtures/s3_tables/tables.yaml: crm.customers in S3 Tables, sales.order_lines
in the Glue catalog.
"""

from __future__ import annotations

import json

import pytest

from lakeloader.control import contract, runtimes
from tests.infra.iam_eval import ACCOUNT, REGION, Resolver, allowed, managed_policies, role_statements

CONFIG = "tests/fixtures/s3_tables/tables.yaml"
BUCKET_ARN = f"arn:aws:s3tables:{REGION}:{ACCOUNT}:bucket/lakeloader-dev-tables"
OTHER_BUCKET_ARN = f"arn:aws:s3tables:{REGION}:{ACCOUNT}:bucket/someone-elses-tables"


@pytest.fixture(scope="module")
def s3t(synth):
    return synth("dev", config=CONFIG)


def only(synth, kind):
    found = synth.resources(kind)
    assert len(found) == 1, found
    return next(iter(found.items()))


def job_role_ids(synth) -> list[str]:
    processing = synth.stack.processing
    return [synth.logical_id(processing.glue_role), synth.logical_id(processing.emr_role)]


def test_table_bucket_is_encrypted_with_the_stage_key(s3t):
    """AWS::S3Tables::TableBucket with SSE-KMS and the stage's key, as the S3 User Guide's "Specifying
    server-side encryption with AWS KMS keys (SSE-KMS) in table buckets" sets it
    (https://docs.aws.amazon.com/AmazonS3/latest/userguide/s3-tables-kms-specify.html)."""
    _, bucket = only(s3t, "AWS::S3Tables::TableBucket")
    props = bucket["Properties"]
    assert props["TableBucketName"] == "lakeloader-dev-tables"
    assert props["EncryptionConfiguration"] == {
        "SSEAlgorithm": "aws:kms",
        "KMSKeyArn": {"Fn::GetAtt": [s3t.logical_id(s3t.stack.storage.key), "Arn"]},
    }


def test_unreferenced_file_removal_follows_the_stage_settings(s3t):
    """Unreferenced file removal is a table bucket setting ("Unreferenced file removal", S3 User Guide,
    https://docs.aws.amazon.com/AmazonS3/latest/userguide/s3-table-buckets-maintenance.html); its two
    windows are the stage's s3_tables settings (defaults 3 and 10 days, AWS's own defaults)."""
    _, bucket = only(s3t, "AWS::S3Tables::TableBucket")
    assert bucket["Properties"]["UnreferencedFileRemoval"] == {
        "Status": "Enabled",
        "UnreferencedDays": 3,
        "NoncurrentDays": 10,
    }


def test_one_namespace_per_database_of_s3_tables_tables(s3t):
    """AWS::S3Tables::Namespace in the bucket, for crm only (sales stays in the Glue catalog); the
    namespace is the config's database, unprefixed: the table bucket is the stage's own."""
    bucket_id, _ = only(s3t, "AWS::S3Tables::TableBucket")
    namespaces = [r["Properties"] for r in s3t.resources("AWS::S3Tables::Namespace").values()]
    assert namespaces == [
        {"Namespace": "crm", "TableBucketARN": {"Fn::GetAtt": [bucket_id, "TableBucketARN"]}}
    ]


def test_the_table_buckets_resources_keep_their_logical_ids(s3t):
    """A deployed stage's table bucket, namespaces and policy keep their logical ids: CloudFormation
    replaces a resource whose logical id changes, and a new table bucket cannot take the old one's name
    (unique in the account and region) while the old one, holding the tables, still exists. The template
    snapshots hold the default config, which has no table bucket."""
    resources = {
        k: v["Type"]
        for k, v in s3t.template_json["Resources"].items()
        if v["Type"].startswith("AWS::S3Tables::")
    }
    assert resources == {
        "S3TablesTableBucket9A4B30D6": "AWS::S3Tables::TableBucket",
        "S3TablesNamespacecrmE797D752": "AWS::S3Tables::Namespace",
        "S3TablesPolicy325071F5": "AWS::S3Tables::TableBucketPolicy",
    }


def test_the_default_config_has_no_table_bucket(dev):
    assert dev.resources("AWS::S3Tables::TableBucket") == {}
    assert dev.resources("AWS::S3Tables::Namespace") == {}


def test_table_bucket_policy_names_the_job_roles(s3t):
    """AWS::S3Tables::TableBucketPolicy ("Table bucket policies", S3 User Guide,
    https://docs.aws.amazon.com/AmazonS3/latest/userguide/s3-tables-resource-based-policies.html): the
    stage's two job roles, by ARN, on the bucket and its tables, and nobody else."""
    bucket_id, _ = only(s3t, "AWS::S3Tables::TableBucket")
    _, policy = only(s3t, "AWS::S3Tables::TableBucketPolicy")
    props = policy["Properties"]
    assert props["TableBucketARN"] == {"Fn::GetAtt": [bucket_id, "TableBucketARN"]}
    resolve = Resolver(s3t.template_json)
    roles = {f"arn:aws:iam::{ACCOUNT}:role/{resolve.ref(r)}" for r in job_role_ids(s3t)}
    for statement in props["ResourcePolicy"]["Statement"]:
        assert statement["Effect"] == "Allow"
        principals = {resolve(p) for p in statement["Principal"]["AWS"]}
        assert principals == roles
    resources = {resolve(s["Resource"]) for s in props["ResourcePolicy"]["Statement"]}
    assert resources == {BUCKET_ARN, f"{BUCKET_ARN}/table/*"}


@pytest.mark.parametrize(
    "action",
    [
        "s3tables:CreateTable",
        "s3tables:GetTable",
        "s3tables:GetTableMetadataLocation",
        "s3tables:UpdateTableMetadataLocation",
        "s3tables:GetTableData",
        "s3tables:PutTableData",
        "s3tables:PutTableMaintenanceConfiguration",
        "s3tables:DeleteTable",
    ],
)
def test_job_roles_write_tables_in_the_stage_bucket_only(s3t, action):
    """What the S3 Tables catalog for Iceberg and S3FileIO call ("Access management for S3 Tables",
    https://docs.aws.amazon.com/AmazonS3/latest/userguide/s3-tables-setting-up.html): allowed on the
    stage's table bucket's tables, on no other table bucket."""
    for role in job_role_ids(s3t):
        statements = role_statements(s3t.template_json, role)
        assert allowed(statements, action, f"{BUCKET_ARN}/table/0123-abcd"), (role, action)
        assert not allowed(statements, action, f"{OTHER_BUCKET_ARN}/table/0123-abcd"), (role, action)


def test_job_roles_read_the_bucket_but_do_not_manage_it(s3t):
    for role in job_role_ids(s3t):
        statements = role_statements(s3t.template_json, role)
        for action in ("s3tables:GetTableBucket", "s3tables:GetNamespace", "s3tables:ListTables"):
            assert allowed(statements, action, BUCKET_ARN), (role, action)
            assert not allowed(statements, action, OTHER_BUCKET_ARN), (role, action)
        # CloudFormation owns the bucket, its namespaces, its policy and its maintenance settings
        for action in (
            "s3tables:CreateNamespace",
            "s3tables:DeleteNamespace",
            "s3tables:DeleteTableBucket",
            "s3tables:PutTableBucketPolicy",
            "s3tables:PutTableBucketMaintenanceConfiguration",
            "s3tables:PutTableBucketEncryption",
            "s3tables:CreateTableBucket",
        ):
            assert not allowed(statements, action, BUCKET_ARN), (role, action)
            assert not allowed(statements, action, "*"), (role, action)


def test_default_config_job_roles_have_no_s3_tables_access(dev):
    for role in job_role_ids(dev):
        statements = role_statements(dev.template_json, role)
        assert not allowed(statements, "s3tables:PutTableData", f"{BUCKET_ARN}/table/x")


# What the jobs call in the stage's table bucket, written out here rather than imported from
# infra.s3_tables (the code under test). The S3 Tables Iceberg REST endpoint translates each Iceberg REST
# operation into an S3 Tables one ("Accessing tables using the Amazon S3 Tables Iceberg REST endpoint",
# https://docs.aws.amazon.com/AmazonS3/latest/userguide/s3-tables-integrating-open-source.html): the
# catalog's config and namespace listing (GetTableBucket, ListNamespaces, GetNamespace), a namespace's
# tables (ListTables), a table's create, load, commit, rename and drop (CreateTable, GetTable,
# GetTableMetadataLocation, UpdateTableMetadataLocation, RenameTable, DeleteTable); S3FileIO reads and
# writes a table's files (GetTableData, PutTableData); `maintain` reads and sets a table's own maintenance
# (Get/PutTableMaintenanceConfiguration, lakeloader.iceberg.s3_tables.configure_maintenance).
JOB_BUCKET_ACTIONS = {
    "s3tables:GetTableBucket",
    "s3tables:ListNamespaces",
    "s3tables:GetNamespace",
    "s3tables:ListTables",
}
JOB_TABLE_ACTIONS = {
    "s3tables:CreateTable",
    "s3tables:GetTable",
    "s3tables:GetTableMetadataLocation",
    "s3tables:UpdateTableMetadataLocation",
    "s3tables:RenameTable",
    "s3tables:DeleteTable",
    "s3tables:GetTableData",
    "s3tables:PutTableData",
    "s3tables:GetTableMaintenanceConfiguration",
    "s3tables:PutTableMaintenanceConfiguration",
}


def test_job_roles_get_what_the_catalog_and_maintain_call_and_nothing_else(s3t):
    """Each job role's S3 Tables actions, and the table bucket policy's for both roles: the bucket's
    on the bucket, the tables' on its tables, each set exactly the one above."""
    table = f"{BUCKET_ARN}/table/0123-abcd"
    for role in job_role_ids(s3t):
        statements = role_statements(s3t.template_json, role)
        granted = {a for s in statements for a in s.actions if a.startswith("s3tables:")}
        assert granted == JOB_BUCKET_ACTIONS | JOB_TABLE_ACTIONS, role
        assert {a for a in granted if allowed(statements, a, BUCKET_ARN)} == JOB_BUCKET_ACTIONS, role
        assert {a for a in granted if allowed(statements, a, table)} == JOB_TABLE_ACTIONS, role
    _, policy = only(s3t, "AWS::S3Tables::TableBucketPolicy")
    resolve = Resolver(s3t.template_json)
    by_resource = {
        resolve(s["Resource"]): set(s["Action"]) for s in policy["Properties"]["ResourcePolicy"]["Statement"]
    }
    assert by_resource == {BUCKET_ARN: JOB_BUCKET_ACTIONS, f"{BUCKET_ARN}/table/*": JOB_TABLE_ACTIONS}


# What `lakeloader erase` calls on an s3_tables table, written out here rather than imported from
# infra.erasure (the code under test): the S3 Tables catalog for Iceberg's load and refresh
# (GetTableMetadataLocation) and commits (UpdateTableMetadataLocation), S3FileIO's and verify's reads
# and writes in the table's storage, and the bucket's unreferenced file removal windows.
ERASE_TABLE_ACTIONS = [
    "s3tables:GetTableMetadataLocation",
    "s3tables:UpdateTableMetadataLocation",
    "s3tables:GetTableData",
    "s3tables:PutTableData",
]
ERASE_BUCKET_ACTIONS = ["s3tables:GetTableBucketMaintenanceConfiguration"]


def erase_statements(synth):
    [statements] = [
        st for name, (_, st) in managed_policies(synth.template_json).items() if name.endswith("-erase")
    ]
    return statements


def test_the_erase_policy_allows_what_erase_calls_on_an_s3_tables_table(s3t):
    """The operators' erase policy lets `lakeloader erase` run on an S3 Tables table, in the stage's
    table bucket only. The actions and their resource types are the Service Authorization Reference's
    ("Actions, resources, and condition keys for Amazon S3 Tables",
    https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3tables.html):
    GetTableMetadataLocation, UpdateTableMetadataLocation, GetTableData (GetObject/HeadObject in the
    table's storage) and PutTableData (PutObject and the multipart calls there) on the `table`
    resource, GetTableBucketMaintenanceConfiguration on the `TableBucket` resource; the key encrypts
    the table bucket too."""
    statements = erase_statements(s3t)
    table = f"{BUCKET_ARN}/table/0123-abcd"
    needs = [(a, table) for a in ERASE_TABLE_ACTIONS] + [(a, BUCKET_ARN) for a in ERASE_BUCKET_ACTIONS]
    key = Resolver(s3t.template_json)(s3t.stack.resolve(s3t.stack.storage.key.key_arn))
    needs += [("kms:Decrypt", key), ("kms:GenerateDataKey", key)]
    assert [need for need in needs if not allowed(statements, *need)] == []
    # nowhere else
    other = [(a, f"{OTHER_BUCKET_ARN}/table/0123-abcd") for a in ERASE_TABLE_ACTIONS]
    other += [(a, OTHER_BUCKET_ARN) for a in ERASE_BUCKET_ACTIONS]
    assert [o for o in other if allowed(statements, *o)] == []


def test_the_erase_policy_changes_no_table_namespace_bucket_or_setting(s3t):
    """erase creates, renames or deletes no table, namespace or bucket and changes no maintenance or
    policy (S3 Tables deletes the files it unreferences itself): the policy grants no more s3tables
    actions than ERASE_*_ACTIONS."""
    statements = erase_statements(s3t)
    for action in (
        "s3tables:CreateTable",
        "s3tables:DeleteTable",
        "s3tables:RenameTable",
        "s3tables:PutTableMaintenanceConfiguration",
        "s3tables:PutTablePolicy",
        "s3tables:CreateNamespace",
        "s3tables:DeleteNamespace",
        "s3tables:DeleteTableBucket",
        "s3tables:PutTableBucketPolicy",
        "s3tables:PutTableBucketMaintenanceConfiguration",
        "s3tables:PutTableBucketEncryption",
    ):
        for resource in (BUCKET_ARN, f"{BUCKET_ARN}/table/0123-abcd", "*"):
            assert not allowed(statements, action, resource), (action, resource)
    granted = {a for s in statements for a in s.actions if a.startswith("s3tables:")}
    assert granted == {*ERASE_TABLE_ACTIONS, *ERASE_BUCKET_ACTIONS}


def test_default_config_erase_policy_has_no_s3_tables_access(dev):
    statements = erase_statements(dev)
    assert not {a for s in statements for a in s.actions if a.startswith("s3tables:")}


def glue_conf(synth) -> dict[str, str]:
    job = synth.template_json["Resources"][synth.logical_id(synth.stack.processing.ingest_job)]
    arguments = job["Properties"]["DefaultArguments"]
    return arguments, dict(
        part.split("=", 1) for part in Resolver(synth.template_json)(arguments["--conf"]).split(" --conf ")
    )


def test_jobs_reach_s3_tables_through_its_iceberg_rest_endpoint(s3t):
    """The catalog `s3tables` is Iceberg's REST catalog on S3 Tables' Iceberg REST endpoint, configured
    as "Accessing tables using the Amazon S3 Tables Iceberg REST endpoint" says
    (https://docs.aws.amazon.com/AmazonS3/latest/userguide/s3-tables-integrating-open-source.html):
    uri https://s3tables.<region>.amazonaws.com/iceberg, the table bucket's ARN as the warehouse,
    SigV4 with the signing name s3tables; beside the Glue catalog, on Glue and on EMR Serverless."""
    _, conf = glue_conf(s3t)
    prefix = f"spark.sql.catalog.{contract.S3_TABLES_CATALOG}"
    expected = {
        prefix: contract.ICEBERG_SPARK_CATALOG,
        f"{prefix}.type": "rest",
        f"{prefix}.uri": f"https://s3tables.{REGION}.amazonaws.com/iceberg",
        f"{prefix}.warehouse": BUCKET_ARN,
        f"{prefix}.rest.sigv4-enabled": "true",
        f"{prefix}.rest.signing-name": "s3tables",
        f"{prefix}.rest.signing-region": REGION,
        f"{prefix}.io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
    }
    assert {key: conf.get(key) for key in expected} == expected
    assert conf[f"spark.sql.catalog.{contract.GLUE_CATALOG}.catalog-impl"].endswith("GlueCatalog")
    resolve = Resolver(s3t.template_json)
    emr = s3t.stack.resolve(s3t.stack.processing.emr.lakeloader_conf)
    assert {key: resolve(emr[key]) for key in expected} == expected


@pytest.mark.parametrize("config", [CONFIG, None])
def test_no_s3_tables_catalog_jar_in_the_bundle_the_settings_or_the_pins(synth, config):
    """AWS calls the S3 Tables catalog jar "not recommended for new AWS Glue ETL job implementations"
    ("Running ETL jobs on Amazon S3 tables with AWS Glue",
    https://docs.aws.amazon.com/AmazonS3/latest/userguide/s3-tables-integrating-glue.html), and its
    s3tables SDK module would lag the SDK core the runtime provides. Neither the jar nor that module
    comes back: not in the template (no --extra-jars, no catalog-impl), not as an asset of the
    stage's bundle, not in EMR's spark.jars (the image's Iceberg jar only), not in the jar pins."""
    from lakeloader_dev.jars import RUNTIME_JARS

    stage = synth("dev", config=config) if config else synth("dev")
    text = json.dumps(stage.template_json)
    for marker in ("s3-tables-catalog", "S3TablesCatalog", "--extra-jars", "awssdk/s3tables"):
        assert marker not in text, marker
    assert not [p.name for p in stage.outdir.rglob("*.jar")]
    emr = stage.stack.resolve(stage.stack.processing.emr.lakeloader_conf)
    assert emr["spark.jars"] == runtimes.EMR_ICEBERG_JAR
    pinned = [jar.coordinates for jars in RUNTIME_JARS.values() for jar in jars]
    assert not [c for c in pinned if c.startswith("software.amazon.s3tables:") or ":s3tables:" in c]


def test_default_config_jobs_get_no_s3_tables_catalog(dev):
    arguments, conf = glue_conf(dev)
    assert "--extra-jars" not in arguments
    assert not any(key.startswith(f"spark.sql.catalog.{contract.S3_TABLES_CATALOG}") for key in conf)
