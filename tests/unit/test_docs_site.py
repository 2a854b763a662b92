"""The docs site's generated pages (lakeloader_dev/docs_site.py, run by `make docs`): every key of the
table config and of a stage, and every flag of every command, reaches its reference page; a link that
leaves docs/ for a page the site publishes is pointed at that page. No Spark, no mkdocs build (make docs
builds the site, strict)."""

from __future__ import annotations

import json

from lakeloader_dev import docs_site


def test_every_config_key_and_stage_setting_is_on_the_configuration_page():
    page = docs_site.configuration_page()
    for schema in (docs_site.table_schema(), docs_site.stage_schema()):
        for path in docs_site.schema_keys(schema):
            assert f"`{path}`" in page
        for model in [schema, *schema["$defs"].values()]:
            for name, field in model.get("properties", {}).items():
                assert f"| `{name}` |" in page
                assert " ".join(field.get("description", "").split()).replace("|", "\\|") in page


def test_a_field_added_to_the_schema_shows_up_without_a_hand_edit(monkeypatch):
    schema = json.loads(docs_site.TABLE_SCHEMA.read_text())
    schema["$defs"]["Target"]["properties"]["shelf_life_days"] = {
        "type": "integer",
        "default": 30,
        "description": "How long.",
    }
    monkeypatch.setattr(docs_site, "table_schema", lambda: schema)
    page = docs_site.configuration_page()
    assert "`tables[].target.shelf_life_days`" in page
    assert "| `shelf_life_days` | integer | `30` | How long. |" in page


def test_every_command_and_flag_is_on_the_cli_page():
    page = docs_site.cli_page()
    rows = [line for line in page.splitlines() if line.startswith("| `-")]  # the options' tables
    for program, parser in docs_site.cli_parsers().items():
        commands = docs_site._subcommands(parser) or {program: parser}
        for name, command in commands.items():
            assert f"## {program if command is parser else f'{program} {name}'}\n" in page
            for action in command._actions:
                for option in action.option_strings:
                    if option not in ("-h", "--help"):
                        assert any(f"`{option}" in row or f", {option}" in row for row in rows), (
                            name,
                            option,
                        )


def test_a_link_out_of_docs_to_a_published_page_points_at_its_page_in_the_site():
    assert docs_site.site_link("deploy.md", "../benchmarks/RESULTS.md#cost") == "benchmarks/RESULTS.md#cost"
    assert docs_site.site_link("reference/cli.md", "../../CHANGELOG.md") == "../CHANGELOG.md"
    assert docs_site.site_link("CONTRIBUTING.md", "docs/development.md#x") == "development.md#x"
    assert docs_site.site_link("benchmarks/RESULTS.md", "../docs/performance.md") == "../performance.md"
    # left for mkdocs to check (and fail, when they reach nothing it builds)
    assert docs_site.site_link("sources.md", "../README.md#a") == "../README.md#a"
    assert docs_site.site_link("sources.md", "operate.md#a") == "operate.md#a"
    assert docs_site.site_link("sources.md", "https://example.com/x.md") == "https://example.com/x.md"
