"""Reusable AWS test fixtures: one moto server on 127.0.0.1, over real HTTP, per test session.

Use from a conftest (``tests/`` is on ``sys.path`` for conftests there) or a test module::

    from aws_fixtures import aws_endpoint, moto_server  # noqa: F401  (pytest fixtures)

* ``moto_server`` (session): starts ``moto_server -H 127.0.0.1 -p <free port>``
  once, sets AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY = ``testing`` and
  AWS_DEFAULT_REGION = ``us-east-1`` for the session, yields the endpoint URL
  (``http://127.0.0.1:<port>``).
* ``aws_endpoint`` (function): the same URL, also exported as AWS_ENDPOINT_URL
  for the test, so boto3 clients built without ``endpoint_url`` reach moto.

The server is shared by everything in the process (even if this module is
imported under two names) and stopped at exit. Tests share it, so give AWS
resources unique names (``unique_name``) rather than resetting the server.
Set LAKELOADER_TEST_MOTO_ENDPOINT to reuse a server you started yourself.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

AWS_TEST_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}
ENDPOINT_ENV = "LAKELOADER_TEST_MOTO_ENDPOINT"
HOST = "127.0.0.1"


class ManualClock:
    """A clock the test moves by hand (`clock.now += ...`): the ledger's and the trigger's `clock=`."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def unique_name(prefix: str) -> str:
    """A resource name no other test uses, e.g. ``ledger-1a2b3c4d``."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def _answers(endpoint: str) -> bool:
    try:
        with urllib.request.urlopen(f"{endpoint}/moto-api/data.json", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _die_with_parent() -> None:
    """Linux: the server gets SIGTERM when the test process dies, even by SIGKILL (mutmut, a
    killed CI run), so no orphaned server outlives its tests."""
    import ctypes
    import signal

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class MotoServer:
    """A ``moto_server`` subprocess bound to 127.0.0.1."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[bytes] | None = None
        self.endpoint: str = ""
        self.log_path = Path(tempfile.gettempdir()) / f"lakeloader-moto-{os.getpid()}.log"

    def _command(self, port: int) -> list[str]:
        script = Path(sys.executable).with_name("moto_server")
        if script.exists():
            return [str(script), "-H", HOST, "-p", str(port)]
        return [sys.executable, "-m", "moto.server", "-H", HOST, "-p", str(port)]

    def start(self, timeout: float = 30.0) -> str:
        env = {**os.environ, **AWS_TEST_ENV}
        env.pop("AWS_ENDPOINT_URL", None)
        for _attempt in range(3):
            port = _free_port()
            endpoint = f"http://{HOST}:{port}"
            with open(self.log_path, "ab") as log:
                process = subprocess.Popen(
                    self._command(port),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    preexec_fn=_die_with_parent,
                )
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and process.poll() is None:
                if _answers(endpoint):
                    self.process, self.endpoint = process, endpoint
                    return endpoint
                time.sleep(0.1)
            if process.poll() is None:
                process.kill()
                process.wait()
        tail = self.log_path.read_text(errors="replace")[-2000:] if self.log_path.exists() else ""
        raise RuntimeError(f"moto server did not come up on {HOST}; log {self.log_path}:\n{tail}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None


_SERVER: MotoServer | None = None


def shared_moto_endpoint() -> str:
    """Start the process-wide moto server if needed; return its endpoint URL."""
    global _SERVER
    existing = os.environ.get(ENDPOINT_ENV)
    if existing and _answers(existing):
        return existing
    _SERVER = MotoServer()
    endpoint = _SERVER.start()
    atexit.register(_SERVER.stop)
    os.environ[ENDPOINT_ENV] = endpoint
    return endpoint


def moto_api(endpoint: str, path: str, body: dict | None = None) -> None:
    """POST to moto's control API, e.g. ``moto_api(url, "state-manager/set-transition", {...})``."""
    request = urllib.request.Request(
        f"{endpoint}/moto-api/{path}",
        data=json.dumps(body or {}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10):
        pass


@contextlib.contextmanager
def moto_state_held(endpoint: str, model_name: str) -> Iterator[None]:
    """moto's `model_name` objects (a query, a job run) stay in their first state while this lasts:
    moto runs no SQL and no job, so they would succeed at once otherwise."""
    transition = {"model_name": model_name, "transition": {"progression": "manual", "times": 10**6}}
    moto_api(endpoint, "state-manager/set-transition", transition)
    try:
        yield
    finally:
        moto_api(endpoint, "state-manager/unset-transition", {"model_name": model_name})


_SESSIONS_SERVED = [0]


@pytest.fixture(scope="session")
def moto_server() -> Iterator[str]:
    """The endpoint URL of the session's moto server (test AWS credentials set). A later pytest session
    in the same process (mutmut runs the tests once per mutant) starts from an empty server, as the
    first did, when this process started it (a server another process shares is never reset)."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in AWS_TEST_ENV.items():
            patch.setenv(name, value)
        patch.delenv("AWS_PROFILE", raising=False)
        endpoint = shared_moto_endpoint()
        if _SESSIONS_SERVED[0] and _SERVER is not None and _SERVER.endpoint == endpoint:
            moto_api(endpoint, "reset")
        _SESSIONS_SERVED[0] += 1
        yield endpoint


@pytest.fixture
def aws_endpoint(moto_server: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """``moto_server``, also exported as AWS_ENDPOINT_URL for the duration of one test."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server)
    return moto_server


def create_dynamodb_table(
    client, name: str, partition_key: str, sort_key: str | None = None, ttl_attribute: str | None = None
) -> str:
    """An on-demand table with string keys (the shape of lakeloader's tables); returns its name."""
    keys = [{"AttributeName": partition_key, "KeyType": "HASH"}]
    attributes = [{"AttributeName": partition_key, "AttributeType": "S"}]
    if sort_key:
        keys.append({"AttributeName": sort_key, "KeyType": "RANGE"})
        attributes.append({"AttributeName": sort_key, "AttributeType": "S"})
    client.create_table(
        TableName=name, KeySchema=keys, AttributeDefinitions=attributes, BillingMode="PAY_PER_REQUEST"
    )
    if ttl_attribute:
        client.update_time_to_live(
            TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl_attribute}
        )
    return name
