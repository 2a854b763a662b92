"""Starting one Glue or EMR Serverless run for a group of tables, and why a start failed."""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Mapping
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from lakeloader.control.contract import (
    ARG_CORRELATION_ID,
    ARG_TABLE_ID,
    ENV_EMR_APPLICATION_ID,
    ENV_EMR_ENTRY_POINT,
    ENV_EMR_JOB_ROLE_ARN,
    ENV_GLUE_JOB_NAME,
    emr_arg,
    glue_arg,
)
from lakeloader.control.trigger.settings import TriggerSettings, TriggerSettingsError

ENGINES = ("glue", "emr")
GLUE_CONCURRENCY_ERRORS = {"ConcurrentRunsExceededException"}
EMR_CONCURRENCY_ERRORS = {"ServiceQuotaExceededException"}
# What a failed start raises; anything else is a bug and fails the invocation as is.
START_ERRORS = (ClientError, BotoCoreError, TriggerSettingsError)

_CLIENTS: dict[tuple[str, str | None, str | None], Any] = {}
_CLIENTS_LOCK = threading.Lock()


def aws_client(service: str) -> Any:
    """A boto3 client, reused across invocations (honours AWS_ENDPOINT_URL)."""
    key = (
        service,
        os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"),
        os.environ.get("AWS_ENDPOINT_URL"),
    )
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            client = boto3.client(
                service,
                config=Config(
                    retries={"mode": "standard", "max_attempts": 5}, connect_timeout=5, read_timeout=20
                ),
            )
            _CLIENTS[key] = client
    return client


def clear_clients() -> None:
    with _CLIENTS_LOCK:
        _CLIENTS.clear()


def failure_reason(exc: Exception) -> tuple[str, bool]:
    """(reason, is an error) of a failed start: a concurrency limit only defers the tables (the next
    trigger or the sweep starts them); a missing engine setting or any other failure is an error."""
    code = exc.response.get("Error", {}).get("Code", "") if isinstance(exc, ClientError) else ""
    if code in GLUE_CONCURRENCY_ERRORS | EMR_CONCURRENCY_ERRORS:
        return "concurrent_runs_exceeded", False
    if isinstance(exc, TriggerSettingsError):
        return "engine_not_configured", True
    return "start_failed", True


class Launcher:
    """Starts engine runs with the job arguments of `lakeloader.control.contract`; clients default to cached
    boto3 clients, made on first use (a stage with Glue only never builds an EMR client)."""

    def __init__(self, settings: TriggerSettings, *, glue: Any = None, emr: Any = None) -> None:
        self.settings = settings
        self._glue = glue
        self._emr = emr

    @property
    def glue(self) -> Any:
        if self._glue is None:
            self._glue = aws_client("glue")
        return self._glue

    @property
    def emr(self) -> Any:
        if self._emr is None:
            self._emr = aws_client("emr-serverless")
        return self._emr

    def start(
        self,
        engine: str,
        table_ids: list[str],
        correlation_id: str,
        execution_class: str,
        job_arguments: Mapping[str, str] | None = None,
    ) -> str:
        """Start one run for ``table_ids``; its Glue/EMR run id. Raises one of ``START_ERRORS``.

        ``job_arguments``: more contract.ARG_* values for this run (a rebuild's)."""
        arguments = {
            ARG_TABLE_ID: ",".join(table_ids),
            ARG_CORRELATION_ID: correlation_id,
            **(job_arguments or {}),
        }
        if engine == "glue":
            return self._start_glue(arguments, execution_class)
        if engine == "emr":
            return self._start_emr(arguments)
        raise TriggerSettingsError(f"engine {engine!r} is not one of {ENGINES}")

    def _start_glue(self, arguments: Mapping[str, str], execution_class: str) -> str:
        if not self.settings.glue_job_name:
            raise TriggerSettingsError(f"{ENV_GLUE_JOB_NAME} is not set but the table's engine is glue")
        extra: dict[str, Any] = {}
        if execution_class == "FLEX":  # a flex run is never queued (Glue refuses queuing for FLEX)
            extra = {"ExecutionClass": "FLEX", "JobRunQueuingEnabled": False}
        response = self.glue.start_job_run(
            JobName=self.settings.glue_job_name,
            Arguments={glue_arg(name): value for name, value in arguments.items()},
            **extra,
        )
        return str(response["JobRunId"])

    def _start_emr(self, arguments: Mapping[str, str]) -> str:
        s = self.settings
        missing = [
            name
            for name, value in (
                (ENV_EMR_APPLICATION_ID, s.emr_application_id),
                (ENV_EMR_JOB_ROLE_ARN, s.emr_job_role_arn),
                (ENV_EMR_ENTRY_POINT, s.emr_entry_point),
            )
            if not value
        ]
        if missing:
            raise TriggerSettingsError(f"{', '.join(missing)} not set but the table's engine is emr")
        tables = arguments[ARG_TABLE_ID]
        # the same invocation asking again (a Lambda retry) gets the same run, not a second one
        token = hashlib.sha256(f"{arguments[ARG_CORRELATION_ID]}|{tables}".encode()).hexdigest()[:64]
        response = self.emr.start_job_run(
            applicationId=s.emr_application_id,
            executionRoleArn=s.emr_job_role_arn,
            clientToken=token,
            name=f"lakeloader-{tables}"[:256],
            jobDriver={
                "sparkSubmit": {
                    "entryPoint": s.emr_entry_point,
                    "entryPointArguments": [
                        *(part for name, value in arguments.items() for part in (emr_arg(name), value)),
                        *s.emr_extra_args,
                    ],
                }
            },
        )
        return str(response["jobRunId"])
