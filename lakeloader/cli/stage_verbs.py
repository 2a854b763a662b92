"""The CLI verbs on a deployed stage: status, requeue, skip, backfill, doctor, verify, and rebuild
--stage. They read and change the stage's ledger through boto3 and its stack's outputs
(lakeloader.cli.operate, lakeloader.cli.stage), with no Spark and no config file. docs/operate.md shows
them at work.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime

from lakeloader.config import ConfigError

COMMANDS = ("status", "requeue", "skip", "backfill", "doctor", "verify")


def _add_stage(parser: argparse.ArgumentParser, *, tables: bool = True) -> None:
    parser.add_argument("--stage", required=True, metavar="NAME", help="the deployed stage (dev, prod, ...)")
    parser.add_argument(
        "--project",
        default="lakeloader",
        metavar="NAME",
        help="cdk.json lakeloader:project (default lakeloader)",
    )
    if tables:
        parser.add_argument("--table", action="append", metavar="ID", help="only this table (repeatable)")


def add_commands(commands: argparse._SubParsersAction) -> None:
    status = commands.add_parser(
        "status",
        help="a deployed stage's tables: backlog, lag, stuck files, last run and commit",
        description="Per table of the deployed stage: files pending, failed, quarantined and skipped, "
        "the age of the oldest file still to load (lag), the last run and the last commit, then every "
        "quarantined or failed file with its error. Reads the stage's DynamoDB tables through its "
        "stack's outputs. Exits 1 when a table has a stuck file or its last run failed.",
    )
    _add_stage(status)
    status.add_argument("--json", action="store_true", help="print JSON instead of a table")
    for verb, what, default in (
        ("requeue", "give quarantined (default), failed or skipped files back to the runs", "quarantined"),
        (
            "skip",
            "set quarantined (default), failed or pending files aside: no run takes them",
            "quarantined",
        ),
    ):
        parser = commands.add_parser(
            verb,
            help=what,
            description=f"{what[0].upper()}{what[1:]}. Without --key: every {default} file of the selected "
            "tables (--table, or --all-tables). Each change is a conditional write on the status just "
            "read: a file a run took meanwhile is left alone and reported."
            + (
                " Then the sweep starts runs for those tables (--no-sweep: wait for its schedule)."
                if verb == "requeue"
                else ""
            ),
        )
        _add_stage(parser)
        parser.add_argument("--all-tables", action="store_true", help="every table of the stage")
        parser.add_argument(
            "--key", action="append", metavar="KEY", help="only this raw object key (repeatable)"
        )
        parser.add_argument(
            "--status",
            dest="statuses",
            action="append",
            choices=("quarantined", "failed", "skipped" if verb == "requeue" else "pending"),
            help=f"which files without --key (repeatable; default {default})",
        )
        parser.add_argument("--reason", required=True, help="why: kept in the ledger with who did it")
        if verb == "requeue":
            parser.add_argument("--no-sweep", action="store_true", help="do not start the sweep")
    doctor = commands.add_parser(
        "doctor",
        help="check the account preconditions the deployed stage relies on (Lake Formation mode)",
        description="In Lake Formation mode (the stage's warehouse is registered): full table access for "
        "external engines is allowed, and IAMAllowedPrincipals holds nothing on the stage's databases. "
        "Prints each check and the fix of a failed one; exits 1 when one fails (docs/query.md).",
    )
    _add_stage(doctor)
    backfill = commands.add_parser(
        "backfill",
        help="record files already in the raw bucket (e.g. before the stage existed) and start their runs",
        description="List the raw prefixes of the selected tables (default: every enabled table) and record "
        "every object the ledger has not seen as pending, as the S3 trigger would; objects it has seen, in "
        "any status, are left alone, so a backfill can be repeated. Then start the sweep, which drains "
        "them in runs bounded by each table's trigger.max_files_per_run and max_bytes_per_run.",
    )
    _add_stage(backfill)
    backfill.add_argument("--since", metavar="DATE", help="only objects last modified on or after (ISO date)")
    backfill.add_argument(
        "--no-sweep", action="store_true", help="record only; the sweep's schedule starts runs"
    )
    verify = commands.add_parser(
        "verify",
        help="prove a deployed stage end to end with a canary file (after cdk deploy)",
        description="Land a small canary file on the stage's canary table (raw prefix lakeloader-canary/, "
        "never a user's table) and follow it: the arrival Lambda's ledger record, the job run (Glue, and "
        "EMR Serverless where a table of the stage runs there), the Iceberg commit, the rows read back "
        "through the Glue catalog and each reader's Athena workgroup; then publish a test message to the "
        "alarm topic. Prints each hop with its time; a failed hop is named with its resource and the "
        "first lines of its CloudWatch log, and exits 1. The canary is removed unless --keep "
        "(docs/deploy.md#verify).",
    )
    _add_stage(verify, tables=False)
    verify.add_argument("--keep", action="store_true", help="leave the canary file, its records and rows")
    verify.add_argument(
        "--timeout",
        type=float,
        default=900,
        metavar="SECONDS",
        help="how long each hop may take (default 900)",
    )


def rebuild(args: argparse.Namespace) -> int:
    """`lakeloader rebuild --stage`: record what the ledger has not seen, then start the rebuild run."""
    from lakeloader.cli import operate
    from lakeloader.cli.stage import DeployedStage, stack_name
    from lakeloader.control.contract import new_run_id
    from lakeloader.spark.progress import stderr_progress

    stage = DeployedStage.from_stack(stack_name(args.stage, args.project))
    args.command, args.table = "rebuild", [args.table]
    (table,) = _tables(stage, args)
    cid = f"rebuild-{new_run_id()}"
    found = operate.backfill(stage, stage.tables(), [table.id], correlation_id=cid, progress=stderr_progress)
    print(found.describe())
    started = operate.start_rebuild(stage, table.id, raw_zone_erased=args.raw_zone_erased)
    run = started.get("started", {}).get(table.id)
    if run is None:
        why = started.get("deferred")
        print(f"lakeloader: error: {table.id}: no rebuild started: {why}", file=sys.stderr)
        return 1
    print(f"{table.id}: rebuild started as run {run}; follow it with lakeloader status --stage {args.stage}")
    return 0


def _tables(stage, args: argparse.Namespace) -> list:
    """The deployed tables the command names (--table), all with --all-tables, else the enabled ones
    (status and backfill) -- requeue and skip must be told which."""
    tables = stage.tables()
    known = {t.id: t for t in tables}
    unknown = [t for t in args.table or [] if t not in known]
    if unknown:
        raise ConfigError(f"unknown table {unknown[0]!r}: the stage has {', '.join(sorted(known))}")
    if args.table:
        return [known[t] for t in args.table]
    if getattr(args, "all_tables", False) or args.command in ("status", "doctor"):
        return tables
    if args.command == "backfill":
        return [t for t in tables if t.enabled]
    raise ConfigError(f"{args.command}: name the tables (--table ID) or give --all-tables")


def verify(args: argparse.Namespace) -> int:
    """`lakeloader verify --stage`: the hops, as they pass; the failed one; what was removed."""
    from lakeloader.cli.stage import DeployedStage, stack_name
    from lakeloader.cli.verify import stack_outputs
    from lakeloader.cli.verify import verify as verify_stage

    outputs = stack_outputs(stack_name(args.stage, args.project))
    result = verify_stage(
        DeployedStage.from_outputs(outputs), outputs, keep=args.keep, timeout=args.timeout, say=_say
    )
    if result.failure is not None:
        print(result.failure.describe(), flush=True)
    for removed in result.removed:
        print(f"removed {removed}")
    for error in result.cleanup_errors:
        print(f"FAIL cleanup: {error}")
    if result.cleanup_errors:
        print("the canary is partly left: the next verify removes it once the error is fixed")
    if args.keep:
        print("kept the canary (--keep): the next verify without --keep removes it")
    return 1 if result.failure is not None or result.cleanup_errors else 0


def _say(line: str) -> None:
    print(line, flush=True)  # each hop as it passes: a verify takes minutes


def run(args: argparse.Namespace) -> int:
    """status, requeue, skip, backfill, doctor, verify."""
    from lakeloader.cli import operate
    from lakeloader.cli.stage import DeployedStage, stack_name
    from lakeloader.control.contract import new_run_id
    from lakeloader.spark.actor import identity
    from lakeloader.spark.progress import stderr_progress

    if args.command == "verify":
        return verify(args)
    stage = DeployedStage.from_stack(stack_name(args.stage, args.project))
    tables = _tables(stage, args)
    if args.command == "doctor":
        from lakeloader.cli.doctor import lake_formation_checks, reader_grant_checks
        from lakeloader.control import reader_grants

        databases = sorted({stage.glue_database(t.target.database) for t in tables})
        checks = lake_formation_checks(stage.warehouse, databases)
        # readers' grants on tables by name (a Lake Formation mode stage with readers has the function)
        checks += reader_grant_checks(f"{stack_name(args.stage, args.project)}-{reader_grants.FUNCTION_NAME}")
        print("\n".join(check.line() for check in checks))
        return 1 if any(check.passed is False for check in checks) else 0
    ledger = stage.ledger()
    if args.command == "status":
        statuses = (operate.table_statuses if args.table else operate.stage_statuses)(ledger, tables)
        held = [t for t in stage.held_tables() if not args.table or t.table_id in args.table]
        if args.json:
            print(operate.status_json(statuses, held))
        else:
            print(operate.status_report(statuses))
            for table in held:  # found by a source, waiting for their keys
                print(f"! {table.hint}")
        return 0 if all(s.healthy for s in statuses) and not held else 1
    if args.command == "backfill":
        since = datetime.fromisoformat(args.since).replace(tzinfo=UTC) if args.since else None
        result = operate.backfill(
            stage,
            stage.tables(),
            [t.id for t in tables],
            since=since,
            correlation_id=f"backfill-{new_run_id()}",
            progress=stderr_progress,
        )
        print(result.describe())
        pending = sorted(result.recorded)
    else:
        note = f"{args.command} by {identity()} at {datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ}: {args.reason}"
        pending = []
        for table in tables:
            outcome = operate.act(
                ledger,
                args.command,
                table.id,
                keys=args.key,
                statuses=tuple(args.statuses or ["quarantined"]),
                note=note,
            )
            done = {"requeue": "requeued", "skip": "skipped"}[args.command]
            print(f"{table.id}: {len(outcome.changed)} {done}")
            for obj in outcome.left:  # not in a status the verb takes, or a run changed it meanwhile
                print(f"  left as it is ({obj.status}): {obj.key}")
            if outcome.changed:
                pending.append(table.id)
    if pending and args.command != "skip" and not args.no_sweep:
        started = operate.start_sweep(stage, pending).get("started", {})
        print(f"sweep: runs started for {', '.join(sorted(started)) or 'no table (busy or in its window)'}")
    return 0
