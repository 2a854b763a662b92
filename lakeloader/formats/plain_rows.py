"""``cdc: none``: every row is an upsert (full loads, append-only exports)."""

from __future__ import annotations

from lakeloader.formats.base import SourceFormat


class PlainRows(SourceFormat):
    name = "none"
