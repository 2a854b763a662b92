"""Storage: the lake's KMS key and its buckets (raw, curated, quarantine, job assets, access logs)."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from aws_cdk import Aws, Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.nag import acknowledge_check
from infra.settings import RawTransition, SettingsError
from infra.settings_names import LONGEST_REGION, Retention, StageNames
from lakeloader.control.contract import EMR_LOGS_PREFIX

WAREHOUSE_PREFIX = "warehouse/"
GLUE_TEMP_PREFIX = "glue/tmp/"
SPARK_UI_PREFIX = "glue/spark-ui/"

_STORAGE_CLASSES = {
    "STANDARD_IA": s3.StorageClass.INFREQUENT_ACCESS,
    "ONEZONE_IA": s3.StorageClass.ONE_ZONE_INFREQUENT_ACCESS,
    "INTELLIGENT_TIERING": s3.StorageClass.INTELLIGENT_TIERING,
    "GLACIER_IR": s3.StorageClass.GLACIER_INSTANT_RETRIEVAL,
    "GLACIER": s3.StorageClass.GLACIER,
    "DEEP_ARCHIVE": s3.StorageClass.DEEP_ARCHIVE,
}


_RETENTION = {
    1: logs.RetentionDays.ONE_DAY,
    3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS,
    90: logs.RetentionDays.THREE_MONTHS,
    120: logs.RetentionDays.FOUR_MONTHS,
    150: logs.RetentionDays.FIVE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
    400: logs.RetentionDays.THIRTEEN_MONTHS,
    545: logs.RetentionDays.EIGHTEEN_MONTHS,
    731: logs.RetentionDays.TWO_YEARS,
    1827: logs.RetentionDays.FIVE_YEARS,
    3653: logs.RetentionDays.TEN_YEARS,
}


# The longest values the account and region tokens of a bucket name can take.
WORST_CASE_ACCOUNT = "123456789012"
WORST_CASE_REGION = LONGEST_REGION
_BUCKET_CHARS = re.compile(r"^[a-z0-9][a-z0-9.-]*[a-z0-9]$")
_BUCKET_RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_BUCKET_RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")


def bucket_name_problem(name: str) -> str | None:
    """Why S3 would reject the bucket name, or None (general purpose bucket naming rules)."""
    if not 3 <= len(name) <= 63:
        return f"{len(name)} characters; S3 allows 3 to 63"
    if not _BUCKET_CHARS.match(name):
        return "only lower-case letters, digits, '.' and '-', starting and ending with a letter or digit"
    if ".." in name:
        return "two adjacent periods"
    try:
        ipaddress.IPv4Address(name)
        return "formatted as an IP address"
    except ValueError:
        pass
    if name.startswith(_BUCKET_RESERVED_PREFIXES) or name.endswith(_BUCKET_RESERVED_SUFFIXES):
        return "a prefix or suffix S3 reserves"
    return None


def removal_policy(retention: Retention) -> RemovalPolicy:
    """dev: resources go with the stack; prod: they outlive it."""
    return RemovalPolicy.RETAIN if retention.retain else RemovalPolicy.DESTROY


def log_retention(retention: Retention) -> logs.RetentionDays:
    return _RETENTION[retention.log_retention_days]


def stage_log_group(
    scope: Construct, construct_id: str, *, retention: Retention, name: str, key: kms.IKey
) -> logs.LogGroup:
    """A log group encrypted with the stage's key, with the stage's retention."""
    return logs.LogGroup(
        scope,
        construct_id,
        log_group_name=name,
        retention=log_retention(retention),
        encryption_key=key,
        removal_policy=removal_policy(retention),
    )


@dataclass(frozen=True, kw_only=True)
class StorageSettings:
    """What LakeStorage takes of the stage: its names, retention, key and the buckets' lifecycles."""

    names: StageNames
    retention: Retention
    key_arn: str | None  # encryption.key_arn: a key of yours instead of the stage's own
    raw_transition: RawTransition
    noncurrent_version_expiration_days: int
    quarantine_expiration_days: int
    access_log_expiration_days: int
    temp_expiration_days: int


class LakeStorage(Construct):
    """The customer-managed key and the buckets of one stage.

    Lake buckets (raw, curated, quarantine, assets) are KMS-encrypted with the key (S3
    bucket keys on), versioned, private, TLS-only, and log their access to the access-log
    bucket (SSE-S3: S3 server access logging cannot deliver to SSE-KMS buckets). dev may
    destroy everything with the stack; prod retains buckets and key.
    """

    def __init__(self, scope: Construct, construct_id: str, *, settings: StorageSettings) -> None:
        super().__init__(scope, construct_id)
        self.settings = settings
        self.key_policy_statements: list[iam.PolicyStatement] = []
        self.key = self._key()
        self._allow_logs_on_key()
        self.access_logs = self._access_logs_bucket()
        self._lake_buckets()

    def _key(self) -> kms.IKey:
        """The stage's customer-managed key, or the one encryption.key_arn names."""
        settings, prefix = self.settings, self.settings.names.prefix
        if settings.key_arn:
            return kms.Key.from_key_arn(self, "Key", settings.key_arn)
        return kms.Key(
            self,
            "Key",
            alias=f"alias/{prefix}",
            description=f"{prefix}: encrypts the lake's buckets, tables, queues, topics and logs",
            enable_key_rotation=True,
            pending_window=Duration.days(30 if settings.retention.retain else 7),
            removal_policy=removal_policy(settings.retention),
        )

    def _allow_logs_on_key(self) -> None:
        """CloudWatch Logs encrypts the stage's log groups (Lambda, Step Functions, Glue security
        configuration) with the key; scoped by the log-group encryption context."""
        self.allow_on_key(
            iam.PolicyStatement(
                sid="AllowCloudWatchLogsOfThisAccount",
                principals=[iam.ServicePrincipal(f"logs.{Aws.REGION}.amazonaws.com")],
                actions=[
                    "kms:Encrypt*",
                    "kms:Decrypt*",
                    "kms:ReEncrypt*",
                    "kms:GenerateDataKey*",
                    "kms:Describe*",
                ],
                resources=["*"],
                conditions={
                    "ArnLike": {
                        "kms:EncryptionContext:aws:logs:arn": (
                            f"arn:{Aws.PARTITION}:logs:{Aws.REGION}:{Aws.ACCOUNT_ID}:log-group:*"
                        )
                    }
                },
            )
        )

    def _access_logs_bucket(self) -> s3.Bucket:
        access_logs = s3.Bucket(
            self,
            "AccessLogs",
            bucket_name=self._bucket_name("access-logs"),
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            enforce_ssl=True,
            minimum_tls_version=1.2,
            versioned=True,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-access-logs",
                    expiration=Duration.days(self.settings.access_log_expiration_days),
                    noncurrent_version_expiration=Duration.days(1),
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                )
            ],
            removal_policy=removal_policy(self.settings.retention),
            auto_delete_objects=not self.settings.retention.retain,
        )
        acknowledge_check(
            access_logs,
            "CKV_AWS_18",
            reason=(
                "The access-log bucket receives the other buckets' server access logs: logging it to itself "
                "would loop, and to another bucket would only move the question."
            ),
        )
        return access_logs

    def _lake_buckets(self) -> None:
        """Raw, curated, quarantine and assets, each with its lifecycle."""
        settings = self.settings
        noncurrent = Duration.days(settings.noncurrent_version_expiration_days)
        transition = settings.raw_transition
        self.raw = self.lake_bucket(
            "Raw",
            "raw",
            [
                s3.LifecycleRule(
                    id="raw-to-colder-storage",
                    transitions=[
                        s3.Transition(
                            storage_class=_STORAGE_CLASSES[transition.storage_class],
                            transition_after=Duration.days(transition.days),
                        )
                    ],
                ),
                s3.LifecycleRule(
                    id="expire-noncurrent-versions",
                    noncurrent_version_expiration=noncurrent,
                    abort_incomplete_multipart_upload_after=Duration.days(7),
                ),
            ],
        )
        self.curated = self.lake_bucket(
            "Curated",
            "curated",
            [
                s3.LifecycleRule(
                    id="expire-noncurrent-versions",
                    noncurrent_version_expiration=noncurrent,
                    abort_incomplete_multipart_upload_after=Duration.days(7),
                )
            ],
        )
        self.quarantine = self.lake_bucket(
            "Quarantine",
            "quarantine",
            [
                s3.LifecycleRule(
                    id="expire-quarantined-files",
                    expiration=Duration.days(settings.quarantine_expiration_days),
                    noncurrent_version_expiration=noncurrent,
                    abort_incomplete_multipart_upload_after=Duration.days(7),
                )
            ],
        )
        self.assets = self.lake_bucket(
            "Assets",
            "assets",
            [
                s3.LifecycleRule(
                    id="expire-noncurrent-versions",
                    noncurrent_version_expiration=noncurrent,
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                ),
                s3.LifecycleRule(
                    id="expire-glue-temp",
                    prefix=GLUE_TEMP_PREFIX,
                    expiration=Duration.days(settings.temp_expiration_days),
                ),
                # EMR Serverless job logs and Spark UI event logs: kept as long as the stage's log groups.
                s3.LifecycleRule(
                    id="expire-emr-logs",
                    prefix=EMR_LOGS_PREFIX,
                    expiration=Duration.days(settings.retention.log_retention_days),
                ),
                s3.LifecycleRule(
                    id="expire-spark-ui-logs",
                    prefix=SPARK_UI_PREFIX,
                    expiration=Duration.days(settings.retention.log_retention_days),
                ),
            ],
        )

    def allow_on_key(self, statement: iam.PolicyStatement) -> None:
        """Add a service's statement to the key's policy; a key of yours cannot be edited from here, so the
        statement is kept for the stack's KeyPolicyStatements output instead."""
        if not self.key.add_to_resource_policy(statement).statement_added:
            self.key_policy_statements.append(statement)

    def grant_key_use(self, role: iam.IRole) -> None:
        """Let `role` encrypt and decrypt with the stage's key: what a role that reads and writes the
        lake's buckets and tables needs of it."""
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="UseLakeKey",
                actions=["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey"],
                resources=[self.key.key_arn],
            )
        )

    @property
    def raw_root(self) -> str:
        """`raw_root` of the jobs on AWS: the raw bucket's root."""
        return f"s3://{self.raw.bucket_name}/"

    @property
    def warehouse(self) -> str:
        """`warehouse` of the jobs on AWS: the Iceberg warehouse in the curated bucket."""
        return f"s3://{self.curated.bucket_name}/{WAREHOUSE_PREFIX}"

    def _bucket_name(self, what: str) -> str:
        """Bucket names are global: stage-scoped and suffixed with account and region.

        Checked here, with the longest account id and region the tokens can become, so a name
        S3 would refuse fails `cdk synth` instead of the deploy.
        """
        names = self.settings.names
        worst_case = f"{names.resource_name(what)}-{WORST_CASE_ACCOUNT}-{WORST_CASE_REGION}"
        problem = bucket_name_problem(worst_case)
        if problem:
            raise SettingsError(
                f"bucket name {names.resource_name(what)}-<account>-<region> (up to {len(worst_case)} "
                f"characters) is not a valid S3 name: {problem}; shorten context lakeloader:project "
                f"({names.project!r}) or the stage name ({names.stage!r})"
            )
        return f"{names.resource_name(what)}-{Aws.ACCOUNT_ID}-{Aws.REGION}"

    def lake_bucket(
        self,
        construct_id: str,
        what: str,
        lifecycle_rules: list[s3.LifecycleRule],
        *,
        scope: Construct | None = None,
    ) -> s3.Bucket:
        """A bucket like the lake's: the stage key, versioned, private, TLS-only, access-logged (in `scope`,
        by default the storage construct)."""
        return s3.Bucket(
            scope or self,
            construct_id,
            bucket_name=self._bucket_name(what),
            encryption=s3.BucketEncryption.KMS,
            encryption_key=self.key,
            bucket_key_enabled=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            enforce_ssl=True,
            minimum_tls_version=1.2,
            versioned=True,
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix=f"{what}/",
            lifecycle_rules=lifecycle_rules,
            removal_policy=removal_policy(self.settings.retention),
            auto_delete_objects=not self.settings.retention.retain,
        )
