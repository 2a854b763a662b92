"""Runs one Lambda invocation inside a subprocess the emulator started (python -m ...).

argv: <code dir> <handler "module.function"> <event file> <result file>. The result file
receives {"ok": true, "result": ...} or {"ok": false, "errorType", "errorMessage", "stackTrace"},
the shape Lambda returns for a function error. stdout/stderr are the function's logs.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
import traceback


class Context:
    """The attributes of Lambda's context object that handlers commonly use."""

    def __init__(self) -> None:
        self.function_name = os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "")
        self.function_version = os.environ.get("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        self.invoked_function_arn = os.environ.get("LAKELOADER_EMULATOR_FUNCTION_ARN", "")
        self.memory_limit_in_mb = int(os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128"))
        self.aws_request_id = os.environ.get("LAKELOADER_EMULATOR_REQUEST_ID", "")
        self.log_group_name = f"/aws/lambda/{self.function_name}"
        self.log_stream_name = f"emulator/{self.aws_request_id}"
        self._deadline = time.monotonic() + float(os.environ.get("AWS_LAMBDA_FUNCTION_TIMEOUT", "3"))

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def main() -> int:
    code_dir, handler, event_path, result_path = sys.argv[1:5]
    sys.path.insert(0, code_dir)
    os.chdir(code_dir)
    with open(event_path, encoding="utf-8") as handle:
        event = json.load(handle)
    module_name, _, function_name = handler.rpartition(".")
    try:
        module = importlib.import_module(module_name)
        result = getattr(module, function_name)(event, Context())
        payload = {"ok": True, "result": result}
    except Exception as exc:  # noqa: BLE001 - reported to the caller like Lambda does
        traceback.print_exc()
        payload = {
            "ok": False,
            "errorType": type(exc).__name__,
            "errorMessage": str(exc),
            "stackTrace": traceback.format_exception(exc),
        }
    sys.stdout.flush()
    with open(result_path, "w", encoding="utf-8") as handle:
        json.dump(payload, handle, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
