"""Lambda invocations for the emulator: the function's deployed code, run once per event in a subprocess.

The code zip is extracted once per code digest; ``lambda_bootstrap`` imports the handler and calls
it with the event and a context object. Environment: the function's variables, the emulator's
endpoint as AWS_ENDPOINT_URL, test credentials, the region. The venv's Python runs it (its boto3
stands in for the Lambda runtime's).
"""

from __future__ import annotations

import io
import json
import tempfile
import threading
import time
import uuid
import zipfile
from pathlib import Path
from typing import Any
from urllib.parse import unquote_plus

from lakeloader_dev.emulator.runtime import EmulatorProcesses, Invocation

BOOTSTRAP = Path(__file__).resolve().parent / "lambda_bootstrap.py"


def _code_dir(runtime: EmulatorProcesses, fn: Any) -> Path:
    digest = (getattr(fn, "code_digest", "") or uuid.uuid4().hex)[:16]
    target = runtime.workdir / "lambda" / f"{fn.function_name}-{digest}"
    with runtime.extract_lock:
        if not target.exists():
            tmp = Path(tempfile.mkdtemp(prefix=".extract-", dir=runtime.workdir))
            with zipfile.ZipFile(io.BytesIO(fn.code_bytes)) as archive:
                archive.extractall(tmp)
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp.rename(target)
    return target


def invoke_lambda(
    runtime: EmulatorProcesses, fn: Any, event: Any, trigger: str = "invoke"
) -> tuple[str, bool, str]:
    """Run the handler once; returns (payload JSON, errored, logs) like moto's Docker executor."""
    _record, payload, errored, logs = _invoke(runtime, fn, event, trigger)
    return payload, errored, logs


def _invoke(
    runtime: EmulatorProcesses, fn: Any, event: Any, trigger: str
) -> tuple[Invocation, str, bool, str]:
    """`invoke_lambda`, with the invocation's journal record (its request id and error)."""
    request_id = str(uuid.uuid4())
    record = Invocation(fn.function_name, request_id, trigger, time.time())
    if isinstance(event, str | bytes):
        event = json.loads(event or "{}")
    if isinstance(event, dict):
        for item in event.get("Records") or []:
            key = ((item.get("s3") or {}).get("object") or {}).get("key") if isinstance(item, dict) else None
            if key:
                record.keys.append(unquote_plus(key))
    language = fn.run_time or ""
    if not language.startswith("python"):
        message = f"the emulator runs Python Lambda functions only; {fn.function_name} is {language}"
        record.ok, record.error = False, message
        runtime.journal.add_invocation(record)
        payload = json.dumps({"errorType": "Runtime.Unsupported", "errorMessage": message})
        return record, payload, True, message
    run_dir = runtime.workdir / "invocations" / request_id
    run_dir.mkdir(parents=True)
    event_path, result_path, log_path = (
        run_dir / "event.json",
        run_dir / "result.json",
        run_dir / "log.txt",
    )
    event_path.write_text(json.dumps(event))
    env = runtime.base_env()
    env.update({k: str(v) for k, v in (fn.environment_vars or {}).items()})
    env.update(
        {
            "AWS_LAMBDA_FUNCTION_NAME": fn.function_name,
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(fn.memory_size),
            "AWS_LAMBDA_FUNCTION_TIMEOUT": str(fn.timeout),
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_EXECUTION_ENV": f"AWS_Lambda_{language}",
            "LAKELOADER_EMULATOR_REQUEST_ID": request_id,
            "LAKELOADER_EMULATOR_FUNCTION_ARN": fn.function_arn,
        }
    )
    code_dir = _code_dir(runtime, fn)
    # -I: neither PYTHONPATH nor the bootstrap's folder on sys.path; the code folder comes first.
    cmd = [
        runtime.python,
        "-I",
        str(BOOTSTRAP),
        str(code_dir),
        fn.handler,
        str(event_path),
        str(result_path),
    ]
    rc = runtime.run_process(cmd, env, run_dir, log_path, timeout=float(fn.timeout) + 30)
    logs = log_path.read_text(errors="replace") if log_path.exists() else ""
    record.seconds = time.time() - record.started
    if result_path.exists():
        outcome = json.loads(result_path.read_text())
    else:
        outcome = {"ok": False, "errorType": "Runtime.ExitError", "errorMessage": f"exit code {rc}"}
    if outcome.get("ok"):
        record.result = outcome.get("result")
        payload, errored = json.dumps(record.result), False
    else:
        record.ok = False
        record.error = f"{outcome.get('errorType')}: {outcome.get('errorMessage')}"
        payload = json.dumps({k: outcome.get(k) for k in ("errorType", "errorMessage", "stackTrace")})
        errored = True
    runtime.journal.add_invocation(record)
    _to_cloudwatch(runtime, fn, request_id, logs)
    return record, payload, errored, logs


def _to_cloudwatch(runtime: EmulatorProcesses, fn: Any, request_id: str, logs: str) -> None:
    """The invocation's output into its log group, a stream per invocation, as Lambda writes it (when
    the group exists: Lambda creates none here), so what reads a function's log reads this one."""
    group = (getattr(fn, "logging_config", None) or {}).get("LogGroup") or f"/aws/lambda/{fn.function_name}"
    lines = [line for line in logs.splitlines() if line.strip()] or ["(no output)"]
    client = _client(runtime, "logs")
    stream = f"{time.strftime('%Y/%m/%d')}/[$LATEST]{request_id.replace('-', '')}"
    now = int(time.time() * 1000)
    events = [{"timestamp": now, "message": line} for line in lines[:1000]]
    try:
        client.create_log_stream(logGroupName=group, logStreamName=stream)
        client.put_log_events(logGroupName=group, logStreamName=stream, logEvents=events)
    except Exception:  # noqa: BLE001 - no group (Lambda creates none here), or the emulator stopping
        return


ASYNC_RETRIES = 2
ASYNC_RETRY_DELAY_SECONDS = 2.0


def invoke_async(
    runtime: EmulatorProcesses, fn: Any, event: dict[str, Any], trigger: str
) -> threading.Thread:
    """Invoke like Lambda's asynchronous invocation: a thread, retried twice on a function error; an
    event whose last attempt fails goes to the function's dead-letter queue, where it has one."""

    def run() -> None:
        for attempt in range(ASYNC_RETRIES + 1):
            if attempt:
                time.sleep(ASYNC_RETRY_DELAY_SECONDS * attempt)
            record, _payload, errored, _logs = _invoke(runtime, fn, event, trigger)
            if not errored:
                return
        _to_dead_letter_queue(runtime, fn, event, record)

    thread = threading.Thread(target=run, name=f"lambda-async-{fn.function_name}", daemon=True)
    thread.start()
    runtime.async_threads.append(thread)
    return thread


def _to_dead_letter_queue(
    runtime: EmulatorProcesses, fn: Any, event: dict[str, Any], failed: Invocation
) -> None:
    """The event as Lambda sends it to a dead-letter queue (SQS) after the last attempt: the event
    itself, with the attributes RequestID, ErrorCode and ErrorMessage (its first KB)."""
    target = (getattr(fn, "dead_letter_config", None) or {}).get("TargetArn", "")
    if not target.startswith("arn:aws:sqs:"):
        return
    *_, account, queue = target.split(":")
    client = _client(runtime, "sqs")
    try:
        url = client.get_queue_url(QueueName=queue, QueueOwnerAWSAccountId=account)["QueueUrl"]
        client.send_message(
            QueueUrl=url,
            MessageBody=json.dumps(event),
            MessageAttributes={
                "RequestID": {"DataType": "String", "StringValue": failed.request_id},
                "ErrorCode": {"DataType": "Number", "StringValue": "200"},
                "ErrorMessage": {"DataType": "String", "StringValue": (failed.error or "")[:1024]},
            },
        )
    except Exception:  # noqa: BLE001 - no queue (deleted), or the emulator stopping: dropped, as Lambda drops it
        return


def _client(runtime: EmulatorProcesses, service: str) -> Any:
    """A boto3 client of `service` on the emulator, as the function's role would call it."""
    import boto3

    env = runtime.base_env()
    return boto3.client(
        service,
        endpoint_url=runtime.endpoint,
        region_name=runtime.region,
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        aws_session_token=env.get("AWS_SESSION_TOKEN"),
    )
