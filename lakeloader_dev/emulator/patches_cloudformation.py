"""CloudFormation custom resources and stack updates on moto (PINNED with patches.MOTO_VERSION).

moto passes custom resources their properties unconverted (CloudFormation turns every scalar into a
string; CDK's bucket-notification handler crashes on a bool), sends the ResponseURL to
``host.docker.internal`` (-> the emulator's own 127.0.0.1 endpoint, patches.apply), and ignores
FAILED answers (-> the stack goes CREATE_FAILED with the reason). ``Custom::S3AutoDeleteObjects`` (a
Node.js provider; the emulator runs Python only) is answered natively: Create/Update need no work,
and the emulator's state is discarded on ``down``.

On a stack delete moto sends custom resources nothing either -> each custom resource of the stack gets
CloudFormation's Delete request first (the last created first), and one that fails leaves the stack
DELETE_FAILED with the reason, its resources in place, as CloudFormation does.

On a stack update moto sends custom resources nothing (it has no update for them) and leaves None in
place of any resource whose type it cannot update -> a changed custom resource gets
CloudFormation's Update request (old and new properties), a failed one leaves the stack
UPDATE_FAILED with the reason, and a resource moto cannot update keeps its first properties (no
crash on the next describe). ``CFN_FAILURES`` keeps each stack's reason for the deploy to report.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Callable
from typing import Any

from lakeloader_dev.emulator.lambda_runner import invoke_lambda


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


NATIVE_CUSTOM_RESOURCES = {"Custom::S3AutoDeleteObjects"}
CFN_FAILURES: dict[str, str] = {}  # stack id -> "<logical id>: <reason>"


def patch_custom_resources(runtime: Callable[[], Any]) -> None:
    """Custom resources created, updated and failed as CloudFormation does; `runtime()` is the
    emulator's current EmulatorProcesses, which runs each handler."""
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
            _payload, errored, logs = invoke_lambda(runtime(), fn, event, trigger="cloudformation")
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
    _patch_stack_updates(runtime)
    _patch_stack_deletes(runtime)
    _patch_role_deletes()


_UPDATING: set[str] = set()  # ids of the stacks an update is applying


def _patch_stack_updates(runtime: Callable[[], Any]) -> None:
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
        _payload, errored, logs = invoke_lambda(runtime(), fn, event, trigger="cloudformation")
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


def _patch_stack_deletes(runtime: Callable[[], Any]) -> None:
    from moto.awslambda.utils import get_backend as lambda_backend
    from moto.cloudformation.models import CloudFormationBackend

    original_delete = CloudFormationBackend.delete_stack

    def custom_resources_deleted(stack: Any) -> bool:
        """Send each custom resource of `stack` its Delete, the last created first; False on a failure."""
        CFN_FAILURES.pop(stack.stack_id, None)
        _UPDATING.add(stack.stack_id)  # the handlers' answers change no status (as an Update's)
        try:
            for resource in reversed(list(stack.custom_resources.values())):
                props = getattr(resource, "properties", None) or {}
                if resource.resource_type in NATIVE_CUSTOM_RESOURCES or "ServiceToken" not in props:
                    continue
                fn = lambda_backend(stack.account_id, stack.region_name).get_function(props["ServiceToken"])
                event = {
                    "RequestType": "Delete",
                    "ServiceToken": props["ServiceToken"],
                    "ResponseURL": f"http://127.0.0.1:{os.environ['MOTO_PORT']}"
                    f"/cloudformation_{stack.region_name}/cfnresponse?stack={stack.stack_id}",
                    "StackId": stack.stack_id,
                    "RequestId": str(uuid.uuid4()),
                    "LogicalResourceId": resource.logical_id,
                    "ResourceType": resource.resource_type,
                    "PhysicalResourceId": resource.physical_resource_id,
                    "ResourceProperties": props,
                }
                _payload, errored, logs = invoke_lambda(runtime(), fn, event, trigger="cloudformation")
                if errored and stack.stack_id not in CFN_FAILURES:
                    CFN_FAILURES[stack.stack_id] = (
                        f"{resource.logical_id}: custom resource handler {fn.function_name} failed: "
                        f"{logs[-800:]}"
                    )
                if stack.stack_id in CFN_FAILURES:
                    stack.status = "DELETE_FAILED"
                    stack._add_stack_event(
                        "DELETE_FAILED", resource_status_reason=CFN_FAILURES[stack.stack_id]
                    )
                    return False
        finally:
            _UPDATING.discard(stack.stack_id)
        return True

    def delete_stack(self: Any, name_or_stack_id: str) -> None:
        # by name, moto's own delete calls this again by the stack's id: its custom resources go then
        found = [self.stacks[name_or_stack_id]] if name_or_stack_id in self.stacks else []
        if all(custom_resources_deleted(stack) for stack in found):
            original_delete(self, name_or_stack_id)

    CloudFormationBackend.delete_stack = delete_stack  # type: ignore[method-assign]


def _patch_role_deletes() -> None:
    """CloudFormation detaches a role's managed policies (its ManagedPolicyArns, and the stack's
    policies naming it in Roles) when it deletes the role; moto refuses the delete (DeleteConflict)."""
    from moto.iam.models import Role, iam_backends
    from moto.utilities.utils import get_partition

    original = Role.delete_from_cloudformation_json.__func__  # type: ignore[attr-defined]

    def delete(cls, resource_name, cloudformation_json, account_id, region_name):  # type: ignore[no-untyped-def]
        backend = iam_backends[account_id][get_partition(region_name)]
        for role in [r for r in backend.roles.values() if r.name == resource_name]:
            for arn in list(role.managed_policies):
                backend.detach_role_policy(arn, role.name)
        original(cls, resource_name, cloudformation_json, account_id, region_name)

    Role.delete_from_cloudformation_json = classmethod(delete)  # type: ignore[method-assign,assignment]
