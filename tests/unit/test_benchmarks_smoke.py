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


def test_ratios_compare_lakeloader_with_each_engine_step_by_step_and_check_the_results():
    from benchmarks.measure import Case
    from benchmarks.merge import ratios

    def case(scenario, name, engine, seconds, rows=1_000, mode="", checksum=(1, 2)):
        return Case(scenario, name, engine, rows, 10, seconds=[seconds], mode=mode, checksum=checksum)

    cases = [
        case("batch", "merge-on-read", "lakeloader", 2.0),
        case("batch", "merge-on-read", "aws-sample", 4.0),
        case("batch", "copy-on-write", "pyiceberg", 8.0),
        *[
            case("growth", f"{n} rows", "lakeloader", s, rows=n, mode="merge-on-read")
            for n, s in ((1_000, 1.0), (2_000, 1.5), (4_000, 3.0))
        ],
        case("small", "8 batches", "lakeloader", 1.0, checksum=(3,)),
        case("small", "8 batches", "aws-sample", 1.0, checksum=(4,)),
    ]
    assert ratios(cases) == [
        "  batch   merge-on-read                lakeloader    2.00s  ÷ aws-sample 0.50  ÷ pyiceberg 0.25",
        "  small   8 batches                    lakeloader    1.00s  ÷ aws-sample 1.00",
        "  growth  lakeloader  mer 1,000->2,000 rows (2x): time x1.50; 2,000->4,000 rows (2x): time x2.00; "
        "1,000->4,000 rows: time x3.00",
        "  check   batch batch: same table from every engine",
        "  check   growth 1000 rows: same table from every engine",
        "  check   growth 2000 rows: same table from every engine",
        "  check   growth 4000 rows: same table from every engine",
        "  check   small 8 batches: DIFFERENT results: {(3,), (4,)}",
    ]
