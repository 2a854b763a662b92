"""`make demo`: deploy to the embedded emulator, land examples/raw, watch Lambda-triggered Glue runs.

Beside the config's tables the demo deploys one Amazon S3 Tables table (target.storage: s3_tables,
issue 42): `s3t.customers`, the sample customers again, landed under a prefix of its own and merged
into the stage's table bucket through the S3 Tables catalog for Iceberg. It is added to a copy of the
config the demo deploys (`demo_config`), not to config/tables.yaml, which stays the plain Glue-catalog
example the stack snapshots and the tests synthesize.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import yaml

from lakeloader.config import load_config
from lakeloader.control import runtimes
from lakeloader.jobs import lineage
from lakeloader.jobs.load import assign_inputs
from lakeloader.spark.inputs import InputFile, batch_order
from lakeloader.spark.progress import write_line
from lakeloader_dev.emulator import drivers
from lakeloader_dev.emulator.runtime import driver_memory

# The demo's S3 Tables table: a copy of crm.customers (its sample files landed again under PREFIX)
S3_TABLES_DEMO = "s3t.customers"
S3_TABLES_SOURCE, S3_TABLES_PREFIX = "crm.customers", "s3tables/public/customers/"

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
        write_line(sys.stdout, f"{DIM}[{time.monotonic() - self.start:6.1f}s]{RESET} {message}")


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


def demo_config(config_path: str, workdir: Path) -> Path:
    """The config the demo deploys: `config_path`'s tables and S3_TABLES_DEMO, a copy of
    S3_TABLES_SOURCE with target.storage s3_tables (in the namespace s3t_crm of the table bucket).
    Relative paths stay as they are: the demo runs from the repository root."""
    document = yaml.safe_load(Path(config_path).read_text())
    tables = document["tables"]
    if not any(t["id"] == S3_TABLES_DEMO for t in tables):
        [source] = [t for t in tables if t["id"] == S3_TABLES_SOURCE]
        tables.append(
            {
                "id": S3_TABLES_DEMO,
                "source": {**source["source"], "prefix": S3_TABLES_PREFIX},
                "target": {"database": "s3t_crm", "table": "customers", "storage": "s3_tables"},
                "keys": source["keys"],
                "sequence_by": source["sequence_by"],
                "mode": source["mode"],
            }
        )
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "tables.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _with_s3_tables_samples(samples: dict[str, list[InputFile]]) -> dict[str, list[InputFile]]:
    """S3_TABLES_DEMO's files: S3_TABLES_SOURCE's, keyed under S3_TABLES_PREFIX."""
    source_prefix = "crm/public/customers/"
    copies = [
        replace(f, name=S3_TABLES_PREFIX + f.name.removeprefix(source_prefix))
        for f in samples.get(S3_TABLES_SOURCE, [])
    ]
    return {**samples, S3_TABLES_DEMO: copies}


def run_demo(config_path: str = "config/tables.yaml") -> int:
    from lakeloader.cli.stage import DeployedStage
    from lakeloader_dev.emulator import Emulator, aws_env, patches_cloudformation
    from lakeloader_dev.emulator.deploy import deploy
    from lakeloader_dev.emulator.loop import latest_runs, run_summary, upload, wait_for_objects

    say = Clock()
    runtime = runtimes.local()  # the stage runs on it: the emulator runs jobs on this venv's Spark only
    workdir = Path(".lakeloader/demo-emulator")
    config_path = str(demo_config(config_path, workdir))
    # every Glue/EMR run of the stage appends its tables' OpenLineage events here (lakeloader.jobs.lineage)
    lineage_file = (workdir / "lineage.jsonl").resolve()
    lineage_file.unlink(missing_ok=True)
    os.environ[lineage.FILE_ENV] = str(lineage_file)
    config = load_config(config_path)
    samples = _with_s3_tables_samples(assign_inputs(config, config.tables, None))
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
            context={"config": config_path},
            failures=patches_cloudformation.CFN_FAILURES.get,
            timeout=180,
        )
        stack = DeployedStage.from_outputs(deployment.outputs)
        say(f"raw bucket s3://{stack.raw_bucket}/ · warehouse {stack.warehouse}")
        emulator.journal.listeners.append(_on_event(say))
        for title, files in waves:
            count = sum(len(f) for f in files.values())
            write_line(sys.stdout, f"\n{BOLD}=== {title}: {count} file(s) land in the raw bucket ==={RESET}")
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
        _show_tables(stack, config, say, deployment.outputs.get("TableBucketArn"), emulator.runtime)
        print(f"\n{BOLD}Run history (DynamoDB {stack.runs_table}){RESET}")
        print(run_summary(latest_runs(stack, [t.id for t in config.tables])))
        show_lineage(lineage_file, config.tables[0].id)
        lambdas = [i for i in emulator.journal.invocations if i.function.endswith("s3-arrival")]
        runs = emulator.journal.runs
        ok = sum(r.state in ("SUCCEEDED", "SUCCESS") for r in runs)
        print(
            f"\n{BOLD}{'FAILED' if failed else 'Done'}{RESET}: {len(lambdas)} Lambda invocation(s) "
            f"from S3 events, {len(runs)} Glue/EMR run(s) ({ok} succeeded), {len(config.tables)} Iceberg "
            f"table(s) ({sum(t.target.storage == 's3_tables' for t in config.tables)} of them in S3 Tables), "
            f"{time.monotonic() - say.start:.0f} s in all."
        )
    finally:
        os.environ.pop(lineage.FILE_ENV, None)
        say("tearing down the emulator (its state was in memory)")
        emulator.stop()
    return 1 if failed else 0


def show_lineage(path: Path, table_id: str) -> None:
    """One table's lineage, as its runs' OpenLineage events tell it: raw prefix and files in, table out."""
    print(f"\n{BOLD}Lineage of {table_id}{RESET}  {DIM}(OpenLineage events: {path}){RESET}")
    found = lineage.describe(lineage.read_events(path), table_id) if path.is_file() else []
    print("\n".join(found) if found else f"{RED}no lineage event of {table_id}{RESET}")


def _show_tables(stack, config, say: Clock, table_bucket: str | None, runtime) -> None:
    import boto3
    from pyspark import SparkContext

    from lakeloader.iceberg.s3_tables import target_name
    from lakeloader.spark.session import S3_TABLES_ENV, SparkSettings, build_session
    from lakeloader_dev.jars import spark_conf

    glue = boto3.client("glue")
    print(
        f"\n{BOLD}=== Iceberg tables in the Glue catalog and the S3 Tables table bucket ==={RESET}",
        flush=True,
    )
    for table in config.tables:
        if table.target.storage == "s3_tables":
            entry = boto3.client("s3tables").get_table(
                tableBucketARN=table_bucket, namespace=table.target.database, name=table.target.table
            )
            say(
                f"  {table.qualified_target}: S3 Tables table in {table_bucket} · {entry['metadataLocation']}"
            )
            continue
        database = stack.glue_database(table.target.database)
        entry = glue.get_table(DatabaseName=database, Name=table.target.table)["Table"]
        columns = [c["Name"] for c in entry.get("StorageDescriptor", {}).get("Columns", [])]
        location = entry.get("Parameters", {}).get("metadata_location", "")
        say(
            f"  {table.qualified_target}: {entry['Parameters'].get('table_type')} · "
            f"{len(columns)} columns · {location}"
        )
    say(
        "starting Spark to read the tables through the Glue catalog (Iceberg GlueCatalog + S3FileIO) "
        "and the S3 Tables catalog for Iceberg"
    )
    if table_bucket:  # the session's `s3tables` catalog (spark.session), as the deployed jobs have it
        os.environ[S3_TABLES_ENV] = table_bucket
    settings = SparkSettings(
        warehouse=stack.warehouse,
        app_name="lakeloader-demo-read",
        extra_conf=spark_conf(),
        driver_memory=driver_memory(),  # the Glue runs': their JVM can serve the read
    )
    driver = runtime.take_driver() if drivers.enabled() else None
    if driver:  # the JVM the Glue runs used: PySpark connects to it rather than starting one
        os.environ.update(driver.env())
    spark = build_session(settings)
    try:
        for table in config.tables:
            keys = ", ".join(f"`{k}`" for k in table.keys)
            if table.target.storage == "s3_tables":
                name = target_name(spark, settings.catalog, table)
            else:
                database = stack.glue_database(table.target.database)
                name = f"{settings.catalog}.`{database}`.`{table.target.table}`"
            print(f"\n{BOLD}{table.qualified_target}{RESET}  {DIM}{name}{RESET}")
            spark.sql(f"SELECT * FROM {name} ORDER BY {keys}").show(truncate=False)
    finally:
        spark.stop()
        os.environ.pop(S3_TABLES_ENV, None)
        if driver:
            # PySpark's connection to the JVM ends with the read: the JVM is the emulator's, and its
            # teardown kills it, which an open connection would log as a traceback at exit
            SparkContext._gateway.close()
            SparkContext._gateway = SparkContext._jvm = None
            for name in driver.env():
                os.environ.pop(name)
            runtime.drivers.give_back(driver, reusable=True)
