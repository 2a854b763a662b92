"""EMR Serverless as shipped: the release's Iceberg line, a custom image's pull policy, and synth
refusing `engine: emr` tables the stage's application cannot run."""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest
from aws_cdk import App
from aws_cdk import aws_glue as glue

from infra.app import build, cdk_json_context
from infra.glue_jobs import glue_version
from infra.settings import SettingsError, resolve_stage
from lakeloader.control import runtimes
from tests.infra.cdk_helpers import join

IMAGE = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/lakeloader/emr-spark:7.12.0-1"
EMR_CONFIG = """
tables:
  - id: crm.customers
    source: {prefix: crm/public/customers/, format: parquet, cdc: dms}
    target: {database: crm, table: customers}
    keys: [customer_id]
  - id: shop.reviews
    engine: emr
    source: {prefix: shop/public/reviews/, format: parquet, cdc: dms}
    target: {database: shop, table: reviews}
    keys: [review_id]
"""


def context_with_emr(stage: str = "dev", **emr) -> dict:
    context = copy.deepcopy(cdk_json_context())
    context["stage"] = stage
    context["lakeloader:stages"][stage]["emr"].update(emr)
    return context


@pytest.fixture
def emr_config(tmp_path) -> str:
    path = tmp_path / "tables.yaml"
    path.write_text(EMR_CONFIG)
    return str(path)


def test_release_older_than_the_iceberg_line_is_refused_in_one_line():
    with pytest.raises(SettingsError) as caught:
        resolve_stage(context_with_emr(release_label="emr-7.9.0"))
    message = str(caught.value)
    assert message == (
        "cdk.json context lakeloader:stages.dev.emr.release_label: emr-7.9.0 is older than emr-7.12.0: "
        "its bundled Iceberg is not the 1.10 line lakeloader is tested with; use emr-7.12.0"
    )
    newer = resolve_stage(context_with_emr(release_label="emr-7.13.0"))
    assert newer.settings.emr.release_label == "emr-7.13.0"


def test_unknown_glue_version_fails_synth_clearly():
    assert glue_version(runtimes.runtime("glue-5.1")) is glue.GlueVersion.V5_1
    assert glue_version(runtimes.runtime("glue-6.0")) is glue.GlueVersion.V6_0
    future = dataclasses.replace(runtimes.runtime("glue-6.0"), name="glue-6.7", glue_version="6.7")
    with pytest.raises(SettingsError, match=r"runtime glue-6\.7's Glue version '6\.7' is not one this stack"):
        glue_version(future)


def test_an_emr_table_fails_synth_when_spark_defaults_replace_what_lakeloader_needs(emr_config):
    context = context_with_emr(spark_defaults={"spark.jars": "/opt/my.jar"})
    with pytest.raises(SettingsError) as caught:
        build(App(context={**context, "config": emr_config}), nag=False)
    assert str(caught.value) == (
        "table(s) shop.reviews have engine emr, but cdk.json context "
        "lakeloader:stages.dev.emr.spark_defaults replaces spark.jars, which lakeloader's EMR runs need"
    )


def test_an_emr_table_fails_synth_when_the_application_cannot_start_a_driver_and_an_executor(emr_config):
    context = context_with_emr(max_cpu="4 vCPU")
    expected = r"shop\.reviews have engine emr, but .*max_cpu is 4 vCPU, below one driver and one executor"
    with pytest.raises(SettingsError, match=expected):
        build(App(context={**context, "config": emr_config}), nag=False)


@pytest.mark.synth
def test_emr_tables_synthesize_on_the_shipped_settings_and_glue_tables_ignore_emr_limits(emr_config):
    build(App(context={**context_with_emr(), "config": emr_config}), nag=False)
    build(App(context=context_with_emr(max_cpu="4 vCPU")), nag=False)  # config/tables.yaml: Glue only


def test_custom_image_gets_the_pull_statement_its_repository_policy_needs(synth):
    stages = context_with_emr(image_uri=IMAGE)["lakeloader:stages"]
    imaged = synth("dev", **{"lakeloader:stages": stages})
    _, app = imaged.resource("AWS::EMRServerless::Application")
    assert app["Properties"]["ImageConfiguration"] == {"ImageUri": IMAGE}
    statement = json.loads(
        join(imaged.template_json["Outputs"]["EmrImageRepositoryPolicyStatement"]["Value"])
        .replace("${AWS::Partition}", "aws")
        .replace("${AWS::Region}", "eu-west-1")
        .replace("${AWS::AccountId}", "123456789012")
    )
    assert statement == {
        "Sid": "EmrServerlessPull",
        "Effect": "Allow",
        "Principal": {"Service": "emr-serverless.amazonaws.com"},
        "Action": ["ecr:BatchGetImage", "ecr:DescribeImages", "ecr:GetDownloadUrlForLayer"],
        "Condition": {
            "ArnLike": {"aws:SourceArn": "arn:aws:emr-serverless:eu-west-1:123456789012:/applications/*"}
        },
    }


def test_no_image_no_pull_statement(dev):
    _, app = dev.resource("AWS::EMRServerless::Application")
    assert "ImageConfiguration" not in app["Properties"]
    assert "EmrImageRepositoryPolicyStatement" not in dev.template_json["Outputs"]


@pytest.mark.parametrize("uri", ["my-image:latest", "public.ecr.aws/emr-serverless/spark/emr-7.12.0:latest"])
def test_image_uri_must_be_an_ecr_image(uri):
    with pytest.raises(SettingsError, match=r"lakeloader:stages\.dev\.emr\.image_uri"):
        resolve_stage(context_with_emr(image_uri=uri))
