"""The commit-conflict retry (`maintenance.retry`), no Spark: attempts, backoff bounds, giving up loudly."""

from __future__ import annotations

import pytest

from lakeloader.config import RetrySettings
from lakeloader.iceberg.retry import RetryExhaustedError, is_commit_conflict, retry_on_conflict

CONFLICT = (
    "org.apache.iceberg.exceptions.ValidationException: Found conflicting files that can contain records"
)


class FakeJavaError(Exception):
    """What PySpark raises for a JVM error: the message plus the Java stack trace in `stackTrace`."""

    def __init__(self, message: str, stack: str = ""):
        super().__init__(message)
        self.stackTrace = stack


class Flaky:
    def __init__(self, failures: int, error: Exception):
        self.failures, self.error, self.calls = failures, error, 0

    def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return "done"


def run(operation, settings, rand=lambda: 0.5):
    waits: list[float] = []
    messages: list[str] = []
    value = retry_on_conflict(
        operation,
        what="table 'x': commit",
        settings=settings,
        sleep=waits.append,
        rand=rand,
        progress=messages.append,
    )
    return value, waits, messages


def test_succeeds_after_conflicts_with_exponential_waits():
    operation = Flaky(3, FakeJavaError(CONFLICT))
    value, waits, messages = run(
        operation, RetrySettings(attempts=5, base_seconds=1, max_seconds=60, jitter=0)
    )
    assert value == "done" and operation.calls == 4
    assert waits == [1, 2, 4]
    assert "attempt 2/5 in 1.0s" in messages[0] and "Found conflicting files" in messages[0]


def test_waits_are_capped_and_jitter_stays_within_bounds():
    settings = RetrySettings(attempts=10, base_seconds=2, max_seconds=10, jitter=0.5)
    assert [settings.ceiling(n) for n in range(1, 6)] == [2, 4, 8, 10, 10]
    for n in range(1, 8):
        low, high = settings.delay(n, rand=lambda: 0.0), settings.delay(n, rand=lambda: 0.999999)
        assert low == pytest.approx(settings.ceiling(n) * 0.5)
        assert settings.ceiling(n) * 0.5 <= high <= settings.ceiling(n)
    import random

    rng = random.Random(7)
    for n in range(1, 8):
        assert settings.ceiling(n) * 0.5 <= settings.delay(n, rng.random) <= settings.ceiling(n)


def test_gives_up_after_the_last_attempt_with_a_clear_message():
    operation = Flaky(99, FakeJavaError("boom", "org.apache.iceberg.exceptions.CommitFailedException: stale"))
    with pytest.raises(RetryExhaustedError) as info:
        run(operation, RetrySettings(attempts=3, base_seconds=0.01, max_seconds=1, jitter=1))
    assert operation.calls == 3
    message = str(info.value)
    assert "gave up after 3 attempt(s)" in message and "concurrent commits" in message and "boom" in message
    assert info.value.__cause__ is operation.error  # the last error is chained, never swallowed


def test_other_errors_are_not_retried():
    operation = Flaky(1, ValueError("bad column"))
    with pytest.raises(ValueError, match="bad column"):
        run(operation, RetrySettings(attempts=5, base_seconds=0))
    assert operation.calls == 1


def test_one_attempt_means_no_retry():
    operation = Flaky(1, FakeJavaError(CONFLICT))
    with pytest.raises(RetryExhaustedError, match="after 1 attempt"):
        run(operation, RetrySettings(attempts=1))


@pytest.mark.parametrize(
    ("error", "conflict"),
    [
        (FakeJavaError(CONFLICT), True),
        (FakeJavaError("x", "org.apache.iceberg.exceptions.CommitFailedException: Cannot commit"), True),
        (FakeJavaError("Cannot commit, found new position delete for replaced data file"), True),
        (FakeJavaError("Missing required files to delete: s3://b/f.parquet"), True),
        (FakeJavaError("Cannot fast-forward: main is not an ancestor of audit_1"), True),
        (FakeJavaError("x", "org.apache.iceberg.exceptions.CommitStateUnknownException: timeout"), False),
        (FakeJavaError("org.apache.iceberg.exceptions.ValidationException: Cannot add column"), False),
        (ValueError("nope"), False),
    ],
)
def test_conflict_classification(error, conflict):
    assert is_commit_conflict(error) is conflict


def test_defaults_and_validation():
    default = RetrySettings()
    assert (default.attempts, default.base_seconds, default.max_seconds, default.jitter) == (
        4,
        2.0,
        60.0,
        0.5,
    )
    with pytest.raises(ValueError):
        RetrySettings(attempts=0)
    with pytest.raises(ValueError):
        RetrySettings(jitter=1.5)
