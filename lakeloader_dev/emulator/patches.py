"""Every change the emulator makes to moto's internals, in one place. PINNED: moto==5.2.5.

The moto server runs in this process (``moto.server.ThreadedMotoServer``), so its
backends and response classes can be patched directly. Each patch says what moto does
and what AWS does; re-check all of them when the pin moves (``MOTO_VERSION``).

1. Lambda invoke needs Docker in moto -> ``lambda_runner.invoke_lambda`` (a subprocess); moto
   drops a function's ``DeadLetterConfig`` -> ``patches_lambda``.
2. S3 -> Lambda notifications run inline in the PUT request -> asynchronous invocations, with
   Lambda's retries and dead-letter queue -> ``patches_lambda``.
3. Custom resources: created, updated and failed as CloudFormation does, and a stack update
   that moto cannot apply -> ``patches_cloudformation`` (which says what moto does there).
4. CloudFormation types moto skips (Glue, EMR Serverless, policies, alarms) -> the
   models of ``cfn_models``.
5. Step Functions: with ``execute_state_machine`` on, the API reads the parser backend,
   while CloudFormation creates state machines in the plain one -> create them where
   the API looks.
6. Glue ``start_job_run`` runs nothing and invents state transitions -> the job's
   deployed script really runs (``glue_runner.run_glue_job``); the run is STARTING, then
   RUNNING, then SUCCEEDED or FAILED with ``ErrorMessage``.
   And the ``glue:startJobRun.sync`` integration crashes in moto's callback base class
   (``callback_endpoint.interrupt_all()`` on None: only ``.waitForTaskToken`` services
   have one) -> the Glue task's sync path without that ``finally``.
7. ``AWS::KMS::Key`` from CloudFormation passes ``Tags`` as Key/Value while moto's KMS
   tagger wants TagKey/TagValue (KeyError) -> converted.
8. EMR Serverless ``start_job_run`` runs nothing and reports SUCCESS at once (moto keeps
   neither the application's ``runtimeConfiguration`` nor a real state) -> the application
   keeps its ``spark-defaults``, the run's entry point really runs (``emr_runner.run_emr_job``)
   and the run is SUBMITTED, RUNNING, then SUCCESS or FAILED with ``stateDetails``.
   ``list_job_runs`` of an application without runs raises ResourceNotFound -> an empty list.
   ``create_application`` refuses the ``emr-spark-8.x.y`` labels of AWS's Spark 4 releases (its
   pattern knows ``emr-X.Y.0`` only) -> accepted, as AWS accepts emr-spark-8.1.0.
9. ``AWS::S3::Bucket`` from CloudFormation ignores ``VersioningConfiguration`` (the bucket
   stays unversioned, so a deleted object is gone at once) -> applied, as AWS does.
10. Lake Formation's repeated grants, Glue's "table created" events and EventBridge's Lambda
   targets -> ``patches_catalog``.
"""

from __future__ import annotations

import json
import os
import re
import threading
from typing import Any
from urllib.parse import urlparse

from lakeloader_dev.emulator.emr_runner import run_emr_job
from lakeloader_dev.emulator.glue_runner import run_glue_job
from lakeloader_dev.emulator.patches_catalog import (
    patch_events_lambda_targets,
    patch_glue_s3_tables_federation,
    patch_glue_table_drop_permission,
    patch_glue_table_events,
    patch_lakeformation_list_table_columns,
    patch_lakeformation_regrant,
)
from lakeloader_dev.emulator.patches_cloudformation import patch_custom_resources
from lakeloader_dev.emulator.patches_lambda import patch_lambda, patch_s3_notifications

MOTO_VERSION = "5.2.5"
ACCOUNT_ID = "123456789012"

_APPLIED = False
_RUNTIME: Any = None  # the EmulatorProcesses of the (single) in-process emulator


def s3_get(uri: str) -> bytes:
    """An object of the emulator's S3, read in-process: s3://bucket/key."""
    from moto.s3.models import s3_backends

    parsed = urlparse(uri)
    key = s3_backends[ACCOUNT_ID]["aws"].get_object(parsed.netloc, parsed.path.lstrip("/"))
    if key is None:
        raise FileNotFoundError(uri)
    return key.value


def current_runtime() -> Any:
    """The EmulatorProcesses of the emulator running now (a restarted emulator brings a new one)."""
    return _RUNTIME


def apply(runtime: Any, port: int) -> None:
    """Install the patches (once per process) and point them at ``runtime``."""
    global _APPLIED, _RUNTIME

    _RUNTIME = runtime
    os.environ["MOTO_PORT"] = str(port)
    if _APPLIED:
        return
    import moto

    if moto.__version__ != MOTO_VERSION:
        raise RuntimeError(
            f"lakeloader's emulator is pinned to moto=={MOTO_VERSION}; found {moto.__version__}"
        )
    _patch_settings()
    patch_lambda(current_runtime)
    patch_s3_notifications(current_runtime)
    patch_custom_resources(current_runtime)
    _patch_cfn_models()
    _patch_s3_tables()
    _patch_stepfunctions()
    _patch_glue()
    _patch_kms()
    _patch_emr_serverless()
    _patch_s3_bucket_versioning()
    patch_lakeformation_regrant()
    patch_lakeformation_list_table_columns()
    patch_glue_table_events()
    patch_glue_s3_tables_federation()
    patch_glue_table_drop_permission()
    patch_events_lambda_targets(current_runtime)
    _APPLIED = True


# 0. where moto tells Lambdas (custom resources) to answer ------------------------------


def _patch_settings() -> None:
    from moto import settings

    settings.moto_server_host = lambda: "http://127.0.0.1"  # type: ignore[assignment]


# 4. CloudFormation types moto skips ---------------------------------------------------


def _patch_cfn_models() -> None:
    from moto.cloudformation import parsing

    from lakeloader_dev.emulator import s3_tables
    from lakeloader_dev.emulator.cfn_models import MODELS

    original = parsing.get_model_map

    def get_model_map() -> dict[str, Any]:
        models = dict(original())
        models.update({model.cloudformation_type(): model for model in [*MODELS, *s3_tables.MODELS]})
        return models

    parsing.get_model_map = get_model_map  # type: ignore[assignment]


def _patch_s3_tables() -> None:
    from lakeloader_dev.emulator import s3_tables, s3_tables_rest

    s3_tables.patch()
    s3_tables_rest.patch()


# 5. Step Functions ---------------------------------------------------------------------


def _patch_stepfunctions() -> None:
    from moto.stepfunctions import models
    from moto.stepfunctions.responses import get_backend

    def create(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):  # type: ignore[no-untyped-def]
        props = cloudformation_json["Properties"]
        tags = models.cfn_to_api_tags(props.get("Tags", []))
        return get_backend(account_id, region_name).create_state_machine(
            props.get("StateMachineName", resource_name),
            props.get("DefinitionString", ""),
            props.get("RoleArn", ""),
            tags=tags,
        )

    models.StateMachine.create_from_cloudformation_json = classmethod(create)  # type: ignore[method-assign,assignment]

    from moto.stepfunctions.parser.asl.component.state.exec.state_task import service as sfn_service
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import state_task_service_glue

    ResourceCondition = sfn_service.resource.ResourceCondition  # noqa: N806

    glue_task = state_task_service_glue.StateTaskServiceGlue
    original_eval = glue_task._eval_integration_pattern

    def eval_integration_pattern(self, env, resource_runtime_part, normalised_parameters, state_credentials):  # type: ignore[no-untyped-def]
        if self.resource.condition != ResourceCondition.Sync:
            return original_eval(self, env, resource_runtime_part, normalised_parameters, state_credentials)
        self.timeout.eval(env=env)
        timeout_seconds = env.stack.pop()
        resolver = self._build_sync_resolver(
            env=env,
            resource_runtime_part=resource_runtime_part,
            normalised_parameters=normalised_parameters,
            state_credentials=state_credentials,
        )
        outcome = self._eval_sync(
            env=env,
            timeout_seconds=timeout_seconds,
            callback_endpoint=None,
            heartbeat_endpoint=None,
            sync_resolver=resolver,
        )
        if isinstance(outcome, Exception):
            raise outcome
        # GetJobRun's datetimes (boto3 parses them) would break the execution's JSON output
        env.stack.append(json.loads(json.dumps(outcome, default=lambda v: v.isoformat())))

    glue_task._eval_integration_pattern = eval_integration_pattern  # type: ignore[method-assign]


# 6. Glue job runs ------------------------------------------------------------------------


def _patch_glue() -> None:
    from moto.glue import models
    from moto.glue.exceptions import ConcurrentRunsExceededException

    class EmulatedJobRun(models.FakeJobRun):
        """A run whose state the emulator sets (no automatic transitions)."""

        error_message: str | None = None
        finished_at: Any = None

        @property  # type: ignore[override]
        def status(self) -> str:
            return self._status

        @status.setter
        def status(self, value: str) -> None:
            self._status = value

        def advance(self) -> None:
            return None

        def set_state(self, state: str, error: str | None = None) -> None:
            from moto.core.utils import utcnow

            self._status = state
            self.modified_on = utcnow()
            if state in ("SUCCEEDED", "FAILED", "STOPPED", "TIMEOUT", "ERROR"):
                self.completed_on = self.finished_at = utcnow()
            if error:
                self.error_message = error

        def as_dict(self) -> dict[str, Any]:
            result = super().as_dict()
            result["GlueVersion"] = getattr(self, "glue_version", None) or "5.0"
            result["LogGroupName"] = "/aws-glue/jobs"
            if self.finished_at is None:
                result.pop("CompletedOn", None)
            result["ExecutionTime"] = int(
                ((self.finished_at or self.modified_on) - self.started_on).total_seconds()
            )
            if self.error_message:
                result["ErrorMessage"] = self.error_message
            return result

    def start_job_run(
        self: Any,
        allocated_capacity: Any,
        max_capacity: Any,
        timeout: Any,
        worker_type: Any,
        security_configuration: Any,
        number_of_workers: Any,
        notification_property: Any,
        previous_run_id: Any,
        arguments: Any,
    ) -> str:
        running = [
            run for run in self.job_runs if run.status in ("STARTING", "RUNNING", "STOPPING", "WAITING")
        ]
        if len(running) >= int((self.execution_property or {}).get("MaxConcurrentRuns", 1)):
            raise ConcurrentRunsExceededException(f"Job with name {self.name} already running")
        merged = dict(self.default_arguments or {})
        merged.update(arguments or {})
        merged.update(self.non_overridable_arguments or {})
        run = EmulatedJobRun(
            job_name=self.name,
            arguments=merged,
            allocated_capacity=allocated_capacity or self.allocated_capacity,
            max_capacity=max_capacity or self.max_capacity,
            timeout=timeout or self.timeout,
            worker_type=worker_type or self.worker_type,
            security_configuration=security_configuration or self.security_configuration,
            number_of_workers=number_of_workers or self.number_of_workers,
            notification_property=notification_property or self.notification_property,
            job_run_id=previous_run_id,
        )
        run.glue_version = self.glue_version
        self.job_runs.append(run)
        thread = threading.Thread(
            target=run_glue_job,
            args=(_RUNTIME, self, run, s3_get),
            name=f"glue-{run.job_run_id[:12]}",
            daemon=True,
        )
        thread.start()
        return run.job_run_id

    models.FakeJob.start_job_run = start_job_run  # type: ignore[method-assign]


# 7. KMS key tags from CloudFormation ------------------------------------------------------


def _patch_kms() -> None:
    from moto.kms.models import Key

    original = Key.create_from_cloudformation_json.__func__  # type: ignore[attr-defined]

    def create(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):  # type: ignore[no-untyped-def]
        props = dict(cloudformation_json["Properties"])
        props["Tags"] = [
            {"TagKey": t.get("Key", t.get("TagKey")), "TagValue": t.get("Value", t.get("TagValue"))}
            for t in props.get("Tags", [])
        ]
        return original(
            cls,
            resource_name,
            {**cloudformation_json, "Properties": props},
            account_id,
            region_name,
            **kwargs,
        )

    Key.create_from_cloudformation_json = classmethod(create)  # type: ignore[method-assign,assignment]


# 8. EMR Serverless job runs ---------------------------------------------------------------


def _patch_emr_serverless() -> None:
    from moto.core.utils import utcnow
    from moto.emrserverless import models
    from moto.emrserverless.responses import EMRServerlessResponse

    def set_state(self: Any, state: str, details: str | None = None) -> None:
        self.state = state
        self.updated_at = utcnow()
        if details:
            self.state_details = details[:2000]
        if state in ("SUCCESS", "FAILED", "CANCELLED"):
            self.total_execution_duration_seconds = int((self.updated_at - self.created_at).total_seconds())

    models.JobRun.set_state = set_state  # type: ignore[attr-defined]

    original_start = models.EMRServerlessBackend.start_job_run

    def start_job_run(self: Any, *args: Any, **kwargs: Any) -> Any:
        job_run = original_start(self, *args, **kwargs)
        job_run.created_at = job_run.updated_at = utcnow()  # moto truncates both to midnight
        job_run.set_state("SUBMITTED")
        application = self.get_application(job_run.application_id)
        thread = threading.Thread(
            target=run_emr_job,
            args=(_RUNTIME, application, job_run, s3_get),
            name=f"emr-{job_run.id[:12]}",
            daemon=True,
        )
        thread.start()
        return job_run

    models.EMRServerlessBackend.start_job_run = start_job_run  # type: ignore[method-assign]

    original_create_application = models.EMRServerlessBackend.create_application

    def create_emr_application(self: Any, name: str, release_label: str, *args: Any, **kwargs: Any) -> Any:
        if not re.fullmatch(r"emr-spark-\d+\.\d+\.\d+", release_label):
            return original_create_application(self, name, release_label, *args, **kwargs)
        # a label moto's pattern accepts stands in while it validates, then the real one is set
        application = original_create_application(self, name, "emr-7.0.0", *args, **kwargs)
        application.release_label = release_label
        return application

    models.EMRServerlessBackend.create_application = create_emr_application  # type: ignore[method-assign]

    original_list = models.EMRServerlessBackend.list_job_runs

    def list_job_runs(self: Any, application_id: str, *args: Any, **kwargs: Any) -> Any:
        self.get_application(application_id)  # an unknown application still raises
        self.job_runs.setdefault(application_id, [])
        return original_list(self, application_id, *args, **kwargs)

    models.EMRServerlessBackend.list_job_runs = list_job_runs  # type: ignore[method-assign]

    original_create = EMRServerlessResponse.create_application

    def create_application(self: Any) -> Any:
        result = original_create(self)
        application = self.emrserverless_backend.get_application(result.result["applicationId"])
        application.runtime_configuration = self._get_param("runtimeConfiguration") or []
        return result

    EMRServerlessResponse.create_application = create_application  # type: ignore[method-assign]


# 9. S3 bucket versioning from CloudFormation -------------------------------------------------


def _patch_s3_bucket_versioning() -> None:
    from moto.s3.models import FakeBucket, s3_backends
    from moto.utilities.utils import get_partition

    original = FakeBucket.create_from_cloudformation_json.__func__  # type: ignore[attr-defined]

    def create(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):  # type: ignore[no-untyped-def]
        bucket = original(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs)
        versioning = (cloudformation_json.get("Properties") or {}).get("VersioningConfiguration") or {}
        if versioning.get("Status"):
            backend = s3_backends[account_id][get_partition(region_name)]
            backend.put_bucket_versioning(bucket.name, versioning["Status"])
        return bucket

    FakeBucket.create_from_cloudformation_json = classmethod(create)  # type: ignore[method-assign,assignment]
