"""The benchmark's data is deterministic and has the promised shape (no timing here)."""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # benchmarks/ is a top-level folder, not an installed package
    sys.path.insert(0, str(ROOT))

from benchmarks import data  # noqa: E402


def test_cdc_batch_is_deterministic_with_the_promised_mix(tmp_path):
    first = data.cdc_changes(2_000, 10_000, batch_no=3)
    assert first.equals(data.cdc_changes(2_000, 10_000, batch_no=3))
    assert not first.equals(data.cdc_changes(2_000, 10_000, batch_no=4))

    ops = dict(zip(*pc.value_counts(first["Op"]).flatten(), strict=True))
    assert {k.as_py(): v.as_py() for k, v in ops.items()} == {"U": 1_400, "I": 400, "D": 200}
    assert len(pc.unique(first["id"])) < first.num_rows  # duplicates per key
    stamps = first["last_update_time"].to_pylist()
    assert len(set(stamps)) == len(stamps) and min(stamps) > data.T0  # unambiguous, newer than base rows

    # every new key is inserted before it is updated
    seen: set[int] = set()
    for op, key in zip(first["Op"].to_pylist(), first["id"].to_pylist(), strict=True):
        if key >= data.INSERT_BASE:
            assert (op == "I") == (key not in seen)
            seen.add(key)

    batch = data.write_batch(tmp_path / "cdc", 2_000, 10_000, batch_no=3)
    assert pq.read_table(batch.files).equals(first)


def test_base_table_is_deterministic_and_chunked(tmp_path, monkeypatch):
    monkeypatch.setattr(data, "ROWS_PER_BASE_FILE", 1_000)
    paths = data.write_base(tmp_path / "base", 2_500)
    assert [p.name for p in paths] == ["LOAD00000001.parquet", "LOAD00000002.parquet", "LOAD00000003.parquet"]
    table = pq.read_table(paths)
    assert table.num_rows == 2_500 and table["id"].to_pylist() == list(range(2_500))
    assert table.equals(data.base_rows(0, 2_500).cast(table.schema))
    assert set(table["status"].to_pylist()) <= set(data.STATUSES)
