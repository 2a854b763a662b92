"""cfn-lint is clean (errors and warnings) on every synthesized template."""

from __future__ import annotations

import pytest
from cfnlint.api import ManualArgs, lint

# W3005 (DependsOn already implied by a GetAtt): CDK adds these on purpose (Function -> Role,
# custom resource -> handler role) so policies exist before first use; they are harmless.
IGNORED = ["W3005"]
REGIONS = ["us-east-1", "eu-west-1"]


@pytest.mark.parametrize("variant", ["dev", "prod", "dev-lake-formation"])
def test_cfn_lint_is_clean(synth, variant):
    synthesized = synth("dev", lake_formation="true") if variant == "dev-lake-formation" else synth(variant)
    matches = lint(
        synthesized.template_path.read_text(),
        config=ManualArgs(regions=REGIONS, ignore_checks=IGNORED),
    )
    problems = [f"{m.rule.id} {m.message} ({'/'.join(str(p) for p in m.path)})" for m in matches]
    assert problems == []
