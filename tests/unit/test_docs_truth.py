"""What the README and docs/ show exists: every `lakeloader` command and flag (the CLI's argparse
parsers), every `python -m` module, every `make` target (the Makefile), every table config key (the
JSON Schema, config/tables.schema.json) and stage setting (infra.settings.StageSettings) named in a
code span or a code block; and every link of the README (not part of the docs site, whose own links
`make docs` checks) reaches a file and its heading. A failure names the file, the line and what it
names that does not exist. No Spark.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from lakeloader_dev.docs_site import REPO, _branches, cli_parsers, schema_keys, stage_schema, table_schema

DOCS = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").rglob("*.md"))]
FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*([\w-]*)")
SPAN = re.compile(r"(?<!`)`([^`]+)`(?!`)")
# `lakeloader VERB ...`, also `.venv/bin/lakeloader` and `lakeloader requeue|skip`; not lakeloader_dev,
# lakeloader-dev (a stack), lakeloader:project, lakeloader.cli or lakeloader/ (a path).
# A command where one starts (a span's or a line's start, after `$ `, `&&`, `;`, `(` or `$(`), so that a
# sentence quoted in a span ("runtime lakeloader runs on") is not read as one.
LAKELOADER = re.compile(
    r"(?:^\s*(?:\$\s+)?|&&\s*|;\s*|\(\s*)(?:\.venv/bin/)?lakeloader "
    r"((?:[a-z][a-z-]*)(?:\s*\\?\|\s*[a-z][a-z-]*)*)(.*)"
)
LOCAL = re.compile(r"python -m lakeloader_dev\.local ((?:[a-z]+)(?:\s*\\?\|\s*[a-z]+)*)(.*)")
PYTHON_MODULE = re.compile(r"python -m ([a-z_][\w.]*)")
MAKE = re.compile(r"(?<![\w-])make ((?:[a-z][\w-]*)(?:\s*\\?\|\s*[a-z][\w-]*)*)")
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")
# Where a command line ends: a comment, a chained or piped command (`| head`, not `\| --where`).
COMMAND_END = re.compile(r"\s#\s|&&|;|\$\(|\|\s*[a-z]|\s\d?>")
DOTTED_KEY = re.compile(r"[a-z_]+(?:\[\])?(?:\.[a-z_]+(?:\[\])?)+")
# Dotted names in the docs that share their first word with a config key but are not config keys:
# Debezium's event fields (`source.ts_ms` is what `add.fields=source.ts_ms` adds).
NOT_CONFIG = {
    "source.ts_ms",
    "source.lsn",
    "source.file",
    "source.pos",
    "source.row",
    "source.commit_lsn",
    "source.change_lsn",
    "source.event_serial_no",
    "source.sequence",
}


@dataclass(frozen=True)
class Snippet:
    """Code as the docs show it: one line of a code block, or one inline code span."""

    path: Path
    line: int
    text: str
    language: str | None  # a code block's language; None for an inline span

    def where(self) -> str:
        return f"{_shown(self.path)}:{self.line}"


def _shown(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def snippets(path: Path) -> Iterator[Snippet]:
    fence, language, paragraph = None, None, []  # paragraph: (line number, text); a span may wrap
    for number, line in enumerate([*path.read_text().splitlines(), ""], start=1):
        match = FENCE.match(line)
        if fence is None and (match or not line.strip()):
            yield from _spans(path, paragraph)
            paragraph = []
        if match and (fence is None or match.group(1)[0] == fence[0]):
            fence, language = (match.group(1), match.group(2)) if fence is None else (None, None)
        elif fence is not None:
            yield Snippet(path, number, line, language or "text")
        elif line.strip():
            paragraph.append((number, line))


def _spans(path: Path, paragraph: list[tuple[int, str]]) -> Iterator[Snippet]:
    text = "\n".join(line for _, line in paragraph)
    for span in SPAN.finditer(text):
        number = paragraph[text.count("\n", 0, span.start())][0]
        yield Snippet(path, number, " ".join(span.group(1).split()).replace("\\|", "|"), None)


def blocks(path: Path, languages: set[str]) -> Iterator[tuple[int, str]]:
    """Each code block in one of `languages`: its first line's number and its text."""
    lines = path.read_text().splitlines()
    start, language, body = None, None, []
    for number, line in enumerate(lines, start=1):
        match = FENCE.match(line)
        if match and start is None:
            start, language, body = number + 1, match.group(2), []
        elif match:
            if language in languages:
                yield start, "\n".join(body)
            start = None
        elif start is not None:
            body.append(line)


def all_snippets() -> list[Snippet]:
    return [snippet for path in DOCS for snippet in snippets(path)]


def _verbs(match: re.Match) -> list[str]:
    return [verb.strip() for verb in re.split(r"\\?\|", match.group(1))]


def _flags(rest: str) -> list[str]:
    end = COMMAND_END.search(rest)
    return FLAG.findall(rest[: end.start()] if end else rest)


def _options(parser) -> set[str]:
    return {option for action in parser._actions for option in action.option_strings}


def _subparsers(parser) -> dict:
    return next(a.choices for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")


def command_problems(found: list[Snippet]) -> list[str]:
    parsers = cli_parsers()
    verbs = _subparsers(parsers["lakeloader"])
    local = parsers["python -m lakeloader_dev.local"]
    actions = next(a.choices for a in local._actions if a.dest == "action")
    problems = []
    for snippet in found:
        for match in LAKELOADER.finditer(snippet.text):
            for verb in _verbs(match):
                if verb not in verbs:
                    problems.append(
                        f"{snippet.where()}: `lakeloader {verb}` is not a command "
                        f"(the CLI has: {', '.join(verbs)})"
                    )
                    continue
                for flag in _flags(match.group(2)):
                    if flag not in _options(verbs[verb]):
                        problems.append(
                            f"{snippet.where()}: `lakeloader {verb}` has no flag {flag} "
                            f"(it takes: {', '.join(sorted(_options(verbs[verb])))})"
                        )
        for match in LOCAL.finditer(snippet.text):
            problems += [
                f"{snippet.where()}: `python -m lakeloader_dev.local {action}` is not one of "
                f"{', '.join(actions)}"
                for action in _verbs(match)
                if action not in actions
            ]
            problems += [
                f"{snippet.where()}: `python -m lakeloader_dev.local` has no flag {flag}"
                for flag in _flags(match.group(2))
                if flag not in _options(local)
            ]
    return problems


def module_problems(found: list[Snippet]) -> list[str]:
    problems = []
    for snippet in found:
        for module in PYTHON_MODULE.findall(snippet.text):
            if module.split(".")[0] not in {"lakeloader", "lakeloader_dev", "benchmarks", "infra", "tests"}:
                continue  # pip, venv, pytest, mkdocs: not ours
            path = REPO.joinpath(*module.split("."))
            if not (path.with_suffix(".py").is_file() or (path / "__main__.py").is_file()):
                problems.append(f"{snippet.where()}: `python -m {module}`: no such module in the repository")
    return problems


def makefile_targets() -> set[str]:
    text = (REPO / "Makefile").read_text()
    return {
        target
        for line in re.findall(r"^([\w .-]+):(?!=)", text, flags=re.M)
        for target in line.split()
        if not target.startswith(".")
    }


def make_problems(found: list[Snippet]) -> list[str]:
    targets = makefile_targets()
    return [
        f"{snippet.where()}: `make {target}`: the Makefile has no target {target}"
        for snippet in found
        for match in MAKE.finditer(snippet.text)
        for target in _verbs(match)
        if target not in targets
    ]


def unknown_keys(schema: dict[str, Any], node: dict[str, Any], value: Any, path: str) -> list[str]:
    """The keys of `value` (and below) that `node` of `schema` does not allow, as dotted paths."""
    shapes = _branches(schema, node)
    if isinstance(value, list):
        items = [shape["items"] for shape in shapes if shape.get("type") == "array" and "items" in shape]
        return [
            bad
            for item in value
            for shape in items[:1]
            for bad in unknown_keys(schema, shape, item, path + "[]")
        ]
    if not isinstance(value, dict):
        return []
    objects = [shape for shape in shapes if shape.get("type") == "object" or "properties" in shape]
    if not objects:
        return []
    problems = []
    for key, child in value.items():
        holders = [shape for shape in objects if key in shape.get("properties", {})]
        free = [shape for shape in objects if shape.get("additionalProperties", not shape.get("properties"))]
        name = f"{path}.{key}" if path else str(key)
        if holders:
            problems += unknown_keys(schema, holders[0]["properties"][key], child, name)
        elif free:
            extra = free[0].get("additionalProperties")
            problems += unknown_keys(schema, extra, child, name + ".*") if isinstance(extra, dict) else []
        else:
            problems.append(name)
    return problems


def _table_node() -> dict[str, Any]:
    return table_schema()["$defs"]["TableConfig"]


def yaml_problems() -> list[str]:
    """Each YAML block that is table config (the whole file, a list of tables or a part of one table)
    holds only keys the JSON Schema has."""
    schema, table = table_schema(), _table_node()
    problems = []
    for path in DOCS:
        for line, text in blocks(path, {"yaml", "yml"}):
            try:
                value = yaml.safe_load(_dedented(text))
            except yaml.YAMLError as error:
                problems.append(
                    f"{path.relative_to(REPO)}:{line}: a YAML block that does not parse ({error})"
                )
                continue
            if isinstance(value, dict) and ("tables" in value or "sources" in value):  # a whole file
                bad = unknown_keys(schema, schema, value, "")
            elif isinstance(value, list | dict):
                bad = unknown_keys(schema, table, value if isinstance(value, dict) else value[0], "tables[]")
            else:
                bad = []
            problems += [
                f"{path.relative_to(REPO)}:{line + _line_of(text, key)}: a YAML block names the config key "
                f"{key}, which the schema has not"
                for key in bad
            ]
    return problems


def _line_of(text: str, key: str) -> int:
    """Where in a block its key `a.b.c` is spelt (the first line holding `c:`), counted from 0."""
    name = key.rsplit(".", 1)[-1].removesuffix("[]")
    lines = text.splitlines()
    return next(
        (n for n, line in enumerate(lines) if re.search(rf"(?<![\w.])\"?{re.escape(name)}\"?\s*:", line)), 0
    )


def _dedented(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    indent = min((len(line) - len(line.lstrip()) for line in lines), default=0)
    return "\n".join(line[indent:] for line in text.splitlines())


def stage_json_problems() -> list[str]:
    """Each JSON block of stage settings (cdk.json's `lakeloader:stages`, or a stage's keys) holds only
    settings the stage's model has. A fragment that is no JSON object (`...` standing for the rest) is
    read with those lines left out."""
    schema = stage_schema()
    problems = []
    for path in DOCS:
        for line, text in blocks(path, {"json", "jsonc"}):
            value = _json_object(text)
            if not isinstance(value, dict):
                continue
            stages = _stages(value, set(schema["properties"]))
            for name, stage in stages.items():
                if isinstance(stage, dict) and set(stage) != {"..."}:
                    bad = unknown_keys(schema, schema, stage, name)
                    problems += [
                        f"{path.relative_to(REPO)}:{line + _line_of(text, key)}: a JSON block names the "
                        f"stage setting {key}, which infra.settings.StageSettings has not"
                        for key in bad
                    ]
    return problems


def _stages(value: dict[str, Any], settings: set[str]) -> dict[str, Any]:
    """The stages a JSON block shows: cdk.json's `lakeloader:stages`, `{"dev": {...}}`, or one stage's
    keys (`{"readers": [...]}`); none when it is something else (an IAM policy, a DMS rule)."""
    if "lakeloader:stages" in value:
        return value["lakeloader:stages"]
    if set(value) & settings:
        return {"": value}
    return {name: stage for name, stage in value.items() if isinstance(stage, dict) and set(stage) & settings}


def _json_object(text: str) -> Any:
    lines = [re.sub(r"\s//.*$", "", line) for line in text.splitlines() if not line.strip().startswith("//")]
    lines = [line for line in lines if line.strip() not in {"...", "...,"}]
    body = "\n".join(lines).strip().rstrip(",")
    for candidate in (body, "{" + body + "}"):
        try:
            return json.loads(re.sub(r",(\s*[}\]])", r"\1", candidate))
        except json.JSONDecodeError:
            continue
    return None


def _names_code(name: str) -> bool:
    """`trigger.summary`, `tombstones.lookup`: a module of lakeloader/ or infra/ and a module or a
    function in it, not a config key; `maintenance.py`, `tables.yaml`: a file."""
    if re.search(r"\.(py|ya?ml|json|md|txt|toml|csv|parquet)$", name):
        return True
    first, second = name.split(".")[:2]
    for package in ("lakeloader", "infra"):
        for module in (REPO / package).rglob(f"{first}*"):
            if module.is_dir() and (module / f"{second}.py").is_file():
                return True
            if module.name == f"{first}.py" and re.search(
                rf"^(?:def|class) {re.escape(second)}\b|^{re.escape(second)} =",
                module.read_text(),
                flags=re.M,
            ):
                return True
    return False


def dotted_key_problems(found: list[Snippet]) -> list[str]:
    """An inline span that is a dotted config path (`trigger.max_files_per_run`, `tables[].id`,
    `s3_tables.unreferenced_days`) names a key of the table config or of a stage."""
    table_keys = set(schema_keys(table_schema()))
    stage_keys = set(schema_keys(stage_schema()))
    table_level = {key.split(".")[1] for key in table_keys if key.startswith("tables[].")}
    roots = {key.split(".")[0].removesuffix("[]") for key in table_keys | stage_keys} | table_level
    problems = []
    for snippet in found:
        if snippet.language is not None or not DOTTED_KEY.fullmatch(snippet.text):
            continue
        if snippet.text in NOT_CONFIG or snippet.text.split(".")[0].removesuffix("[]") not in roots:
            continue
        known = {snippet.text, f"tables[].{snippet.text}"} & table_keys or {snippet.text} & stage_keys
        below = any(key.startswith(f"{snippet.text}.") for key in table_keys | stage_keys)
        if not known and not below and not _names_code(snippet.text):
            problems.append(
                f"{snippet.where()}: `{snippet.text}` is no key of the table config nor of a stage"
            )
    return problems


def inline_json_problems(found: list[Snippet]) -> list[str]:
    """An inline span that is a JSON object of settings (`{"vpc_id": ..., "subnets": [...]}`: one of its
    keys is a key of the table config or of a stage) names only such keys."""
    names = {
        segment.removesuffix("[]")
        for key in schema_keys(table_schema()) | schema_keys(stage_schema())
        for segment in key.split(".")
    }
    problems = []
    for snippet in found:
        if snippet.language is not None or not snippet.text.startswith('{"'):
            continue
        value = _json_object(snippet.text)
        if not isinstance(value, dict) or not set(value) & names:
            continue  # something else: an event, a map of the user's own names
        problems += [
            f"{snippet.where()}: `{snippet.text}` names {key}, no key of the table config nor of a stage"
            for key in sorted(set(value) - names)
        ]
    return problems


def github_slug(heading: str) -> str:
    text = re.sub(r"<[^>]*>", "", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def headings(path: Path) -> set[str]:
    fence, slugs = False, set()
    for line in path.read_text().splitlines():
        if FENCE.match(line):
            fence = not fence
        elif not fence and (match := re.match(r"#{1,6} (.+)", line)):
            slugs.add(github_slug(match.group(1)))
    return slugs


def readme_link_problems() -> list[str]:
    readme = REPO / "README.md"
    problems = []
    for number, line in enumerate(readme.read_text().splitlines(), start=1):
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            if re.match(r"^[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            path = (readme.parent / file) if file else readme
            if not path.exists():
                problems.append(f"README.md:{number}: the link {target} reaches no file")
            elif anchor and path.suffix == ".md" and anchor not in headings(path):
                problems.append(
                    f"README.md:{number}: the link {target}: {file or 'README.md'} has no such heading"
                )
    return problems


def _report(problems: list[str]) -> str:
    return f"{len(problems)} thing(s) the docs show that do not exist:\n" + "\n".join(problems)


# What each check reads: the snippets of every page, or (the blocks' and the links' checks) the pages.
CHECKS = {
    "every lakeloader command and flag exists": lambda: command_problems(all_snippets()),
    "every python -m module exists": lambda: module_problems(all_snippets()),
    "every make target exists": lambda: make_problems(all_snippets()),
    "every YAML block's config key is in the schema": yaml_problems,
    "every JSON block's stage setting is in the stage model": stage_json_problems,
    "every dotted config key exists": lambda: dotted_key_problems(all_snippets()),
    "every inline JSON object of settings names known keys": lambda: inline_json_problems(all_snippets()),
    "the README's links reach a file and its heading": readme_link_problems,
}


@pytest.mark.parametrize("check", CHECKS)
def test_what_the_docs_show_exists(check):
    problems = CHECKS[check]()
    assert not problems, _report(problems)


def test_a_renamed_flag_a_missing_target_and_an_unknown_key_are_each_named_with_their_line(tmp_path):
    """The checks above on a page written to fail them: each problem comes back with its line."""
    page = tmp_path / "page.md"
    page.write_text(
        "Run `lakeloader run --config x.yaml --tabel crm.customers`.\n"
        "```bash\nmake tset\nlakeloader sqll --config x.yaml\n```\n"
        "Set `trigger.max_file_per_run`.\n"
    )
    found = list(snippets(page))
    assert command_problems(found) == [
        f"{found[0].where()}: `lakeloader run` has no flag --tabel (it takes: "
        + ", ".join(sorted(_options(_subparsers(cli_parsers()["lakeloader"])["run"])))
        + ")",
        f"{found[2].where()}: `lakeloader sqll` is not a command (the CLI has: "
        + ", ".join(_subparsers(cli_parsers()["lakeloader"]))
        + ")",
    ]
    assert make_problems(found) == [f"{found[1].where()}: `make tset`: the Makefile has no target tset"]
    assert dotted_key_problems(found) == [
        f"{found[3].where()}: `trigger.max_file_per_run` is no key of the table config nor of a stage"
    ]
    assert unknown_keys(
        table_schema(), _table_node(), {"source": {"cdc": "dms", "prefx": "a/"}}, "tables[]"
    ) == ["tables[].source.prefx"]


def test_the_readme_stays_a_front_door():
    """At most 250 lines, no dated log (two dates at most) and no commit hash: measurements live in
    docs/development.md and benchmarks/RESULTS.md (CONTRIBUTING.md: where figures go)."""
    text = (REPO / "README.md").read_text()
    dates = re.findall(r"20\d{2}-\d{2}-\d{2}", text)
    hashes = re.findall(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b", text)
    assert len(text.splitlines()) <= 250
    assert len(dates) <= 2, dates
    assert not hashes, hashes
