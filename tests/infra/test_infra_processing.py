"""Processing: Glue job arguments and settings, the lakeloader zip, EMR Serverless."""

from __future__ import annotations

import zipfile

import pytest

from infra.emr import emr_venv_conf
from infra.glue_jobs import glue_conf_argument
from infra.packaging import lakeloader_zip
from lakeloader.control import contract, runtimes
from tests.infra import test_infra_triggers
from tests.infra.cdk_helpers import join, stage_settings

batched = test_infra_triggers.batched  # fixture: a dev stack with batching on

EXPECTED_CONF = (
    "spark.sql.extensions=org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
    " --conf spark.sql.catalog.glue_catalog=org.apache.iceberg.spark.SparkCatalog"
    " --conf spark.sql.catalog.glue_catalog.catalog-impl=org.apache.iceberg.aws.glue.GlueCatalog"
    " --conf spark.sql.catalog.glue_catalog.io-impl=org.apache.iceberg.aws.s3.S3FileIO"
    " --conf spark.sql.catalog.glue_catalog.warehouse=s3://${CURATED}/warehouse/"
    " --conf spark.sql.catalog.glue_catalog.io.manifest.cache-enabled=true"
    " --conf spark.hadoop.fs.s3a.endpoint.region=${AWS::Region}"
)


def glue_job(synth, name: str) -> dict:
    return synth.resource("AWS::Glue::Job", lambda p: p["Name"] == f"lakeloader-{synth.stage}-{name}")[1][
        "Properties"
    ]


@pytest.mark.parametrize("name", ["ingest", "maintain"])
def test_glue_job_arguments(stage_synth, name):
    props = glue_job(stage_synth, name)
    args = props["DefaultArguments"]
    curated = stage_synth.logical_id(stage_synth.stack.storage.curated)
    assert props["GlueVersion"] == runtimes.runtime(runtimes.DEFAULT_RUNTIME).glue_version
    assert props["Command"]["Name"] == "glueetl"
    assert join(props["Command"]["ScriptLocation"]).endswith(".py")
    assert args["--datalake-formats"] == "iceberg"
    assert join(args["--conf"]) == EXPECTED_CONF.replace("CURATED", curated)
    assert args["--enable-metrics"] == ""
    assert args["--enable-continuous-cloudwatch-log"] == "true"
    assert args["--enable-job-insights"] == "true"
    assert args["--job-bookmark-option"] == "job-bookmark-disable"
    assert args["--job-language"] == "python"
    assert join(args["--extra-py-files"]).endswith(".zip")
    # the arguments glue_jobs/*.py resolve; the per-run ones default to ""
    store = stage_synth.stack.config_store
    assert args["--lakeloader_config_table"] == {"Ref": stage_synth.logical_id(store.config_table)}
    assert args["--lakeloader_ledger_table"] == {"Ref": stage_synth.logical_id(store.ledger_table)}
    assert args["--lakeloader_runs_table"] == {"Ref": stage_synth.logical_id(store.runs_table)}
    raw = stage_synth.logical_id(stage_synth.stack.storage.raw)
    assert join(args["--lakeloader_raw_root"]) == f"s3://${{{raw}}}/"
    assert join(args["--lakeloader_warehouse"]) == f"s3://${{{curated}}}/warehouse/"
    assert args["--lakeloader_table_id"] == ""
    assert args["--lakeloader_correlation_id"] == ""
    assert args["--lakeloader_database_prefix"] == f"lakeloader_{stage_synth.stage}_"
    assert props["SecurityConfiguration"] == {
        "Ref": stage_synth.logical_id(stage_synth.stack.catalog.security_configuration)
    }


@pytest.mark.parametrize("name", ["ingest", "maintain"])
def test_glue_job_capacity_comes_from_the_stage(stage_synth, name):
    expected = stage_settings(stage_synth.stage)[name]
    props = glue_job(stage_synth, name)
    assert props["WorkerType"] == expected["worker_type"]
    assert props["NumberOfWorkers"] == expected["number_of_workers"]
    assert props["Timeout"] == expected["timeout_minutes"]
    assert props["MaxRetries"] == expected["max_retries"]
    assert props["ExecutionProperty"] == {"MaxConcurrentRuns": expected["max_concurrent_runs"]}


def test_both_engines_share_the_library_zip(dev):
    library = join(glue_job(dev, "ingest")["DefaultArguments"]["--extra-py-files"])
    assert library == join(glue_job(dev, "maintain")["DefaultArguments"]["--extra-py-files"])
    _, app = dev.resource("AWS::EMRServerless::Application")
    spark_defaults = app["Properties"]["RuntimeConfiguration"][0]
    assert spark_defaults["Classification"] == "spark-defaults"
    assert join(spark_defaults["Properties"]["spark.submit.pyFiles"]) == library


def test_lakeloader_zip_has_the_package_at_its_root_and_is_deterministic():
    path = lakeloader_zip()
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        assert "lakeloader/__init__.py" in names
        assert "lakeloader/config/__init__.py" in names
        assert all(n.startswith("lakeloader/") for n in names)
        assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
        assert {info.date_time for info in archive.infolist()} == {(1980, 1, 1, 0, 0, 0)}
    assert names == sorted(names)
    assert lakeloader_zip().read_bytes() == path.read_bytes()


def test_emr_serverless_application(stage_synth):
    expected = stage_settings(stage_synth.stage)["emr"]
    runtime = runtimes.runtime(stage_settings(stage_synth.stage).get("runtime", runtimes.DEFAULT_RUNTIME))
    _, app = stage_synth.resource("AWS::EMRServerless::Application")
    props = app["Properties"]
    assert props["Type"] == "SPARK"
    assert props["ReleaseLabel"] == expected.get("release_label", runtime.emr_release_label)
    assert props["Name"] == f"lakeloader-{stage_synth.stage}-spark"
    assert props["AutoStopConfiguration"] == {
        "Enabled": True,
        "IdleTimeoutMinutes": expected["idle_timeout_minutes"],
    }
    assert props["MaximumCapacity"] == {
        "Cpu": expected["max_cpu"],
        "Memory": expected["max_memory"],
        "Disk": expected["max_disk"],
    }
    conf = props["RuntimeConfiguration"][0]["Properties"]
    curated = stage_synth.logical_id(stage_synth.stack.storage.curated)
    for key, value in contract.iceberg_catalog_conf(
        "glue_catalog", f"s3://${{{curated}}}/warehouse/"
    ).items():
        assert join(conf[key]) == value
    # the documented jar of EMR Serverless images, and the packed venv's Python (test_infra_bundle)
    assert conf["spark.jars"] == "/usr/share/aws/iceberg/lib/iceberg-spark3-runtime.jar"
    venv = emr_venv_conf("s3://assets/venv.tar.gz")
    assert {k: v for k, v in venv.items() if k != "spark.archives"}.items() <= conf.items()
    logs = props["MonitoringConfiguration"]["S3MonitoringConfiguration"]
    assert join(logs["LogUri"]).endswith("/emr/logs/")


def test_emr_job_role_trusts_emr_serverless_of_this_account(dev):
    role_id = dev.logical_id(dev.stack.processing.emr_role)
    trust = dev.template_json["Resources"][role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust == [
        {
            "Action": "sts:AssumeRole",
            "Condition": {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}},
            "Effect": "Allow",
            "Principal": {"Service": "emr-serverless.amazonaws.com"},
        }
    ]


def test_glue_conf_argument_joins_settings_with_conf():
    assert glue_conf_argument({"a": "1", "b": "2", "c": "3"}) == "a=1 --conf b=2 --conf c=3"


def test_ingest_runs_drain_tables_in_parallel_as_the_stage_says(stage_synth):
    parallel = str(stage_settings(stage_synth.stage)["batching"]["parallel_tables"])
    assert glue_job(stage_synth, "ingest")["DefaultArguments"]["--lakeloader_parallel_tables"] == parallel
    assert "--lakeloader_parallel_tables" not in glue_job(stage_synth, "maintain")["DefaultArguments"]
    # queuing is off unless the stage turns it on
    assert glue_job(stage_synth, "ingest")["JobRunQueuingEnabled"] is False


def test_job_run_queuing_is_a_stage_setting_of_the_ingest_job(batched):
    ingest = glue_job(batched, "ingest")
    assert ingest["JobRunQueuingEnabled"] is True and ingest["MaxRetries"] == 0
    assert ingest["DefaultArguments"]["--lakeloader_parallel_tables"] == "8"
    assert glue_job(batched, "maintain")["JobRunQueuingEnabled"] is False


LAKE_FORMATION_CONF = {
    "spark.sql.catalog.glue_catalog.glue.lakeformation-enabled": "true",
    "spark.sql.catalog.glue_catalog.glue.account-id": "${AWS::AccountId}",
    "spark.sql.catalog.glue_catalog.client.region": "${AWS::Region}",
    "spark.sql.catalog.dropDirectoryBeforeTable.enabled": "true",
}


@pytest.mark.parametrize("lake_formation", [False, True])
def test_lake_formation_mode_makes_both_engines_use_lake_formation_credentials(synth, lake_formation):
    """Glue 5 / EMR 7 full table access: without the catalog option the jobs would still read and write
    with their role's own S3 grants, and Lake Formation would govern nothing the jobs do."""
    built = synth("dev", lake_formation=str(lake_formation).lower())
    glue_conf = join(glue_job(built, "ingest")["DefaultArguments"]["--conf"]).split(" --conf ")
    _, app = built.resource("AWS::EMRServerless::Application")
    emr_conf = {k: join(v) for k, v in app["Properties"]["RuntimeConfiguration"][0]["Properties"].items()}
    for key, value in LAKE_FORMATION_CONF.items():
        assert (f"{key}={value}" in glue_conf) is lake_formation, key
        assert (emr_conf.get(key) == value) is lake_formation, key
