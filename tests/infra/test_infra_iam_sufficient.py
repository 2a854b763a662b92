"""IAM is sufficient: every role may do what its code does, on the resources the stack wires it to.

test_infra_iam.py checks that no role holds more than it should; this file checks the other side.
Each role's needs are written out from reading the code that runs under it, with the resource
names taken from where the template hands them to that code (job arguments, Lambda environment,
custom-resource properties, state-machine definition), then evaluated against the synthesized
policies with IAM's wildcard and condition rules (tests/infra/iam_eval.py):

* Glue jobs (glue_jobs/*.py -> lakeloader.jobs.main): config table Scan (config_store.scan_items); ledger
  Query/UpdateItem (Ledger.pending_objects, claim, finish); runs table PutItem/GetItem/UpdateItem/
  DeleteItem (start_run, end_run, acquire/renew/release_lock); raw objects GetObject (Spark read);
  warehouse objects Get/Put/Delete/AbortMultipartUpload and ListBucket (Iceberg S3FileIO commits,
  multipart uploads, snapshot expiry, orphan-file listing in maintenance); Glue catalog GetDatabase
  (CREATE NAMESPACE IF NOT EXISTS) and GetTable/CreateTable/UpdateTable (Iceberg GlueCatalog load,
  create, commit); cloudwatch:PutMetricData in lakeloader's namespace (jobs.publish_metrics); the
  KMS key of each bucket and table it touches; its own script and the lakeloader library.
* EMR job role: the same lake access, for the arguments the arrival Lambda passes (EMR_EXTRA_ARGS),
  plus its entry point, the library in spark.submit.pyFiles and the application's S3 logs.
* S3-arrival Lambda (lakeloader.control.trigger): config Scan (load_routes), PutItem/GetItem (found tables);
  ledger PutItem/GetItem/Query (record, get_object, has_pending); runs
  GetItem/PutItem/UpdateItem/DeleteItem (get_lock, reserve_start, note_engine_run, release_lock;
  window_opens_at, claim_window, unclaim_window for batched tables); glue:StartJobRun (FLEX runs too:
  same action); emr-serverless:StartJobRun with iam:PassRole of the EMR role; its log group; its
  dead-letter queue.
* Config sync Lambda (lakeloader.control.config_store.sync_items): Scan and BatchWriteItem; GetObject of the
  items' file asset (read_items).
* Maintenance state machine: the Glue .sync integration and sns:Publish on failure; the schedule's
  role starts the state machine.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

import pytest

from lakeloader.control.contract import METRICS_NAMESPACE
from lakeloader.engine.tombstones import SUFFIX as TOMBSTONES
from tests.infra.cdk_helpers import config_items
from tests.infra.iam_eval import ACCOUNT, REGION, Resolver, allowed, matches, role_statements

ARN = f"{REGION}:{ACCOUNT}"
SPARK_CATALOG = "spark.sql.catalog.glue_catalog.warehouse"


# The DynamoDB calls of a job run, per table: config_store.scan_items (config); Ledger.next_batch,
# claim, finish (ledger); start_run, end_run, acquire/renew/release_lock (runs). tests/unit/test_drain.py
# records what drain_table really sends and checks it against this list.
JOB_DYNAMODB_ACTIONS = {
    "config": ["Scan"],
    "ledger": ["Query", "UpdateItem"],
    "runs": ["PutItem", "GetItem", "UpdateItem", "DeleteItem", "Query"],  # Query: runs left running
}


@dataclass(frozen=True)
class Need:
    action: str
    resource: str
    why: str
    context: tuple[tuple[str, str], ...] = field(default=())


def s3_arn(url: str) -> str:
    parsed = urlparse(url)
    assert parsed.scheme == "s3", url
    return f"arn:aws:s3:::{parsed.netloc}{parsed.path}"


def dynamodb_arn(table: str) -> str:
    return f"arn:aws:dynamodb:{ARN}:table/{table}"


class Stack:
    """The synthesized template with its intrinsics resolved, and lookups by what code receives."""

    def __init__(self, template: dict[str, Any], items: list[dict[str, Any]]) -> None:
        self.template = template
        self.items = items  # the config sync's (a file asset the template names)
        self.resources: dict[str, dict[str, Any]] = template["Resources"]
        self.resolve = Resolver(template)

    def of_type(self, kind: str) -> dict[str, dict[str, Any]]:
        return {k: v.get("Properties", {}) for k, v in self.resources.items() if v["Type"] == kind}

    def role_id(self, role_arn_value: Any) -> str:
        arn = self.resolve(role_arn_value)
        found = [k for k in self.of_type("AWS::IAM::Role") if self.resolve({"Fn::GetAtt": [k, "Arn"]}) == arn]
        assert len(found) == 1, (arn, found)
        return found[0]

    def _one(self, kind: str, name: str, resolved_as) -> dict[str, Any]:
        found = [p for k, p in self.of_type(kind).items() if resolved_as(k) == name]
        assert len(found) == 1, f"expected one {kind} named {name!r}, found {len(found)}"
        return found[0]

    def bucket_key_arn(self, bucket: str) -> str:
        props = self._one("AWS::S3::Bucket", bucket, lambda k: self.resolve({"Ref": k}))
        (rule,) = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
        return self.resolve(rule["ServerSideEncryptionByDefault"]["KMSMasterKeyID"])

    def table_key_arn(self, table: str) -> str:
        props = self._one("AWS::DynamoDB::Table", table, lambda k: self.resolve({"Ref": k}))
        return self.resolve(props["SSESpecification"]["KMSMasterKeyId"])

    def queue_key_arn(self, queue_arn: str) -> str:
        props = self._one("AWS::SQS::Queue", queue_arn, lambda k: self.resolve({"Fn::GetAtt": [k, "Arn"]}))
        return self.resolve(props["KmsMasterKeyId"])

    def topic_key_arn(self, topic_arn: str) -> str:
        props = self._one("AWS::SNS::Topic", topic_arn, lambda k: self.resolve({"Ref": k}))
        return self.resolve(props["KmsMasterKeyId"])

    def table_configs(self) -> list[dict[str, Any]]:
        """The table configs the config-sync custom resource writes (what the jobs and trigger read)."""
        return [json.loads(item["config"]) for item in self.items]

    def database_location(self, name: str) -> str:
        """The LocationUri of the stack's Glue database `name` (where Iceberg puts its tables)."""
        found = [
            self.resolve(props["DatabaseInput"]["LocationUri"]).rstrip("/")
            for props in self.of_type("AWS::Glue::Database").values()
            if self.resolve(props["DatabaseInput"]["Name"]) == name
        ]
        assert len(found) == 1, f"expected one Glue database named {name!r}, found {len(found)}"
        return found[0]

    def lambda_with_env(self, variable: str) -> dict[str, Any]:
        found = [
            p for p in self.of_type("AWS::Lambda::Function").values()
            if variable in p.get("Environment", {}).get("Variables", {})
        ]  # fmt: skip
        assert len(found) == 1, variable
        return found[0]


def kms(key_arn: str, actions: list[str], why: str) -> list[Need]:
    return [Need(f"kms:{a}", key_arn, why) for a in actions]


def dynamodb(stack: Stack, table: str, actions: list[str], why: str) -> list[Need]:
    needs = [Need(f"dynamodb:{a}", dynamodb_arn(table), why) for a in actions]
    return needs + kms(stack.table_key_arn(table), ["Decrypt", "DescribeKey"], f"{why} (table key)")


def lake_needs(stack: Stack, args: dict[str, str], code_urls: list[str]) -> list[Need]:
    """What lakeloader.jobs.ingest_main / maintain_main do with the job arguments they receive."""
    needs = []
    for table, actions in JOB_DYNAMODB_ACTIONS.items():
        needs += dynamodb(stack, args[table], actions, f"the jobs' {table} table")
    raw, warehouse = urlparse(args["raw_root"]), urlparse(args["warehouse"])
    curated_key = stack.bucket_key_arn(warehouse.netloc)
    for table in stack.table_configs():
        raw_object = f"arn:aws:s3:::{raw.netloc}{raw.path}{table['source']['prefix']}LOAD00000001.parquet"
        needs.append(Need("s3:GetObject", raw_object, f"{table['id']}: Spark reads the raw file"))
        database = args["database_prefix"] + table["target"]["database"]  # jobs.with_database_prefix
        location = stack.database_location(database)
        table_root = f"{location}/{table['target']['table']}"
        assert table_root.startswith(args["warehouse"]), table_root
        side_root = f"{location}/{table['target']['table']}{TOMBSTONES}"  # lakeloader.engine.tombstones
        for root in (table_root, side_root):
            for path in ("data/00000-0-a.parquet", "metadata/00001-b.metadata.json"):
                arn = s3_arn(f"{root}/{path}")
                for action in ("GetObject", "PutObject", "DeleteObject", "AbortMultipartUpload"):
                    needs.append(
                        Need(f"s3:{action}", arn, f"{table['id']}: Iceberg S3FileIO ({root}/{path})")
                    )
        needs.append(
            Need(
                "s3:ListBucket",
                f"arn:aws:s3:::{warehouse.netloc}",
                f"{table['id']}: orphan-file listing (maintenance)",
                (("s3:prefix", f"{urlparse(table_root).path.lstrip('/')}/"),),
            )
        )
        catalog = f"arn:aws:glue:{ARN}:catalog"
        database_arn = f"arn:aws:glue:{ARN}:database/{database}"
        table_arn = f"arn:aws:glue:{ARN}:table/{database}/{table['target']['table']}"
        side_arn = f"{table_arn}{TOMBSTONES}"
        for resource in (catalog, database_arn):
            needs.append(Need("glue:GetDatabase", resource, f"{table['id']}: CREATE NAMESPACE IF NOT EXISTS"))
        for action in ("GetTable", "CreateTable", "UpdateTable"):
            for resource in (catalog, database_arn, table_arn, side_arn):
                needs.append(Need(f"glue:{action}", resource, f"{table['id']}: Iceberg GlueCatalog"))
    needs += kms(stack.bucket_key_arn(raw.netloc), ["Decrypt"], "raw objects are SSE-KMS")
    needs += kms(curated_key, ["Decrypt", "GenerateDataKey"], "warehouse objects are SSE-KMS (multipart too)")
    needs.append(
        Need(
            "cloudwatch:PutMetricData",
            "*",
            "jobs.publish_metrics",
            (("cloudwatch:namespace", METRICS_NAMESPACE),),
        )
    )
    needs += [Need("s3:GetObject", s3_arn(url), "the engine loads the job's code") for url in code_urls]
    return needs


def glue_job_needs(stack: Stack) -> dict[str, list[Need]]:
    by_role: dict[str, list[Need]] = {}
    for props in stack.of_type("AWS::Glue::Job").values():
        defaults = {k: stack.resolve(v) for k, v in props["DefaultArguments"].items()}
        args = {
            "config": defaults["--lakeloader_config_table"],
            "ledger": defaults["--lakeloader_ledger_table"],
            "runs": defaults["--lakeloader_runs_table"],
            "raw_root": defaults["--lakeloader_raw_root"],
            "warehouse": defaults["--lakeloader_warehouse"],
            "database_prefix": defaults.get("--lakeloader_database_prefix", ""),
        }
        code = [stack.resolve(props["Command"]["ScriptLocation"]), *defaults["--extra-py-files"].split(",")]
        by_role.setdefault(stack.role_id(props["Role"]), []).extend(lake_needs(stack, args, code))
    return by_role


def arrival_env(stack: Stack) -> dict[str, str]:
    function = stack.lambda_with_env("EMR_EXTRA_ARGS")
    return {k: stack.resolve(v) for k, v in function["Environment"]["Variables"].items()}


def emr_job_needs(stack: Stack) -> dict[str, list[Need]]:
    env = arrival_env(stack)
    passed = json.loads(env["EMR_EXTRA_ARGS"])
    flags = dict(zip(passed[::2], passed[1::2], strict=True))
    args = {
        "config": flags["--config-table"],
        "ledger": flags["--ledger-table"],
        "runs": flags["--runs-table"],
        "raw_root": flags["--raw-root"],
        "warehouse": flags["--warehouse"],
        "database_prefix": flags.get("--database-prefix", ""),
    }
    (application,) = [
        p for k, p in stack.of_type("AWS::EMRServerless::Application").items()
        if stack.resolve({"Fn::GetAtt": [k, "ApplicationId"]}) == env["EMR_APPLICATION_ID"]
    ]  # fmt: skip
    (spark_defaults,) = [
        {k: stack.resolve(v) for k, v in c["Properties"].items()}
        for c in application["RuntimeConfiguration"]
        if c["Classification"] == "spark-defaults"
    ]
    assert spark_defaults[SPARK_CATALOG] == args["warehouse"]
    code = [env["EMR_ENTRY_POINT"], *spark_defaults["spark.submit.pyFiles"].split(",")]
    needs = lake_needs(stack, args, code)
    logs = application["MonitoringConfiguration"]["S3MonitoringConfiguration"]
    log_object = s3_arn(stack.resolve(logs["LogUri"]).rstrip("/") + "/applications/x/jobs/y/stdout.gz")
    needs += [Need("s3:PutObject", log_object, "EMR Serverless writes the run's logs")]
    needs += kms(stack.resolve(logs["EncryptionKeyArn"]), ["GenerateDataKey"], "the run's logs are encrypted")
    return {stack.role_id(env["EMR_JOB_ROLE_ARN"]): needs}


def log_group_needs(stack: Stack, function: dict[str, Any], why: str) -> list[Need]:
    group = stack.resolve(function["LoggingConfig"]["LogGroup"])
    stream = f"arn:aws:logs:{ARN}:log-group:{group}:log-stream:2026/01/01/[$LATEST]0123"
    return [Need(f"logs:{a}", stream, why) for a in ("CreateLogStream", "PutLogEvents")]


def arrival_needs(stack: Stack) -> dict[str, list[Need]]:
    function = stack.lambda_with_env("EMR_EXTRA_ARGS")
    env = arrival_env(stack)
    needs = dynamodb(stack, env["CONFIG_TABLE"], ["Scan"], "trigger.load_routes")
    needs += dynamodb(stack, env["CONFIG_TABLE"], ["PutItem", "GetItem"], "trigger.found: found tables")
    needs += dynamodb(
        stack, env["LEDGER_TABLE"], ["PutItem", "GetItem", "Query"], "Ledger.record/has_pending"
    )
    needs += dynamodb(
        stack, env["RUNS_TABLE"], ["GetItem", "PutItem", "UpdateItem", "DeleteItem"], "table lock, window"
    )
    needs += kms(stack.table_key_arn(env["LEDGER_TABLE"]), ["Encrypt", "GenerateDataKey"], "ledger writes")
    needs.append(
        Need("glue:StartJobRun", f"arn:aws:glue:{ARN}:job/{env['GLUE_JOB_NAME']}", "Trigger._start_glue")
    )
    needs.append(
        Need(
            "emr-serverless:StartJobRun",
            f"arn:aws:emr-serverless:{ARN}:/applications/{env['EMR_APPLICATION_ID']}",
            "Trigger._start_emr",
        )
    )
    needs.append(
        Need(
            "iam:PassRole",
            env["EMR_JOB_ROLE_ARN"],
            "Trigger._start_emr passes executionRoleArn",
            (("iam:PassedToService", "emr-serverless.amazonaws.com"),),
        )
    )
    needs += log_group_needs(stack, function, "the function's log lines")
    queue = stack.resolve(function["DeadLetterConfig"]["TargetArn"])
    needs.append(Need("sqs:SendMessage", queue, "failed async invocations go to the dead-letter queue"))
    needs += kms(
        stack.queue_key_arn(queue), ["GenerateDataKey", "Decrypt"], "the dead-letter queue is encrypted"
    )
    return {stack.role_id(function["Role"]): needs}


def config_sync_needs(stack: Stack) -> dict[str, list[Need]]:
    (sync,) = stack.of_type("Custom::LakeloaderConfigSync").values()
    token = stack.resolve(sync["ServiceToken"])
    (function,) = [
        p for k, p in stack.of_type("AWS::Lambda::Function").items()
        if stack.resolve({"Fn::GetAtt": [k, "Arn"]}) == token
    ]  # fmt: skip
    table = stack.resolve(sync["TableName"])
    needs = dynamodb(stack, table, ["Scan", "BatchWriteItem"], "config_store.sync_items / delete_items")
    items = f"arn:aws:s3:::{stack.resolve(sync['ItemsBucket'])}/{sync['ItemsKey']}"
    needs.append(Need("s3:GetObject", items, "config_store.read_items: this deploy's items"))
    needs += kms(stack.table_key_arn(table), ["Encrypt", "GenerateDataKey"], "config table writes")
    needs += log_group_needs(stack, function, "the function's log lines")
    return {stack.role_id(function["Role"]): needs}


def maintenance_needs(stack: Stack) -> dict[str, list[Need]]:
    by_role: dict[str, list[Need]] = {}
    for logical, props in stack.of_type("AWS::StepFunctions::StateMachine").items():
        definition = json.loads(stack.resolve(props["DefinitionString"]))
        needs = []
        for state in definition["States"].values():
            resource, params = state.get("Resource", ""), state.get("Parameters", {})
            if resource.endswith(":glue:startJobRun.sync"):
                job = f"arn:aws:glue:{ARN}:job/{params['JobName']}"
                needs += [
                    Need(f"glue:{a}", job, "Glue .sync integration")
                    for a in ("StartJobRun", "GetJobRun", "GetJobRuns", "BatchStopJobRun")
                ]
            elif resource.endswith(":sns:publish"):
                needs.append(Need("sns:Publish", params["TopicArn"], "failure notice"))
                needs += kms(
                    stack.topic_key_arn(params["TopicArn"]), ["GenerateDataKey", "Decrypt"], "topic key"
                )
        needs += [
            Need(f"logs:{a}", "*", "execution logs") for a in ("CreateLogDelivery", "PutResourcePolicy")
        ]
        needs += [Need("xray:PutTraceSegments", "*", "tracing")]
        by_role.setdefault(stack.role_id(props["RoleArn"]), []).extend(needs)
        machine = stack.resolve({"Ref": logical})
        for rule in stack.of_type("AWS::Events::Rule").values():
            for target in rule.get("Targets", []):
                if "RoleArn" in target and stack.resolve(target["Arn"]) == machine:
                    by_role.setdefault(stack.role_id(target["RoleArn"]), []).append(
                        Need("states:StartExecution", machine, "the maintenance schedule")
                    )
    return by_role


ROLE_NEEDS = {
    "glue-job": glue_job_needs,
    "emr-job": emr_job_needs,
    "s3-arrival": arrival_needs,
    "config-sync": config_sync_needs,
    "maintenance": maintenance_needs,
}


def missing(stack: Stack, needs: dict[str, list[Need]]) -> list[str]:
    gaps = []
    for role_id, role_needs in needs.items():
        statements = role_statements(stack.template, role_id)
        for need in dict.fromkeys(role_needs):
            if not allowed(statements, need.action, need.resource, dict(need.context)):
                gaps.append(f"{role_id}: {need.action} on {need.resource} ({need.why})")
    return gaps


@pytest.mark.parametrize("role", sorted(ROLE_NEEDS))
def test_role_may_do_what_its_code_does(stage_synth, role):
    stack = Stack(stage_synth.template_json, config_items(stage_synth))
    needs = ROLE_NEEDS[role](stack)
    assert needs and all(needs.values()), f"{role}: no role or no needs found"
    gaps = missing(stack, needs)
    assert not gaps, "\n".join(gaps)


# -- the evaluator itself ------------------------------------------------------------------


def test_wildcards_match_as_iam_does():
    assert matches("s3:Get*", "s3:GetObject") and matches("S3:GETOBJECT", "s3:GetObject", ignore_case=True)
    assert not matches("s3:Get*", "s3:PutObject")
    assert matches("arn:aws:s3:::b/warehouse/*", "arn:aws:s3:::b/warehouse/db.db/t/data/x.parquet")
    assert not matches("arn:aws:s3:::b/warehouse/*", "arn:aws:s3:::b/warehousex")
    assert matches("arn:aws:s3:::b/?.txt", "arn:aws:s3:::b/a.txt") and not matches(
        "arn:aws:s3:::b/?.txt", "arn:aws:s3:::b/ab.txt"
    )
    assert not matches("arn:aws:s3:::B/*", "arn:aws:s3:::b/x")  # resources are case-sensitive


def test_conditions_and_denies_are_evaluated():
    template = {
        "Resources": {
            "R": {"Type": "AWS::IAM::Role", "Properties": {"RoleName": "r", "Policies": [{"PolicyDocument": {
                "Statement": [
                    {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": "arn:aws:s3:::b",
                     "Condition": {"StringLike": {"s3:prefix": ["warehouse/*"]}}},
                    {"Effect": "Allow", "Action": "s3:*Object", "Resource": "arn:aws:s3:::b/*"},
                    {"Effect": "Deny", "Action": "s3:DeleteObject", "Resource": "arn:aws:s3:::b/keep/*"},
                ]}}]}},
        }
    }  # fmt: skip
    statements = role_statements(template, "R")
    assert allowed(statements, "s3:ListBucket", "arn:aws:s3:::b", {"s3:prefix": "warehouse/db/"})
    assert not allowed(statements, "s3:ListBucket", "arn:aws:s3:::b", {"s3:prefix": "raw/"})
    assert not allowed(statements, "s3:ListBucket", "arn:aws:s3:::b")
    assert allowed(statements, "s3:DeleteObject", "arn:aws:s3:::b/x")
    assert not allowed(statements, "s3:DeleteObject", "arn:aws:s3:::b/keep/x")
