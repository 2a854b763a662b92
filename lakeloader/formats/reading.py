"""What reading a format's files works with, below both the formats (`base.py`) and plain-row reading
(`files.py`), which import it and not each other at import time: the table config a format reads, the
format's facts plain-row reading needs, and the check a change row must pass.

`lakeloader.config` imports the formats for their facts (`FORMATS`, a format's defaults), so the
formats name the config they read by these protocols (`TableConfig`, `Source` and `CsvOptions` have
them), not by importing it: no import loop, not even through type hints. Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pyspark.sql import Column


class CsvSettings(Protocol):
    """`source.csv` (lakeloader.config.source.CsvOptions)."""

    @property
    def header(self) -> bool: ...
    @property
    def delimiter(self) -> str: ...
    @property
    def quote(self) -> str: ...
    @property
    def escape(self) -> str | None: ...
    @property
    def null_value(self) -> str: ...
    @property
    def columns(self) -> list[str] | None: ...


class SourceSettings(Protocol):
    """`source:` (lakeloader.config.Source)."""

    @property
    def prefix(self) -> str: ...
    @property
    def format(self) -> str: ...
    @property
    def csv_options(self) -> CsvSettings: ...
    @property
    def complete_when(self) -> str: ...
    @property
    def snapshot_by(self) -> str | None: ...
    @property
    def schema_(self) -> dict[str, str] | None: ...


class FormatTable(Protocol):
    """One table's config (lakeloader.config.TableConfig)."""

    @property
    def id(self) -> str: ...
    @property
    def source(self) -> SourceSettings: ...
    @property
    def sequence_column(self) -> str | None: ...


class PlainFormat(Protocol):
    """The facts of a source format (lakeloader.formats.base.SourceFormat) plain-row reading uses."""

    @property
    def op_columns(self) -> tuple[str, ...]: ...
    @property
    def csv_escape(self) -> str: ...
    @property
    def sequence_setting(self) -> str: ...
    def headerless_columns(self, names: list[str], found: int) -> list[str]: ...


@dataclass
class Check:
    """A rule every change row must pass; `message` gets the offending value (repr) at `{}`."""

    bad: Column
    value: Column
    message: str
    column: str | None
