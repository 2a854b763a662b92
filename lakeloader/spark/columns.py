"""The names the engine gives its meta columns, and how a configured name finds its spelling in a file.

Pure Python: the formats, the config's checks and every Spark module read them from here.
"""

from __future__ import annotations

# OP: I (insert/upsert), U (update), D (delete) or T (truncate); a format fills it. SEQ, SEQ_1, ...:
# the sequence columns' values (TableConfig.sequence_columns; a tie-breaker a file lacks is NULL,
# the oldest). FILE: the raw file's name, for error messages. FILE_POS, ROW_POS: the file's position
# in the batch and the row's in its file, the last resort when two changes to a key share the whole
# sequence tuple. INVALID<n>: a raw value kept past a cast, to report the one that does not fit.
OP, SEQ, FILE, FILE_POS, ROW_POS = "_ll_op", "_ll_seq", "_ll_file", "_ll_file_pos", "_ll_row_pos"
META_COLUMNS = (OP, SEQ, FILE, FILE_POS, ROW_POS)
INVALID = "_ll_invalid_"
# cdc: snapshot without source.snapshot_by: a data column (kept in the table) holding the snapshot the
# row came from, its folder name (a TIMESTAMP when the name reads as a date or date-time); it is the
# table's sequence column, so SCD2 history and tombstones take the snapshot's time.
SNAPSHOT = "lakeloader_snapshot"


def seq_columns(n: int) -> list[str]:
    """The meta columns holding a change's sequence tuple of `n` elements (the first is SEQ)."""
    return [SEQ, *[f"{SEQ}_{i}" for i in range(1, n)]]


def find_column(columns: list[str], name: str) -> str | None:
    """The actual spelling of `name` among `columns` (Spark resolves names case-insensitively)."""
    lowered = name.lower()
    return next((c for c in columns if c.lower() == lowered), None)
