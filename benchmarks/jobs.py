"""List the Spark jobs one small lakeloader batch starts, with what started each.

    python -m benchmarks.jobs                       # merge-on-read table of 20k rows, 1k changes
    python -m benchmarks.jobs --rows 100000 --changes 2000 --copy-on-write

The count is deterministic (it depends on the plan, not on timing), so it is what
`tests/spark/test_job_count.py` pins. Each job is listed with the Python line that started it
(PySpark's call site) or, for jobs started inside a SQL command, that command's first words,
taken from Spark's event log.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from benchmarks import data
from benchmarks.engines import COW, DB, MOR, SparkTables, input_files, table_config


def job_lines(event_log: Path, group: str, show_plans: bool = False) -> list[str]:
    """One line per job of `group`: job id, stages, how long it ran, and the call site / SQL statement
    that ran it."""
    sql: dict[str, str] = {}
    plans: dict[str, str] = {}
    lines = []
    started: dict[int, tuple[int, int]] = {}  # job id: (its line's index, submission time in ms)
    for raw in event_log.read_text().splitlines():
        event = json.loads(raw)
        kind = event.get("Event", "")
        if kind.endswith("SparkListenerSQLExecutionStart"):
            plan = event.get("physicalPlanDescription", "").split("\n")
            root = next((line for line in plan[1:] if line.strip()), "")
            sql[str(event["executionId"])] = " ".join(root.split())[:100]
            plans[str(event["executionId"])] = event.get("physicalPlanDescription", "")
        elif kind == "SparkListenerJobStart":
            props = event.get("Properties") or {}
            if props.get("spark.jobGroup.id") != group:
                continue
            stage_names = [info.get("Stage Name", "") for info in event.get("Stage Infos", [])]
            site = props.get("callSite.short") or (stage_names[-1] if stage_names else "")
            statement = sql.get(props.get("spark.sql.execution.id", ""), "")
            stages = len(event.get("Stage IDs", []))
            where = site.replace(str(Path.cwd()) + "/", "")
            started[event["Job ID"]] = (len(lines), event["Submission Time"])
            lines.append(f"job {event['Job ID']:>4}  stages {stages}  {{ms}}  {where:<48} {statement}")
            execution = props.get("spark.sql.execution.id", "")
            if show_plans and execution in plans:
                lines.append(plans.pop(execution).split("\n\n")[0])
        elif kind == "SparkListenerJobEnd" and event["Job ID"] in started:
            at, submitted = started.pop(event["Job ID"])
            lines[at] = lines[at].replace("{ms}", f"{event['Completion Time'] - submitted:>6} ms")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.jobs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--changes", type=int, default=1_000)
    parser.add_argument("--batches", type=int, default=3, help="batches applied; the last one is listed")
    parser.add_argument("--copy-on-write", action="store_true")
    parser.add_argument("--plans", action="store_true", help="print each SQL execution's physical plan")
    args = parser.parse_args(argv)

    from lakeloader.engine import apply_batch
    from lakeloader.spark.session import CATALOG, SparkSettings, build_session
    from lakeloader_dev.jars import spark_conf

    work = Path(tempfile.mkdtemp(prefix="lakeloader-jobs-"))
    logs = work / "events"
    logs.mkdir()
    spark = build_session(
        SparkSettings(
            warehouse=str(work / "warehouse"),
            app_name="lakeloader-jobs",
            extra_conf={
                **spark_conf(),
                "spark.eventLog.enabled": "true",
                "spark.eventLog.dir": str(logs),
                # Spark 4 rolls and compresses event logs by default: one plain file is what job_lines reads
                "spark.eventLog.rolling.enabled": "false",
                "spark.eventLog.compress": "false",
            },
        )
    )
    try:
        label = "jobs_mor" if not args.copy_on_write else "jobs_cow"
        props = COW if args.copy_on_write else MOR
        config = table_config(label, props)
        SparkTables(spark).create(label, data.write_base(work / "base", args.rows), props, config)
        counts = []
        for i in range(args.batches):
            batch = data.write_batch(work / f"cdc{i}", args.changes, args.rows, batch_no=200 + i)
            files = input_files(batch, "v1")
            group = f"batch-{i}"
            spark.sparkContext.setLocalProperty("spark.jobGroup.id", group)  # no description: keep call sites
            result = apply_batch(spark, config, files, catalog=CATALOG, run_id=group)
            spark.sparkContext.setLocalProperty("spark.jobGroup.id", "other")
            counts.append(len(spark.sparkContext.statusTracker().getJobIdsForGroup(group)))
            assert result.files, result
        print(f"{DB}.{label}: {args.rows:,} rows, {args.batches} batches of {args.changes:,} changes")
        print(f"jobs per batch: {counts}")
    finally:
        spark.stop()
    event_log = next(logs.iterdir())
    print(f"jobs of the last batch ({event_log.name}):")
    print("\n".join(job_lines(event_log, f"batch-{args.batches - 1}", args.plans)))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
