"""Orphan-file removal under Lake Formation lists through the table's FileIO.

In Lake Formation mode the job roles hold no IAM grant on the warehouse (infra.job_access): AWS's
full table access serves a registered table's S3 data with Lake Formation's credentials ("Using AWS
Glue with AWS Lake Formation for Full Table Access",
https://docs.aws.amazon.com/glue/latest/dg/security-access-control-fta.html; "Lake Formation full
table access for EMR Serverless",
https://docs.aws.amazon.com/emr/latest/EMR-Serverless-UserGuide/lake-formation-unfiltered-access.html),
and the role's own for anything else. Iceberg's orphan-file action lists with Hadoop's file system
unless told `prefix_listing => true`, and Hadoop's S3A would list with the role's own credentials.
"""

from __future__ import annotations

from lakeloader.control.contract import GLUE_CATALOG, lake_formation_catalog_conf
from lakeloader.jobs.maintenance import lake_formation_catalog, orphan_file_arguments
from tests.unit.spark_conf import Session


def test_a_lake_formation_catalog_lists_orphans_through_the_tables_file_io():
    """The catalog settings the stack gives both engines in Lake Formation mode (full table access)
    make maintenance list a table's files by prefix through Iceberg's FileIO, which Lake Formation's
    vended credentials serve; the role has no S3 grant of its own on the warehouse to list with."""
    spark = Session(**lake_formation_catalog_conf(GLUE_CATALOG, "123456789012", "eu-west-1"))
    assert lake_formation_catalog(spark, GLUE_CATALOG) is True
    assert orphan_file_arguments("TIMESTAMP '2026-11-01 00:00:00'", True) == [
        "older_than => TIMESTAMP '2026-11-01 00:00:00'",
        "prefix_listing => true",
    ]


def test_an_iam_mode_catalog_lists_orphans_as_before():
    """IAM mode keeps Iceberg's default listing (the role holds the warehouse's ListBucket)."""
    spark = Session()
    assert lake_formation_catalog(spark, GLUE_CATALOG) is False
    assert (
        lake_formation_catalog(
            Session(**{"spark.sql.catalog.other.glue.lakeformation-enabled": "true"}), GLUE_CATALOG
        )
        is False
    )
    assert orphan_file_arguments("TIMESTAMP '2026-11-01 00:00:00'", False) == [
        "older_than => TIMESTAMP '2026-11-01 00:00:00'"
    ]
