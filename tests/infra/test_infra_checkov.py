"""checkov, the second template scanner beside cdk-nag: no failed check on any variant of the template,
and every acknowledgement (`Metadata.checkov.skip`, infra.nag.acknowledge_check) silences a finding.

checkov runs from its own venv (`.venv-scan`, made by `make setup`: its pins conflict with the dev
venv's), once over the templates of every variant, each also bare (its acknowledgements removed: checkov
reports a declared skip as skipped whether or not the check would fail), with no network
(`--skip-download`) and without each check's code block (`--compact`: the same results, 5 MB of JSON
instead of 360 MB, which took checkov half of its 37 s to print).
"""

from __future__ import annotations

import copy
import json
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from infra.packaging import REPO_ROOT
from tests.infra.cdk_helpers import CREATED_VPC, READERS, with_settings

CHECKOV = REPO_ROOT / ".venv-scan" / "bin" / "checkov"
YOUR_KEY = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
VARIANTS = {
    "dev": ("dev", {}),
    "prod": ("prod", {}),
    "dev-everything": (
        "dev",
        {"lake_formation": "true", **with_settings("dev", readers=READERS, network=CREATED_VPC)},
    ),
    "prod-your-key": ("prod", with_settings("prod", encryption={"customer_managed_key": YOUR_KEY})),
    "dev-s3-tables": ("dev", {"config": "tests/fixtures/s3_tables/tables.yaml"}),
}


BARE = "-bare"


def without_acknowledgements(template: dict) -> dict:
    bare = copy.deepcopy(template)
    for resource in bare["Resources"].values():
        resource.get("Metadata", {}).pop("checkov", None)
    return bare


@pytest.fixture(scope="module")
def scanned(synth, tmp_path_factory) -> dict[str, dict]:
    """Variant -> checkov's results (passed, failed and skipped checks) for its template."""
    assert CHECKOV.exists(), f"{CHECKOV} is missing: run `make setup`"
    folder = tmp_path_factory.mktemp("checkov")
    for variant, (stage, context) in VARIANTS.items():
        template = synth(stage, **context).template_json
        (folder / f"{variant}.template.json").write_text(json.dumps(template))
        (folder / f"{variant}{BARE}.template.json").write_text(json.dumps(without_acknowledgements(template)))
    done = subprocess.run(
        [
            str(CHECKOV),
            "-d",
            str(folder),
            "--framework",
            "cloudformation",
            "-o",
            "json",
            "--skip-download",
            "--compact",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    report = json.loads(done.stdout)
    results = report["results"] if isinstance(report, dict) else report[0]["results"]
    names = [*VARIANTS, *(f"{v}{BARE}" for v in VARIANTS)]
    by_variant: dict[str, dict] = {v: {"passed": [], "failed": [], "skipped": []} for v in names}
    for kind in ("passed", "failed", "skipped"):
        for check in results[f"{kind}_checks"]:
            variant = Path(check["file_path"]).name.removesuffix(".template.json")
            by_variant[variant][kind].append(check)
    assert all(by_variant[v]["passed"] for v in names), f"checkov scanned nothing: {done.stderr[-2000:]}"
    return by_variant


@pytest.mark.parametrize("variant", VARIANTS)
def test_no_failed_check(scanned, variant):
    failed = [(c["check_id"], c["resource"], c["check_name"]) for c in scanned[variant]["failed"]]
    assert failed == []


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_acknowledgement_silences_a_finding(synth, scanned, variant):
    stage, context = VARIANTS[variant]
    resources = synth(stage, **context).template_json["Resources"]
    declared = {
        (logical, skip["id"])
        for logical, resource in resources.items()
        for skip in resource.get("Metadata", {}).get("checkov", {}).get("skip", [])
    }
    found = {(c["resource"].split(".", 1)[1], c["check_id"]) for c in scanned[f"{variant}{BARE}"]["failed"]}
    assert declared - found == set(), "acknowledged, but checkov finds nothing there"


def test_print_the_figures(scanned, capsys):
    """docs/development.md's scanner figures (`pytest tests/infra/test_infra_checkov.py -s` prints them)."""
    with capsys.disabled():
        for variant in VARIANTS:
            checks = scanned[variant]
            skipped = Counter(c["check_id"] for c in checks["skipped"])
            which = ", ".join(f"{check} x{n}" for check, n in sorted(skipped.items()))
            print(
                f"\ncheckov {variant}: {len(checks['passed'])} passed, {len(checks['failed'])} failed, "
                f"{len(checks['skipped'])} acknowledged ({which})"
            )
