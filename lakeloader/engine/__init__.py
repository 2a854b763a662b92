"""The engine: one batch of raw files prepared for its table (read, normalised, the schema evolved,
classified for the table's mode), passed through the quality gate and committed through the Iceberg
layer (lakeloader.iceberg). The jobs (lakeloader.jobs) use only what is named here."""

from lakeloader.engine import tombstones
from lakeloader.engine.batch import apply_batch
from lakeloader.engine.batch_result import COUNTED, BatchResult
from lakeloader.engine.quality import report_counts
from lakeloader.engine.repair import compare_snapshot, repair_difference
from lakeloader.engine.schema import table_layout_sql

__all__ = [
    "COUNTED",
    "BatchResult",
    "apply_batch",
    "compare_snapshot",
    "repair_difference",
    "report_counts",
    "table_layout_sql",
    "tombstones",
]
