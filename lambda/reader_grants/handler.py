"""Readers' Lake Formation grants on tables by name (lakeloader.reader_grants): applied when Glue
reports a table created (EventBridge), on the hourly schedule, and as the stack's custom resource
(deployed by infra/reader_grants.py; as a custom resource it answers CloudFormation itself)."""

from __future__ import annotations

import json
import logging
import os
import urllib.request
from typing import Any

import boto3

from lakeloader import reader_grants

log = logging.getLogger()
log.setLevel(os.environ.get("LOG_LEVEL", "INFO"))


def send_response(event: dict[str, Any], status: str, data: dict, reason: str = "") -> None:
    body = json.dumps(
        {
            "Status": status,
            "Reason": (reason or f"see CloudWatch Logs for request {event.get('RequestId')}")[:3000],
            "PhysicalResourceId": event.get("PhysicalResourceId")
            or f"{event['LogicalResourceId']}/reader-grants",
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
    try:
        result = reader_grants.handle(
            event,
            grants=reader_grants.decode(os.environ.get(reader_grants.ENV_GRANTS)),
            lakeformation=boto3.client("lakeformation"),
            glue=boto3.client("glue"),
            catalog_id=os.environ[reader_grants.ENV_CATALOG_ID],
        )
    except Exception as exc:
        log.exception("reader grants failed")
        if "ResponseURL" in event:
            send_response(event, "FAILED", {}, reason=f"reader grants failed: {exc}")
            return {}
        raise
    log.info(json.dumps(result))
    if "ResponseURL" in event:
        counts = {key: str(len(value)) for key, value in result.items() if isinstance(value, list)}
        send_response(event, "SUCCESS", counts)
    return result
