"""The emulator's patches of moto's Lambda (PINNED with patches.MOTO_VERSION): functions run for real
(``lambda_runner``), S3 notifications invoke them asynchronously, and a function keeps its
dead-letter queue.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lakeloader_dev.emulator.lambda_runner import invoke_async, invoke_lambda


def patch_lambda(runtime: Callable[[], Any]) -> None:
    """Invoke runs the deployed code in a subprocess (moto needs Docker). moto drops a function's
    ``DeadLetterConfig``: kept from CreateFunction, CloudFormation and UpdateFunctionConfiguration,
    and reported as Lambda reports it (``invoke_async`` sends a failed event there)."""
    from moto.awslambda.models import LambdaFunction

    def _invoke_lambda(self: Any, event: Any = None) -> tuple[str, bool, str]:
        return invoke_lambda(runtime(), self, event if event is not None else {})

    LambdaFunction._invoke_lambda = _invoke_lambda  # type: ignore[method-assign]

    init, update, configuration = (
        LambdaFunction.__init__,
        LambdaFunction.update_configuration,
        LambdaFunction.get_configuration,
    )
    create = LambdaFunction.create_from_cloudformation_json.__func__  # type: ignore[attr-defined]

    def __init__(self: Any, account_id: str, spec: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        init(self, account_id, spec, *args, **kwargs)
        self.dead_letter_config = spec.get("DeadLetterConfig") or {}

    def update_configuration(self: Any, config_updates: dict[str, Any]) -> dict[str, Any]:
        if "DeadLetterConfig" in config_updates:
            self.dead_letter_config = config_updates["DeadLetterConfig"] or {}
        return update(self, config_updates)

    def get_configuration(self: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        config = configuration(self, *args, **kwargs)
        if getattr(self, "dead_letter_config", None):
            config["DeadLetterConfig"] = self.dead_letter_config
        return config

    def create_from_cloudformation_json(cls, resource_name, cloudformation_json, *args, **kwargs):  # type: ignore[no-untyped-def]
        fn = create(cls, resource_name, cloudformation_json, *args, **kwargs)
        fn.dead_letter_config = (cloudformation_json.get("Properties") or {}).get("DeadLetterConfig") or {}
        return fn

    LambdaFunction.__init__ = __init__  # type: ignore[method-assign]
    LambdaFunction.update_configuration = update_configuration  # type: ignore[method-assign]
    LambdaFunction.get_configuration = get_configuration  # type: ignore[method-assign]
    LambdaFunction.create_from_cloudformation_json = classmethod(create_from_cloudformation_json)  # type: ignore[method-assign,assignment]


def patch_s3_notifications(runtime: Callable[[], Any]) -> None:
    """moto runs an S3 -> Lambda notification inline in the PUT request; S3 invokes Lambda
    asynchronously: a thread, with Lambda's retries and dead-letter queue (``invoke_async``)."""
    from moto.s3 import notifications

    def _invoke_awslambda(account_id: str, event_body: Any, fn_arn: str, region_name: str) -> None:
        from moto.awslambda.utils import get_backend

        try:
            fn = get_backend(account_id, region_name).get_function(fn_arn)
        except Exception:  # noqa: BLE001 - like AWS: a missing function never fails the PUT
            return
        invoke_async(runtime(), fn, event_body, trigger="s3")

    notifications._invoke_awslambda = _invoke_awslambda
