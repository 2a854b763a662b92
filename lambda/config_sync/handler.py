"""CloudFormation custom resource: write config/tables.yaml's tables into the config table.

Deployed by infra/config_store.py with what this file imports of `lakeloader` next to it
(`config_store` and its codec: boto3 and the standard library only; no pydantic on Lambda).
The resource names the items' S3 object (a file asset whose key is its content hash), so any
config change changes the template and CloudFormation sends an Update.

The function is the custom resource's service token, so it answers CloudFormation itself:
a PUT of the result to the pre-signed ResponseURL.
"""

from __future__ import annotations

import json
import logging
import os
import urllib.request
from typing import Any

from lakeloader.config_store import apply_custom_resource_event

log = logging.getLogger()
log.setLevel(os.environ.get("LOG_LEVEL", "INFO"))


def send_response(event: dict[str, Any], status: str, physical_id: str, data: dict, reason: str = "") -> None:
    body = json.dumps(
        {
            "Status": status,
            "Reason": (reason or f"see CloudWatch Logs for request {event.get('RequestId')}")[:3000],
            "PhysicalResourceId": physical_id,
            "StackId": event["StackId"],
            "RequestId": event["RequestId"],
            "LogicalResourceId": event["LogicalResourceId"],
            "NoEcho": False,
            "Data": data,
        }
    ).encode()
    request = urllib.request.Request(
        event["ResponseURL"],
        data=body,
        method="PUT",
        headers={"Content-Type": "", "Content-Length": str(len(body))},
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - pre-signed CloudFormation URL
        log.info("CloudFormation answered %s", response.status)


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    log.info(
        "%s %s (stack %s)", event.get("RequestType"), event.get("LogicalResourceId"), event.get("StackId")
    )
    fallback_id = (
        event.get("PhysicalResourceId") or f"{event.get('LogicalResourceId', 'ConfigSync')}/config-sync"
    )
    try:
        physical_id, data = apply_custom_resource_event(event)
    except Exception as exc:
        log.exception("config sync failed")
        send_response(event, "FAILED", fallback_id, {}, reason=f"config sync failed: {exc}")
        return {"Status": "FAILED", "Reason": str(exc)}
    send_response(event, "SUCCESS", physical_id, data)
    return {"Status": "SUCCESS", "PhysicalResourceId": physical_id, "Data": data}
