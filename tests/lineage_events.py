"""Check an OpenLineage event lakeloader wrote against the pinned openlineage-python (requirements-dev.txt).

The client ships the spec as generated attrs models (openlineage.client.generated), not as JSON files:
each event is rebuilt from those models, whose validators check the event time, run id, producer and
schema URLs, and serialized back with the client's Serde; the round trip must give the event back
unchanged, so a field the spec does not have, or one of the wrong shape, fails. Each standard facet's
`_schemaURL` must be the one the client's model of that facet names, and lakeloader's own run facet
must validate against the JSON Schema published in this repository (docs/lineage/LakeloaderRunFacet.json).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
from openlineage.client.generated import base, error_message_run, job_type_job, schema_dataset
from openlineage.client.serde import Serde

from lakeloader.jobs import lineage

ROOT = Path(__file__).resolve().parents[1]
RUN_FACET_SCHEMA = json.loads((ROOT / lineage.RUN_FACET_FILE).read_text())


def _facet(model: type, data: dict[str, Any], **fields: Any) -> Any:
    """The client's facet of `data` (its `_producer` the event's), its schema URL the model's own."""
    built = model(**fields, producer=data["_producer"])
    assert data["_schemaURL"] == built._schemaURL, (data["_schemaURL"], built._schemaURL)
    return built


def _run_facets(facets: dict[str, Any]) -> dict[str, Any]:
    built: dict[str, Any] = {}
    for key, data in facets.items():
        if key == lineage.RUN_FACET:
            jsonschema.validate(data, {**RUN_FACET_SCHEMA, "$ref": "#/$defs/LakeloaderRunFacet"})
            built[key] = base.RunFacet(producer=data["_producer"]).with_additional_properties(
                **{k: v for k, v in data.items() if not k.startswith("_")}
            )
            built[key]._schemaURL = data["_schemaURL"]
        elif key == "errorMessage":
            built[key] = _facet(
                error_message_run.ErrorMessageRunFacet,
                data,
                message=data["message"],
                programmingLanguage=data["programmingLanguage"],
            )
        else:
            raise AssertionError(f"unexpected run facet {key!r}")
    return built


def _dataset_facets(facets: dict[str, Any]) -> dict[str, Any]:
    built: dict[str, Any] = {}
    for key, data in facets.items():
        assert key == "schema", f"unexpected dataset facet {key!r}"
        fields = [
            schema_dataset.SchemaDatasetFacetFields(name=f["name"], type=f["type"]) for f in data["fields"]
        ]
        built[key] = _facet(schema_dataset.SchemaDatasetFacet, data, fields=fields)
    return built


def check_event(event: dict[str, Any]) -> None:
    """Fail unless `event` is a RunEvent the pinned client's models describe, field for field."""
    job_facets = {}
    for key, data in event["job"]["facets"].items():
        assert key == "jobType", f"unexpected job facet {key!r}"
        job_facets[key] = _facet(
            job_type_job.JobTypeJobFacet,
            data,
            processingType=data["processingType"],
            integration=data["integration"],
            jobType=data["jobType"],
        )
    rebuilt = base.RunEvent(
        eventTime=event["eventTime"],
        producer=event["producer"],
        eventType=base.EventType(event["eventType"]),
        run=base.Run(runId=event["run"]["runId"], facets=_run_facets(event["run"]["facets"])),
        job=base.Job(namespace=event["job"]["namespace"], name=event["job"]["name"], facets=job_facets),
        inputs=[
            base.InputDataset(namespace=d["namespace"], name=d["name"], facets=_dataset_facets(d["facets"]))
            for d in event["inputs"]
        ],
        outputs=[
            base.OutputDataset(namespace=d["namespace"], name=d["name"], facets=_dataset_facets(d["facets"]))
            for d in event["outputs"]
        ],
    )
    assert event["schemaURL"] == rebuilt.schemaURL
    assert _without_empty(json.loads(Serde.to_json(rebuilt))) == _without_empty(event)


def _without_empty(value: Any) -> Any:
    """The event without None and empty mappings or lists, which the client's Serde writes or leaves out
    as it likes (empty `facets` kept, empty `inputFacets` added)."""
    if isinstance(value, dict):
        kept = {k: _without_empty(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v not in (None, {}, [])}
    if isinstance(value, list):
        return [_without_empty(v) for v in value]
    return value
