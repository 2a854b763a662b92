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
  ``jitter`` is drawn at random (so two colliding writers do not collide again);
* after the last attempt :class:`RetryExhaustedError` says what was tried, how
  often and the last error (chained as ``__cause__``): never a silent loop.

No PySpark import: usable (and unit-tested) without a JVM.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from lakeloader.errors import LakeloaderError, first_line
from lakeloader.progress import Progress, no_progress

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


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 4
    base_seconds: float = 2.0
    max_seconds: float = 60.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("attempts must be at least 1")
        if self.base_seconds < 0 or self.max_seconds < 0:
            raise ValueError("waits must not be negative")
        if not 0 <= self.jitter <= 1:
            raise ValueError("jitter must be between 0 and 1")

    @classmethod
    def from_settings(cls, settings: object) -> RetryPolicy:
        """From a config.RetrySettings (or anything with the same attributes)."""
        return cls(
            attempts=settings.attempts,  # type: ignore[attr-defined]
            base_seconds=settings.base_seconds,  # type: ignore[attr-defined]
            max_seconds=settings.max_seconds,  # type: ignore[attr-defined]
            jitter=settings.jitter,  # type: ignore[attr-defined]
        )

    def ceiling(self, retry: int) -> float:
        """The longest wait before retry number `retry` (1 = the wait after the first failure)."""
        return min(self.max_seconds, self.base_seconds * 2 ** (retry - 1))

    def delay(self, retry: int, rand: Callable[[], float] = random.random) -> float:
        """The wait before retry `retry`: in [ceiling * (1 - jitter), ceiling]."""
        ceiling = self.ceiling(retry)
        return ceiling * (1 - self.jitter) + ceiling * self.jitter * rand()


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
    policy: RetryPolicy,
    retryable: Callable[[BaseException], bool] = is_commit_conflict,
    progress: Progress = no_progress,
    sleep: Callable[[float], None] = time.sleep,
    rand: Callable[[], float] = random.random,
    clock: Callable[[], float] = time.monotonic,
    on_retry: Callable[[int], None] | None = None,
) -> T:
    """Run `operation`; on a retryable conflict wait and run it again, at most `policy.attempts` times.

    `on_retry(attempt)` runs before each new attempt (e.g. to drop an audit branch).
    """
    started = clock()
    for attempt in range(1, policy.attempts + 1):
        try:
            return operation()
        except BaseException as exc:
            if not retryable(exc):
                raise
            if attempt == policy.attempts:
                raise RetryExhaustedError(what, attempt, clock() - started, exc) from exc
            wait = policy.delay(attempt, rand)
            progress(
                f"{what}: concurrent commit ({first_line(exc)[:160]}); attempt {attempt + 1}/"
                f"{policy.attempts} in {wait:.1f}s"
            )
            sleep(wait)
            if on_retry is not None:
                on_retry(attempt + 1)
    raise AssertionError("unreachable")  # pragma: no cover
