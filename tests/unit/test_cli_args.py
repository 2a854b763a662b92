"""The CLI's overrides of the config file, without Spark: a deployed stage's database prefix."""

from __future__ import annotations

from pathlib import Path

from lakeloader.cli import build_parser, configure

CONFIG = str(Path(__file__).resolve().parents[2] / "config" / "tables.yaml")


def test_database_prefix_points_every_table_at_the_stage_database() -> None:
    args = build_parser().parse_args(
        ["erase", "--config", CONFIG, "--table", "crm.customers", "--key", "1"]
        + ["--database-prefix", "ll_dev_"]
    )
    config = configure(args)
    assert {t.target.database for t in config.tables} == {"ll_dev_crm", "ll_dev_sales", "ll_dev_inventory"}
    assert {t.id for t in config.tables} >= {"crm.customers"}  # ids, the ledger's keys, stay as configured


def test_without_a_prefix_the_config_names_stand() -> None:
    config = configure(
        build_parser().parse_args(["maintain", "--config", CONFIG, "--warehouse", "s3://b/w/"])
    )
    assert {t.target.database for t in config.tables} == {"crm", "sales", "inventory"}
    assert config.warehouse == "s3://b/w/"


def test_the_emr_scripts_take_every_job_argument_the_trigger_may_pass():
    """The trigger starts EMR runs with `--<name> value` for any contract.ARG_* (a rebuild's too);
    an option the script does not declare fails the run before it starts."""
    from lakeloader.control import contract
    from lakeloader.jobs.args import emr_args

    required = [part for name in contract.JOB_REQUIRED_ARGS for part in (contract.emr_arg(name), "x")]
    for optional in (contract.INGEST_OPTIONAL_ARGS, contract.MAINTAIN_OPTIONAL_ARGS):
        given = [part for name in optional for part in (contract.emr_arg(name), f"v-{name}")]
        args = emr_args(["ingest.py", *required, *given], optional)
        assert {name: args[name] for name in optional} == {name: f"v-{name}" for name in optional}


def test_a_stage_verb_without_an_aws_region_is_one_line_and_exit_2(monkeypatch, tmp_path, capsys):
    """botocore's NoRegionError (or no credentials) is a usage error naming the stack, not a traceback."""
    from lakeloader.cli import main

    for name in ("AWS_DEFAULT_REGION", "AWS_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    assert main(["status", "--stage", "nope"]) == 2
    assert (
        capsys.readouterr().err
        == "lakeloader: error: stack 'lakeloader-nope': AWS: You must specify a region.\n"
    )
