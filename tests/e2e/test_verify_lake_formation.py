"""`lakeloader verify --stage` on a Lake Formation-mode stage, on the embedded emulator: each hop is
reported and the canary removed; and when one removal is refused, the refusal is reported beside the
hops, the other removals still run, and the hops' result stands.

The stage is the synthesized one with `lake_formation: true` and `verify_role_arn` (its verify policy
attached to that role, and Lake Formation grants to it on the canary tables), deployed through the
emulator's CloudFormation, its jobs run by the emulator's Glue.

What this proves: a Lake Formation-mode stage deploys and verify follows the canary through it (S3,
the arrival Lambda and its ledger record, the Glue job's run and Iceberg commit, the read through the
Glue catalog, the alarm topic), then removes the canary's file, ledger and run items and table. And a
cleanup step that AWS refuses is reported as `FAIL cleanup` after the hops, with exit code 1, while
the other steps still remove their part. The refusal is one the emulator enforces as S3 does: the raw
bucket's Object Lock default retention (governance mode) refuses DeleteObjectVersion of the canary file
("How S3 Object Lock works",
https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-lock-overview.html).

And with Glue's DeleteTable answering AccessDeniedException, as Lake Formation answers a data lake
administrator who did not create the table ("Implicit Lake Formation permissions",
https://docs.aws.amazon.com/lake-formation/latest/dg/implicit-permissions.html): an answer the test
sets on the emulator (patches_catalog.table_drops_answer), since the emulator enforces no Lake
Formation permission. The refusal names the table and the stage setting that fixes it, and the next
verify, once the drop is allowed, removes the table left behind.

What it does not prove: the emulator checks no IAM policy and no Lake Formation permission, and
records no AWS::LakeFormation::* resource (moto has no model for them). So the operator's DROP and
SELECT grants on the canary tables, which a data lake administrator lacks ("Implicit Lake Formation
permissions"), are shown by the template tests only (tests/infra/test_infra_verify_access.py evaluates
the verify policy per mode and reads the grants); the jobs run here without Lake Formation's credential
vending; and the stage has no readers, as the emulator's Athena runs no query.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

import boto3
import pytest

from lakeloader.cli.stage import DeployedStage
from lakeloader.config import canary
from lakeloader_dev.emulator import Emulator
from lakeloader_dev.emulator.loop import lakeloader
from lakeloader_dev.emulator.patches_catalog import table_drops_answer
from tests.infra.cdk_helpers import with_settings

pytestmark = pytest.mark.e2e

OPERATOR = "arn:aws:iam::123456789012:role/operator"
# the sample config (no EMR table): the glue canary only, and one job run per verify
CONTEXT = {"config": "config/tables.yaml", "max_attempts": "1", "lake_formation": "true"}
HOPS = [
    "glue: land",
    "glue: arrival Lambda -> ledger",
    "glue: job run",
    "glue: iceberg commit",
    "glue: read through the catalog",
    "alarm topic",
]


@pytest.fixture(scope="module")
def stage(emulator: Emulator) -> DeployedStage:
    from lakeloader_dev.emulator import patches_cloudformation
    from lakeloader_dev.emulator.deploy import deploy

    trust = {"Version": "2012-10-17", "Statement": []}
    boto3.client("iam").create_role(RoleName="operator", AssumeRolePolicyDocument=json.dumps(trust))
    deployment = deploy(
        endpoint=emulator.endpoint,
        context={**CONTEXT, **with_settings("dev", verify_role_arn=OPERATOR)},
        failures=patches_cloudformation.CFN_FAILURES.get,
        timeout=400,
    )
    return DeployedStage.from_outputs(deployment.outputs)


def verify() -> tuple[int, str, list[str]]:
    """`lakeloader verify --stage dev`: exit code, output, the hops it reported passed."""
    code, out = lakeloader("verify", "--stage", "dev", "--timeout", "600")
    print(out)
    passed = [line.split(" s  ", 1)[1].split(": ") for line in out.splitlines() if line.startswith("ok ")]
    return code, out, [": ".join(p[:2]) if p[0] == "glue" else p[0] for p in passed]


def canary_files(stage: DeployedStage) -> list[dict]:
    listed = boto3.client("s3").list_object_versions(Bucket=stage.raw_bucket, Prefix=canary.CANARY_PREFIX)
    return [*listed.get("Versions", []), *listed.get("DeleteMarkers", [])]


def canary_table_gone(stage: DeployedStage) -> bool:
    glue = boto3.client("glue")
    try:
        glue.get_table(DatabaseName=stage.glue_database(canary.CANARY_DATABASE), Name="glue")
    except glue.exceptions.EntityNotFoundException:
        return True
    return False


@contextlib.contextmanager
def canary_files_locked(stage: DeployedStage) -> Iterator[None]:
    """The raw bucket's Object Lock, governance mode, a day's default retention: a version written
    meanwhile cannot be deleted without bypassing governance. Undone after: the locked versions deleted
    with the bypass, then the default retention removed (S3 accepts the change on an empty bucket here)."""
    s3 = boto3.client("s3")
    retention = {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 1}}
    s3.put_object_lock_configuration(
        Bucket=stage.raw_bucket, ObjectLockConfiguration={"ObjectLockEnabled": "Enabled", "Rule": retention}
    )
    try:
        yield
    finally:
        for version in canary_files(stage):
            s3.delete_object(
                Bucket=stage.raw_bucket,
                Key=version["Key"],
                VersionId=version["VersionId"],
                BypassGovernanceRetention=True,
            )
        s3.put_object_lock_configuration(
            Bucket=stage.raw_bucket, ObjectLockConfiguration={"ObjectLockEnabled": "Enabled"}
        )


def test_verify_reports_each_hop_of_a_lake_formation_stage_and_removes_the_canary(stage):
    code, out, passed = verify()

    assert code == 0, out
    assert passed == HOPS, out
    assert "--   glue: Athena: no reader of the stage queries through Athena" in out
    assert f"removed s3://{stage.raw_bucket}/{canary.CANARY_PREFIX}glue/verify-" in out
    assert f"removed Glue table {stage.glue_database(canary.CANARY_DATABASE)}.glue and its files" in out
    assert "FAIL" not in out
    assert canary_files(stage) == []
    assert stage.ledger().objects(canary.canary_id("glue")) == []
    assert canary_table_gone(stage)


def test_a_refused_cleanup_is_reported_beside_the_hops_and_the_other_removals_still_run(stage):
    with canary_files_locked(stage):
        code, out, passed = verify()
        locked = canary_files(stage)

    assert code == 1, out
    assert passed == HOPS, out  # every hop still reported, none replaced by the cleanup's error
    fails = [line for line in out.splitlines() if line.startswith("FAIL")]
    assert len(fails) == 1 and fails[0].startswith(
        f"FAIL cleanup: canary file s3://{stage.raw_bucket}/{canary.CANARY_PREFIX}glue/verify-"
    ), out
    assert "AccessDenied" in fails[0], out
    assert out.index(fails[0]) > out.index("ok ") and out.rindex("alarm topic") < out.index(fails[0])
    assert "the canary is partly left: the next verify removes it once the error is fixed" in out
    assert [v["Key"] for v in locked] == [fails[0].split(f"s3://{stage.raw_bucket}/", 1)[1].split(":")[0]]
    assert f"removed Glue table {stage.glue_database(canary.CANARY_DATABASE)}.glue and its files" in out
    assert stage.ledger().objects(canary.canary_id("glue")) == []
    assert canary_table_gone(stage)


def test_a_denied_canary_drop_names_the_setting_that_fixes_it_and_the_next_verify_removes_the_table(stage):
    table_drops_answer("AccessDeniedException")
    try:
        code, out, passed = verify()
    finally:
        table_drops_answer(None)

    assert code == 1, out
    assert passed == HOPS, out
    fails = [line for line in out.splitlines() if line.startswith("FAIL")]
    database = stage.glue_database(canary.CANARY_DATABASE)
    assert len(fails) == 1 and fails[0].startswith(f"FAIL cleanup: Glue table {database}.glue: "), out
    assert "AccessDeniedException" in fails[0] and "set the stage setting verify_role_arn" in fails[0]
    assert canary_files(stage) == [] and stage.ledger().objects(canary.canary_id("glue")) == []
    assert not canary_table_gone(stage)

    code, out, passed = verify()  # the drop allowed again: the table left behind goes too

    assert code == 0 and passed == HOPS, out
    assert canary_table_gone(stage)
