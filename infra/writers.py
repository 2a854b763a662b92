"""Writers (stage setting `writers`): the roles that land files in the raw bucket, and nothing else.

A DMS endpoint writes with its service-access role, an S3 sink connector (MSK Connect, Kafka Connect)
with the connector's role. The raw bucket is encrypted with the stage's key and refuses plain HTTP, so
such a role needs both an S3 grant and the key. Each writer gets a managed policy
`<project>-<stage>-writer-<role name>`, attached to its role:

* under each of its prefixes: `s3:PutObject` (a file), `s3:AbortMultipartUpload` (a sink uploads in
  parts and abandons a part-written file on failure), `s3:PutObjectTagging` and `s3:DeleteObject` (the
  DMS endpoint's S3 target tags what it writes and deletes the file its connection test writes: "Using
  Amazon S3 as a target for AWS Database Migration Service", prerequisites);
* `s3:ListBucket` of the raw bucket, for its prefixes only, each given with and without its trailing
  `/` (`crm` and `crm/*`: a client lists a folder either way);
* the stage's key for S3 only (`kms:ViaService`) and for the raw bucket only (its encryption context,
  the bucket's ARN with S3 Bucket Keys on): `kms:GenerateDataKey` for each new object, and
  `kms:Decrypt`, which S3 needs of the uploader to complete a multipart upload with SSE-KMS ("Multipart
  upload API and permissions", Amazon S3 User Guide).

A writer's `kind` adds what that writer is documented to need:

* `dms`: `s3:ListBucket` of the whole bucket, unconditioned, as DMS's S3-target prerequisites grant
  it ("Using Amazon S3 as a target for AWS Database Migration Service"): DMS lists with prefixes of
  its own choosing (its connection test, a CdcPath), which no prefix condition can foresee;
* `kafka_connect`: an S3 sink connector uploads every file in parts and, on a restart, lists its
  multipart uploads and their parts to resume or abandon them: `s3:ListBucketMultipartUploads` on the
  bucket and `s3:ListMultipartUploadParts` under its prefixes (the connector's IAM policy, Confluent's
  "Amazon S3 Sink Connector" and MSK Connect's S3 sink examples; those also list `s3:GetObject`, which
  stays out: the sink writes files and never needs to read the raw zone back).

No `s3:GetObject`: a writer cannot read the raw zone, its own files included.
"""

from __future__ import annotations

from aws_cdk import Aws
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.nag import acknowledge_wildcards, arn_ref
from infra.settings_access import WriterSettings
from infra.settings_names import StageNames
from infra.storage import LakeStorage

WRITE_ACTIONS = ["s3:PutObject", "s3:AbortMultipartUpload", "s3:PutObjectTagging", "s3:DeleteObject"]
KEY_ACTIONS = ["kms:GenerateDataKey", "kms:Decrypt"]
SINK_OBJECT_ACTIONS = ["s3:ListMultipartUploadParts"]
SINK_BUCKET_ACTIONS = ["s3:ListBucketMultipartUploads"]


def listed_prefixes(prefixes: list[str]) -> list[str]:
    """The `s3:prefix` values a writer may list: each folder with and without its trailing `/`."""
    return sorted({form for p in prefixes for form in (p.rstrip("/"), f"{p}*")})


class Writers(Construct):
    """One managed policy per writer role: write under its raw prefixes, with the stage's key via S3."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        names: StageNames,
        writers: list[WriterSettings],
        storage: LakeStorage,
    ) -> None:
        super().__init__(scope, construct_id)
        self.policies: dict[str, iam.ManagedPolicy] = {}
        for writer in writers:
            self.policies[writer.role_name] = self._writer(names, storage, writer)

    def _writer(self, names: StageNames, storage: LakeStorage, writer: WriterSettings) -> iam.ManagedPolicy:
        name, raw = writer.role_name, storage.raw
        prefixes = sorted(writer.prefixes)
        policy = iam.ManagedPolicy(
            self,
            f"Policy-{name}",
            managed_policy_name=names.resource_name(f"writer-{name}"),
            description=f"{names.prefix}: land raw files under {', '.join(prefixes)}",
            statements=self._statements(storage, writer, prefixes),
            roles=[iam.Role.from_role_arn(self, f"Role-{name}", writer.role_arn)],
        )
        acknowledge_wildcards(
            policy,
            [f"Resource::{arn_ref(raw)}/{p}*" for p in prefixes],
            reason=(
                "A writer (a DMS endpoint, an S3 sink) names the files it lands under its own raw prefixes "
                "at run time; it may write there only, and use the stage's key only through S3 for the raw "
                "bucket."
            ),
        )
        return policy

    @staticmethod
    def _statements(
        storage: LakeStorage, writer: WriterSettings, prefixes: list[str]
    ) -> list[iam.PolicyStatement]:
        raw = storage.raw
        objects = [raw.arn_for_objects(f"{p}*") for p in prefixes]
        sink = writer.kind == "kafka_connect"
        statements = [
            iam.PolicyStatement(
                sid="WriteUnderOwnPrefixes",
                actions=WRITE_ACTIONS + (SINK_OBJECT_ACTIONS if sink else []),
                resources=objects,
            ),
            iam.PolicyStatement(
                sid="ListBucket" if writer.kind == "dms" else "ListOwnPrefixes",
                actions=["s3:ListBucket"],
                resources=[raw.bucket_arn],
                conditions=None
                if writer.kind == "dms"
                else {"StringLike": {"s3:prefix": listed_prefixes(prefixes)}},
            ),
            iam.PolicyStatement(
                sid="StageKeyThroughS3ForRawOnly",
                actions=KEY_ACTIONS,
                resources=[storage.key.key_arn],
                conditions={
                    "StringEquals": {"kms:ViaService": f"s3.{Aws.REGION}.amazonaws.com"},
                    "ArnLike": {"kms:EncryptionContext:aws:s3:arn": raw.bucket_arn},
                },
            ),
        ]
        if sink:
            statements.append(
                iam.PolicyStatement(
                    sid="ListOwnMultipartUploads", actions=SINK_BUCKET_ACTIONS, resources=[raw.bucket_arn]
                )
            )
        return statements
