"""Errors a user can cause. Each message names the table, file and column it is about."""

from __future__ import annotations


def first_line(exc: BaseException) -> str:
    """An error in one line for a summary or a message: `Type: the message's first line`, or `Type`
    when it has no message."""
    text = str(exc).strip()
    line = text.splitlines()[0].rstrip() if text else ""
    return f"{type(exc).__name__}: {line}" if line else type(exc).__name__


class LakeloaderError(Exception):
    """Base class: a problem with input or config, reported without a traceback."""


class BadInputError(LakeloaderError):
    """A raw file cannot be merged as it is. Nothing of its batch is committed."""

    def __init__(self, table_id: str, message: str, *, file: str | None = None, column: str | None = None):
        self.table_id, self.file, self.column = table_id, file, column
        where = [f"table {table_id!r}"]
        if file:
            where.append(f"file {file!r}")
        if column:
            where.append(f"column {column!r}")
        super().__init__(f"{', '.join(where)}: {message}")


class SchemaChangeError(LakeloaderError):
    """The source schema drifted in a way the table's policy does not allow."""

    def __init__(self, table_id: str, problems: list[str]):
        self.table_id, self.problems = table_id, problems
        listing = "\n  - ".join(problems)
        super().__init__(f"table {table_id!r}: schema change not allowed:\n  - {listing}")


class GuiltyFilesError(BadInputError):
    """Files of a batch each proven guilty on its own, each with its own message: set aside one by one
    (lakeloader.jobs) while the batch's other files go on."""

    def __init__(self, table_id: str, messages: dict[str, str], summary: str):
        self.table_id, self.file, self.column, self.messages = table_id, next(iter(messages)), None, messages
        LakeloaderError.__init__(self, f"table {table_id!r}: {summary}")


class UnreadableFilesError(GuiltyFilesError):
    """Files of a batch that cannot be read at all (truncated, empty, not the format, undecryptable),
    each with the reader's one-line reason. Found by lakeloader.engine.unreadable after a read failed
    with no file named."""

    def __init__(self, table_id: str, reasons: dict[str, str]):
        self.reasons = reasons
        messages = {
            name: f"table {table_id!r}, file {name!r}: cannot be read: {r}" for name, r in reasons.items()
        }
        listing = "; ".join(f"{name!r}: {reason}" for name, reason in reasons.items())
        super().__init__(table_id, messages, f"{len(reasons)} unreadable file(s): {listing}")


class ColumnConflictError(GuiltyFilesError):
    """Files of a batch with a column whose type the table (or the batch's earlier files) cannot hold
    under the table's schema_evolution policy, found from each file's own schema before the batch is
    combined (lakeloader.engine.file_conflicts)."""

    def __init__(self, table_id: str, messages: dict[str, str]):
        listing = "; ".join(messages.values())
        super().__init__(table_id, messages, f"{len(messages)} file(s) with a conflicting column: {listing}")


def blamed_files(exc: BaseException) -> dict[str, str]:
    """The input files an error proves guilty, each with its own message: the ones to set aside while
    the batch's other files go on. An error that names no file blames none."""
    if isinstance(exc, GuiltyFilesError):
        return dict(exc.messages)
    file = getattr(exc, "file", None) if isinstance(exc, LakeloaderError) else None
    return {file: str(exc)} if file else {}


def root_cause(exc: BaseException) -> str:
    """One line: the innermost Java exception of a Py4J error (the useful part), else the first line."""
    java = getattr(exc, "java_exception", None)
    if java is not None:
        try:
            while java.getCause() is not None:
                java = java.getCause()
            return str(java.toString()).splitlines()[0]
        except Exception:  # the JVM is gone: fall back to the Python text
            pass
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else repr(exc)}"
