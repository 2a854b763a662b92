"""The Lambda's structured logs: one JSON object per line on stdout, with the invocation's correlation id.

aws-lambda-powertools' Logger formats the records of every ``lakeloader.*`` logger (the trigger's and
the ledger's); why the correlation id is set with ``thread_safe_append_keys`` rather than
``set_correlation_id``/``inject_lambda_context``: docs/ledger_and_trigger.md.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from aws_lambda_powertools import Logger

from lakeloader.control.contract import ARRIVAL_SERVICE_NAME, ENV_POWERTOOLS_SERVICE_NAME

# The service is never "lakeloader": Powertools filters records of loggers named after the service out
# of the root logger's handlers, which would silence every lakeloader.* logger in a process that also
# logs there.
PACKAGE_LOGGER = "lakeloader"
LOG = logging.getLogger("lakeloader.trigger")  # the name log queries know

_POWERTOOLS: list[Logger] = []
_SETUP = threading.Lock()


class _CurrentStdout:
    """Writes to whatever ``sys.stdout`` is at emit time (Lambda ships stdout to CloudWatch; tests
    capture it by swapping ``sys.stdout``)."""

    def write(self, text: str) -> int:
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()


def configure_logging(level: str | int = "INFO") -> Logger:
    """Send the ``lakeloader`` loggers to stdout as JSON lines through Powertools (idempotent)."""
    with _SETUP:
        if not _POWERTOOLS:
            _POWERTOOLS.append(
                Logger(
                    service=os.environ.get(ENV_POWERTOOLS_SERVICE_NAME) or ARRIVAL_SERVICE_NAME,
                    stream=_CurrentStdout(),
                    utc=True,
                    use_rfc3339=True,
                    log_record_order=["timestamp", "level", "name", "message"],
                    name="%(name)s",  # which logger: lakeloader.control.trigger, ...ledger
                )
            )
        powertools = _POWERTOOLS[0]
        package = logging.getLogger(PACKAGE_LOGGER)
        if powertools.registered_handler not in package.handlers:
            package.addHandler(powertools.registered_handler)
        package.setLevel(level.upper() if isinstance(level, str) else level)
        package.propagate = False
    return powertools


@contextmanager
def correlation_id(logger: Logger, value: str) -> Iterator[None]:
    """Every log line of this thread carries ``correlation_id`` until the block ends."""
    logger.thread_safe_append_keys(correlation_id=value)
    try:
        yield
    finally:
        logger.thread_safe_remove_keys(["correlation_id"])


def log(level: int, message: str, **fields: Any) -> None:
    """One log line: ``message`` is an event name (``run.started``), ``fields`` become top-level keys."""
    LOG.log(level, message, extra=fields, stacklevel=2)
