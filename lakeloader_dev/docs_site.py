"""The docs site's pages that come from the code (mkdocs.yml names this module under `hooks:`).

At every `make docs` the configuration reference is rendered from config/tables.schema.json and the
stage settings' models (infra.settings.StageSettings), and the CLI reference from the argparse parsers
(lakeloader.cli, lakeloader_dev.local): nothing generated is committed, so nothing can drift. The
repository pages the docs link to (CONTRIBUTING.md, CHANGELOG.md, benchmarks/RESULTS.md) are published
beside them, and a link that leaves docs/ for one of them is pointed at its page in the site, so
mkdocs' strict link and anchor checks cover those links too.

The key walk (`schema_keys`) is shared with tests/unit/test_docs_truth.py, which checks that every key
the docs show exists.
"""

from __future__ import annotations

import argparse
import functools
import json
import posixpath
import re
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TABLE_SCHEMA = REPO / "config" / "tables.schema.json"
# Repository pages outside docs/ that the site publishes under the same path.
PUBLISHED = ("CONTRIBUTING.md", "CHANGELOG.md", "benchmarks/RESULTS.md")
CONFIGURATION_PAGE = "reference/configuration.md"
CLI_PAGE = "reference/cli.md"
BOUNDS = {
    "minimum": "≥",
    "exclusiveMinimum": ">",
    "maximum": "≤",
    "exclusiveMaximum": "<",
    "pattern": "matching",
}
LINK = re.compile(r"(\]\()([^)\s]+)(\))")


@functools.cache
def table_schema() -> dict[str, Any]:
    return json.loads(TABLE_SCHEMA.read_text())


@functools.cache
def stage_schema() -> dict[str, Any]:
    from infra.settings import StageSettings

    return StageSettings.model_json_schema()


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = schema["$defs"][node["$ref"].rsplit("/", 1)[1]]
    return node


def _branches(schema: dict[str, Any], node: dict[str, Any]) -> list[dict[str, Any]]:
    """A field's possible shapes: the members of an anyOf (a `| None`, a union of rules), resolved."""
    node = _resolve(schema, node)
    if "anyOf" in node or "oneOf" in node:
        return [b for member in node.get("anyOf", node.get("oneOf")) for b in _branches(schema, member)]
    return [node]


def schema_keys(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every key path a document under `schema` may hold -> its field's schema: `tables[].source.cdc`,
    `trigger.max_files_per_run` below a table, `readers[].role_arn` below a stage. A list of objects
    adds `[]`, a map of objects (`{source: ...}`) a `*` segment."""
    keys: dict[str, dict[str, Any]] = {}

    def walk(node: dict[str, Any], prefix: str, seen: tuple[int, ...]) -> None:
        for branch in _branches(schema, node):
            if id(branch) in seen:
                continue
            if branch.get("type") == "array" and "items" in branch:
                walk(branch["items"], prefix + "[]", seen + (id(branch),))
            for name, field in branch.get("properties", {}).items():
                path = f"{prefix}.{name}" if prefix else name
                keys.setdefault(path, field)
                walk(field, path, seen + (id(branch),))
            if isinstance(branch.get("additionalProperties"), dict):
                walk(branch["additionalProperties"], f"{prefix}.*" if prefix else "*", seen + (id(branch),))

    walk(schema, "", ())
    return keys


# --- the configuration reference ---------------------------------------------------------------------


def _anchor(schema: dict[str, Any], model: str) -> str:
    """A model's anchor on the page, apart for the two schemas (a model name may come in both)."""
    return f"{'stage' if schema is stage_schema() else 'config'}-{model.lower()}"


def _type(schema: dict[str, Any], node: dict[str, Any]) -> str:
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[1]
        return f"[{name}](#{_anchor(schema, name)})"
    if "anyOf" in node or "oneOf" in node:
        return " or ".join(_type(schema, member) for member in node.get("anyOf", node.get("oneOf")))
    if "enum" in node:
        return " \\| ".join(f"`{json.dumps(value)}`" for value in node["enum"])
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    kind = node.get("type", "any")
    bounds = [f"{sign} {node[key]}" for key, sign in BOUNDS.items() if key in node]
    if bounds:
        return f"{kind} ({', '.join(bounds)})"
    if kind == "array":
        return f"list of {_type(schema, node.get('items', {}))}"
    if kind == "object" and isinstance(node.get("additionalProperties"), dict):
        return f"map of string to {_type(schema, node['additionalProperties'])}"
    return str(kind)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _model_table(schema: dict[str, Any], model: dict[str, Any]) -> list[str]:
    required = set(model.get("required", ()))
    lines = ["| key | type | default | meaning |", "| --- | --- | --- | --- |"]
    for name, field in model.get("properties", {}).items():
        default = "required" if name in required else f"`{json.dumps(field.get('default'))}`"
        if "default" not in field and name not in required:
            default = "built by the model"
        meaning = _cell(field.get("description", ""))
        lines.append(f"| `{name}` | {_type(schema, field)} | {_cell(default)} | {meaning} |")
    return lines


def _models_section(schema: dict[str, Any], root_title: str, level: str) -> list[str]:
    lines = [f"{level} {root_title}", "", _cell(schema.get("description", "")), ""]
    lines += _model_table(schema, schema) + [""]
    for name, model in sorted(schema.get("$defs", {}).items()):
        lines += [f"{level}# {name} {{#{_anchor(schema, name)}}}", ""]
        if model.get("description"):
            lines += [model["description"].strip(), ""]
        if "properties" in model:
            lines += _model_table(schema, model) + [""]
        else:
            lines += [f"One of: {_type(schema, model)}.", ""]
    return lines


def configuration_page() -> str:
    tables = table_schema()
    stage = stage_schema()
    lines = [
        "# Configuration reference",
        "",
        "Generated when the site is built, from `config/tables.schema.json` (the table configuration, "
        "`python -m lakeloader.config` writes it from the models in `lakeloader/config/`) and from the "
        "stage settings' models in `infra/settings*.py` (a stage under `lakeloader:stages` in `cdk.json`). "
        "A key this page does not list is refused: by `cdk synth`, `lakeloader tables` and every run for "
        "the table configuration, by `cdk synth` for a stage. The guide with examples: "
        "[configuration](../configuration.md).",
        "",
        "## Every key of the table configuration",
        "",
        "The dotted path of each key (`tables[]` is one table of the list).",
        "",
    ]
    lines += [", ".join(f"`{path}`" for path in schema_keys(tables))]
    lines += [""] + _models_section(tables, "The table configuration (`config/tables.yaml`)", "##")
    lines += ["## Every key of a stage's settings", ""]
    lines += [", ".join(f"`{path}`" for path in schema_keys(stage))]
    lines += [""] + _models_section(stage, "Stage settings (`cdk.json`, `lakeloader:stages.<stage>`)", "##")
    return "\n".join(lines) + "\n"


# --- the CLI reference -------------------------------------------------------------------------------


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(parser.prog, width=100)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, prefix="")
    return formatter.format_help().strip()


def _options(parser: argparse.ArgumentParser) -> list[str]:
    lines = ["| argument | meaning | default |", "| --- | --- | --- |"]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        name = ", ".join(action.option_strings) or action.dest
        if action.option_strings and action.nargs != 0:
            name += f" {action.metavar or action.dest.upper()}"
        meaning = action.help or ""
        if action.choices:
            meaning += f" (one of: {', '.join(map(str, action.choices))})"
        if action.required and action.option_strings:
            meaning += " (required)"
        default = "" if action.default in (None, False, "", argparse.SUPPRESS) else f"`{action.default}`"
        lines.append(f"| `{_cell(name)}` | {_cell(meaning)} | {_cell(default)} |")
    return lines


def _command(parser: argparse.ArgumentParser, title: str) -> list[str]:
    lines = [f"## {title}", "", "```text", _usage(parser), "```", ""]
    if parser.description:
        lines += (
            ["```text", parser.description.strip(), "```", ""]
            if "\n" in parser.description
            else [
                _cell(parser.description),
                "",
            ]
        )
    return lines + _options(parser) + [""]


def cli_parsers() -> dict[str, argparse.ArgumentParser]:
    """The command lines the docs may show: `lakeloader` and its verbs, and the local emulator's."""
    from lakeloader.cli import build_parser
    from lakeloader_dev.local import build_parser as local_parser

    return {"lakeloader": build_parser(), "python -m lakeloader_dev.local": local_parser()}


def cli_page() -> str:
    parsers = cli_parsers()
    lakeloader = parsers["lakeloader"]
    verbs = _subcommands(lakeloader)
    lines = [
        "# CLI reference",
        "",
        "Generated when the site is built, from the argparse parsers (`lakeloader/cli/`, "
        "`lakeloader_dev/local.py`); `lakeloader COMMAND --help` prints the same. Exit codes: `0` "
        "success, `1` a table failed (`status`: a table is stuck; `reconcile`: the table differs), `2` a "
        "usage or configuration error, `141` the output's reader stopped early. How the commands fit "
        "together: [using lakeloader](../usage.md).",
        "",
        "| command | what it does |",
        "| --- | --- |",
    ]
    summaries = {
        choice.dest: choice.help
        for action in lakeloader._actions
        if isinstance(action, argparse._SubParsersAction)
        for choice in action._choices_actions
    }
    for name in verbs:
        lines.append(f"| [`lakeloader {name}`](#lakeloader-{name}) | {_cell(summaries.get(name) or '')} |")
    lines += [""]
    lines += _command(lakeloader, "lakeloader")
    for name, verb in verbs.items():
        lines += _command(verb, f"lakeloader {name}")
    lines += _command(parsers["python -m lakeloader_dev.local"], "python -m lakeloader_dev.local")
    return "\n".join(lines) + "\n"


# --- mkdocs hooks ------------------------------------------------------------------------------------


def on_files(files, config):
    from mkdocs.structure.files import File

    files.append(File.generated(config, CONFIGURATION_PAGE, content=configuration_page()))
    files.append(File.generated(config, CLI_PAGE, content=cli_page()))
    for path in PUBLISHED:
        files.append(File.generated(config, path, abs_src_path=str(REPO / path)))
    return files


def site_link(page_uri: str, target: str) -> str:
    """A link as written in the repository, made to work in the site: one that leaves docs/ for a
    published page points at its copy; any other link is left for mkdocs to check."""
    if re.match(r"^[a-z]+:|^#|^/", target):
        return target
    path, _, anchor = target.partition("#")
    page_dir = posixpath.dirname(page_uri if page_uri in PUBLISHED else f"docs/{page_uri}")
    in_repo = posixpath.normpath(posixpath.join(page_dir, path))
    if in_repo in PUBLISHED:
        site_path = in_repo
    elif in_repo.startswith("docs/") and page_uri in PUBLISHED:
        site_path = in_repo.removeprefix("docs/")
    else:
        return target
    relative = posixpath.relpath(site_path, posixpath.dirname(page_uri) or ".")
    return relative + (f"#{anchor}" if anchor else "")


def on_page_markdown(markdown, page, config, files):
    return LINK.sub(lambda m: m.group(1) + site_link(page.file.src_uri, m.group(2)) + m.group(3), markdown)
