"""OpenLineage run events of lakeloader's own runs, as JSON lines (config `lineage: {file: PATH}`,
`lakeloader run --lineage-file PATH`).

Why lakeloader writes these itself rather than through the OpenLineage Spark listener: a run's
tables share one SparkSession (`batching.parallel_tables` of them at once), and the listener's
settings are the session's, so its events name Spark actions, not lakeloader's tables and verbs;
they do not know which raw files a batch took, nor lakeloader's counts. These events do:

* one job per table and verb, `lakeloader.<verb>.<table id>` in the namespace `lakeloader`, its
  `jobType` facet saying what the verb is (INGEST, REBUILD, MAINTENANCE, ERASURE): maintenance and
  erasure write the table they read, so they have no input and never look like a new source;
* inputs: the table's raw prefix (`s3://<bucket>` + key prefix, or `file` + path: OpenLineage's
  naming for S3 and local files); the files a run read are in the run facet below;
* output: the Iceberg table by its catalog name, as OpenLineage's dataset naming names a Glue table
  (`arn:aws:glue:<region>:<account>` + `table/<database>/<table>`; an S3 Tables table is Glue's
  federated `s3tablescatalog/<bucket>`), or, in a laptop's Hadoop catalog, the catalog's warehouse
  (`file://<warehouse>`) + `<database>.<table>`: never a data path; its `schema` facet on COMPLETE;
* a custom run facet `lakeloader` (schema: docs/lineage/LakeloaderRunFacet.json) with the run's
  counts (files, changes, inserted, updated, deleted), its snapshot and its raw files.

On AWS the runtime's own listener posts the Spark actions' lineage to the Glue Data Catalog or
DataZone (infra.lineage); these file events are for the laptop and the emulator. No PySpark.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from lakeloader.config import TableConfig
from lakeloader.spark.session import S3_TABLES_ENV

PROJECT_URL = "https://github.com/lakeloader/lakeloader"
PRODUCER = f"{PROJECT_URL}/tree/main/lakeloader/lineage.py"  # as the events always said: consumers key on it
SPEC = "https://openlineage.io/spec"
RUN_EVENT_SCHEMA = f"{SPEC}/2-0-2/OpenLineage.json#/$defs/RunEvent"
JOB_TYPE_SCHEMA = f"{SPEC}/facets/2-0-4/JobTypeJobFacet.json#/$defs/JobTypeJobFacet"
SCHEMA_FACET_SCHEMA = f"{SPEC}/facets/1-2-0/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet"
ERROR_FACET_SCHEMA = f"{SPEC}/facets/1-0-1/ErrorMessageRunFacet.json#/$defs/ErrorMessageRunFacet"
# lakeloader's own run facet: the schema published in this repository
RUN_FACET = "lakeloader"
RUN_FACET_FILE = "docs/lineage/LakeloaderRunFacet.json"
RUN_FACET_SCHEMA = f"{PROJECT_URL}/blob/main/{RUN_FACET_FILE}#/$defs/LakeloaderRunFacet"

JOB_NAMESPACE = "lakeloader"
# The OpenLineage Spark listener's job name (lakeloader.jobs.main.JobStart.spark sets it per verb).
OPENLINEAGE_APP_NAME = "spark.openlineage.appName"
# What each verb is, in the jobType facet (processingType BATCH, integration LAKELOADER).
JOB_TYPES = {"ingest": "INGEST", "rebuild": "REBUILD", "maintain": "MAINTENANCE", "erase": "ERASURE"}
READS_RAW = ("ingest", "rebuild")
COUNTS = ("files", "changes", "inserted", "updated", "deleted")
# Where the emulator's Glue and EMR runs (and any job) write events when set: the jobs get no config file.
FILE_ENV = "LAKELOADER_LINEAGE_FILE"


def job_name(verb: str, table_id: str) -> str:
    """`lakeloader.ingest.crm.customers`: one OpenLineage job per table and verb."""
    return f"{JOB_NAMESPACE}.{verb}.{table_id}"


@dataclass(frozen=True)
class TableNaming:
    """How the session's catalog names its tables as OpenLineage datasets."""

    namespace: str
    glue: bool  # Glue Data Catalog (AWS, the emulator): `table/<database>/<table>`
    s3_tables_bucket: str | None = None  # the S3 Tables table bucket's name, when the stage has one

    @classmethod
    def glue_catalog(cls, region: str, account: str) -> TableNaming:
        bucket_arn = os.environ.get(S3_TABLES_ENV, "")
        return cls(
            f"arn:aws:glue:{region}:{account}",
            glue=True,
            s3_tables_bucket=bucket_arn.rsplit("/", 1)[-1] or None,
        )

    @classmethod
    def hadoop_catalog(cls, warehouse: str) -> TableNaming:
        return cls(f"file://{Path(warehouse).resolve()}", glue=False)

    def dataset(self, table: TableConfig) -> dict[str, str]:
        target = table.target
        if not self.glue:
            return {"namespace": self.namespace, "name": f"{target.database}.{target.table}"}
        if target.storage == "s3_tables" and self.s3_tables_bucket:
            catalog = f"s3tablescatalog/{self.s3_tables_bucket}/"
            return {"namespace": self.namespace, "name": f"table/{catalog}{target.database}/{target.table}"}
        return {"namespace": self.namespace, "name": f"table/{target.database}/{target.table}"}


def raw_dataset(raw_root: str, prefix: str) -> dict[str, str]:
    """The table's raw prefix: `s3://<bucket>` + key prefix, or `file` + absolute path."""
    if raw_root.startswith(("s3://", "s3a://")):
        parsed = urlparse(raw_root)
        key = "/".join(part for part in (parsed.path.strip("/"), prefix.strip("/")) if part)
        return {"namespace": f"s3://{parsed.netloc}", "name": f"{key}/" if key else "/"}
    return {"namespace": "file", "name": f"{(Path(raw_root) / prefix).resolve()}/"}


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _facet(schema_url: str, **fields: Any) -> dict[str, Any]:
    return {"_producer": PRODUCER, "_schemaURL": schema_url, **fields}


@dataclass
class LineageLog:
    """Appends each table run's START and COMPLETE (or FAIL) events to one JSON-lines file."""

    path: Path
    naming: TableNaming
    raw_root: str
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def start(self, verb: str, table: TableConfig, run_id: str) -> TableRun:
        """The table's run under `verb` has started: its START event is written."""
        if verb not in JOB_TYPES:
            raise ValueError(f"unknown lineage verb {verb!r}; one of {', '.join(JOB_TYPES)}")
        run = TableRun(self, verb, table, run_id)
        self.write(run.event("START"))
        return run

    def write(self, event: Mapping[str, Any]) -> None:
        line = json.dumps(event, sort_keys=True) + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as out:
                out.write(line)


@dataclass
class TableRun:
    """One table's run under one verb: one OpenLineage run of the job `lakeloader.<verb>.<table>`."""

    log: LineageLog
    verb: str
    table: TableConfig
    run_id: str  # lakeloader's run id (contract.new_run_id)

    @property
    def openlineage_run_id(self) -> str:
        """A UUID of its own per run, table and verb (START and COMPLETE share it)."""
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{PROJECT_URL}/{self.run_id}/{self.verb}/{self.table.id}"))

    def finish(
        self,
        *,
        status: str,
        counts: Mapping[str, int],
        raw_files: list[str] | None = None,
        snapshot_id: int | None = None,
        schema: list[tuple[str, str]] | None = None,
        error: str | None = None,
    ) -> None:
        """COMPLETE (status ok or skipped) or FAIL, with the counts, the raw files read, the snapshot and
        the output's schema."""
        facets: dict[str, Any] = {
            RUN_FACET: _facet(
                RUN_FACET_SCHEMA,
                verb=self.verb,
                runId=self.run_id,
                status=status,
                snapshotId=snapshot_id,
                rawFiles=list(raw_files or []),
                **{name: int(counts.get(name, 0)) for name in COUNTS},
            )
        }
        if error:
            facets["errorMessage"] = _facet(ERROR_FACET_SCHEMA, message=error, programmingLanguage="PYTHON")
        event_type = "FAIL" if status == "failed" else "COMPLETE"
        self.log.write(self.event(event_type, run_facets=facets, schema=schema))

    def event(
        self,
        event_type: str,
        *,
        run_facets: dict[str, Any] | None = None,
        schema: list[tuple[str, str]] | None = None,
    ) -> dict[str, Any]:
        output: dict[str, Any] = {**self.log.naming.dataset(self.table), "facets": {}}
        if schema:
            output["facets"]["schema"] = _facet(
                SCHEMA_FACET_SCHEMA, fields=[{"name": name, "type": kind} for name, kind in schema]
            )
        inputs = []
        if self.verb in READS_RAW:
            inputs.append({**raw_dataset(self.log.raw_root, self.table.source.prefix), "facets": {}})
        return {
            "eventType": event_type,
            "eventTime": _now(),
            "producer": PRODUCER,
            "schemaURL": RUN_EVENT_SCHEMA,
            "run": {"runId": self.openlineage_run_id, "facets": run_facets or {}},
            "job": {
                "namespace": JOB_NAMESPACE,
                "name": job_name(self.verb, self.table.id),
                "facets": {
                    "jobType": _facet(
                        JOB_TYPE_SCHEMA,
                        processingType="BATCH",
                        integration="LAKELOADER",
                        jobType=JOB_TYPES[self.verb],
                    )
                },
            },
            "inputs": inputs,
            "outputs": [output],
        }


def naming_for(warehouse: str) -> TableNaming:
    """The naming of the session's catalog: a local warehouse is a Hadoop catalog; an s3:// one is the
    Glue Data Catalog of the account and region the AWS clients reach (the emulator's, or AWS's)."""
    if not warehouse.startswith(("s3://", "s3a://")):
        return TableNaming.hadoop_catalog(warehouse)
    import boto3

    session = boto3.session.Session()
    account = session.client("sts").get_caller_identity()["Account"]
    return TableNaming.glue_catalog(session.region_name or "us-east-1", account)


def open_log(path: str | None, *, warehouse: str, raw_root: str) -> LineageLog | None:
    """The lineage log of a run: `path` (the config's `lineage.file` or --lineage-file), else
    $LAKELOADER_LINEAGE_FILE, else none."""
    chosen = path or os.environ.get(FILE_ENV)
    if not chosen:
        return None
    return LineageLog(Path(chosen), naming_for(warehouse), raw_root)


def read_events(path: str | Path) -> list[dict[str, Any]]:
    """The events of a lineage file, in the order they were written."""
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def describe(events: list[dict[str, Any]], table_id: str) -> list[str]:
    """One table's lineage for a reader: each finished run of its jobs, what it read and wrote."""
    jobs = {job_name(verb, table_id) for verb in JOB_TYPES}
    lines = []
    for event in events:
        name = event["job"]["name"]
        if event["eventType"] == "START" or name not in jobs:
            continue
        facet = event["run"]["facets"].get(RUN_FACET, {})
        lines.append(f"{event['eventTime']}  {name}  {event['eventType']}  (run {facet.get('runId', '?')})")
        for dataset in event["inputs"]:
            lines.append(f"  in   {dataset['namespace']}  {dataset['name']}")
        lines.extend(f"         {raw}" for raw in facet.get("rawFiles", []))
        for dataset in event["outputs"]:
            columns = [f["name"] for f in dataset.get("facets", {}).get("schema", {}).get("fields", [])]
            lines.append(f"  out  {dataset['namespace']}  {dataset['name']}")
            if columns:
                lines.append(f"         columns: {', '.join(columns)}")
        counts = ", ".join(f"{k} {facet[k]}" for k in COUNTS if k in facet)
        if counts:
            lines.append(f"  counts: {counts}; snapshot {facet.get('snapshotId')}")
    return lines
