"""Empties a dev stage's table bucket on the stack's delete (lakeloader.control.table_bucket_teardown), as
the stack's custom resource (infra/s3_tables_teardown.py): it answers CloudFormation itself."""

from __future__ import annotations

import json
import logging
import os
from typing import Any

import boto3

from lakeloader.control import table_bucket_teardown
from lakeloader.control.cfn_response import own_physical_id, send_response

log = logging.getLogger()
log.setLevel(os.environ.get("LOG_LEVEL", "INFO"))
NAME = "table-bucket-teardown"


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    try:
        result = table_bucket_teardown.handle(event, s3tables=boto3.client("s3tables"))
    except Exception as exc:
        log.exception("emptying the table bucket failed")
        send_response(
            event,
            "FAILED",
            own_physical_id(event, NAME),
            {},
            reason=f"emptying the table bucket failed: {exc}",
        )
        return {}
    log.info(json.dumps(result))
    send_response(event, "SUCCESS", own_physical_id(event, NAME), {"Deleted": str(len(result["deleted"]))})
    return result
