"""The trigger's settings from the Lambda environment (lakeloader.control.trigger.settings)."""

from __future__ import annotations

import pytest

from lakeloader.control.ledger import DEFAULT_START_LEASE_SECONDS
from lakeloader.control.trigger import TriggerSettings, TriggerSettingsError


def test_settings_from_env():
    base = {"CONFIG_TABLE": "c", "LEDGER_TABLE": "l", "RUNS_TABLE": "r"}
    settings = TriggerSettings.from_env({**base, "EMR_EXTRA_ARGS": '["--a", "b"]', "LOG_LEVEL": "debug"})
    assert settings.emr_extra_args == ("--a", "b") and settings.log_level == "DEBUG"
    assert settings.glue_job_name is None and settings.config_cache_seconds == 60
    with pytest.raises(TriggerSettingsError, match="LEDGER_TABLE, RUNS_TABLE"):
        TriggerSettings.from_env({"CONFIG_TABLE": "c"})
    with pytest.raises(TriggerSettingsError, match="EMR_EXTRA_ARGS"):
        TriggerSettings.from_env({**base, "EMR_EXTRA_ARGS": '{"a": 1}'})
    with pytest.raises(TriggerSettingsError, match="EMR_EXTRA_ARGS"):
        TriggerSettings.from_env({**base, "EMR_EXTRA_ARGS": "--a b"})
    with pytest.raises(TriggerSettingsError, match="LOG_LEVEL"):
        TriggerSettings.from_env({**base, "LOG_LEVEL": "chatty"})


BASE = {"CONFIG_TABLE": "c", "LEDGER_TABLE": "l", "RUNS_TABLE": "r"}


def test_every_variable_the_stack_sets_reaches_its_setting():
    env = {
        "CONFIG_TABLE": " lakeloader-dev-config ",
        "LEDGER_TABLE": "lakeloader-dev-ledger",
        "RUNS_TABLE": "lakeloader-dev-runs",
        "GLUE_JOB_NAME": "lakeloader-dev-ingest",
        "EMR_APPLICATION_ID": "00f1abc",
        "EMR_JOB_ROLE_ARN": "arn:aws:iam::123456789012:role/emr",
        "EMR_ENTRY_POINT": "s3://assets/emr_steps/ingest.py",
        "EMR_EXTRA_ARGS": '["--conf", "spark.x=1"]',
        "RAW_BUCKET": "raw-bucket",
        "LOG_LEVEL": "warning",
        "CONFIG_CACHE_SECONDS": "2.5",
        "START_LEASE_SECONDS": "90",
        "EVENTBRIDGE_KEYS_ENCODED": "false",
        "TABLES_PER_RUN": "3",
    }
    assert TriggerSettings.from_env(env) == TriggerSettings(
        config_table="lakeloader-dev-config",
        ledger_table="lakeloader-dev-ledger",
        runs_table="lakeloader-dev-runs",
        glue_job_name="lakeloader-dev-ingest",
        emr_application_id="00f1abc",
        emr_job_role_arn="arn:aws:iam::123456789012:role/emr",
        emr_entry_point="s3://assets/emr_steps/ingest.py",
        emr_extra_args=("--conf", "spark.x=1"),
        raw_bucket="raw-bucket",
        log_level="WARNING",
        config_cache_seconds=2.5,
        start_lease_seconds=90,
        eventbridge_keys_encoded=False,
        tables_per_run=3,
    )


def test_unset_or_blank_variables_take_the_defaults():
    blank = {name: "  " for name in ("GLUE_JOB_NAME", "RAW_BUCKET", "LOG_LEVEL", "TABLES_PER_RUN")}
    settings = TriggerSettings.from_env({**BASE, **blank})
    assert settings == TriggerSettings(config_table="c", ledger_table="l", runs_table="r")
    assert (settings.log_level, settings.config_cache_seconds, settings.tables_per_run) == ("INFO", 60.0, 1)
    assert settings.start_lease_seconds == DEFAULT_START_LEASE_SECONDS and settings.eventbridge_keys_encoded
    for spelling, encoded in (("TRUE", True), ("1", True), ("yes", True), ("0", False), ("No", False)):
        assert (
            TriggerSettings.from_env({**BASE, "EVENTBRIDGE_KEYS_ENCODED": spelling}).eventbridge_keys_encoded
            is encoded
        )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"CONFIG_TABLE": " "}, "environment variable(s) not set: CONFIG_TABLE"),
        ({"LEDGER_TABLE": ""}, "environment variable(s) not set: LEDGER_TABLE"),
        ({"RUNS_TABLE": ""}, "environment variable(s) not set: RUNS_TABLE"),
        (
            {"EMR_EXTRA_ARGS": "--a b"},
            "EMR_EXTRA_ARGS is not valid JSON (Expecting value: line 1 column 1 (char 0)): '--a b'",
        ),
        (
            {"EMR_EXTRA_ARGS": '["--a", 1]'},
            "EMR_EXTRA_ARGS must be a JSON list of strings, got '[\"--a\", 1]'",
        ),
        ({"LOG_LEVEL": "chatty"}, "LOG_LEVEL must be DEBUG, INFO, WARNING, ERROR or CRITICAL, got 'CHATTY'"),
        ({"TABLES_PER_RUN": "0"}, "TABLES_PER_RUN must be a whole number >= 1, got 0"),
        ({"TABLES_PER_RUN": "1.5"}, "TABLES_PER_RUN must be a whole number >= 1, got 1.5"),
        ({"TABLES_PER_RUN": "many"}, "TABLES_PER_RUN must be a number, got 'many'"),
        ({"CONFIG_CACHE_SECONDS": "soon"}, "CONFIG_CACHE_SECONDS must be a number, got 'soon'"),
        ({"START_LEASE_SECONDS": "x"}, "START_LEASE_SECONDS must be a number, got 'x'"),
        (
            {"EVENTBRIDGE_KEYS_ENCODED": "maybe"},
            "EVENTBRIDGE_KEYS_ENCODED must be true or false, got 'maybe'",
        ),
    ],
)
def test_a_malformed_environment_names_the_variable(env, message):
    with pytest.raises(TriggerSettingsError) as raised:
        TriggerSettings.from_env({**BASE, **env})
    assert str(raised.value) == message
