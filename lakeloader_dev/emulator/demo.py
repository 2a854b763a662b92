"""`make demo`: deploy to the embedded emulator, land examples/raw, watch Lambda-triggered Glue runs."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from lakeloader import runtimes
from lakeloader.config import load_config
from lakeloader.inputs import batch_order
from lakeloader.jobs.load import assign_inputs

BOLD, DIM, GREEN, RED, RESET = (
    ("\033[1m", "\033[2m", "\033[32m", "\033[31m", "\033[0m")
    if sys.stdout.isatty()
    else (
        "",
        "",
        "",
        "",
        "",
    )
)


class Clock:
    def __init__(self) -> None:
        self.start = time.monotonic()

    def __call__(self, message: str) -> None:
        print(f"{DIM}[{time.monotonic() - self.start:6.1f}s]{RESET} {message}", flush=True)


def _on_event(say: Clock):
    def listener(kind: str, record) -> None:
        if kind == "lambda":
            if record.trigger != "s3" and not record.function.endswith("s3-arrival"):
                return
            if not record.ok:
                say(f"  {RED}λ {record.function} failed{RESET}: {record.error}")
                return
            result = record.result or {}
            started = ", ".join(f"{t} → run {r[:11]}…" for t, r in (result.get("started") or {}).items())
            deferred = ", ".join(d.get("table_id", "?") for d in result.get("deferred") or [])
            keys = ", ".join(record.keys) or "(sweep)"
            parts = [f"recorded {result.get('recorded', 0)}"]
            for name in ("duplicates", "unknown", "disabled"):
                if result.get(name):
                    parts.append(f"{name} {result[name]}")
            if started:
                parts.append(f"started {started}")
            if deferred:
                parts.append(f"deferred {deferred} (a run is draining it)")
            say(f"  λ s3-arrival  {keys}: {'; '.join(parts)}")
        elif kind in ("glue", "emr"):
            state = record.state
            done = state in ("SUCCEEDED", "SUCCESS", "FAILED")
            color = RED if state == "FAILED" else GREEN if done else ""
            extra = f" in {record.seconds:.0f} s" if done else ""
            error = f": {record.error}" if record.error else ""
            engine = "Glue" if kind == "glue" else "EMR Serverless"
            say(f"  ⚙ {engine} {record.job} run {record.run_id[:11]}… {color}{state}{RESET}{extra}{error}")

    return listener


def run_demo(config_path: str = "config/tables.yaml") -> int:
    from lakeloader.stage import DeployedStage
    from lakeloader_dev.emulator import Emulator, aws_env, patches
    from lakeloader_dev.emulator.deploy import deploy
    from lakeloader_dev.emulator.loop import latest_runs, run_summary, upload, wait_for_objects

    say = Clock()
    runtime = runtimes.local()  # the stage runs on it: the emulator runs jobs on this venv's Spark only
    config = load_config(config_path)
    samples = assign_inputs(config, config.tables, None)
    ordered = {table_id: batch_order(files) for table_id, files in samples.items() if files}
    waves = [
        ("full loads", {t: files[:1] for t, files in ordered.items()}),
        ("CDC batches", {t: files[1:] for t, files in ordered.items() if files[1:]}),
    ]
    print(f"{BOLD}lakeloader demo: the S3 → Lambda → Glue → Iceberg loop on the embedded AWS emulator{RESET}")
    emulator = Emulator()
    failed = False
    try:
        emulator.start()
        os.environ.update(aws_env(emulator.endpoint))
        say(f"emulator (moto, extended) listening on {emulator.endpoint}")
        say(
            f"stage runtime {runtime.name}: Glue {runtime.glue_version}, Spark {runtime.spark}, "
            f"Iceberg {runtime.iceberg}, Python {runtime.python}"
        )
        deployment = deploy(
            endpoint=emulator.endpoint,
            progress=lambda m: say(m),
            failures=patches.CFN_FAILURES.get,
            timeout=180,
        )
        stack = DeployedStage.from_outputs(deployment.outputs)
        say(f"raw bucket s3://{stack.raw_bucket}/ · warehouse {stack.warehouse}")
        emulator.journal.listeners.append(_on_event(say))
        for title, files in waves:
            count = sum(len(f) for f in files.values())
            print(f"\n{BOLD}=== {title}: {count} file(s) land in the raw bucket ==={RESET}", flush=True)
            pairs = [(Path(f.uri), f.name) for table_files in files.values() for f in table_files]
            for _, key in pairs:
                say(f"  + s3://{stack.raw_bucket}/{key}")
            upload(stack, pairs)
            statuses = wait_for_objects(
                stack, {t: [f.name for f in fs] for t, fs in files.items()}, timeout=900, progress=say
            )
            bad = [f"{t}: {k}" for t, keys in statuses.items() for k, s in keys.items() if s != "done"]
            failed = failed or bool(bad)
            if bad:
                say(f"{RED}not merged: {', '.join(bad)}{RESET}")
        emulator.journal.listeners.clear()
        _show_tables(stack, config, say)
        print(f"\n{BOLD}Run history (DynamoDB {stack.runs_table}){RESET}")
        print(run_summary(latest_runs(stack, [t.id for t in config.tables])))
        lambdas = [i for i in emulator.journal.invocations if i.function.endswith("s3-arrival")]
        runs = emulator.journal.runs
        ok = sum(r.state in ("SUCCEEDED", "SUCCESS") for r in runs)
        print(
            f"\n{BOLD}{'FAILED' if failed else 'Done'}{RESET}: {len(lambdas)} Lambda invocation(s) "
            f"from S3 events, {len(runs)} Glue/EMR run(s) ({ok} succeeded), {len(config.tables)} Iceberg "
            f"table(s) in the Glue catalog, {time.monotonic() - say.start:.0f} s in all."
        )
    finally:
        say("tearing down the emulator (its state was in memory)")
        emulator.stop()
    return 1 if failed else 0


def _show_tables(stack, config, say: Clock) -> None:
    import boto3

    from lakeloader.spark import SparkSettings, build_session
    from lakeloader_dev.jars import spark_conf

    glue = boto3.client("glue")
    print(f"\n{BOLD}=== Iceberg tables in the Glue catalog ==={RESET}", flush=True)
    for table in config.tables:
        database = stack.glue_database(table.target.database)
        entry = glue.get_table(DatabaseName=database, Name=table.target.table)["Table"]
        columns = [c["Name"] for c in entry.get("StorageDescriptor", {}).get("Columns", [])]
        location = entry.get("Parameters", {}).get("metadata_location", "")
        say(
            f"  {table.qualified_target}: {entry['Parameters'].get('table_type')} · "
            f"{len(columns)} columns · {location}"
        )
    say("starting Spark to read the tables through the Glue catalog (Iceberg GlueCatalog + S3FileIO)")
    settings = SparkSettings(
        warehouse=stack.warehouse, app_name="lakeloader-demo-read", extra_conf=spark_conf()
    )
    spark = build_session(settings)
    try:
        for table in config.tables:
            keys = ", ".join(f"`{k}`" for k in table.keys)
            name = f"{settings.catalog}.`{stack.glue_database(table.target.database)}`.`{table.target.table}`"
            print(f"\n{BOLD}{table.qualified_target}{RESET}")
            spark.sql(f"SELECT * FROM {name} ORDER BY {keys}").show(truncate=False)
    finally:
        spark.stop()
