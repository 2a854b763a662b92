"""cfn-lint is clean (errors and warnings) on every synthesized template."""

from __future__ import annotations

import pytest
from cfnlint.api import ManualArgs, lint

from tests.infra.cdk_helpers import CREATED_VPC, READERS, with_settings

# W3005 (DependsOn already implied by a GetAtt): CDK adds these on purpose (Function -> Role,
# custom resource -> handler role) so policies exist before first use; they are harmless.
IGNORED = ["W3005"]
YOUR_KEY = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
REGIONS = ["us-east-1", "eu-west-1"]


VARIANTS = {
    "dev": ("dev", {}),
    "prod": ("prod", {}),
    "dev-lake-formation": ("dev", {"lake_formation": "true"}),
    "dev-readers": ("dev", with_settings("dev", readers=READERS)),
    "dev-lake-formation-readers": (
        "dev",
        {"lake_formation": "true", **with_settings("dev", readers=READERS)},
    ),
    "dev-created-vpc": ("dev", with_settings("dev", network=CREATED_VPC)),
    "prod-your-key": ("prod", with_settings("prod", encryption={"customer_managed_key": YOUR_KEY})),
}


@pytest.mark.parametrize("variant", VARIANTS)
def test_cfn_lint_is_clean(synth, variant):
    stage, context = VARIANTS[variant]
    synthesized = synth(stage, **context)
    matches = lint(
        synthesized.template_path.read_text(),
        config=ManualArgs(regions=REGIONS, ignore_checks=IGNORED),
    )
    problems = [f"{m.rule.id} {m.message} ({'/'.join(str(p) for p in m.path)})" for m in matches]
    assert problems == []
