"""A stage does not grow with its tables: prod with 1,000 declared tables stays far inside CloudFormation's
limits (500 resources per stack, 1 MB template), with the resources of the 3-table sample.

The 1,000 tables are copies of the sample's first table (benchmarks.synth_scale, which measures the
figures of docs/scale.md); cdk-nag stays out, as in the other synth fixtures (its checks add no resource).
"""

from __future__ import annotations

import collections

import pytest
import yaml

from benchmarks.synth_scale import RESOURCE_LIMIT, TEMPLATE_LIMIT, scaled_config
from tests.infra.cdk_helpers import config_items

TABLES = 1_000


@pytest.fixture(scope="session")
def thousand(synth, tmp_path_factory):
    config = tmp_path_factory.mktemp("scale") / "tables.yaml"
    config.write_text(yaml.safe_dump(scaled_config(TABLES), sort_keys=False))
    return synth("prod", config=str(config))


def kinds(built) -> collections.Counter:
    return collections.Counter(r["Type"] for r in built.template_json["Resources"].values())


@pytest.mark.slow
def test_prod_with_1000_tables_keeps_the_resources_of_the_sample_and_far_under_the_limits(thousand, prod):
    resources = thousand.template_json["Resources"]
    size = thousand.template_path.stat().st_size
    assert len(resources) < RESOURCE_LIMIT / 2, kinds(thousand).most_common(5)
    assert size < TEMPLATE_LIMIT / 4, size
    # no resource per table: the same resources, type by type, as the sample's 3 tables, but for the
    # Glue databases, one per target database (the copies' crm and the canaries', where the sample has 4)
    databases = "AWS::Glue::Database"
    assert kinds(thousand)[databases] == 2 and kinds(prod)[databases] == 4
    assert kinds(thousand) - collections.Counter({databases: 2}) == kinds(prod) - collections.Counter(
        {databases: 4}
    )
    # every table still reaches the config table (the items ride as an asset, not in the template)
    assert len([i for i in config_items(thousand) if i["table_id"].startswith("crm.customers_")]) == TABLES
