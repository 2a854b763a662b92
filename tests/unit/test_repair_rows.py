"""Which rows `lakeloader reconcile --repair` writes (lakeloader.engine.repair.written_counts): every
missing and different key, and the extra keys' deletes unless the table keeps what its source deletes."""

from __future__ import annotations

import pytest

from lakeloader.config import TableConfig
from lakeloader.engine.repair import written_counts

COUNTS = {"missing": 3, "extra": 2, "different": 1}


def table(**source) -> TableConfig:
    return TableConfig.model_validate(
        {
            "id": "shop.orders",
            "source": {"prefix": "src/", "format": "parquet", "cdc": "snapshot", **source},
            "target": {"database": "shop", "table": "orders"},
            "keys": ["id"],
        }
    )


@pytest.mark.parametrize("source", [{}, {"deletes": "delete"}], ids=["default", "deletes: delete"])
def test_a_repair_writes_every_missing_extra_and_different_key(source):
    assert written_counts(table(**source), COUNTS) == COUNTS


def test_a_repair_of_a_table_that_ignores_deletes_writes_no_delete():
    assert written_counts(table(deletes="ignore"), COUNTS) == {"missing": 3, "different": 1}
