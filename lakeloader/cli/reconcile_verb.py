"""`lakeloader reconcile`: a table compared with a full copy of its source, on a config file or a deployed
stage (lakeloader.jobs.reconcile does the work; --repair makes them equal)."""

from __future__ import annotations

import argparse
import json

from lakeloader.cli.session import configure, json_default, spark_session
from lakeloader.config import ConfigError
from lakeloader.spark.errors import LakeloaderError


def add_command(commands: argparse._SubParsersAction) -> None:
    """`reconcile` and its arguments, beside the config-file verbs (both forms: --config, --stage)."""
    reconcile = commands.add_parser(
        "reconcile",
        help="compare a table with a full copy of its source; --repair makes it equal",
        description="Compare the table's current rows (scd2: current versions) with a snapshot of its source "
        "(a DMS full load, an export: a file or a folder, local or s3://), read as the table's own files "
        "are, and report the keys missing from the table, the extra keys it holds and the keys whose "
        "compared columns differ, with counts and sample keys. Exits 0 when they are equal, 1 when they "
        "differ (also after --repair: the report says what was repaired). With --repair the difference "
        "goes through the normal merge path in one commit (tombstones, scd2 history, the quality gate), "
        "whose snapshot summary records it (lakeloader.repair). With --stage it runs here against the "
        "stage's catalog and warehouse, and a repair holds the table's run lock and is recorded in the "
        "stage's run history (docs/operate.md).",
    )
    where = reconcile.add_mutually_exclusive_group(required=True)
    where.add_argument("--config", metavar="FILE", help="table configuration (YAML)")
    where.add_argument("--stage", metavar="NAME", help="a deployed stage: its deployed config and catalog")
    reconcile.add_argument("--table", required=True, metavar="ID", help="the table id")
    reconcile.add_argument(
        "--snapshot",
        required=True,
        metavar="URI",
        help="the source snapshot: a file or a folder, local or s3://",
    )
    reconcile.add_argument("--repair", action="store_true", help="apply the difference, in one commit")
    reconcile.add_argument(
        "--samples",
        type=int,
        default=10,
        metavar="N",
        help="sample keys shown of each kind (default 10)",
    )
    reconcile.add_argument("--json", action="store_true", help="print JSON instead of a report")
    reconcile.add_argument("--warehouse", help="with --config: override the config's warehouse")
    reconcile.add_argument(
        "--database-prefix",
        default="",
        metavar="PREFIX",
        help="with --config: a deployed stage's Glue database prefix (as for run)",
    )
    reconcile.add_argument(
        "--project", default="lakeloader", metavar="NAME", help="with --stage: cdk.json lakeloader:project"
    )


def run(args: argparse.Namespace) -> int:
    """Both forms: the table from the config file or the stage's deployed config, then the one job."""
    from lakeloader.control.contract import new_run_id
    from lakeloader.jobs.reconcile import reconcile, reconcile_on_stage
    from lakeloader.spark.actor import identity
    from lakeloader.spark.progress import stderr_progress

    if args.samples < 0:
        raise LakeloaderError("--samples must be 0 or more")
    run_id = new_run_id()
    options = {"samples": args.samples, "who": identity() if args.repair else "", "progress": stderr_progress}
    if args.stage:
        from lakeloader.cli.stage import DeployedStage, stack_name
        from lakeloader.jobs.main import with_database_prefix

        deployed = DeployedStage.from_stack(stack_name(args.stage, args.project))
        tables = {t.id: t for t in with_database_prefix(deployed.tables(), deployed.database_prefix)}
        if args.table not in tables:
            raise ConfigError(f"unknown table {args.table!r}: the stage has {', '.join(sorted(tables))}")
        table = tables[args.table]
        stderr_progress(f"reconcile {run_id}: {table.id} on stage {args.stage}; starting Spark")
        spark, catalog = spark_session(deployed, f"lakeloader-reconcile-{run_id}")  # the stage's warehouse
        result = reconcile_on_stage(
            spark,
            deployed.ledger(),
            table,
            args.snapshot,
            catalog=catalog,
            run_id=run_id,
            repair=args.repair,
            **options,
        )
    else:
        config = configure(args)
        table = config.table(args.table)
        stderr_progress(f"reconcile {run_id}: {table.id}; starting Spark")
        spark, catalog = spark_session(config, f"lakeloader-reconcile-{run_id}")
        result = reconcile(
            spark, table, args.snapshot, catalog=catalog, repair=args.repair, run_id=run_id, **options
        )
    print(json.dumps(result.as_json(), indent=2, default=json_default) if args.json else result.describe())
    return 0 if result.equal else 1
