"""cdk-nag AwsSolutions: no unacknowledged finding, and no acknowledgement without a finding."""

from __future__ import annotations

import pytest
from cdk_nag import AwsSolutionsChecks

import infra.nag
from tests.infra.cdk_helpers import CREATED_VPC, READERS, WRITERS, synthesize, with_settings


def findings(app) -> list[tuple[str, str, str, str]]:
    """(severity, rule, construct path, description) of every unacknowledged finding."""
    report = AwsSolutionsChecks(verbose=True).validate_scope(app)
    return sorted(
        (v.severity, v.rule_name, r.construct_path, v.description)
        for v in report.violations
        for r in v.violating_resources
    )


def test_no_unacknowledged_errors_or_warnings(stage_synth):
    assert findings(stage_synth.app) == []


def test_no_findings_in_lake_formation_mode(synth):
    assert findings(synth("dev", lake_formation="true").app) == []


def test_no_findings_with_your_own_key(synth):
    key = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    assert (
        findings(synth("prod", **with_settings("prod", encryption={"customer_managed_key": key})).app) == []
    )


def test_no_findings_with_an_s3_tables_table(synth):
    assert findings(synth("dev", config="tests/fixtures/s3_tables/tables.yaml").app) == []


def test_no_findings_with_a_source(synth):
    """The e2e stage's config has a `sources:` entry: the job roles' and the erasure policy's grants on
    the databases its tables are found in are globs, each acknowledged."""
    assert findings(synth("dev", config="tests/e2e/tables.yaml").app) == []


def test_no_findings_in_a_created_vpc(synth):
    assert findings(synth("dev", **with_settings("dev", network=CREATED_VPC)).app) == []


@pytest.mark.parametrize("lake_formation", ["false", "true"])
def test_no_findings_with_readers_and_writers(synth, lake_formation):
    settings = with_settings("dev", readers=READERS, writers=WRITERS)
    assert findings(synth("dev", lake_formation=lake_formation, **settings).app) == []


@pytest.mark.synth
def test_every_acknowledgement_matches_a_finding(tmp_path, monkeypatch):
    """Synthesize with acknowledgements recorded instead of applied: each must silence something."""
    recorded: list[tuple[str, str]] = []

    class Recorder:
        def __init__(self, scope):
            self.path = scope.node.path

        @classmethod
        def of(cls, scope):
            return cls(scope)

        def acknowledge(self, *acks):
            recorded.extend((self.path, ack.id) for ack in acks)

    monkeypatch.setattr(infra.nag, "Validations", Recorder)
    everything = with_settings("dev", readers=READERS, writers=WRITERS, network=CREATED_VPC)
    synthesized = synthesize(tmp_path, "dev", lake_formation="true", **everything)
    found = {(rule, path) for _, rule, path, _ in findings(synthesized.app)}
    unused = [
        (path, rule)
        for path, rule in recorded
        if not any(r == rule and (p == path or p.startswith(path + "/")) for r, p in found)
    ]
    assert recorded
    assert unused == []
