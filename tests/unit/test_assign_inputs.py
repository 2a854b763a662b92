"""`lakeloader run`'s files per table (lakeloader.jobs.load.assign_inputs): tables that share a prefix
each get its files, found under raw_root or named with --input; a file no selected table claims is
refused when several tables run."""

from __future__ import annotations

import pytest

from lakeloader.config import parse_config
from lakeloader.jobs.load import assign_inputs
from lakeloader.spark.errors import LakeloaderError


def table(table_id: str, prefix: str, target: str, mode: str = "append") -> dict:
    return {
        "id": table_id,
        "source": {"prefix": prefix},
        "target": {"database": "crm", "table": target},
        "mode": mode,
    }


@pytest.fixture
def config(tmp_path):
    for name in ("crm/c/LOAD1.parquet", "crm/c/2026/x.parquet", "crm/c/nested/y.parquet", "hr/z.parquet"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"PAR1")
    return parse_config(
        {
            "raw_root": str(tmp_path),
            "tables": [
                table("current", "crm/c/", "current"),
                table("history", "crm/c/", "history"),
                table("nested", "crm/c/nested/", "nested"),
            ],
        }
    )


def test_tables_sharing_a_prefix_each_get_its_files(config, tmp_path):
    found = assign_inputs(config, config.tables, None)
    names = {table_id: sorted(f.name for f in files) for table_id, files in found.items()}
    assert names == {
        "current": ["crm/c/2026/x.parquet", "crm/c/LOAD1.parquet"],
        "history": ["crm/c/2026/x.parquet", "crm/c/LOAD1.parquet"],
        "nested": ["crm/c/nested/y.parquet"],
    }
    given = assign_inputs(config, config.tables, [str(tmp_path / "crm/c/LOAD1.parquet")])
    assert {t: [f.name for f in files] for t, files in given.items()} == {
        "current": ["crm/c/LOAD1.parquet"],
        "history": ["crm/c/LOAD1.parquet"],
        "nested": [],
    }
    with pytest.raises(LakeloaderError, match="match no selected table's source.prefix"):
        assign_inputs(config, config.tables, [str(tmp_path / "hr/z.parquet")])


def test_every_given_input_is_assigned_and_one_selected_table_takes_what_no_prefix_claims(config, tmp_path):
    """With --input, each file goes to the tables whose prefix claims it, every file of the list; when
    one table is selected, it takes the files no prefix claims (--table names where they go)."""
    paths = [
        str(tmp_path / n) for n in ("crm/c/LOAD1.parquet", "crm/c/nested/y.parquet", "crm/c/2026/x.parquet")
    ]
    given = assign_inputs(config, config.tables, paths)
    assert {t: sorted(f.name for f in files) for t, files in given.items()} == {
        "current": ["crm/c/2026/x.parquet", "crm/c/LOAD1.parquet"],
        "history": ["crm/c/2026/x.parquet", "crm/c/LOAD1.parquet"],
        "nested": ["crm/c/nested/y.parquet"],
    }
    current = [t for t in config.tables if t.id == "current"]
    alone = assign_inputs(config, current, [str(tmp_path / "hr/z.parquet")])
    assert {t: [f.name for f in files] for t, files in alone.items()} == {"current": ["hr/z.parquet"]}


def test_inputs_no_selected_table_claims_are_refused_by_name(config, tmp_path):
    with pytest.raises(LakeloaderError) as error:
        assign_inputs(config, config.tables, [str(tmp_path / "hr/z.parquet"), str(tmp_path / "hr")])
    assert str(error.value) == (
        "these inputs match no selected table's source.prefix (name one table with --table to load them "
        "into it): hr/z.parquet, hr/z.parquet"
    )
