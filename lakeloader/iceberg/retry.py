"""Bounded retry with exponential backoff and jitter, for Iceberg commit conflicts.

Iceberg retries a commit itself (table properties ``commit.retry.*``) when only the
metadata pointer moved and the change can be re-applied. When the concurrent
commit *conflicts* -- a MERGE and a compaction touched the same files, a branch
can no longer be fast-forwarded -- Iceberg gives up with ``ValidationException``
or ``CommitFailedException``; the whole operation (re-planned against the new
table state) is what must be retried. That is this module's job:

* only errors :func:`is_commit_conflict` recognises are retried; anything else
  propagates at once, unchanged;
* at most ``attempts`` attempts; the wait before attempt ``n + 1`` is
  ``min(max_seconds, base_seconds * 2 ** (n - 1))``, of which the fraction
  ``jitter`` is drawn at random (so two colliding writers do not collide again):
  the table's ``maintenance.retry`` (:class:`lakeloader.config.RetrySettings`);
* after the last attempt :class:`RetryExhaustedError` says what was tried, how
  often and the last error (chained as ``__cause__``): never a silent loop.

No PySpark import: usable (and unit-tested) without a JVM.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable
from typing import TypeVar

from lakeloader.config import RetrySettings
from lakeloader.spark.errors import LakeloaderError, first_line
from lakeloader.spark.progress import Progress, no_progress

T = TypeVar("T")

# Java exception classes that mean "someone else committed first; re-plan and try again".
CONFLICT_CLASSES = (
    "org.apache.iceberg.exceptions.CommitFailedException",
    "CommitFailedException",
)
# ValidationException is also thrown for non-conflicts (bad schema, ...): only these messages count.
CONFLICT_MESSAGES = re.compile(
    r"conflicting files|found new (?:position |equality )?delete|found conflicting|"
    r"missing required files to delete|missing data files|"
    r"cannot commit, .*concurrent|cannot fast-forward|is not an ancestor|"
    r"found new conflicting|cannot determine history|concurrent modification|deleted by a concurrent|"
    r"could not be found in the latest snapshot",
    re.IGNORECASE,
)


class RetryExhaustedError(LakeloaderError):
    """An operation kept conflicting with concurrent commits; the last error is the cause."""

    def __init__(self, what: str, attempts: int, seconds: float, last: BaseException):
        self.what, self.attempts, self.last = what, attempts, last
        super().__init__(
            f"{what}: gave up after {attempts} attempt(s) over {seconds:.1f}s because of concurrent "
            f"commits; last error: {first_line(last)} (raise maintenance.retry.attempts, or run it when "
            "fewer writers are active)"
        )


def error_text(exc: BaseException) -> str:
    """Everything a Py4J/PySpark error says about itself: message, Java class, stack trace, causes."""
    parts = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        parts.append(f"{type(current).__name__}: {current}")
        for attr in ("desc", "stackTrace"):
            value = getattr(current, attr, None)
            if isinstance(value, str):
                parts.append(value)
        java = getattr(current, "java_exception", None)
        if java is not None:
            try:
                cause = java
                while cause is not None:
                    parts.append(str(cause.toString()))
                    cause = cause.getCause()
            except Exception:  # noqa: BLE001 - best effort: the JVM may be gone
                pass
        current = current.__cause__ or current.__context__
    return "\n".join(parts)


def is_commit_conflict(exc: BaseException) -> bool:
    """Is this a commit conflict that a fresh attempt can resolve?"""
    if isinstance(exc, RetryExhaustedError | KeyboardInterrupt):
        return False
    text = error_text(exc)
    if "CommitStateUnknownException" in text:
        return False  # the commit may have succeeded: retrying could apply it twice
    if any(name in text for name in CONFLICT_CLASSES):
        return True
    return bool(CONFLICT_MESSAGES.search(text))


def retry_on_conflict(
    operation: Callable[[], T],
    *,
    what: str,
    settings: RetrySettings,
    retryable: Callable[[BaseException], bool] = is_commit_conflict,
    progress: Progress = no_progress,
    sleep: Callable[[float], None] = time.sleep,
    rand: Callable[[], float] = random.random,
    clock: Callable[[], float] = time.monotonic,
    on_retry: Callable[[int], None] | None = None,
) -> T:
    """Run `operation`; on a retryable conflict wait and run it again, at most `settings.attempts` times.

    `on_retry(attempt)` runs before each new attempt (e.g. to drop an audit branch).
    """
    started = clock()
    for attempt in range(1, settings.attempts + 1):
        try:
            return operation()
        except BaseException as exc:
            if not retryable(exc):
                raise
            if attempt == settings.attempts:
                raise RetryExhaustedError(what, attempt, clock() - started, exc) from exc
            wait = settings.delay(attempt, rand)
            progress(
                f"{what}: concurrent commit ({first_line(exc)[:160]}); attempt {attempt + 1}/"
                f"{settings.attempts} in {wait:.1f}s"
            )
            sleep(wait)
            if on_retry is not None:
                on_retry(attempt + 1)
    raise AssertionError("unreachable")  # pragma: no cover
