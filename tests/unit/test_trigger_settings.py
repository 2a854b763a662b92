"""The trigger's settings from the Lambda environment (lakeloader.trigger.settings)."""

from __future__ import annotations

import pytest

from lakeloader.trigger import SettingsError, TriggerSettings


def test_settings_from_env():
    base = {"CONFIG_TABLE": "c", "LEDGER_TABLE": "l", "RUNS_TABLE": "r"}
    settings = TriggerSettings.from_env({**base, "EMR_EXTRA_ARGS": '["--a", "b"]', "LOG_LEVEL": "debug"})
    assert settings.emr_extra_args == ("--a", "b") and settings.log_level == "DEBUG"
    assert settings.glue_job_name is None and settings.config_cache_seconds == 60
    with pytest.raises(SettingsError, match="LEDGER_TABLE, RUNS_TABLE"):
        TriggerSettings.from_env({"CONFIG_TABLE": "c"})
    with pytest.raises(SettingsError, match="EMR_EXTRA_ARGS"):
        TriggerSettings.from_env({**base, "EMR_EXTRA_ARGS": '{"a": 1}'})
    with pytest.raises(SettingsError, match="EMR_EXTRA_ARGS"):
        TriggerSettings.from_env({**base, "EMR_EXTRA_ARGS": "--a b"})
    with pytest.raises(SettingsError, match="LOG_LEVEL"):
        TriggerSettings.from_env({**base, "LOG_LEVEL": "chatty"})
