"""The `lakeloader` command line: run, sql, tables, erase, maintain, rebuild, reconcile on a config file;
status, requeue, skip, backfill, rebuild, reconcile on a deployed stage (lakeloader.cli.stage_verbs;
reconcile, in both forms, is lakeloader.cli.reconcile_verb).

Exit codes: 0 success, 1 a table failed (status: a table is stuck), 2 a usage or configuration error,
141 the output's reader went away (`lakeloader ... | head`), as for any Unix tool SIGPIPE ends.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import sys
from pathlib import Path
from typing import Any

from lakeloader.cli import reconcile_verb, stage_verbs
from lakeloader.cli.session import configure, json_default, lineage_log, spark_session
from lakeloader.config import ConfigError, LakeConfig
from lakeloader.config.sources import Discovery, discover, raw_keys
from lakeloader.control import runtimes
from lakeloader.spark.errors import LakeloaderError

DESCRIPTION = """\
lakeloader merges raw files (full loads and change-data-capture batches from
AWS DMS, Debezium or any exporter) into Apache Iceberg tables, as one config
file describes them. Locally it runs on PySpark with an Iceberg warehouse on
disk; the same code runs on AWS Glue and EMR Serverless.

examples:
  lakeloader tables --config config/tables.yaml
  lakeloader discover --config config/tables.yaml --source crm   # what a sources: entry would load
  lakeloader run    --config config/tables.yaml
  lakeloader run    --config config/tables.yaml --table crm.customers --input examples/raw/crm
  lakeloader sql    --config config/tables.yaml "SELECT * FROM crm.customers ORDER BY customer_id"
  lakeloader erase  --config config/tables.yaml --table crm.customers --key 42
  lakeloader maintain --config config/tables.yaml --table crm.customers
  lakeloader rebuild  --config config/tables.yaml --table crm.customers
  lakeloader reconcile --config config/tables.yaml --table crm.customers --snapshot s3://exports/customers/

a deployed stage (its stack's outputs; no Spark):
  lakeloader status   --stage prod
  lakeloader requeue  --stage prod --table crm.customers --reason "file fixed upstream"
  lakeloader skip     --stage prod --table crm.customers --key raw/key.csv --reason "test data"
  lakeloader backfill --stage prod --since 2026-01-01
  lakeloader rebuild  --stage prod --table crm.customers
  lakeloader reconcile --stage prod --table crm.customers --snapshot s3://exports/customers/ --repair
  lakeloader verify   --stage prod   # after cdk deploy: a canary file through every hop
"""


def _add_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, metavar="FILE", help="table configuration (YAML)")
    parser.add_argument("--warehouse", help="override the config's warehouse (folder or s3:// URI)")
    parser.add_argument(
        "--database-prefix",
        default="",
        metavar="PREFIX",
        help="a deployed stage's Glue database prefix (stack output GlueDatabasePrefix, "
        "e.g. lakeloader_dev_), for runs against its s3:// warehouse",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lakeloader", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser(
        "run",
        help="merge new raw files into their Iceberg tables",
        description="Merge every new raw file of the selected tables (default: all enabled tables) into "
        "Iceberg. Files an earlier commit consumed are skipped, so a re-run is safe. Ends with a "
        "summary table; exits 1 when any table failed (the others are still committed).",
    )
    _add_config(run)
    run.add_argument("--table", action="append", metavar="ID", help="only this table (repeatable)")
    run.add_argument(
        "--input",
        action="append",
        metavar="PATH",
        help="load these files or folders instead of scanning raw_root (repeatable); each is matched to a "
        "table by source.prefix",
    )
    run.add_argument("--raw-root", help="override the config's raw_root (folder or s3:// URI)")
    run.add_argument(
        "--skip",
        action="append",
        metavar="FILE",
        help="give up on this raw file for good (repeatable; needs --reason): kept in the input log with "
        "the reason, never loaded again; a new version of it (changed size or time) is a new file",
    )
    run.add_argument("--reason", metavar="TEXT", help="why the --skip files are given up")
    run.add_argument(
        "--lineage-file",
        metavar="PATH",
        help="append each table's OpenLineage events (START, then COMPLETE or FAIL) to this JSON-lines "
        "file; default: the config's lineage.file, else none (docs/operate.md#lineage)",
    )

    sql = commands.add_parser(
        "sql",
        help="run a SQL query, print one JSON object per row",
        description="Run Spark SQL against the warehouse. Tables are addressed as database.table; "
        "Iceberg metadata tables work too (crm.customers.snapshots), and time travel "
        "(SELECT ... FROM crm.customers TIMESTAMP AS OF '2026-01-01 00:00:00').",
    )
    _add_config(sql)
    sql.add_argument("query", help="the SQL statement")

    tables = commands.add_parser(
        "tables",
        help="validate the config and list its tables",
        description="Validate the config and list tables.",
    )
    tables.add_argument("--config", required=True, metavar="FILE", help="table configuration (YAML)")
    tables.add_argument("--json", action="store_true", help="print the validated config as JSON")
    tables.add_argument(
        "--stage",
        metavar="NAME",
        help="also check the tables against a stage of cdk.json (--cdk-json): a format-3 table needs a "
        "runtime that runs format 3 and no reader that queries it through Athena (as cdk synth checks)",
    )
    tables.add_argument("--cdk-json", default="cdk.json", metavar="FILE", help="default ./cdk.json")

    discover_verb = commands.add_parser(
        "discover",
        help="list the tables a source's raw prefix holds today (a dry run, no Spark)",
        description="List the tables the raw files under one sources: entry name today: each table's id, "
        "folder, file count and keys, and the tables held (no keys known) with the line that releases "
        "them. Nothing is written.",
    )
    discover_verb.add_argument("--config", required=True, metavar="FILE", help="table configuration (YAML)")
    discover_verb.add_argument("--source", required=True, metavar="ID", help="the sources: entry's id")
    discover_verb.add_argument("--raw-root", help="override the config's raw_root (folder or s3:// URI)")

    erase = commands.add_parser(
        "erase",
        help="GDPR erasure: delete a data subject's rows and purge them from history",
        description="Delete the rows of one table matching the given keys (or --where), rewrite the files "
        "still holding them, expire every older snapshot, remove orphan files, and verify that no snapshot "
        "reachable by time travel returns them. Prints what was removed and appends an audit record (who, "
        "when, table, row count, a SHA-256 of the predicate -- not the values) to "
        "lakeloader_audit.erasures. Run it while no writer loads the table.",
    )
    _add_config(erase)
    erase.add_argument("--table", required=True, metavar="ID", help="the table id")
    subject = erase.add_mutually_exclusive_group(required=True)
    subject.add_argument(
        "--key",
        action="append",
        metavar="VALUE",
        help="a subject's key (repeatable): 42 or id=42; composite keys as order_id=1,line_no=2 "
        "(a negative number: --key=-5)",
    )
    subject.add_argument("--where", metavar="SQL", help="a Spark SQL predicate selecting the rows to erase")

    maintain = commands.add_parser(
        "maintain",
        help="compact, rewrite delete files and manifests, expire snapshots, remove orphan files",
        description="Run each selected table's maintenance (default: all enabled tables) as its "
        "maintenance: config says. Commit conflicts with concurrent writers are retried with backoff. "
        "Ends with a summary table; exits 1 when any table's maintenance failed.",
    )
    _add_config(maintain)
    maintain.add_argument("--table", action="append", metavar="ID", help="only this table (repeatable)")
    rebuild = commands.add_parser(
        "rebuild",
        help="build a table again from every raw file (after a keys, mode or partitioning change)",
        description="Build the table again from every raw file still under its prefix, with the config as it "
        "is now, into a staging table; then replace the table with it in one commit. Until that commit "
        "the table keeps its rows; a rebuild that fails leaves it as it was. The loaded files become the "
        "table's only consumed files (input log, or the stage's ledger), and its tombstones are the "
        "rebuild's. Refused while erasures of the table are on record (the raw zone may still hold "
        "those subjects) unless --raw-zone-erased. With --stage, the stage's raw objects the ledger has "
        "not seen are recorded first and the rebuild runs as the table's job run.",
    )
    where = rebuild.add_mutually_exclusive_group(required=True)
    where.add_argument("--config", metavar="FILE", help="table configuration (YAML): rebuild here, on Spark")
    where.add_argument("--stage", metavar="NAME", help="a deployed stage: rebuild in its job")
    rebuild.add_argument("--table", required=True, metavar="ID", help="the table id")
    rebuild.add_argument("--warehouse", help="with --config: override the config's warehouse")
    rebuild.add_argument(
        "--project", default="lakeloader", metavar="NAME", help="with --stage: cdk.json lakeloader:project"
    )
    rebuild.add_argument(
        "--raw-zone-erased",
        action="store_true",
        help="the subjects of the table's recorded erasures are gone from the raw files too",
    )
    reconcile_verb.add_command(commands)
    stage_verbs.add_commands(commands)
    return parser


def _row_to_json(row: Any) -> str:
    return json.dumps(row.asDict(recursive=True), default=json_default, sort_keys=False)


def _cmd_tables(config: LakeConfig, args: argparse.Namespace) -> int:
    if args.stage:
        _check_stage_formats(config, Path(args.cdk_json), args.stage)
    if args.json:
        print(json.dumps(config.model_dump(mode="json", by_alias=True), indent=2))
        return 0
    print(f"raw_root: {config.raw_root}\nwarehouse: {config.warehouse}")
    found = {t.id for t in args.discovery.found}
    for table in config.tables:
        state = ("" if table.enabled else " (disabled)") + (" (found)" if table.id in found else "")
        print(
            f"- {table.id}{state}: {table.source.prefix} ({table.source.format}, cdc {table.source.cdc}) -> "
            f"{table.qualified_target} keys={table.keys} mode={table.mode} "
            f"schema_evolution={table.schema_evolution} format_version={table.target.format_version}"
        )
    _print_held(args.discovery)
    return 0


def _print_held(discovery: Discovery) -> None:
    for held in discovery.held:
        print(f"! {held.hint}")


def _cmd_discover(config: LakeConfig, args: argparse.Namespace) -> int:
    source = next((s for s in config.sources if s.id == args.source), None)
    if source is None:
        known = ", ".join(s.id for s in config.sources) or "none"
        raise ConfigError(f"unknown source {args.source!r}; the config's sources: {known}")
    discovery = discover([source], config.tables, raw_keys(config.raw_root, [source]))
    print(f"source {source.id}: {config.raw_root.rstrip('/')}/{source.prefix} (layout {source.layout})")
    for table in discovery.found:
        print(
            f"- {table.id}: {table.source.prefix} {discovery.files[table.id]} file(s) -> "
            f"{table.qualified_target} keys={table.keys} mode={table.mode}"
        )
    _print_held(discovery)
    print(f"{len(discovery.found)} table(s) to load, {len(discovery.held)} held")
    return 0


def _check_stage_formats(config: LakeConfig, cdk_json: Path, stage: str) -> None:
    """What `cdk synth` refuses of the tables' format versions on `stage` (its runtime and readers, as
    cdk.json gives them), refused here in the same words."""
    from lakeloader.config.format_versions import DEFAULT_ENGINES, Reader, format_version_problems

    try:
        settings = json.loads(cdk_json.read_text())["context"]["lakeloader:stages"][stage]
    except (OSError, ValueError, KeyError) as exc:
        problem = f"{cdk_json}: no stage {stage!r} in context lakeloader:stages ({exc!r})"
        raise LakeloaderError(problem) from None
    readers = [
        Reader(
            str(r["role_arn"]).rsplit("/", 1)[-1],
            r.get("tables", ["*"]),
            r.get("engines", DEFAULT_ENGINES),
        )
        for r in settings.get("readers", [])
    ]
    runtime = runtimes.runtime(settings.get("runtime", runtimes.DEFAULT_RUNTIME))
    problems = format_version_problems(config.tables, runtime, readers)
    if problems:
        raise LakeloaderError(f"{cdk_json} stage {stage}: {problems[0]}")


def _cmd_run(config: LakeConfig, args: argparse.Namespace) -> int:
    from lakeloader.control.contract import new_run_id
    from lakeloader.jobs.load import assign_inputs, run_tables, skip_files, summary_table
    from lakeloader.spark.progress import stderr_progress

    if args.skip and not args.reason:
        raise LakeloaderError("--skip needs --reason TEXT: the input log keeps why a file was given up")
    tables = config.select(args.table)
    skips = assign_inputs(config, tables, args.skip) if args.skip else {}
    inputs = assign_inputs(config, tables, args.input)
    run_id = new_run_id()
    total = sum(len(files) for files in inputs.values())
    stderr_progress(f"run {run_id}: {len(tables)} table(s), {total} raw file(s) found; starting Spark")
    spark, catalog = spark_session(config, f"lakeloader-run-{run_id}")
    for table_id, files in skips.items():
        if files:
            skip_files(spark, catalog, table_id, files, run_id, args.reason, stderr_progress)
    results = run_tables(
        spark,
        tables,
        inputs,
        catalog=catalog,
        run_id=run_id,
        log_consumed=True,
        lineage=lineage_log(config, args.lineage_file),
    )
    print(summary_table(results))
    _print_held(args.discovery)
    return 1 if any(r.status == "failed" for r in results) else 0


def _cmd_sql(config: LakeConfig, args: argparse.Namespace) -> int:
    from pyspark.errors import PySparkException

    spark, _ = spark_session(config, "lakeloader-sql")
    try:
        for row in spark.sql(args.query).toLocalIterator():
            print(_row_to_json(row))
    except PySparkException as exc:
        print(f"lakeloader: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    return 0


def _cmd_erase(config: LakeConfig, args: argparse.Namespace) -> int:
    from lakeloader.control.contract import new_run_id
    from lakeloader.jobs.erase import ErasureNotVerifiedError, erase
    from lakeloader.jobs.load import output_schema
    from lakeloader.spark.actor import identity
    from lakeloader.spark.progress import stderr_progress

    table = config.table(args.table)
    who = identity()
    spark, catalog = spark_session(config, f"lakeloader-erase-{table.id}")
    lineage = lineage_log(config)
    run = lineage.start("erase", table, new_run_id()) if lineage else None
    try:
        result = erase(
            spark, table, catalog=catalog, keys=args.key, where=args.where, who=who, progress=stderr_progress
        )
    except LakeloaderError as exc:
        if run is not None:
            run.finish(status="failed", counts={}, error=str(exc))
        if isinstance(exc, ErasureNotVerifiedError):  # deleted, but history still holds rows: exit 1, not 2
            print(f"lakeloader: error: {exc}", file=sys.stderr)
            return 1
        raise
    if run is not None:
        run.finish(
            status="ok",
            counts={"deleted": result.rows_erased},
            schema=output_schema(spark, catalog, table),
        )
    print(result.describe())
    return 0


def _cmd_maintain(config: LakeConfig, args: argparse.Namespace) -> int:
    from lakeloader.jobs.maintenance import maintain_tables, summary_table
    from lakeloader.spark.progress import stderr_progress

    tables = config.select(args.table)
    stderr_progress(f"maintaining {len(tables)} table(s); starting Spark")
    spark, catalog = spark_session(config, "lakeloader-maintain")
    results = maintain_tables(
        spark, tables, catalog=catalog, progress=stderr_progress, lineage=lineage_log(config)
    )
    print(summary_table(results))
    return 1 if any(r.status == "failed" for r in results) else 0


def _cmd_rebuild(config: LakeConfig, args: argparse.Namespace) -> int:
    from lakeloader.control.contract import new_run_id
    from lakeloader.jobs.load import assign_inputs, finish_lineage, summary_table
    from lakeloader.jobs.rebuild import RebuildRefusedError, rebuild_table, reset_input_log
    from lakeloader.spark.progress import stderr_progress

    table = config.table(args.table)
    files = assign_inputs(config, [table], None)[table.id]
    run_id = new_run_id()
    stderr_progress(f"rebuild {run_id}: {table.id} from {len(files)} raw file(s); starting Spark")
    spark, catalog = spark_session(config, f"lakeloader-rebuild-{run_id}")
    lineage = lineage_log(config)
    run = lineage.start("rebuild", table, run_id) if lineage else None
    try:
        result = rebuild_table(
            spark,
            table,
            files,
            catalog=catalog,
            run_id=run_id,
            progress=stderr_progress,
            raw_zone_erased=args.raw_zone_erased,
        )
    except LakeloaderError as exc:
        if run is not None:
            run.finish(status="failed", counts={}, error=str(exc))
        if isinstance(exc, RebuildRefusedError):
            raise
        # bad input: the table failed to rebuild and is as it was
        print(f"lakeloader: error: {exc}", file=sys.stderr)
        return 1
    reset_input_log(spark, catalog, table.id, files, run_id)
    if run is not None:
        finish_lineage(spark, catalog, run, result)
    print(summary_table([result]))
    return 0


READER_GONE = 128 + 13  # the exit status of a process SIGPIPE ended


def main(argv: list[str] | None = None) -> int:
    try:
        code = _main(sys.argv[1:] if argv is None else argv)
        sys.stdout.flush()  # a short output is written here, not at exit where nothing could catch it
        return code
    except BrokenPipeError:
        gone = _pipes_without_reader()
        if not gone:  # not our output's pipe: a real error
            raise
        # `lakeloader ... | head`: the reader has what it wanted. Later writes (the interpreter's
        # flush at exit) go nowhere instead of failing again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        for fd in gone:
            os.dup2(devnull, fd)
        return READER_GONE


def _pipes_without_reader() -> list[int]:
    """Standard output and error, if either is a pipe whose reader has closed it."""
    poller = select.poll()
    for fd in (sys.stdout.fileno(), sys.stderr.fileno()):
        poller.register(fd, select.POLLOUT)
    return [fd for fd, events in poller.poll(0) if events & (select.POLLERR | select.POLLHUP)]


def _main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command in stage_verbs.COMMANDS:
            return stage_verbs.run(args)
        if args.command == "rebuild" and args.stage:
            return stage_verbs.rebuild(args)
        if args.command == "reconcile":
            return reconcile_verb.run(args)
        config = configure(args, find_tables=args.command not in ("sql", "discover"))
        handler = {
            "discover": _cmd_discover,
            "tables": _cmd_tables,
            "run": _cmd_run,
            "sql": _cmd_sql,
            "erase": _cmd_erase,
            "maintain": _cmd_maintain,
            "rebuild": _cmd_rebuild,
        }[args.command]
        return handler(config, args)
    except (ConfigError, LakeloaderError, FileNotFoundError, LookupError) as exc:
        print(f"lakeloader: error: {exc}", file=sys.stderr)
        return 2
