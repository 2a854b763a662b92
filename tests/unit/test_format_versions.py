"""target.format_version: 2 by default, 3 on request, and where each is refused (issue 69).

Format 3 needs a runtime lakeloader runs it on (glue-6.0, glue-6.1) and no reader that queries the table
through Athena, which reads format 2 only. `cdk synth` (infra.settings_lake.check_format_versions) and
`lakeloader tables --stage` refuse the same tables in the same words (lakeloader.config.format_versions).
"""

from __future__ import annotations

import copy
import json

import pytest

from infra.app import cdk_json_context
from infra.settings import SettingsError, resolve_stage
from infra.settings_lake import check_format_versions
from lakeloader import cli
from lakeloader.config import ConfigError, parse_config
from lakeloader.config.format_versions import Reader, format_version_problems
from lakeloader.control import runtimes
from lakeloader.engine.schema import table_layout_sql
from lakeloader.engine.table_settings import config_properties

ATHENA = 'Athena "only creates and operates on Iceberg v2 tables"'


def spec(table: str = "customers", **target) -> dict:
    return {
        "id": f"crm.{table}",
        "source": {"prefix": f"crm/public/{table}", "format": "parquet", "cdc": "dms"},
        "target": {"database": "crm", "table": table, **target},
        "keys": ["customer_id"],
    }


def lake(*specs):
    return parse_config({"tables": list(specs)}, origin="tables.yaml")


def test_a_new_table_is_format_2_unless_the_config_says_3():
    v2, v3 = lake(spec(), spec("orders", format_version=3)).tables
    assert v2.target.format_version == 2
    assert "'format-version'='2'" in table_layout_sql(v2, ["customer_id"])
    assert "'format-version'='3'" in table_layout_sql(v3, ["customer_id"])


def test_an_existing_table_is_never_given_a_format_version():
    """The properties set on an existing table before each batch leave its version alone, whatever the
    config says: an upgrade is one-way."""
    (v3,) = lake(spec(format_version=3, properties={"format-version": "3"})).tables
    assert "format-version" not in config_properties(v3)


def test_properties_cannot_say_another_version():
    with pytest.raises(ConfigError) as caught:
        lake(spec(properties={"format-version": "3"}))
    assert "properties format-version 3 disagrees with format_version 2" in str(caught.value)
    with pytest.raises(ConfigError, match="format_version"):
        lake(spec(format_version=4))


def test_format_3_is_refused_on_glue_5_1_and_allowed_on_6_x():
    tables = lake(spec(format_version=3)).tables
    assert format_version_problems(tables, runtimes.runtime("glue-5.1"), []) == [
        "table 'crm.customers' has target.format_version 3, which runtime glue-5.1 does not run (format 3 "
        "needs glue-6.0 or glue-6.1); keep it at 2 or change runtime"
    ]
    for name in ("glue-6.0", "glue-6.1"):
        assert format_version_problems(tables, runtimes.runtime(name), []) == []


def test_format_3_is_refused_to_an_athena_reader_unless_it_reads_with_spark():
    tables = lake(spec(format_version=3), spec("orders")).tables
    glue_6 = runtimes.runtime("glue-6.0")
    [problem] = format_version_problems(tables, glue_6, [Reader("analyst", ["crm.*"])])
    assert problem == (
        "table 'crm.customers' has target.format_version 3, and reader analyst reads crm.customers through "
        f"its Athena workgroup: {ATHENA}; keep the table at 2, or give the reader engines: [spark] (or "
        "another engine that reads format 3)"
    )
    assert format_version_problems(tables, glue_6, [Reader("etl", ["*"], ["spark"])]) == []
    assert format_version_problems(tables, glue_6, [Reader("bi", ["crm.orders"])]) == []  # a v2 table
    assert format_version_problems(tables, glue_6, [Reader("mixed", ["*"], ["spark", "Athena"])])


def stage_context(**settings) -> dict:
    context = copy.deepcopy(cdk_json_context())
    context["lakeloader:stages"]["dev"].update(settings)
    return context


def test_synth_refuses_the_same_in_one_line():
    tables = lake(spec(format_version=3))
    reader = {"role_arn": "arn:aws:iam::123456789012:role/analyst", "tables": ["crm.*"]}
    stage = resolve_stage(
        stage_context(runtime="glue-6.0", emr={"release_label": "emr-spark-8.1.0"}, readers=[reader])
    )
    with pytest.raises(SettingsError) as caught:
        check_format_versions(stage, tables)
    assert str(caught.value).startswith(
        "cdk.json context lakeloader:stages.dev: table 'crm.customers' has target.format_version 3, and "
        "reader analyst reads crm.customers through its Athena workgroup: "
    )
    assert "\n" not in str(caught.value)
    spark_reader = {**reader, "engines": ["spark"]}
    stage = resolve_stage(
        stage_context(runtime="glue-6.0", emr={"release_label": "emr-spark-8.1.0"}, readers=[spark_reader])
    )
    check_format_versions(stage, tables)


def test_lakeloader_tables_shows_the_version_and_refuses_on_the_stage(tmp_path, capsys):
    config = tmp_path / "tables.yaml"
    config.write_text(json.dumps({"tables": [spec(format_version=3)]}))
    cdk_json = tmp_path / "cdk.json"
    stages = {"dev": {"runtime": "glue-6.0", "readers": [{"role_arn": "arn:aws:iam::1:role/analyst"}]}}
    cdk_json.write_text(json.dumps({"context": {"lakeloader:stages": stages}}))
    assert cli.main(["tables", "--config", str(config)]) == 0
    assert "format_version=3" in capsys.readouterr().out
    code = cli.main(["tables", "--config", str(config), "--stage", "dev", "--cdk-json", str(cdk_json)])
    err = capsys.readouterr().err
    assert code != 0
    assert "stage dev: table 'crm.customers' has target.format_version 3, and reader analyst" in err
    assert ATHENA in err
    stages["dev"]["readers"][0]["engines"] = ["spark"]
    cdk_json.write_text(json.dumps({"context": {"lakeloader:stages": stages}}))
    assert cli.main(["tables", "--config", str(config), "--stage", "dev", "--cdk-json", str(cdk_json)]) == 0
