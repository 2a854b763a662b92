"""The S3-arrival Lambda's log lines as docs/ledger_and_trigger.md ("Logs") names them: each event name
at its level, with the fields an operator searches by (table, bucket, key, reason, run id, ...), in the
order the invocation did things. The handler against the trigger world on moto (HTTP)."""

from __future__ import annotations

import pytest

from lakeloader.control.ledger import ObjectRef
from lakeloader.control.trigger import TriggerError, handle_event
from tests.unit import trigger_world
from tests.unit.trigger_world import CUSTOMERS, HANDLER, RAW, World, context, log_lines, s3_event, s3_record

world = trigger_world.world
aws_endpoint = trigger_world.aws_endpoint
moto_server = trigger_world.moto_server

ETAG = "d41d8cd98f00b204e9800998ecf8427e"


def lines(capsys) -> list[dict]:
    """Each log line (not the metric lines) without what every line has (time, location, service),
    checked once here."""
    found = [line for line in log_lines(capsys) if "_aws" not in line]
    for line in found:
        assert {"timestamp", "location", "service", "name"} <= set(line), line
        assert line["service"] == "lakeloader-s3-arrival" and line["name"] == "lakeloader.trigger"
    skip = {"timestamp", "location", "service", "name"}
    return [{k: v for k, v in line.items() if k not in skip} for line in found]


def test_an_invocation_logs_each_record_what_became_of_it_and_a_summary(world: World, capsys):
    world.add_table("crm.customers", CUSTOMERS)
    world.add_table("old.archive", "old/", enabled=False)
    key = CUSTOMERS + "LOAD1.parquet"
    event = s3_event(
        s3_record(key, size=10),
        s3_record(CUSTOMERS + "LOAD0.parquet", event_name="ObjectRemoved:Delete"),
        s3_record(CUSTOMERS + "_SUCCESS"),
        s3_record("hr/people.csv"),
        s3_record("old/a.csv", etag="old"),
    )
    event["Records"].append("junk")

    summary = HANDLER(event, context("req-1"))

    (run_id,) = summary["started"].values()
    where = {"bucket": RAW, "event": "ObjectCreated:Put"}
    assert lines(capsys) == [
        {
            "level": "WARNING",
            "message": "record.unrecognised",
            "reason": "record of type str",
            "correlation_id": "req-1",
        },
        {
            "level": "INFO",
            "message": "object.recorded",
            "size": 10,
            "table_id": "crm.customers",
            "object_id": f"{key}#{ETAG}",
            "key": key,
            **where,
            "correlation_id": "req-1",
        },
        {
            "level": "INFO",
            "message": "object.ignored",
            "reason": "not an object-created event (ObjectRemoved:Delete)",
            "bucket": RAW,
            "key": CUSTOMERS + "LOAD0.parquet",
            "event": "ObjectRemoved:Delete",
            "correlation_id": "req-1",
        },
        {
            "level": "INFO",
            "message": "object.ignored",
            "reason": "hidden file (name starts with '_' or '.', which Spark skips)",
            "key": CUSTOMERS + "_SUCCESS",
            **where,
            "correlation_id": "req-1",
        },
        {
            "level": "WARNING",
            "message": "object.unknown_prefix",
            "known_prefixes": 2,
            "key": "hr/people.csv",
            **where,
            "correlation_id": "req-1",
        },
        {
            "level": "WARNING",
            "message": "object.table_disabled",
            "new": True,
            "status": "pending",
            "note": "recorded as pending; no run started while the table is disabled",
            "table_id": "old.archive",
            "object_id": "old/a.csv#old",
            "key": "old/a.csv",
            **where,
            "correlation_id": "req-1",
        },
        {
            "level": "INFO",
            "message": "run.started",
            "table_id": "crm.customers",
            "table_ids": ["crm.customers"],
            "engine": "glue",
            "execution_class": "STANDARD",
            "run_id": run_id,
            "correlation_id": "req-1",
        },
        {
            "level": "INFO",
            "message": "trigger.summary",
            "records": 6,
            "recorded": 1,
            "duplicates": 0,
            "unknown": 1,
            "disabled": 1,
            "held": 0,
            "ignored": 3,
            "started": {"crm.customers": run_id},
            "deferred": [],
            "correlation_id": "req-1",
        },
    ]

    HANDLER(s3_event(s3_record(key, size=10)), context("req-2"))  # the same file again, a run holds it

    duplicate, deferred, summary_line = lines(capsys)
    (obj,) = world.ledger.objects("crm.customers")
    assert duplicate == {
        "level": "INFO",
        "message": "object.duplicate",
        "status": "pending",
        "first_seen": obj.first_seen,
        "first_correlation_id": "req-1",
        "table_id": "crm.customers",
        "object_id": f"{key}#{ETAG}",
        "key": key,
        **where,
        "correlation_id": "req-2",
    }
    lock = world.ledger.get_lock("crm.customers")
    assert deferred == {
        "level": "INFO",
        "message": "run.deferred.run_in_progress",
        "table_id": "crm.customers",
        "note": "objects stay pending; the running job or the next trigger takes them",
        "lock_holder": "trigger:req-1",
        "lock_state": "starting",
        "lock_expires_at": lock.expires_at,
        "correlation_id": "req-2",
    }
    assert summary_line["message"] == "trigger.summary" and summary_line["duplicates"] == 1

    HANDLER(s3_event(s3_record(key, size=10)), context("req-1"))  # a retry of the first invocation
    assert [(line["message"], line.get("run_id")) for line in lines(capsys)][1] == (
        "run.already_started",
        run_id,
    )


def test_a_sweep_logs_what_it_checked_and_a_bad_config_item_is_an_error(world: World, capsys, monkeypatch):
    monkeypatch.setenv("TABLES_PER_RUN", "2")
    world.add_table("crm.customers", CUSTOMERS)
    world.add_table("crm.vip", "crm/vip/")
    world.dynamodb.put_item(TableName=world.config_table, Item={"table_id": {"S": "broken"}})
    for table_id, key in (("crm.customers", CUSTOMERS + "a.parquet"), ("crm.vip", "crm/vip/b.parquet")):
        world.ledger.record_object(table_id, ObjectRef(RAW, key, etag="e"), correlation_id="c")

    summary = handle_event({"lakeloader": {"action": "sweep", "correlation_id": "sweep-1"}})

    found = lines(capsys)
    assert found[0] == {
        "level": "ERROR",
        "message": "config.item_invalid",
        "config_table": world.config_table,
        "item_table_id": "broken",
        "reason": "table_id and a non-empty prefix are required",
        "correlation_id": "sweep-1",
    }
    assert found[1] == {
        "level": "INFO",
        "message": "sweep.checked",
        "tables": 2,
        "due": ["crm.customers", "crm.vip"],
        "in_window": 0,
        "correlation_id": "sweep-1",
    }
    (run_id,) = set(summary["started"].values())  # one run for both tables
    assert found[2] == {
        "level": "INFO",
        "message": "run.started",
        "table_ids": ["crm.customers", "crm.vip"],
        "engine": "glue",
        "execution_class": "STANDARD",
        "run_id": run_id,
        "correlation_id": "sweep-1",
    }
    assert found[3]["message"] == "trigger.summary" and len(found) == 4
    assert (found[3]["action"], found[3]["tables_checked"], found[3]["tables_waiting"]) == ("sweep", 2, 2)
    assert summary["tables_in_window"] == 0


def test_every_record_of_an_event_is_counted_as_what_became_of_it(world: World, capsys):
    world.add_table("crm.customers", CUSTOMERS)
    world.add_table("old.archive", "old/", enabled=False)
    nameless = s3_record(CUSTOMERS + "x.parquet")
    del nameless["eventName"]
    event = s3_event(
        s3_record("old/a.csv", etag="a"),  # a disabled table's, twice, before the rest
        s3_record("old/b.csv", etag="b"),
        s3_record("hr/a.csv"),  # no table's, twice
        s3_record("hr/b.csv"),
        s3_record(CUSTOMERS),  # a folder marker
        nameless,
        s3_record(CUSTOMERS + "LOAD1.parquet", etag="1"),  # the same object twice in one event
        s3_record(CUSTOMERS + "LOAD1.parquet", etag="1"),
        s3_record(CUSTOMERS + "LOAD2.parquet", etag="2"),
    )
    event["Records"] += ["junk", 7]

    summary = HANDLER(event, context("req-1"))

    counts = ("records", "recorded", "duplicates", "unknown", "disabled", "ignored")
    assert {name: summary[name] for name in counts} == {
        "records": 11,
        "recorded": 2,
        "duplicates": 1,
        "unknown": 2,
        "disabled": 2,
        "ignored": 4,
    }
    reasons = [
        line["reason"]
        for line in lines(capsys)
        if "reason" in line and line["message"] != "config.item_invalid"
    ]
    assert reasons == [
        "record of type str",
        "record of type int",
        "folder marker",
        "not an object-created event (no event name)",
    ]


def test_a_start_that_fails_is_logged_as_an_error_and_its_objects_stay_pending(
    world: World, capsys, monkeypatch
):
    monkeypatch.setenv("GLUE_JOB_NAME", "no-such-job")
    world.add_table("crm.customers", CUSTOMERS)

    with pytest.raises(TriggerError):
        HANDLER(s3_event(s3_record(CUSTOMERS + "1.parquet")), context("req-x"))

    (deferred,) = [line for line in lines(capsys) if line["message"] == "run.deferred.start_failed"]
    assert (deferred["level"], deferred["note"], deferred["engine"]) == (
        "ERROR",
        "objects stay pending",
        "glue",
    )
    assert deferred["table_id"] == "crm.customers" and "EntityNotFoundException" in deferred["error"]
