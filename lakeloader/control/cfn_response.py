"""Answer CloudFormation for a custom resource backed by one of the stack's own Lambdas (the
config-sync, reader-grants and table-bucket-teardown handlers): a PUT of the result to the
request's pre-signed ResponseURL. Standard library only."""

from __future__ import annotations

import json
import logging
import urllib.request
from typing import Any

log = logging.getLogger(__name__)


def own_physical_id(event: dict[str, Any], name: str) -> str:
    """The request's physical id, or `<logical id>/<name>` on a Create."""
    return event.get("PhysicalResourceId") or f"{event['LogicalResourceId']}/{name}"


def send_response(event: dict[str, Any], status: str, physical_id: str, data: dict, reason: str = "") -> None:
    """`status` SUCCESS or FAILED, with `data` (GetAtt) and, for FAILED, the `reason` CloudFormation
    shows."""
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
