"""The S3-arrival Lambda's environment (names from `control.contract`, set by infra/triggers.py)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass

from lakeloader.control.contract import (
    ENV_CONFIG_CACHE_SECONDS,
    ENV_CONFIG_TABLE,
    ENV_EMR_APPLICATION_ID,
    ENV_EMR_ENTRY_POINT,
    ENV_EMR_EXTRA_ARGS,
    ENV_EMR_JOB_ROLE_ARN,
    ENV_EVENTBRIDGE_KEYS_ENCODED,
    ENV_GLUE_JOB_NAME,
    ENV_LEDGER_TABLE,
    ENV_LOG_LEVEL,
    ENV_RAW_BUCKET,
    ENV_RUNS_TABLE,
    ENV_START_LEASE_SECONDS,
    ENV_TABLES_PER_RUN,
)
from lakeloader.control.ledger import DEFAULT_START_LEASE_SECONDS

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class TriggerSettingsError(ValueError):
    """The Lambda's environment is incomplete or malformed (names the variable)."""


def _opt(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name, "").strip()
    return value or None


def _number(env: Mapping[str, str], name: str, default: float) -> float:
    text = _opt(env, name)
    if text is None:
        return default
    try:
        return float(text)
    except ValueError:
        raise TriggerSettingsError(f"{name} must be a number, got {text!r}") from None


def _extra_args(env: Mapping[str, str]) -> tuple[str, ...]:
    text = _opt(env, ENV_EMR_EXTRA_ARGS) or "[]"
    try:
        extra = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TriggerSettingsError(f"{ENV_EMR_EXTRA_ARGS} is not valid JSON ({exc}): {text!r}") from None
    if not isinstance(extra, list) or not all(isinstance(a, str) for a in extra):
        raise TriggerSettingsError(f"{ENV_EMR_EXTRA_ARGS} must be a JSON list of strings, got {text!r}")
    return tuple(extra)


@dataclass(frozen=True)
class TriggerSettings:
    """The Lambda's environment."""

    config_table: str
    ledger_table: str
    runs_table: str
    glue_job_name: str | None = None
    emr_application_id: str | None = None
    emr_job_role_arn: str | None = None
    emr_entry_point: str | None = None
    emr_extra_args: tuple[str, ...] = ()
    raw_bucket: str | None = None
    log_level: str = "INFO"
    config_cache_seconds: float = 60.0
    start_lease_seconds: int = DEFAULT_START_LEASE_SECONDS
    eventbridge_keys_encoded: bool = True
    tables_per_run: int = 1

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> TriggerSettings:
        """Read CONFIG_TABLE, LEDGER_TABLE, RUNS_TABLE (required), GLUE_JOB_NAME,
        EMR_APPLICATION_ID, EMR_JOB_ROLE_ARN, EMR_ENTRY_POINT, EMR_EXTRA_ARGS (JSON
        list of strings), RAW_BUCKET, LOG_LEVEL, CONFIG_CACHE_SECONDS,
        START_LEASE_SECONDS, EVENTBRIDGE_KEYS_ENCODED (true|false), TABLES_PER_RUN."""
        env = os.environ if env is None else env
        required = (ENV_CONFIG_TABLE, ENV_LEDGER_TABLE, ENV_RUNS_TABLE)
        missing = [name for name in required if not _opt(env, name)]
        if missing:
            raise TriggerSettingsError(f"environment variable(s) not set: {', '.join(missing)}")
        extra_args = _extra_args(env)
        log_level = (_opt(env, ENV_LOG_LEVEL) or "INFO").upper()
        if log_level not in LOG_LEVELS:
            raise TriggerSettingsError(
                f"{ENV_LOG_LEVEL} must be DEBUG, INFO, WARNING, ERROR or CRITICAL, got {log_level!r}"
            )
        tables_per_run = _number(env, ENV_TABLES_PER_RUN, 1)
        if tables_per_run < 1 or tables_per_run != int(tables_per_run):
            raise TriggerSettingsError(
                f"{ENV_TABLES_PER_RUN} must be a whole number >= 1, got {tables_per_run:g}"
            )
        encoded = (_opt(env, ENV_EVENTBRIDGE_KEYS_ENCODED) or "true").lower()
        if encoded not in ("true", "false", "1", "0", "yes", "no"):
            raise TriggerSettingsError(
                f"{ENV_EVENTBRIDGE_KEYS_ENCODED} must be true or false, got {encoded!r}"
            )
        return cls(
            config_table=env[ENV_CONFIG_TABLE].strip(),
            ledger_table=env[ENV_LEDGER_TABLE].strip(),
            runs_table=env[ENV_RUNS_TABLE].strip(),
            glue_job_name=_opt(env, ENV_GLUE_JOB_NAME),
            emr_application_id=_opt(env, ENV_EMR_APPLICATION_ID),
            emr_job_role_arn=_opt(env, ENV_EMR_JOB_ROLE_ARN),
            emr_entry_point=_opt(env, ENV_EMR_ENTRY_POINT),
            emr_extra_args=extra_args,
            raw_bucket=_opt(env, ENV_RAW_BUCKET),
            log_level=log_level,
            config_cache_seconds=_number(env, ENV_CONFIG_CACHE_SECONDS, 60.0),
            start_lease_seconds=int(_number(env, ENV_START_LEASE_SECONDS, DEFAULT_START_LEASE_SECONDS)),
            eventbridge_keys_encoded=encoded in ("true", "1", "yes"),
            tables_per_run=int(tables_per_run),
        )
