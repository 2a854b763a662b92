"""The app: stage and config from context; an invalid config or stage fails synth with a clear message."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from aws_cdk import App
from aws_cdk import aws_sqs as sqs

from infra.app import build, cdk_json_context
from infra.settings import SettingsError
from lakeloader.config import ConfigError

REPO = Path(__file__).resolve().parents[2]
BAD_CONFIG = """
tables:
  - id: crm.customers
    source: {prefix: crm/public/customers/, format: xml}
    target: {database: crm, table: customers}
    keys: [customer_id]
"""
FORMAT_MESSAGE = "table 'crm.customers' -> source.format: Input should be 'parquet', 'csv' or 'json'"


def run_app(tmp_path: Path, **overrides) -> subprocess.CompletedProcess:
    """Run app.py the way the CDK CLI does: context in CDK_CONTEXT_JSON, output in CDK_OUTDIR."""
    context = {**cdk_json_context(), **overrides}
    env = {
        **os.environ,
        "CDK_CONTEXT_JSON": json.dumps(context),
        "CDK_OUTDIR": str(tmp_path / "cdk.out"),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }
    return subprocess.run(
        [sys.executable, "app.py"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.slow
def test_invalid_config_fails_synth_with_the_models_message(tmp_path):
    bad = tmp_path / "tables.yaml"
    bad.write_text(BAD_CONFIG)
    with pytest.raises(ConfigError) as caught:
        build(App(context={**cdk_json_context(), "config": str(bad)}), nag=False)
    assert str(caught.value) == f"{bad}: {FORMAT_MESSAGE}"
    result = run_app(tmp_path, config=str(bad))
    assert result.returncode == 1
    assert f"cdk synth: {bad}: {FORMAT_MESSAGE}" in result.stderr
    assert not (tmp_path / "cdk.out" / "manifest.json").exists()


def test_missing_config_file_fails_synth(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        build(App(context={**cdk_json_context(), "config": str(tmp_path / "nope.yaml")}), nag=False)


def test_unknown_stage_and_bad_settings_fail_synth():
    with pytest.raises(SettingsError, match="stage='qa': unknown stage; cdk.json defines dev, prod"):
        build(App(context={**cdk_json_context(), "stage": "qa"}), nag=False)
    context = cdk_json_context()
    context["lakeloader:stages"]["dev"]["ingest"]["worker_type"] = "G.3X"
    with pytest.raises(SettingsError, match=r"lakeloader:stages\.dev\.ingest\.worker_type: Input should be"):
        build(App(context=context), nag=False)


def test_max_attempts_from_the_command_line_overrides_the_stage():
    """`-c max_attempts=1` (a string, as the CDK CLI passes it): what the e2e stage deploys with."""
    from infra.app import load_stage_and_config

    def max_attempts(**context: str) -> int:
        stage, _, _ = load_stage_and_config(App(context={**cdk_json_context(), **context}))
        return stage.settings.max_attempts

    assert max_attempts(max_attempts="1") == 1
    assert max_attempts() == 3
    with pytest.raises(SettingsError, match=r"lakeloader:stages\.dev\.max_attempts: Input should be greater"):
        max_attempts(max_attempts="0")


@pytest.mark.synth  # a whole synth in a process of its own
def test_app_py_synthesizes_the_selected_stage(tmp_path):
    result = run_app(tmp_path, stage="prod")
    assert result.returncode == 0, result.stderr[-3000:]
    manifest = json.loads((tmp_path / "cdk.out" / "manifest.json").read_text())
    assert [name for name, a in manifest["artifacts"].items() if a["type"] == "aws:cloudformation:stack"] == [
        "lakeloader-prod"
    ]
    assert (tmp_path / "cdk.out" / "lakeloader-prod.template.json").is_file()


@pytest.mark.synth  # a whole synth in a process of its own
def test_build_registers_cdk_nag_so_a_finding_fails_synth(tmp_path):
    app = App(context=cdk_json_context(), outdir=str(tmp_path))
    stack = build(app)
    sqs.Queue(stack, "UncheckedQueue")  # no DLQ, no TLS policy: AwsSolutions-SQS3/SQS4
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    rules = {v["ruleName"] for r in report["pluginReports"] for v in r["violations"]}
    assert rules == {"AwsSolutions-SQS3", "AwsSolutions-SQS4"}


def test_a_declared_type_the_stages_runtime_refuses_fails_synth(tmp_path):
    """`source.schema` is checked against the Spark SQL of the stage's runtime (cdk.json `runtime`)."""
    from infra.app import load_stage_and_config

    bad = tmp_path / "tables.yaml"
    declared = "    source: {prefix: crm/public/customers/, schema: {salary: integr, doc: variant}}\n"
    bad.write_text(BAD_CONFIG.replace("    source: {prefix: crm/public/customers/, format: xml}\n", declared))
    with pytest.raises(ConfigError) as caught:
        build(App(context={**cdk_json_context(), "config": str(bad)}), nag=False)
    assert str(caught.value).startswith(
        f"{bad}: table 'crm.customers' -> source.schema: column salary: 'integr': 'integr' is not a "
        "Spark SQL type; valid forms: "
    )
    bad.write_text(bad.read_text().replace("integr", "int"))
    with pytest.raises(ConfigError, match="column doc: 'variant': variant needs Spark 4; glue-5.1"):
        load_stage_and_config(App(context={**cdk_json_context(), "config": str(bad)}))
    load_stage_and_config(App(context={**cdk_json_context(), "config": str(bad), "runtime": "glue-6.0"}))
