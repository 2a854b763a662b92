"""The embedded AWS emulator: moto (pinned) on 127.0.0.1, extended to run lakeloader's real loop.

    with Emulator() as emu:            # moto server on a free port, patches applied
        emu.endpoint                    # http://127.0.0.1:<port>, for AWS_ENDPOINT_URL
        emu.journal                     # Lambda invocations and Glue/EMR runs it executed

What moto lacks and the emulator adds is listed in ``patches`` (one module, pinned to
moto 5.2.5) and ``cfn_models``; ``deploy`` puts the synthesized CDK app on it.
One emulator at a time per process (moto's backends are process-global; ``stop`` resets them).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

from lakeloader_dev.emulator.runtime import TEST_CREDENTIALS, EmulatorProcesses, Journal

ACCOUNT_ID = "123456789012"
REGION = "us-east-1"
HOST = "127.0.0.1"

__all__ = ["ACCOUNT_ID", "REGION", "Emulator", "aws_env"]


def aws_env(endpoint: str, region: str = REGION) -> dict[str, str]:
    """The environment a client (boto3, Spark, the CLI) needs to talk to the emulator."""
    return {
        **TEST_CREDENTIALS,
        "AWS_REGION": region,
        "AWS_DEFAULT_REGION": region,
        "AWS_ENDPOINT_URL": endpoint,
    }


class Emulator:
    """moto's ThreadedMotoServer in this process, with lakeloader's extensions."""

    def __init__(
        self, port: int = 0, workdir: str | Path | None = None, spark_slots: int | None = None
    ) -> None:
        self.port = port
        self._own_workdir = workdir is None
        self.workdir = (
            Path(workdir).resolve() if workdir else Path(tempfile.mkdtemp(prefix="lakeloader-emulator-"))
        )
        self.spark_slots = spark_slots or int(os.environ.get("LAKELOADER_EMULATOR_SPARK_SLOTS", "2"))
        self.server: Any = None
        self.runtime: EmulatorProcesses | None = None
        self.endpoint = ""

    @property
    def journal(self) -> Journal:
        assert self.runtime is not None, "start() the emulator first"
        return self.runtime.journal

    def start(self) -> Emulator:
        from moto.server import ThreadedMotoServer

        from lakeloader_dev.emulator import patches

        self.workdir.mkdir(parents=True, exist_ok=True)
        for name, value in aws_env("", REGION).items():
            if name != "AWS_ENDPOINT_URL":
                os.environ.setdefault(name, value)
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        self.server = ThreadedMotoServer(ip_address=HOST, port=self.port, verbose=False)
        self.server.start()
        self.port = self.server.get_host_and_port()[1]
        self.endpoint = f"http://{HOST}:{self.port}"
        self.runtime = EmulatorProcesses(self.endpoint, self.workdir, REGION, spark_slots=self.spark_slots)
        patches.apply(self.runtime, self.port)
        self.moto_api("config", {"stepfunctions": {"execute_state_machine": True}})
        return self

    def moto_api(self, path: str, body: dict[str, Any]) -> None:
        request = urllib.request.Request(
            f"{self.endpoint}/moto-api/{path}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10):  # noqa: S310 - our own 127.0.0.1 endpoint
            pass

    def stop(self) -> None:
        if self.runtime is not None:
            self.runtime.stop()
        if self.server is not None:
            # moto's backends are process-global: without a reset, the next emulator of this
            # process (another e2e module) would find this one's stacks, buckets and tables
            self.moto_api("reset", {})
            self.server.stop()
            self.server = None
        if self._own_workdir and not os.environ.get("LAKELOADER_EMULATOR_KEEP"):
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
