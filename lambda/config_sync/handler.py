"""CloudFormation custom resource: write config/tables.yaml's tables into the config table.

Deployed by infra/config_store.py with `lakeloader/control/` next to it (`config_store` and its
codec among it: boto3 and the standard library only; no pydantic on Lambda).
The resource names the items' S3 object (a file asset whose key is its content hash), so any
config change changes the template and CloudFormation sends an Update.

The function is the custom resource's service token, so it answers CloudFormation itself:
a PUT of the result to the pre-signed ResponseURL.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from lakeloader.control.cfn_response import send_response
from lakeloader.control.config_store import apply_custom_resource_event

log = logging.getLogger()
log.setLevel(os.environ.get("LOG_LEVEL", "INFO"))


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
