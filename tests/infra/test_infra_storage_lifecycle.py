"""Storage, bucket by bucket: each lifecycle rule as the stage's settings ask, where each bucket logs its
access, and the key's waiting period. Written out from cdk.json's settings, not from infra.storage."""

from __future__ import annotations

from tests.infra.cdk_helpers import stage_settings


def abort(days: int) -> dict:
    return {"AbortIncompleteMultipartUpload": {"DaysAfterInitiation": days}}


def expire(days: int) -> dict:
    return {"ExpirationInDays": days}


def expected_rules(settings: dict) -> dict[str, list[dict]]:
    noncurrent = {
        "NoncurrentVersionExpiration": {"NoncurrentDays": settings["noncurrent_version_expiration_days"]}
    }
    logs = expire(settings["log_retention_days"])
    transition = settings["raw_transition"]
    return {
        "AccessLogs": [
            {"Id": "expire-access-logs", **expire(settings["access_log_expiration_days"]),
             "NoncurrentVersionExpiration": {"NoncurrentDays": 1}, **abort(1)},
        ],
        "Raw": [
            {"Id": "raw-to-colder-storage", "Transitions": [
                {"StorageClass": transition["storage_class"], "TransitionInDays": transition["days"]}]},
            {"Id": "expire-noncurrent-versions", **noncurrent, **abort(7)},
        ],
        "Curated": [{"Id": "expire-noncurrent-versions", **noncurrent, **abort(7)}],
        "Quarantine": [
            {"Id": "expire-quarantined-files", **expire(settings["quarantine_expiration_days"]), **noncurrent,
             **abort(7)},
        ],
        "Assets": [
            {"Id": "expire-noncurrent-versions", **noncurrent, **abort(1)},
            {"Id": "expire-glue-temp", "Prefix": "glue/tmp/", **expire(settings["temp_expiration_days"])},
            {"Id": "expire-emr-logs", "Prefix": "emr/logs/", **logs},
            {"Id": "expire-spark-ui-logs", "Prefix": "glue/spark-ui/", **logs},
        ],
    }  # fmt: skip


def storage_buckets(built) -> dict[str, dict]:
    """The storage construct's buckets by construct id (`Raw`, ...)."""
    storage = built.stack.storage
    found = {}
    for name in ("access_logs", "raw", "curated", "quarantine", "assets"):
        bucket = getattr(storage, name)
        found[bucket.node.id] = built.template_json["Resources"][built.logical_id(bucket)]["Properties"]
    return found


def test_every_bucket_has_the_lifecycle_its_stage_asks_for(stage_synth):
    expected = expected_rules(stage_settings(stage_synth.stage))
    buckets = storage_buckets(stage_synth)
    actual = {
        name: [
            {k: v for k, v in rule.items() if k != "Status"}
            for rule in props["LifecycleConfiguration"]["Rules"]
        ]
        for name, props in buckets.items()
    }
    assert actual == expected
    for props in buckets.values():
        assert {rule["Status"] for rule in props["LifecycleConfiguration"]["Rules"]} == {"Enabled"}


def test_each_lake_bucket_logs_its_access_under_its_own_prefix_and_owns_its_objects(stage_synth):
    for name, props in storage_buckets(stage_synth).items():
        assert props["OwnershipControls"] == {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}, name
        if name != "AccessLogs":
            assert props["LoggingConfiguration"]["LogFilePrefix"] == f"{name.lower()}/"


def test_a_deleted_key_waits_a_week_in_dev_and_a_month_where_the_stage_retains(stage_synth):
    (key,) = stage_synth.resources("AWS::KMS::Key").values()
    retain = stage_settings(stage_synth.stage).get("removal") == "retain"
    assert key["Properties"]["PendingWindowInDays"] == (30 if retain else 7)
    assert key["Properties"]["Description"].startswith(f"lakeloader-{stage_synth.stage}: encrypts the lake's")


def test_every_log_group_keeps_the_stage_retention_and_goes_with_the_stack_only_where_it_does_not_retain(
    stage_synth,
):
    """dev's logs go with a destroyed stack; a retaining stage's outlive it, like its buckets (a log group's
    own CloudFormation default is to be retained)."""
    settings = stage_settings(stage_synth.stage)
    groups = stage_synth.resources("AWS::Logs::LogGroup")
    assert len(groups) >= 7  # the stage_log_group callers: jobs, crawler, maintenance, the Lambdas
    policy = "Retain" if settings.get("removal") == "retain" else "Delete"
    for name, group in groups.items():
        assert group["DeletionPolicy"] == policy, name
        assert group["Properties"]["RetentionInDays"] == settings["log_retention_days"], name
