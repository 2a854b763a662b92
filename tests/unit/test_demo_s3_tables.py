"""`make demo` deploys one Amazon S3 Tables table beside config/tables.yaml's (issue 42): a copy of
crm.customers with target.storage s3_tables, fed the same sample files under a prefix of its own.
The table is added to the config the demo deploys, not to config/tables.yaml (the stack snapshots
and the tests synthesize that one as it is)."""

from __future__ import annotations

from lakeloader.config import load_config
from lakeloader.jobs.load import assign_inputs
from lakeloader_dev.emulator.demo import (
    S3_TABLES_DEMO,
    S3_TABLES_PREFIX,
    S3_TABLES_SOURCE,
    _with_s3_tables_samples,
    demo_config,
)

CONFIG = "config/tables.yaml"


def test_the_demo_config_is_the_example_config_plus_one_s3_tables_table(tmp_path):
    example = load_config(CONFIG)
    demo = load_config(str(demo_config(CONFIG, tmp_path)))
    assert [t.id for t in demo.tables] == [*(t.id for t in example.tables), S3_TABLES_DEMO]
    [s3_table] = [t for t in demo.tables if t.target.storage == "s3_tables"]
    source = example.table(S3_TABLES_SOURCE)
    assert s3_table.id == S3_TABLES_DEMO and s3_table.source.prefix == S3_TABLES_PREFIX
    assert (s3_table.target.database, s3_table.target.table) == ("s3t_crm", "customers")
    assert (s3_table.keys, s3_table.mode, s3_table.sequence_by) == (
        source.keys,
        source.mode,
        source.sequence_by,
    )
    # the other tables stay exactly as configured, and config/tables.yaml has no S3 Tables table
    assert [t for t in demo.tables if t.id != S3_TABLES_DEMO] == example.tables
    assert all(t.target.storage == "glue" for t in example.tables)
    # written again over an existing one: still one copy
    assert [t.id for t in load_config(str(demo_config(CONFIG, tmp_path))).tables].count(S3_TABLES_DEMO) == 1


def test_the_s3_tables_table_gets_the_customers_sample_files_under_its_prefix(tmp_path):
    demo = load_config(str(demo_config(CONFIG, tmp_path)))
    samples = _with_s3_tables_samples(assign_inputs(demo, demo.tables, None))
    customers, copies = samples[S3_TABLES_SOURCE], samples[S3_TABLES_DEMO]
    assert customers and len(copies) == len(customers)
    for original, copy in zip(customers, copies, strict=True):
        assert copy.uri == original.uri
        assert copy.name == S3_TABLES_PREFIX + original.name.removeprefix("crm/public/customers/")
    # the arrival Lambda routes each copy to the S3 Tables table by its prefix
    assert {t.id for t in demo.tables if all(c.name.startswith(t.source.prefix) for c in copies)} == {
        S3_TABLES_DEMO
    }
