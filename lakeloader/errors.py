"""Errors a user can cause. Each message names the table, file and column it is about."""

from __future__ import annotations


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
