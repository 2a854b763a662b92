"""How a stage's template grows with its tables: `cdk synth` of a stage with N copies of the sample table.

    python -m benchmarks.synth_scale --tables 10 100 1000 [--stage prod] [--databases 1]

Each copy is config/tables.yaml's first table (crm.customers) under its own id, prefix and target
table; `--databases K` spreads the copies over K target databases (1: all in the sample's `crm`,
as a DMS task over one schema writes them). The app is built exactly as `cdk synth` builds it
(infra.app.build with cdk.json's context, cdk-nag included unless --no-nag), in this process; prints
per N the stack's resources, the template's size, its largest resource types and the synth's wall time.
CloudFormation's limits: 500 resources per stack, 1 MB template (uploaded through S3). docs/scale.md.
"""

from __future__ import annotations

import argparse
import collections
import copy
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from infra.packaging import REPO_ROOT

SAMPLE_CONFIG = REPO_ROOT / "config" / "tables.yaml"
RESOURCE_LIMIT = 500
TEMPLATE_LIMIT = 1_000_000


def scaled_config(tables: int, *, databases: int = 1, sample: Path = SAMPLE_CONFIG) -> dict[str, Any]:
    """config/tables.yaml with its first table copied `tables` times (ids `<db>.customers_0001`...)."""
    config = yaml.safe_load(sample.read_text())
    template = config["tables"][0]
    copies = []
    for index in range(1, tables + 1):
        table = copy.deepcopy(template)
        database = template["target"]["database"] if databases == 1 else f"schema_{index % databases:04d}"
        name = f"{template['target']['table']}_{index:04d}"
        table["id"] = f"{database}.{name}"
        table["source"]["prefix"] = f"{template['source']['prefix'].split('/')[0]}/{database}/{name}/"
        table["target"]["database"] = database
        table["target"]["table"] = name
        copies.append(table)
    config["tables"] = copies
    return config


def synthesize(config_path: Path, outdir: Path, *, stage: str, nag: bool) -> dict[str, Any]:
    """The stage's template, synthesized in this process as `cdk synth -c stage=<stage>` would."""
    from aws_cdk import App

    from infra.app import build, cdk_json_context

    context = cdk_json_context()
    context.update({"stage": stage, "config": str(config_path)})
    app = App(context=context, outdir=str(outdir))
    stack = build(app, nag=nag)
    assembly = app.synth()
    artifact = assembly.get_stack_by_name(stack.stack_name)
    return {"template_path": Path(assembly.directory) / artifact.template_file}


def measure(tables: int, *, stage: str = "prod", databases: int = 1, nag: bool = True) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="synth-scale-") as tmp:
        config_path = Path(tmp) / "tables.yaml"
        config_path.write_text(yaml.safe_dump(scaled_config(tables, databases=databases), sort_keys=False))
        started = time.perf_counter()
        synthesized = synthesize(config_path, Path(tmp) / "cdk.out", stage=stage, nag=nag)
        seconds = time.perf_counter() - started
        raw = synthesized["template_path"].read_bytes()
    resources = json.loads(raw)["Resources"]
    kinds = collections.Counter(r["Type"] for r in resources.values())
    return {
        "tables": tables,
        "resources": len(resources),
        "template_bytes": len(raw),
        "alarms": kinds["AWS::CloudWatch::Alarm"],
        "top": kinds.most_common(5),
        "seconds": seconds,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.synth_scale", description=__doc__)
    parser.add_argument("--tables", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--stage", default="prod")
    parser.add_argument("--databases", type=int, default=1)
    parser.add_argument("--no-nag", action="store_true", help="leave cdk-nag's checks out of the synth")
    args = parser.parse_args(argv)
    print("| tables | resources | template | alarms | synth | largest types |")
    print("| ---: | ---: | ---: | ---: | ---: | --- |")
    for count in args.tables:
        try:
            row = measure(count, stage=args.stage, databases=args.databases, nag=not args.no_nag)
        except Exception as exc:  # CDK refuses a stack past 500 resources: that is a result too
            print(f"| {count} | synth refused: {str(exc).splitlines()[0][:150]} | | | | |", flush=True)
            continue
        top = ", ".join(f"{kind.split('::', 1)[1]} {n}" for kind, n in row["top"])
        size = row["template_bytes"]
        print(
            f"| {count} | {row['resources']} | {size:,} B ({size / 1024:.0f} KiB) | {row['alarms']} "
            f"| {row['seconds']:.1f} s | {top} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
