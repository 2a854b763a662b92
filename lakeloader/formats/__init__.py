"""Source formats (``source.cdc``): one module each, registered here.

A new format is one module with a ``SourceFormat`` subclass, its entry in FORMATS, and its tests
(docs/architecture.md, "Add a CDC format"). Importing this package imports no PySpark.
"""

from __future__ import annotations

from lakeloader.formats.base import SourceFormat
from lakeloader.formats.debezium import Debezium
from lakeloader.formats.debezium_envelope import DebeziumEnvelope
from lakeloader.formats.dms import Dms
from lakeloader.formats.full_copy import FullCopy
from lakeloader.formats.plain_rows import PlainRows

FORMATS: dict[str, SourceFormat] = {
    f.name: f for f in (Dms(), Debezium(), DebeziumEnvelope(), PlainRows(), FullCopy())
}
FORMAT_NAMES = tuple(FORMATS)


def source_format(name: str) -> SourceFormat:
    """The format `source.cdc` names (validated by the config model)."""
    return FORMATS[name]


__all__ = ["FORMATS", "FORMAT_NAMES", "SourceFormat", "source_format"]
