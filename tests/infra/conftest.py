"""Synthesize each stage once per test session and share the result.

The context is cdk.json's, passed explicitly to `cdk.App` (as the CLI would), optionally
with overrides (e.g. ``lake_formation=true``). Synth takes seconds; every test reads the
same immutable assembly.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:  # `infra` is not an installed package
    sys.path.insert(0, str(REPO_ROOT))
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")

import json  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402

from tests.infra.cdk_helpers import Synth, synthesize  # noqa: E402

_CACHE: dict[tuple, Synth] = {}


@pytest.fixture(scope="session")
def synth(tmp_path_factory):
    """`synth(stage, **context)`: the stage synthesized once per session per context."""

    def get(stage: str, **overrides: Any) -> Synth:
        key = (stage, tuple(sorted((k, json.dumps(v, sort_keys=True)) for k, v in overrides.items())))
        if key not in _CACHE:
            _CACHE[key] = synthesize(tmp_path_factory.mktemp(f"cdk-{stage}"), stage, **overrides)
        return _CACHE[key]

    return get


@pytest.fixture(scope="session")
def dev(synth) -> Synth:
    return synth("dev")


@pytest.fixture(scope="session")
def prod(synth) -> Synth:
    return synth("prod")


@pytest.fixture(scope="session", params=["dev", "prod"])
def stage_synth(request, synth) -> Synth:
    return synth(request.param)
