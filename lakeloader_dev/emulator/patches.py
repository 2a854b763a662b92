"""Every change the emulator makes to moto's internals, in one place. PINNED: moto==5.2.5.

The moto server runs in this process (``moto.server.ThreadedMotoServer``), so its
backends and response classes can be patched directly. Each patch says what moto does
and what AWS does; re-check all of them when the pin moves (``MOTO_VERSION``).

1. Lambda invoke needs Docker in moto -> ``lambda_runner.invoke_lambda`` (a subprocess).
2. S3 -> Lambda notifications run inline in the PUT request -> a thread, with Lambda's
   asynchronous retries (2 more attempts), as S3 invokes Lambda asynchronously.
3. Custom resources: moto passes properties unconverted (CloudFormation turns every
   scalar into a string; CDK's bucket-notification handler crashes on a bool), sends the
   ResponseURL to ``host.docker.internal`` (-> the emulator's own 127.0.0.1 endpoint),
   and ignores FAILED answers (-> the stack goes CREATE_FAILED with the reason).
   ``Custom::S3AutoDeleteObjects`` (a Node.js provider; the emulator runs Python only)
   is answered natively: Create/Update need no work, and the emulator's state is
   discarded on ``down``.
   On a stack update moto sends custom resources nothing (it has no update for them) and
   leaves None in place of any resource whose type it cannot update -> a changed custom
   resource gets CloudFormation's Update request (old and new properties), a failed one
   leaves the stack UPDATE_FAILED with the reason, and a resource moto cannot update keeps
   its first properties (no crash on the next describe).
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
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
import uuid
from typing import Any
from urllib.parse import urlparse

from lakeloader_dev.emulator.emr_runner import run_emr_job
from lakeloader_dev.emulator.glue_runner import run_glue_job
from lakeloader_dev.emulator.lambda_runner import invoke_lambda

MOTO_VERSION = "5.2.5"
ACCOUNT_ID = "123456789012"

_APPLIED = False
_RUNTIME: Any = None  # the Runtime of the (single) in-process emulator


def _stringify(value: Any) -> Any:
    """CloudFormation hands custom resources every scalar property as a string."""
    if isinstance(value, dict):
        return {k: _stringify(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_stringify(v) for v in value]
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return value


def s3_get(uri: str) -> bytes:
    """An object of the emulator's S3, read in-process: s3://bucket/key."""
    from moto.s3.models import s3_backends

    parsed = urlparse(uri)
    key = s3_backends[ACCOUNT_ID]["aws"].get_object(parsed.netloc, parsed.path.lstrip("/"))
    if key is None:
        raise FileNotFoundError(uri)
    return key.value


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
    _patch_lambda()
    _patch_s3_notifications()
    _patch_custom_resources()
    _patch_cfn_models()
    _patch_s3_tables()
    _patch_stepfunctions()
    _patch_glue()
    _patch_kms()
    _patch_emr_serverless()
    _patch_s3_bucket_versioning()
    patch_lakeformation_regrant()
    _patch_glue_table_events()
    _patch_events_lambda_targets()
    _APPLIED = True


# 0. where moto tells Lambdas (custom resources) to answer ------------------------------


def _patch_settings() -> None:
    from moto import settings

    settings.moto_server_host = lambda: "http://127.0.0.1"  # type: ignore[assignment]


# 1. Lambda ---------------------------------------------------------------------------


def _patch_lambda() -> None:
    from moto.awslambda.models import LambdaFunction

    def _invoke_lambda(self: Any, event: Any = None) -> tuple[str, bool, str]:
        return invoke_lambda(_RUNTIME, self, event if event is not None else {})

    LambdaFunction._invoke_lambda = _invoke_lambda  # type: ignore[method-assign]


# 2. S3 notifications -------------------------------------------------------------------

ASYNC_RETRIES = 2
ASYNC_RETRY_DELAY_SECONDS = 2.0


def invoke_async(fn: Any, event: dict[str, Any], trigger: str) -> threading.Thread:
    """Invoke like Lambda's asynchronous invocation: a thread, retried twice on a function error."""

    def run() -> None:
        for attempt in range(ASYNC_RETRIES + 1):
            _payload, errored, _logs = invoke_lambda(_RUNTIME, fn, event, trigger=trigger)
            if not errored:
                return
            time.sleep(ASYNC_RETRY_DELAY_SECONDS * (attempt + 1))

    thread = threading.Thread(target=run, name=f"lambda-async-{fn.function_name}", daemon=True)
    thread.start()
    _RUNTIME.async_threads.append(thread)
    return thread


def _patch_s3_notifications() -> None:
    from moto.s3 import notifications

    def _invoke_awslambda(account_id: str, event_body: Any, fn_arn: str, region_name: str) -> None:
        from moto.awslambda.utils import get_backend

        try:
            fn = get_backend(account_id, region_name).get_function(fn_arn)
        except Exception:  # noqa: BLE001 - like AWS: a missing function never fails the PUT
            return
        invoke_async(fn, event_body, trigger="s3")

    notifications._invoke_awslambda = _invoke_awslambda


# 3. custom resources -----------------------------------------------------------------

NATIVE_CUSTOM_RESOURCES = {"Custom::S3AutoDeleteObjects"}
CFN_FAILURES: dict[str, str] = {}  # stack id -> "<logical id>: <reason>"


def _patch_custom_resources() -> None:
    from moto.cloudformation.custom_model import CustomModel
    from moto.cloudformation.responses import CloudFormationResponse

    original = CustomModel.create_from_cloudformation_json.__func__  # type: ignore[attr-defined]

    def create(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):  # type: ignore[no-untyped-def]
        cloudformation_json = dict(cloudformation_json)
        props = dict(cloudformation_json.get("Properties") or {})
        token = props.get("ServiceToken")
        props = _stringify(props)
        cloudformation_json["Properties"] = props
        if kwargs.get("ResourceType") in NATIVE_CUSTOM_RESOURCES:
            from moto.cloudformation import cloudformation_backends

            resource = CustomModel(region_name, "native", kwargs["LogicalId"], resource_name)
            cloudformation_backends[account_id][region_name].get_stack(kwargs["StackId"]).add_custom_resource(
                resource
            )
            resource.set_data({})
        else:
            props["ServiceToken"] = token
            resource = original_without_invoke(
                cls, resource_name, cloudformation_json, account_id, region_name, **kwargs
            )
        resource.stack_id, resource.resource_type = kwargs["StackId"], kwargs["ResourceType"]
        resource.properties = props  # what an Update sends as OldResourceProperties
        return resource

    def original_without_invoke(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):  # type: ignore[no-untyped-def]
        """moto's own create, with its invoke thread replaced by one that notices a crashed handler."""
        from moto.cloudformation import cloudformation_backends

        captured: dict[str, Any] = {}

        class _Capture:
            def __init__(self, target: Any, args: tuple) -> None:
                captured["fn"], captured["event"] = target.__self__, json.loads(args[0])

            def start(self) -> None:
                pass

        import moto.cloudformation.custom_model as custom_model

        real_thread = custom_model.threading.Thread
        custom_model.threading = _ThreadingShim(_Capture)  # type: ignore[assignment]
        try:
            resource = original(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs)
        finally:
            custom_model.threading = _threading_module(real_thread)  # type: ignore[assignment]
        fn, event = captured["fn"], captured["event"]
        stack = cloudformation_backends[account_id][region_name].get_stack(kwargs["StackId"])

        def run() -> None:
            _payload, errored, logs = invoke_lambda(_RUNTIME, fn, event, trigger="cloudformation")
            if errored and not resource.is_created():
                reason = (
                    f"{kwargs['LogicalId']}: custom resource handler {fn.function_name} failed: {logs[-800:]}"
                )
                CFN_FAILURES[stack.stack_id] = reason
                stack.status = "CREATE_FAILED"
                stack._add_stack_event("CREATE_FAILED", resource_status_reason=reason)

        threading.Thread(target=run, name=f"cfn-{kwargs['LogicalId']}", daemon=True).start()
        return resource

    CustomModel.create_from_cloudformation_json = classmethod(create)  # type: ignore[method-assign,assignment]

    original_response = CloudFormationResponse.process_cfn_response

    def process_cfn_response(self: Any) -> Any:
        stack_id = self._get_param("StackId")
        if stack_id in _UPDATING:  # an Update's answer: the stack's own update sets its status
            logical_id = self._get_param("LogicalResourceId")
            if self._get_param("Status") == "FAILED":
                CFN_FAILURES[stack_id] = f"{logical_id}: {self._get_param('Reason')}"
            else:
                stack = self.cloudformation_backend.get_stack(stack_id)
                stack.get_custom_resource(logical_id).set_data(self._get_param("Data"))
            return 200, {"status": 200}, json.dumps("{}")
        if self._get_param("Status") == "FAILED":
            reason = f"{self._get_param('LogicalResourceId')}: {self._get_param('Reason')}"
            CFN_FAILURES[stack_id] = reason
            try:
                stack = self.cloudformation_backend.get_stack(stack_id)
                stack.status = "CREATE_FAILED"
                stack._add_stack_event("CREATE_FAILED", resource_status_reason=reason)
            except Exception:  # noqa: BLE001 - unknown stack: nothing to mark
                pass
            return 200, {"status": 200}, json.dumps("{}")
        return original_response(self)

    CloudFormationResponse.process_cfn_response = process_cfn_response  # type: ignore[method-assign]
    _patch_stack_updates()


_UPDATING: set[str] = set()  # ids of the stacks an update is applying


def _patch_stack_updates() -> None:
    from moto.awslambda.utils import get_backend as lambda_backend
    from moto.cloudformation import cloudformation_backends, parsing
    from moto.cloudformation.custom_model import CustomModel
    from moto.cloudformation.models import Stack

    def update_custom(  # type: ignore[no-untyped-def]
        cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name
    ):
        """CloudFormation's Update request, answered before the update goes on (moto's is synchronous)."""
        old = original_resource
        props = _stringify(dict(cloudformation_json.get("Properties") or {}))
        stack = cloudformation_backends[account_id][region_name].get_stack(old.stack_id)
        new = CustomModel(region_name, str(uuid.uuid4()), old.logical_id, old.resource_name)
        new.stack_id, new.resource_type, new.properties = old.stack_id, old.resource_type, props
        stack.add_custom_resource(new)  # the handler's answer lands on the new one
        if old.resource_type in NATIVE_CUSTOM_RESOURCES:
            new.set_data(old.data)
            return new
        fn = lambda_backend(account_id, region_name).get_function(props["ServiceToken"])
        event = {
            "RequestType": "Update",
            "ServiceToken": props["ServiceToken"],
            "ResponseURL": f"http://127.0.0.1:{os.environ['MOTO_PORT']}/cloudformation_{region_name}"
            f"/cfnresponse?stack={old.stack_id}",
            "StackId": old.stack_id,
            "RequestId": new.request_id,
            "LogicalResourceId": old.logical_id,
            "ResourceType": old.resource_type,
            "PhysicalResourceId": old.physical_resource_id,
            "ResourceProperties": props,
            "OldResourceProperties": old.properties,
        }
        _payload, errored, logs = invoke_lambda(_RUNTIME, fn, event, trigger="cloudformation")
        if errored and not new.is_created():
            CFN_FAILURES[old.stack_id] = (
                f"{old.logical_id}: custom resource handler {fn.function_name} failed: {logs[-800:]}"
            )
        return new

    CustomModel.update_from_cloudformation_json = classmethod(update_custom)  # type: ignore[method-assign,assignment]

    original_update_resource = parsing.parse_and_update_resource

    def parse_and_update_resource(logical_id, resource_json, resources_map, account_id, region_name):  # type: ignore[no-untyped-def]
        updated = original_update_resource(logical_id, resource_json, resources_map, account_id, region_name)
        return resources_map[logical_id] if updated is None else updated

    parsing.parse_and_update_resource = parse_and_update_resource

    original_stack_update = Stack.update

    def update_stack(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        CFN_FAILURES.pop(self.stack_id, None)
        _UPDATING.add(self.stack_id)
        try:
            original_stack_update(self, *args, **kwargs)
        finally:
            _UPDATING.discard(self.stack_id)
        if self.stack_id in CFN_FAILURES:  # AWS would roll back; the emulator keeps what it applied
            self.status = "UPDATE_FAILED"
            self._add_stack_event("UPDATE_FAILED", resource_status_reason=CFN_FAILURES[self.stack_id])

    Stack.update = update_stack  # type: ignore[method-assign]


class _ThreadingShim:
    """Stands in for the ``threading`` module inside moto's custom_model while it creates a resource."""

    def __init__(self, thread_class: Any) -> None:
        self.Thread = lambda target, args: thread_class(target, args)  # noqa: N803


def _threading_module(_thread_class: Any) -> Any:
    return threading


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
    from lakeloader_dev.emulator import s3_tables

    s3_tables.patch()


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


# Lake Formation: granting again what a principal holds --------------------------------


def patch_lakeformation_regrant() -> None:
    """Lake Formation grants idempotently: granting a principal what it holds changes nothing. moto
    5.2.5 merges the permissions into the stored grant in place, changing its hash inside the set that
    holds it, so a later revoke of it raises KeyError. Merge it out of the set and put it back."""
    from moto.lakeformation.models import PermissionCatalog

    if getattr(PermissionCatalog.add_permission, "lakeloader", False):
        return

    def add_permission(self: Any, permission: Any) -> None:
        for existing in list(self.permissions):
            if permission.equal_principal_and_resouce(existing):
                self.permissions.remove(existing)
                existing.merge(permission)
                self.permissions.add(existing)
                return
        self.permissions.add(permission)

    add_permission.lakeloader = True  # type: ignore[attr-defined]
    PermissionCatalog.add_permission = add_permission  # type: ignore[method-assign]


# Glue's "table created" events and EventBridge rules that target a Lambda --------------

GLUE_DATABASE_CHANGE = "Glue Data Catalog Database State Change"


def _patch_glue_table_events() -> None:
    """Glue sends "Glue Data Catalog Database State Change" (`typeOfChange` CreateTable, the database
    and the table) to the account's default event bus when a table is created (AWS Glue events,
    EventBridge reference); moto's Glue sends nothing."""
    from moto.events.models import events_backends
    from moto.glue.models import GlueBackend

    original = GlueBackend.create_table

    def create_table(self: Any, database_name: str, table_name: str, *args: Any, **kwargs: Any) -> Any:
        table = original(self, database_name, table_name, *args, **kwargs)
        detail = {"databaseName": database_name, "typeOfChange": "CreateTable", "changedTables": [table_name]}
        arn = f"arn:aws:glue:{self.region_name}:{self.account_id}:table/{database_name}/{table_name}"
        events_backends[self.account_id][self.region_name].put_events(
            [
                {
                    "Source": "aws.glue",
                    "DetailType": GLUE_DATABASE_CHANGE,
                    "Detail": json.dumps(detail),
                    "Resources": [arn],
                }
            ]
        )
        return table

    GlueBackend.create_table = create_table  # type: ignore[method-assign]


def _patch_events_lambda_targets() -> None:
    """EventBridge invokes a rule's Lambda targets asynchronously with the event; moto 5.2.5 delivers to
    logs, SQS and event buses only."""
    from moto.events.models import Rule
    from moto.utilities.arns import parse_arn

    original = Rule.send_to_targets

    def send_to_targets(self: Any, original_event: Any, transform_input: bool = True) -> None:
        functions = [t for t in self.targets if parse_arn(t["Arn"]).service == "lambda"]
        others = [t for t in self.targets if t not in functions]
        if others:  # moto raises NotImplementedError on a target type it does not deliver to
            every, self.targets = self.targets, others
            try:
                original(self, original_event, transform_input)
            finally:
                self.targets = every
        if not functions or not self.event_pattern.matches_event(original_event):
            return
        from moto.awslambda.utils import get_backend

        for target in functions:
            arn = parse_arn(target["Arn"])
            try:
                fn = get_backend(arn.account, arn.region).get_function(target["Arn"])
            except Exception:  # noqa: BLE001 - like EventBridge: a missing target fails no put_events
                continue
            invoke_async(fn, dict(original_event), trigger="events")

    Rule.send_to_targets = send_to_targets  # type: ignore[method-assign]
