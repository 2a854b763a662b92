"""Lake Formation mode: the job roles reach the warehouse only through Lake Formation's credentials.

AWS's full table access (Glue 5.x: "Using AWS Glue with AWS Lake Formation for Full Table Access",
https://docs.aws.amazon.com/glue/latest/dg/security-access-control-fta.html; EMR Serverless 7.8+:
"Lake Formation full table access for EMR Serverless",
https://docs.aws.amazon.com/emr/latest/EMR-Serverless-UserGuide/lake-formation-unfiltered-access.html)
reads and writes a Lake Formation-registered table's S3 data with credentials Lake Formation vends,
and uses the job role's own credentials only for tables and paths not registered. Step 2 of the EMR
page: "in addition to Lake Formation permissions, the job runtime role needs the
`lakeformation:GetDataAccess` IAM permission". So in this mode the job roles hold
`lakeformation:GetDataAccess`, their Lake Formation grants, and no IAM grant on the registered
warehouse: a broken Lake Formation path must fail a run, not be served by IAM behind its back.
What is not registered (raw files, quarantine) stays an IAM grant.
"""

from __future__ import annotations

from urllib.parse import urlparse

import pytest

from tests.infra.iam_eval import Resolver, allowed, role_statements

WAREHOUSE_OBJECT_ACTIONS = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"]


def job_roles(template: dict) -> dict[str, str]:
    """The Glue job role and the EMR Serverless execution role: name -> logical id."""
    resources = template["Resources"]
    found = {}
    for logical, resource in resources.items():
        if resource["Type"] == "AWS::IAM::Role":
            name = Resolver(template)(resource["Properties"].get("RoleName", logical))
            for kind in ("glue-job", "emr-job", "lf-data-access"):
                if f"-{kind}-" in name:
                    found[kind] = logical
    return found


def lake_paths(template: dict) -> tuple[str, str, str]:
    """(curated bucket, warehouse key prefix, raw object ARN) as the Glue jobs receive them."""
    resolve = Resolver(template)
    job = next(r for r in template["Resources"].values() if r["Type"] == "AWS::Glue::Job")
    defaults = {k: resolve(v) for k, v in job["Properties"]["DefaultArguments"].items()}
    warehouse, raw = urlparse(defaults["--lakeloader_warehouse"]), urlparse(defaults["--lakeloader_raw_root"])
    return warehouse.netloc, warehouse.path.lstrip("/"), f"arn:aws:s3:::{raw.netloc}{raw.path}"


@pytest.fixture(scope="module")
def lf(synth):
    return synth("dev", lake_formation="true")


def test_lake_formation_mode_job_roles_hold_no_s3_grant_on_the_warehouse(lf, dev):
    """No object action and no listing on the registered warehouse for the Glue or EMR job role in
    Lake Formation mode; the same roles in IAM mode do hold them (so the check is not vacuous)."""
    for synthesized, lake_formation in ((lf, True), (dev, False)):
        template = synthesized.template_json
        bucket, prefix, _ = lake_paths(template)
        table_object = f"arn:aws:s3:::{bucket}/{prefix}crm.db/customers/data/00000-0-a.parquet"
        roles = job_roles(template)
        for kind in ("glue-job", "emr-job"):
            statements = role_statements(template, roles[kind])
            for action in WAREHOUSE_OBJECT_ACTIONS:
                assert allowed(statements, action, table_object) is not lake_formation, (kind, action)
            listing = allowed(
                statements, "s3:ListBucket", f"arn:aws:s3:::{bucket}", {"s3:prefix": f"{prefix}crm.db/"}
            )
            assert listing is not lake_formation, kind


def test_lake_formation_mode_job_roles_take_vended_credentials_and_keep_what_is_not_registered(lf):
    """`lakeformation:GetDataAccess` (step 2 of AWS's full-table-access page), `ALL` on the tables and
    DATA_LOCATION_ACCESS (infra.lake_formation); the raw files, which are not registered, still by
    IAM. The warehouse's only IAM grant is the registered location's data-access role, which Lake
    Formation assumes to vend the credentials."""
    template = lf.template_json
    bucket, prefix, raw_root = lake_paths(template)
    roles = job_roles(template)
    for kind in ("glue-job", "emr-job"):
        statements = role_statements(template, roles[kind])
        assert allowed(statements, "lakeformation:GetDataAccess", "*"), kind
        assert allowed(statements, "s3:GetObject", f"{raw_root}crm/public/customers/LOAD00000001.parquet"), (
            kind
        )
    vending = role_statements(template, roles["lf-data-access"])
    table_object = f"arn:aws:s3:::{bucket}/{prefix}crm.db/customers/data/00000-0-a.parquet"
    for action in WAREHOUSE_OBJECT_ACTIONS:
        assert allowed(vending, action, table_object), action
    registered = lf.resource("AWS::LakeFormation::Resource")[1]["Properties"]
    assert registered["RoleArn"] == {"Fn::GetAtt": [roles["lf-data-access"], "Arn"]}
