"""A found table's database is the job's to create: a stage with a `sources:` entry lets its job roles
create (and use) the databases the source's tables land in, under the stage's own database prefix only,
so a found table in a database no declared table uses loads on AWS with no deploy, and another stage's
databases stay out of reach. Evaluated with IAM's rules (tests/infra/iam_eval.py) on the synthesized
policies. (Lake Formation mode's CREATE_DATABASE on the catalog is an admin's grant: docs/sources.md.)"""

from __future__ import annotations

from tests.infra.iam_eval import ACCOUNT, REGION, allowed, managed_policies, role_statements

GLUE = f"arn:aws:glue:{REGION}:{ACCOUNT}"
# the e2e stage's config: its source `found` names its tables' databases found_<schema>, and
# tests/e2e/test_found_tables.py loads app.widgets into found_app, a database no declared table uses
E2E_CONFIG = "tests/e2e/tables.yaml"
DATABASE = "lakeloader_dev_found_app"
# what a job run calls for a found table (here `orders`) in a database nothing created yet: Spark's
# CREATE NAMESPACE IF NOT EXISTS (GetDatabase, then Iceberg's GlueCatalog.createNamespace), then the
# table's create and commits (lakeloader.engine.schema.create_table)
FIRST_RUN = [
    ("glue:GetDatabase", f"{GLUE}:database/{{db}}"),
    ("glue:CreateDatabase", f"{GLUE}:catalog"),
    ("glue:CreateDatabase", f"{GLUE}:database/{{db}}"),
    ("glue:GetTable", f"{GLUE}:table/{{db}}/orders"),
    ("glue:CreateTable", f"{GLUE}:table/{{db}}/orders"),
    ("glue:UpdateTable", f"{GLUE}:table/{{db}}/orders"),
]


def job_roles(built) -> dict[str, list]:
    processing = built.stack.processing
    return {
        name: role_statements(built.template_json, built.logical_id(role))
        for name, role in (("glue", processing.glue_role), ("emr", processing.emr_role))
    }


def may(statements, database: str) -> list[tuple[str, str]]:
    """The first run's calls on `database` the statements allow."""
    calls = [(action, resource.format(db=database)) for action, resource in FIRST_RUN]
    return [(action, resource) for action, resource in calls if allowed(statements, action, resource)]


def test_the_job_roles_create_and_load_the_databases_of_found_tables_of_their_stage_only(synth):
    dev = synth("dev", config=E2E_CONFIG)
    for name, statements in job_roles(dev).items():
        mine = [(a, r.format(db=DATABASE)) for a, r in FIRST_RUN]
        assert may(statements, DATABASE) == mine, name
        # another stage's database, and one of this stage the source never names: not even read
        assert may(statements, "lakeloader_prod_found_app") == [(FIRST_RUN[1][0], f"{GLUE}:catalog")], name
        assert may(statements, "lakeloader_dev_hr") == [(FIRST_RUN[1][0], f"{GLUE}:catalog")], name
    [erasure] = [found for name, (_, found) in managed_policies(dev.template_json).items() if "erase" in name]
    assert allowed(erasure, "glue:UpdateTable", f"{GLUE}:table/lakeloader_dev_found_app/orders")


def test_without_a_source_the_job_roles_create_no_database(dev):
    for name, statements in job_roles(dev).items():
        assert not allowed(statements, "glue:CreateDatabase", f"{GLUE}:database/{DATABASE}"), name
        assert not allowed(statements, "glue:CreateDatabase", f"{GLUE}:catalog"), name
