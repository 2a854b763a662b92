"""lakeloader.jobs.lineage without Spark: what each verb's events name, per OpenLineage's dataset naming,
each event checked against the pinned openlineage-python (tests/lineage_events.py)."""

from __future__ import annotations

import json

import jsonschema
import pytest

from lakeloader.config import TableConfig, parse_config
from lakeloader.jobs import lineage
from tests.lineage_events import check_event


def table(storage: str = "glue") -> TableConfig:
    return TableConfig.model_validate(
        {
            "id": "crm.customers",
            "source": {"prefix": "crm/public/customers/", "format": "parquet", "cdc": "dms"},
            "target": {"database": "crm", "table": "customers", "storage": storage},
            "keys": ["customer_id"],
        }
    )


GLUE = lineage.TableNaming.glue_catalog("eu-west-1", "123456789012")


def written(log: lineage.LineageLog) -> list[dict]:
    return [json.loads(line) for line in log.path.read_text().splitlines()]


def test_glue_table_and_s3_raw_prefix_are_named_as_the_spec_names_them(tmp_path):
    """Output: the Glue table's ARN parts (namespace arn:aws:glue:<region>:<account>, name
    table/<database>/<table>); input: the raw prefix as s3://<bucket> + key prefix."""
    log = lineage.LineageLog(tmp_path / "events.jsonl", GLUE, "s3://raw-bucket/landing/")
    run = log.start("ingest", table(), "20261201T000000000Z-abc123")
    run.finish(status="ok", counts={"files": 2, "inserted": 3}, raw_files=["crm/public/customers/a.parquet"])
    start, complete = written(log)
    for event in (start, complete):
        check_event(event)
        assert event["outputs"][0] | {"facets": {}} == {
            "namespace": "arn:aws:glue:eu-west-1:123456789012",
            "name": "table/crm/customers",
            "facets": {},
        }
        assert event["inputs"] == [
            {"namespace": "s3://raw-bucket", "name": "landing/crm/public/customers/", "facets": {}}
        ]
    facet = complete["run"]["facets"]["lakeloader"]
    assert (facet["files"], facet["inserted"], facet["updated"], facet["runId"]) == (
        2,
        3,
        0,
        "20261201T000000000Z-abc123",
    )


def test_s3_tables_table_is_named_in_glue_s3tablescatalog(tmp_path, monkeypatch):
    monkeypatch.setenv(lineage.S3_TABLES_ENV, "arn:aws:s3tables:eu-west-1:123456789012:bucket/lake-dev")
    naming = lineage.TableNaming.glue_catalog("eu-west-1", "123456789012")
    assert naming.dataset(table("s3_tables")) == {
        "namespace": "arn:aws:glue:eu-west-1:123456789012",
        "name": "table/s3tablescatalog/lake-dev/crm/customers",
    }


@pytest.mark.parametrize(("verb", "job_type"), [("maintain", "MAINTENANCE"), ("erase", "ERASURE")])
def test_maintenance_and_erasure_are_not_a_source(tmp_path, verb, job_type):
    """They rewrite the table they read: no input, the table as output, the job type saying what they are."""
    log = lineage.LineageLog(tmp_path / "events.jsonl", GLUE, "s3://raw-bucket/")
    log.start(verb, table(), "20261201T000000000Z-abc123").finish(status="failed", counts={}, error="boom")
    start, fail = written(log)
    for event in (start, fail):
        check_event(event)
        assert event["inputs"] == []
        assert event["job"]["name"] == f"lakeloader.{verb}.crm.customers"
        assert event["job"]["facets"]["jobType"]["jobType"] == job_type
    assert fail["eventType"] == "FAIL"
    assert fail["run"]["facets"]["errorMessage"]["message"] == "boom"


def test_rebuild_reads_the_raw_prefix(tmp_path):
    log = lineage.LineageLog(tmp_path / "events.jsonl", GLUE, "s3://raw-bucket/")
    log.start("rebuild", table(), "20261201T000000000Z-abc123")
    [start] = written(log)
    check_event(start)
    assert start["job"]["facets"]["jobType"]["jobType"] == "REBUILD"
    assert start["inputs"][0]["name"] == "crm/public/customers/"


def test_unknown_verb_is_refused(tmp_path):
    log = lineage.LineageLog(tmp_path / "events.jsonl", GLUE, "s3://raw-bucket/")
    with pytest.raises(ValueError, match="unknown lineage verb 'compact'"):
        log.start("compact", table(), "r")


def test_config_lineage_file_is_validated():
    config = parse_config({"lineage": {"file": "out/lineage.jsonl"}, "tables": []})
    assert config.lineage is not None and config.lineage.file == "out/lineage.jsonl"
    with pytest.raises(ValueError, match=r"lineage\.path: Extra inputs are not permitted"):
        parse_config({"lineage": {"path": "x"}, "tables": []})


@pytest.mark.parametrize(
    "spoil",
    [
        lambda e: e.update(extra=1),  # a field the spec does not have
        lambda e: e["run"].update(runId="run-1"),  # not a UUID
        lambda e: e.update(eventTime="yesterday"),
        lambda e: e["run"]["facets"]["lakeloader"].update(inserted=-1),  # against the published facet schema
        lambda e: e["outputs"][0]["facets"]["schema"]["fields"][0].update(typ="x"),
        lambda e: e["job"]["facets"]["jobType"].update(
            _schemaURL=lineage.JOB_TYPE_SCHEMA.replace("2-0-4", "2-0-3")
        ),
    ],
)
def test_the_check_refuses_an_event_off_the_spec(tmp_path, spoil):
    """tests/lineage_events.check_event, which every lineage test relies on, fails on each of these."""
    log = lineage.LineageLog(tmp_path / "events.jsonl", GLUE, "s3://raw-bucket/")
    log.start("ingest", table(), "r").finish(status="ok", counts={}, schema=[("customer_id", "bigint")])
    _, complete = written(log)
    check_event(complete)
    spoil(complete)
    with pytest.raises((AssertionError, ValueError, jsonschema.ValidationError)):
        check_event(complete)
