"""Readers' Lake Formation grants on tables by name (lakeloader.control.reader_grants): applied when Glue
reports a table created (EventBridge), on the hourly schedule, and as the stack's custom resource
(deployed by infra/reader_grants.py; as a custom resource it answers CloudFormation itself).

A grant that cannot be applied (denied, no grant option, any other error code) is reported, never a
failure: in the custom resource's response data (`Ungranted`, one line per grant) and in the metric
ReaderGrantsUngranted (CloudWatch embedded-metric log line, no API call). Only a bug answers FAILED."""

from __future__ import annotations

import json
import logging
import os
from typing import Any

import boto3
from aws_lambda_powertools.metrics import MetricUnit, single_metric

from lakeloader.control import contract, reader_grants
from lakeloader.control.cfn_response import own_physical_id, send_response

log = logging.getLogger()
log.setLevel(os.environ.get("LOG_LEVEL", "INFO"))
# CloudFormation takes 4 KB of response in all: the ungranted lines keep to this much of it.
UNGRANTED_DATA_LIMIT = 2500


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
            send_response(
                event,
                "FAILED",
                own_physical_id(event, "reader-grants"),
                {},
                reason=f"reader grants failed: {exc}",
            )
            return {}
        raise
    log.info(json.dumps(result))
    ungranted = reader_grants.ungranted(result)
    with single_metric(
        name=contract.READER_GRANTS_UNGRANTED_METRIC,
        unit=MetricUnit.Count,
        value=len(ungranted),
        namespace=contract.METRICS_NAMESPACE,
        default_dimensions={"Function": os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "reader-grants")},
    ):
        pass  # written when the block closes
    if "ResponseURL" in event:
        data = {key: str(len(value)) for key, value in result.items() if isinstance(value, list)}
        if ungranted:
            data["Ungranted"] = "; ".join(ungranted)[:UNGRANTED_DATA_LIMIT]
            log.warning("ungranted (see `lakeloader doctor` for the commands): %s", data["Ungranted"])
        send_response(event, "SUCCESS", own_physical_id(event, "reader-grants"), data)
    return result
