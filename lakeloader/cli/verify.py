"""`lakeloader verify --stage NAME`: prove a deployed stage end to end with a canary file.

Like `doctor`, an operator's check from outside the stage: it lives with the CLI, out of the job zip
and out of the VPC (it calls CloudFormation, SNS and Athena, which the stage's network has no
endpoint for, and needs none).

The file lands under the canary table's raw prefix (lakeloader.config.canary) and is followed hop by hop:
the S3 event reaches the arrival Lambda, which records it in the ledger; the Lambda starts a job run
(Glue, and EMR Serverless where a table of the stage runs there); the run loads it and commits to
Iceberg; the rows are read back through the Glue catalog, and through each reader's Athena
workgroup; the alarm topic takes a message. A hop that fails stops the verify, named with its
resource and the first lines of its CloudWatch log.

The rows are read back with pyiceberg (boto3 + pyarrow, no JVM): it reads the table as any engine
does -- catalog, metadata, manifests, data files -- so a table the catalog cannot serve fails here
even when the job's own commit succeeded. boto3 only otherwise; AWS_ENDPOINT_URL points it at an
emulator.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from lakeloader.cli.canary_cleanup import remove_canary
from lakeloader.cli.stage import DeployedStage, StageNotFoundError
from lakeloader.config import canary
from lakeloader.control.contract import ARG_TABLE_ID, EMR_LOGS_PREFIX, glue_arg
from lakeloader.control.ledger import DONE, FAILED, QUARANTINED
from lakeloader.control.ledger.interfaces import StatusLedger
from lakeloader.control.trigger.events import ObjectsArrived

LOG_LINES = 10
TAIL_LINES = 3
GLUE_FAILED = ("FAILED", "ERROR", "TIMEOUT", "STOPPED", "EXPIRED")
EMR_FAILED = ("FAILED", "CANCELLED")
DEAD_LETTER_OUTPUT = "ArrivalDeadLetterQueueUrl"  # the stack's output (infra.stack)


class HopFailed(Exception):
    """One hop did not pass: which, on what resource, why, and its log's first lines."""

    def __init__(self, hop: str, resource: str, detail: str, log: list[str] | None = None) -> None:
        super().__init__(f"{hop}: {resource}: {detail}")
        self.hop, self.resource, self.detail, self.log = hop, resource, detail, log or []

    def describe(self) -> str:
        lines = [f"FAIL {self.hop}", f"     resource: {self.resource}", f"     {self.detail}"]
        lines += [f"     | {line}" for line in self.log]
        return "\n".join(lines)


@dataclass
class Verification:
    """What one verify saw: the hops passed, in order, and the one that failed."""

    passed: list[str] = field(default_factory=list)
    failure: HopFailed | None = None
    removed: list[str] = field(default_factory=list)
    cleanup_errors: list[str] = field(default_factory=list)  # beside the result, never instead of it


def stack_outputs(stack: str) -> dict[str, str]:
    try:
        found = boto3.client("cloudformation").describe_stacks(StackName=stack)["Stacks"]
    except Exception as exc:  # noqa: BLE001 -- one line, as the other stage verbs say it
        raise StageNotFoundError(f"stack {stack!r}: {exc}") from None
    return {o["OutputKey"]: o["OutputValue"] for o in found[0].get("Outputs", [])}


def log_excerpt(
    group: str, stream_prefix: str | None = None, since: float | None = None, lines: int = LOG_LINES
) -> list[str]:
    """The first lines of a CloudWatch log group: of its streams starting `stream_prefix`, or logged
    since `since` (epoch seconds; a busy function's older invocations are not this canary's). A longer
    log ends with its last lines too: a traceback's last line is its error."""
    kwargs: dict[str, Any] = {"logGroupName": group, "limit": 500}
    if stream_prefix:
        kwargs["logStreamNamePrefix"] = stream_prefix
    if since is not None:
        kwargs["startTime"] = int(since * 1000)
    try:
        events = boto3.client("logs").filter_log_events(**kwargs).get("events", [])
    except Exception as exc:  # noqa: BLE001 -- the log is a help to the report, never its cause
        return [f"(log group {group}: {exc})"]
    found = [e["message"].rstrip() for e in events]
    if not found:
        return [f"(no log events in {group})"]
    if len(found) > lines + TAIL_LINES:
        found = [*found[:lines], "...", *found[-TAIL_LINES:]]
    return [f"log group {group}:", *found]


class Verifier:
    """The hops of one stage, each waiting at most `timeout` seconds; `say` prints a passed hop."""

    def __init__(
        self,
        stage: DeployedStage,
        outputs: dict[str, str],
        *,
        timeout: float,
        say: Callable[[str], None],
        poll: float = 1.0,
    ) -> None:
        self.stage, self.outputs, self.timeout, self.say, self.poll = stage, outputs, timeout, say, poll
        self.token = f"verify-{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"
        self.s3, self.glue, self.sqs = boto3.client("s3"), boto3.client("glue"), boto3.client("sqs")
        self.ledger: StatusLedger = stage.ledger()
        self.started, self.started_at = time.monotonic(), time.time()
        self.read_dead_letters = True
        self.current = ("config", f"DynamoDB table {stage.config_table}")  # the hop under way, its resource

    def passed(self, result: Verification, hop: str, detail: str) -> None:
        line = f"ok   {time.monotonic() - self.started:6.1f} s  {hop}: {detail}"
        result.passed.append(hop)
        self.say(line)

    def wait(self, probe: Callable[[], Any], on_timeout: Callable[[], HopFailed]) -> Any:
        """`probe()` until it returns something (or raises HopFailed), for at most `timeout` seconds."""
        deadline = time.monotonic() + self.timeout
        while True:
            found = probe()
            if found:
                return found
            if time.monotonic() > deadline:
                raise on_timeout()
            time.sleep(self.poll)

    def lambda_failure(self, hop: str, detail: str) -> HopFailed:
        function = self.stage.arrival_function
        log = log_excerpt(f"/aws/lambda/{function}", since=self.started_at)
        return HopFailed(hop, f"Lambda {function}", detail, log)

    def dead_letter(self, key: str) -> str | None:
        """Why the arrival Lambda gave up on the S3 event of `key`, if that event is in its dead-letter
        queue: Lambda sends it there after its last retry (on AWS about three minutes after the first
        failure). Messages are read without hiding them; the canary's own is deleted once read. A
        queue that cannot be read (no output on an older stack, no permission) is not probed again:
        the hop then waits for its timeout, as before."""
        url = self.outputs.get(DEAD_LETTER_OUTPUT) if self.read_dead_letters else None
        if not url:
            return None
        try:
            messages = self.sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0, MessageAttributeNames=["All"]
            ).get("Messages", [])
            for message in messages:  # the event as the Lambda read it (lakeloader.control.trigger.events)
                arrived = ObjectsArrived.read(message.get("Body", ""), correlation_id=self.token)
                if key in (o.ref.key for o in arrived.objects):
                    self.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
                    error = message.get("MessageAttributes", {}).get("ErrorMessage", {}).get("StringValue")
                    return (
                        f"Lambda gave up on the S3 event of {key} after its retries: it went to the "
                        f"dead-letter queue {url} (error: {error or 'not given'}; the canary's message "
                        "was removed from the queue)"
                    )
        except (BotoCoreError, ClientError):
            self.read_dead_letters = False
        return None

    # -- the hops of one canary --------------------------------------------------------------------

    def engines(self) -> list[str]:
        """glue always; emr where a table of the stage runs on EMR Serverless. The deployed config must
        hold the canaries (a stack from before `verify` existed does not)."""
        deployed = self.stage.tables()
        ids = {t.id for t in deployed}
        missing = [canary.canary_id(e) for e in canary.CANARY_ENGINES if canary.canary_id(e) not in ids]
        if missing:
            raise HopFailed(
                "config",
                f"DynamoDB table {self.stage.config_table}",
                f"no canary table {missing[0]}: deploy the stage with this lakeloader (cdk deploy)",
            )
        uses_emr = any(t.engine == "emr" for t in deployed if not canary.is_canary(t))
        return ["glue", "emr"] if uses_emr else ["glue"]

    def land(self, result: Verification, engine: str) -> str:
        key = f"{canary.CANARY_PREFIX}{engine}/{self.token}.json"
        self.current = (f"{engine}: land", f"S3 bucket {self.stage.raw_bucket}")
        self.s3.put_object(Bucket=self.stage.raw_bucket, Key=key, Body=canary.canary_file(self.token, engine))
        self.passed(result, f"{engine}: land", f"s3://{self.stage.raw_bucket}/{key}")
        return key

    def recorded(self, result: Verification, engine: str, key: str) -> None:
        table_id = canary.canary_id(engine)
        hop = f"{engine}: arrival Lambda -> ledger"
        self.current = (hop, f"DynamoDB table {self.stage.ledger_table}")

        def probe() -> bool:
            if any(o.key == key for o in self.ledger.objects(table_id)):
                return True
            given_up = self.dead_letter(key)
            if given_up:  # no later attempt can record it: the hop failed now, not at the timeout
                raise self.lambda_failure(hop, given_up)
            return False

        self.wait(
            probe,
            lambda: self.lambda_failure(
                hop, f"no ledger record of {key} in {self.stage.ledger_table} after {self.timeout:.0f} s"
            ),
        )
        self.passed(
            result, f"{engine}: arrival Lambda -> ledger", f"{self.stage.arrival_function} recorded it"
        )

    def job_run(self, result: Verification, engine: str, key: str, since: datetime) -> str:
        """Wait for the file to be loaded; its engine's run, found by the canary table in its arguments,
        fails the hop as soon as it fails. Returns the lakeloader run id that loaded the file."""
        table_id = canary.canary_id(engine)
        self.current = (f"{engine}: job run", self._engine_resource(engine))
        runs: list[tuple[str, str, str]] = []  # (engine run id, state, error)

        def probe() -> str | None:
            (obj,) = [o for o in self.ledger.objects(table_id) if o.key == key] or [None]
            runs[:] = self._engine_runs(engine, table_id, since)
            if obj is not None and obj.status == DONE:
                return obj.run_id or "?"
            if obj is not None and obj.status in (FAILED, QUARANTINED):
                raise self._job_failure(
                    engine, runs, f"the run set the file aside ({obj.status}): {obj.error}"
                )
            failed = [r for r in runs if r[1] in GLUE_FAILED + EMR_FAILED]
            if failed and len(failed) == len(runs):  # every run that took the canary ended without it
                raise self._job_failure(engine, failed[:1], f"{failed[0][1]}: {failed[0][2]}")
            return None

        def on_timeout() -> HopFailed:
            if not runs:
                return self.lambda_failure(
                    f"{engine}: job run", f"no {engine} run started within {self.timeout:.0f} s"
                )
            return self._job_failure(engine, runs, f"{runs[0][1]} after {self.timeout:.0f} s")

        run_id = self.wait(probe, on_timeout)
        engine_run = runs[0][0] if runs else "?"
        self.passed(
            result, f"{engine}: job run", f"{self._engine_resource(engine)} run {engine_run} loaded it"
        )
        return run_id

    def _engine_resource(self, engine: str) -> str:
        if engine == "emr":
            return f"EMR Serverless application {self.stage.emr_application}"
        return f"Glue job {self.stage.ingest_job}"

    def _engine_runs(self, engine: str, table_id: str, since: datetime) -> list[tuple[str, str, str]]:
        """Runs of the engine since the canary landed that took the canary table, newest first."""
        if engine == "emr":
            emr = boto3.client("emr-serverless")
            found = emr.list_job_runs(applicationId=self.stage.emr_application, createdAtAfter=since)
            runs = [r for r in found.get("jobRuns", []) if table_id in (r.get("name") or "")]
            return [(r["id"], r["state"], r.get("stateDetails", "")) for r in runs]
        found = self.glue.get_job_runs(JobName=self.stage.ingest_job, MaxResults=50).get("JobRuns", [])
        runs = [
            r
            for r in found
            if table_id in (r.get("Arguments") or {}).get(glue_arg(ARG_TABLE_ID), "").split(",")
            and r["StartedOn"] >= since
        ]
        runs.sort(key=lambda r: r["StartedOn"], reverse=True)
        return [(r["Id"], r["JobRunState"], r.get("ErrorMessage", "")) for r in runs]

    def _job_failure(self, engine: str, runs: list[tuple[str, str, str]], detail: str) -> HopFailed:
        resource = self._engine_resource(engine)
        if not runs:
            return HopFailed(f"{engine}: job run", resource, detail)
        run_id = runs[0][0]
        if engine == "emr":
            assets = self.outputs.get("AssetsBucketName", "<assets bucket>")
            where = (  # EMR Serverless logs to S3 (infra.emr), not to CloudWatch
                f"driver log: s3://{assets}/{EMR_LOGS_PREFIX}applications/{self.stage.emr_application}/jobs/"
                f"{run_id}/SPARK_DRIVER/stderr.gz"
            )
            return HopFailed(f"{engine}: job run", f"{resource} run {run_id}", detail, [where])
        job = self.glue.get_job(JobName=self.stage.ingest_job)["Job"]
        configuration = job.get("SecurityConfiguration")
        role = job.get("Role", "").rsplit("/", 1)[-1]
        groups = (  # catalog.glue_job_log_groups: where Glue writes under an encrypting configuration
            [f"/aws-glue/jobs/{configuration}-role/{role}/error", f"/aws-glue/jobs/logs-v2-{configuration}"]
            if configuration
            else ["/aws-glue/jobs/error", "/aws-glue/jobs/logs-v2"]
        )
        found = (log_excerpt(group, run_id) for group in groups)
        log = next((lines for lines in found if lines[0].startswith("log group")), None)
        log = log or [f"(no log events of run {run_id} in {', '.join(groups)})"]
        return HopFailed(f"{engine}: job run", f"{resource} run {run_id}", detail, log)

    def committed(self, result: Verification, engine: str, run_id: str) -> dict[str, Any]:
        """The run's snapshot is in the table's Iceberg metadata that the catalog points at. A run marks
        its files loaded before it records its own end (jobs.drain), so this waits for that record."""
        database = self.stage.glue_database(canary.CANARY_DATABASE)
        hop, resource = f"{engine}: iceberg commit", f"Glue table {database}.{engine}"
        self.current = (hop, resource)
        table_id = canary.canary_id(engine)

        def ended() -> Any:
            run = self.ledger.get_run(table_id, run_id)
            return run if run is not None and run.ended_at else None

        def no_end() -> HopFailed:
            run = self.ledger.get_run(table_id, run_id)
            return HopFailed(hop, resource, f"run {run_id} recorded no end within {self.timeout:g} s: {run}")

        run = self.wait(ended, no_end)
        if not run.snapshot_id:
            raise HopFailed(hop, resource, f"run {run_id} recorded no snapshot: {run}")
        table = self.glue.get_table(DatabaseName=database, Name=engine)["Table"]
        location = (table.get("Parameters") or {}).get("metadata_location", "")
        bucket, _, path = location.removeprefix("s3://").partition("/")
        metadata = json.loads(self.s3.get_object(Bucket=bucket, Key=path)["Body"].read())
        snapshot = next(
            (s for s in metadata.get("snapshots", []) if s["snapshot-id"] == run.snapshot_id), None
        )
        if snapshot is None:
            raise HopFailed(hop, resource, f"snapshot {run.snapshot_id} is not in {location}")
        added = snapshot.get("summary", {}).get("added-records", "?")
        self.passed(result, hop, f"{resource} snapshot {run.snapshot_id}, {added} rows added")
        return table

    def read_back(self, result: Verification, engine: str) -> None:
        """The canary's rows, read through the Glue catalog by pyiceberg."""
        database = self.stage.glue_database(canary.CANARY_DATABASE)
        hop, resource = f"{engine}: read through the catalog", f"Glue table {database}.{engine}"
        self.current = (hop, resource)
        try:
            from pyiceberg.catalog import load_catalog
            from pyiceberg.expressions import EqualTo
        except ImportError:
            raise HopFailed(hop, resource, "needs pyiceberg: pip install 'pyiceberg[glue,pyarrow]'") from None
        properties = {"type": "glue"}
        endpoint = os.environ.get("AWS_ENDPOINT_URL")
        if endpoint:
            properties |= {"glue.endpoint": endpoint, "s3.endpoint": endpoint}
        region = boto3.session.Session().region_name
        if region:
            properties |= {"glue.region": region, "s3.region": region}
        table = load_catalog("lakeloader-verify", **properties).load_table((database, engine))
        rows = table.scan(row_filter=EqualTo("canary_id", self.token)).to_arrow().to_pylist()
        if sorted(r["row_no"] for r in rows) != list(range(canary.CANARY_ROWS)):
            raise HopFailed(
                hop, resource, f"read {len(rows)} canary rows, wanted {canary.CANARY_ROWS}: {rows}"
            )
        self.passed(result, hop, f"{len(rows)} rows of {self.token}")

    def athena(self, result: Verification, engine: str) -> None:
        """The canary's rows through each reader's Athena workgroup (as the caller, in that workgroup)."""
        listed = self.outputs.get("ReaderWorkgroups", "")
        if not listed:
            self.say(f"--   {engine}: Athena: no reader of the stage queries through Athena")
            return
        athena = boto3.client("athena")
        table = f'"{self.stage.glue_database(canary.CANARY_DATABASE)}"."{engine}"'
        for entry in listed.split(","):
            workgroup = entry.rsplit("=", 1)[-1]
            hop, resource = f"{engine}: Athena workgroup {workgroup}", f"Athena workgroup {workgroup}"
            self.current = (hop, resource)
            query = f"SELECT count(*) FROM {table} WHERE canary_id = '{self.token}'"
            qid = athena.start_query_execution(QueryString=query, WorkGroup=workgroup)["QueryExecutionId"]

            def probe(qid: str = qid) -> dict[str, Any] | None:
                status = athena.get_query_execution(QueryExecutionId=qid)["QueryExecution"]["Status"]
                return status if status["State"] in ("SUCCEEDED", "FAILED", "CANCELLED") else None

            status = self.wait(
                probe, lambda h=hop, r=resource, q=qid: HopFailed(h, r, f"query {q} still running")
            )
            if status["State"] != "SUCCEEDED":
                raise HopFailed(
                    hop, resource, f"query {qid} {status['State']}: {status.get('StateChangeReason')}"
                )
            rows = athena.get_query_results(QueryExecutionId=qid)["ResultSet"].get("Rows", [])
            count = rows[1]["Data"][0].get("VarCharValue") if len(rows) > 1 else None  # rows[0]: the header
            if count != str(canary.CANARY_ROWS):
                raise HopFailed(
                    hop, resource, f"query {qid} counted {count} canary rows, wanted {canary.CANARY_ROWS}"
                )
            self.passed(result, hop, f"{count} rows")

    def alarm_topic(self, result: Verification) -> None:
        topic = self.outputs.get("AlarmTopicArn", "")
        message = f"lakeloader verify {self.token}: a test message; no action needed"
        try:
            sent = boto3.client("sns").publish(TopicArn=topic, Subject="lakeloader verify", Message=message)
        except Exception as exc:  # noqa: BLE001 -- the hop's failure, named
            raise HopFailed("alarm topic", f"SNS topic {topic}", f"publish refused: {exc}") from None
        self.passed(result, "alarm topic", f"{topic} took message {sent['MessageId']}")


def verify(
    stage: DeployedStage,
    outputs: dict[str, str],
    *,
    keep: bool = False,
    timeout: float = 900,
    say: Callable[[str], None] = print,
) -> Verification:
    """Every hop for each canary, then the alarm topic; the canary removed unless `keep`."""
    verifier, result = Verifier(stage, outputs, timeout=timeout, say=say), Verification()
    try:
        for engine in verifier.engines():
            since = datetime.now(UTC).replace(microsecond=0)
            key = verifier.land(result, engine)
            verifier.recorded(result, engine, key)
            run_id = verifier.job_run(result, engine, key, since)
            verifier.committed(result, engine, run_id)
            verifier.read_back(result, engine)
            verifier.athena(result, engine)
        verifier.alarm_topic(result)
    except HopFailed as failure:
        result.failure = failure
    except (BotoCoreError, ClientError) as exc:  # refused or unreachable: the hop under way failed
        result.failure = HopFailed(*verifier.current, f"{type(exc).__name__}: {exc}")
    finally:  # after the hops, whatever they did: a cleanup error is reported beside them, never raised
        if not keep:
            try:
                removal = remove_canary(stage)
            except Exception as exc:  # noqa: BLE001 - the hops' result stands, the cleanup's error beside it
                result.cleanup_errors.append(f"cleanup: {type(exc).__name__}: {exc}")
            else:
                result.removed, result.cleanup_errors = removal.removed, removal.errors
    return result
