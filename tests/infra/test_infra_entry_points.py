"""glue_jobs/*.py and emr_steps/*.py: thin entry points that hand lakeloader.jobs the same arguments."""

from __future__ import annotations

import argparse
import json
import runpy
import sys
import types
from pathlib import Path

import pytest

from tests.infra.iam_eval import Resolver

REPO = Path(__file__).resolve().parents[2]
ARG_KEYS = [
    "lakeloader_config_table",
    "lakeloader_ledger_table",
    "lakeloader_runs_table",
    "lakeloader_raw_root",
    "lakeloader_warehouse",
    "lakeloader_table_id",
    "lakeloader_correlation_id",
    "lakeloader_database_prefix",
]
INGEST_ONLY = {
    "lakeloader_parallel_tables": "",
    "lakeloader_max_attempts": "",
    "lakeloader_rebuild": "",
    "lakeloader_raw_zone_erased": "",
}  # ingest's own: how many tables a run drains at once, quarantine after, a rebuild run
COMMON = {
    "lakeloader_config_table": "lakeloader-dev-config",
    "lakeloader_ledger_table": "lakeloader-dev-ledger",
    "lakeloader_runs_table": "lakeloader-dev-runs",
    "lakeloader_raw_root": "s3://raw/",
    "lakeloader_warehouse": "s3://curated/warehouse/",
}


def get_resolved_options(args: list[str], options: list[str]) -> dict[str, str]:
    """awsglue.utils.getResolvedOptions as Glue ships it: each option required, unknown ones ignored."""
    parser = argparse.ArgumentParser()
    for option in options:
        parser.add_argument(f"--{option}", required=True)
    parsed, _ = parser.parse_known_args(args[1:])
    return vars(parsed)


@pytest.fixture
def calls(monkeypatch):
    """Stand-ins for the Glue runtime module and lakeloader.jobs; records each call."""
    recorded: list[tuple[str, dict, str]] = []
    awsglue, utils = types.ModuleType("awsglue"), types.ModuleType("awsglue.utils")
    utils.getResolvedOptions = get_resolved_options
    jobs = types.ModuleType("lakeloader.jobs")
    jobs.__path__ = [str(REPO / "lakeloader" / "jobs")]  # its submodules stay real: jobs.args
    jobs.ingest_main = lambda args, runtime: recorded.append(("ingest", dict(args), runtime)) or 0
    jobs.maintain_main = lambda args, runtime: recorded.append(("maintain", dict(args), runtime)) or 3
    monkeypatch.setitem(sys.modules, "awsglue", awsglue)
    monkeypatch.setitem(sys.modules, "awsglue.utils", utils)
    monkeypatch.setitem(sys.modules, "lakeloader.jobs", jobs)
    return recorded


def run(script: Path, argv: list[str], monkeypatch) -> int:
    monkeypatch.setattr(sys, "argv", [str(script), *argv])
    with pytest.raises(SystemExit) as exited:
        runpy.run_path(str(script), run_name="__main__")
    return exited.value.code


def glue_argv(**per_run: str) -> list[str]:
    argv = ["--JOB_ID", "j_1", "--JOB_RUN_ID", "jr_1", "--job-bookmark-option", "job-bookmark-disable"]
    for key, value in {**COMMON, **per_run}.items():
        argv += [f"--{key}", value]
    return argv + ["--TempDir", "s3://assets/glue/tmp/"]


@pytest.mark.parametrize(("name", "code"), [("ingest", 0), ("maintain", 3)])
def test_glue_entry_point_resolves_the_job_arguments(calls, monkeypatch, name, code):
    argv = glue_argv(lakeloader_table_id="crm.customers", lakeloader_correlation_id="req-1")
    assert run(REPO / "glue_jobs" / f"{name}.py", argv, monkeypatch) == code
    assert calls == [
        (
            name,
            {
                **COMMON,
                "lakeloader_table_id": "crm.customers",
                "lakeloader_correlation_id": "req-1",
                "lakeloader_database_prefix": "",
                **(INGEST_ONLY if name == "ingest" else {}),
            },
            "glue",
        )
    ]
    assert sorted(calls[0][1]) == sorted(ARG_KEYS + (list(INGEST_ONLY) if name == "ingest" else []))


def test_glue_per_run_arguments_default_to_empty(calls, monkeypatch):
    assert run(REPO / "glue_jobs" / "maintain.py", glue_argv(lakeloader_table_id=""), monkeypatch) == 3
    assert calls == [("maintain", {**COMMON, **dict.fromkeys(ARG_KEYS[5:], "")}, "glue")]


def test_glue_entry_point_passes_the_stage_database_prefix(calls, monkeypatch):
    argv = glue_argv(lakeloader_database_prefix="lakeloader_dev_")
    assert run(REPO / "glue_jobs" / "ingest.py", argv, monkeypatch) == 0
    assert calls[0][1]["lakeloader_database_prefix"] == "lakeloader_dev_"


def test_glue_missing_job_argument_fails(calls, monkeypatch):
    argv = [a for a in glue_argv() if a not in ("--lakeloader_runs_table", COMMON["lakeloader_runs_table"])]
    assert run(REPO / "glue_jobs" / "ingest.py", argv, monkeypatch) == 2  # argparse: required option
    assert calls == []


@pytest.mark.parametrize(("name", "code"), [("ingest", 0), ("maintain", 3)])
def test_emr_entry_point_passes_the_same_keys(calls, monkeypatch, name, code):
    argv = [
        "--table-id",
        "sales.order_lines",
        "--correlation-id",
        "req-2",
        "--config-table",
        COMMON["lakeloader_config_table"],
        "--ledger-table",
        COMMON["lakeloader_ledger_table"],
        "--runs-table",
        COMMON["lakeloader_runs_table"],
        "--raw-root",
        COMMON["lakeloader_raw_root"],
        "--warehouse",
        COMMON["lakeloader_warehouse"],
    ]  # fmt: skip  (the order the S3-arrival Lambda uses: per-run arguments, then EMR_EXTRA_ARGS)
    assert run(REPO / "emr_steps" / f"{name}.py", argv, monkeypatch) == code
    expected = {
        **COMMON,
        "lakeloader_table_id": "sales.order_lines",
        "lakeloader_correlation_id": "req-2",
        "lakeloader_database_prefix": "",
        **(INGEST_ONLY if name == "ingest" else {}),
    }
    assert calls == [(name, expected, "emr")]
    run(REPO / "emr_steps" / f"{name}.py", [*argv, "--database-prefix", "lakeloader_dev_"], monkeypatch)
    assert calls[1][1] == {**expected, "lakeloader_database_prefix": "lakeloader_dev_"}


# -- which script each job runs: the deployed asset is the entry point's own file ---------------


def staged_asset(synth, s3_url: str) -> bytes:
    """The bytes CDK uploads to `s3_url`, read from the cloud assembly's asset manifest."""
    key = s3_url.rsplit("/", 1)[1]
    manifest = json.loads((synth.template_path.parent / f"{synth.stack.stack_name}.assets.json").read_text())
    sources = [
        entry["source"]["path"]
        for entry in manifest["files"].values()
        if any(d["objectKey"] == key for d in entry["destinations"].values())
    ]
    assert len(sources) == 1, f"{s3_url}: {len(sources)} assets publish to this key"
    return (synth.template_path.parent / sources[0]).read_bytes()


@pytest.mark.parametrize("name", ["ingest", "maintain"])
def test_each_glue_job_runs_its_own_glue_script(dev, name):
    resolve = Resolver(dev.template_json)
    (job,) = [
        props
        for props in (r["Properties"] for r in dev.resources("AWS::Glue::Job").values())
        if props["Tags"]["lakeloader:job"] == name
    ]
    deployed = staged_asset(dev, resolve(job["Command"]["ScriptLocation"]))
    own, other_engine = (REPO / d / f"{name}.py" for d in ("glue_jobs", "emr_steps"))
    assert own.read_bytes() != other_engine.read_bytes()  # else this test could not tell them apart
    assert deployed == own.read_bytes(), f"the {name} Glue job does not run glue_jobs/{name}.py"


def test_emr_runs_start_the_emr_ingest_entry_point(dev):
    (arrival,) = [
        props
        for props in (r["Properties"] for r in dev.resources("AWS::Lambda::Function").values())
        if "EMR_ENTRY_POINT" in props.get("Environment", {}).get("Variables", {})
    ]
    url = Resolver(dev.template_json)(arrival["Environment"]["Variables"]["EMR_ENTRY_POINT"])
    assert staged_asset(dev, url) == (REPO / "emr_steps" / "ingest.py").read_bytes()


def test_maintenance_state_machine_starts_the_maintain_job(dev):
    resolve = Resolver(dev.template_json)
    (machine,) = dev.resources("AWS::StepFunctions::StateMachine").values()
    states = json.loads(resolve(machine["Properties"]["DefinitionString"]))["States"].values()
    started = [s["Parameters"]["JobName"] for s in states if ":glue:startJobRun" in s.get("Resource", "")]
    assert not [s for s in states if "emr-serverless" in s.get("Resource", "")]  # EMR: see the test above
    jobs = {resolve({"Ref": k}): r["Properties"] for k, r in dev.resources("AWS::Glue::Job").items()}
    assert [jobs[name]["Tags"]["lakeloader:job"] for name in started] == ["maintain"]
