"""One snapshot per stage's stack (asset hashes masked). Update with `pytest --snapshot-update`."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from syrupy.extensions.json import JSONSnapshotExtension

ASSET_HASH = re.compile(r"[0-9a-f]{64}")


def mask(value: Any) -> Any:
    """Replace asset hashes (S3 keys, staging paths) so code edits do not churn the snapshot.

    CDK sorts a minimized policy's resources by their text, asset hashes included: sort
    them again once masked, so a new hash cannot reorder them.
    """
    if isinstance(value, dict):
        masked = {ASSET_HASH.sub("<asset-hash>", k): mask(v) for k, v in value.items()}
        if isinstance(masked.get("Resource"), list):
            masked["Resource"] = sorted(masked["Resource"], key=lambda r: json.dumps(r, sort_keys=True))
        return masked
    if isinstance(value, list):
        return [mask(v) for v in value]
    if isinstance(value, str):
        return ASSET_HASH.sub("<asset-hash>", value)
    return value


@pytest.fixture
def snapshot_json(snapshot):
    return snapshot.use_extension(JSONSnapshotExtension)


@pytest.mark.template_snapshot
@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_stack_template(synth, snapshot_json, stage):
    template = mask(synth(stage).template_json)
    assert "<asset-hash>" in str(template)
    assert template == snapshot_json
