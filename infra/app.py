"""Building the CDK app: stage and config from context, the stack, cdk-nag.

`app.py` (the CLI's entry point) calls `build(App())`; tests call `build(App(context=...))`
with cdk.json's context, so both synthesize the same stack.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from aws_cdk import App, Environment, Validations
from cdk_nag import AwsSolutionsChecks

from infra.packaging import REPO_ROOT
from infra.settings import Stage, resolve_stage
from infra.settings_lake import with_stage_defaults
from infra.stack import LakeloaderStack
from lakeloader.config import LakeConfig, load_config

CDK_JSON = REPO_ROOT / "cdk.json"
DEFAULT_CONFIG = "config/tables.yaml"
CONTEXT_KEYS = (
    "stage",
    "config",
    "lakeloader:project",
    "lakeloader:stages",
    "lake_formation",
    "alarm_email",
    "max_attempts",
    "runtime",
)


def cdk_json_context(path: Path = CDK_JSON) -> dict[str, Any]:
    """The `context` of cdk.json (what the CLI would pass to the app)."""
    return dict(json.loads(path.read_text())["context"])


def config_path(app: App) -> Path:
    """The config file named by context `config`; relative paths are relative to the repository."""
    path = Path(app.node.try_get_context("config") or DEFAULT_CONFIG)
    return path if path.is_absolute() else REPO_ROOT / path


def load_stage_and_config(app: App) -> tuple[Stage, LakeConfig, Path]:
    """Resolve the stage and validate the config; errors (SettingsError, ConfigError) name the key/field."""
    context = {key: app.node.try_get_context(key) for key in CONTEXT_KEYS}
    stage = resolve_stage(context)
    path = config_path(app)
    lake = with_stage_defaults(
        load_config(path, runtime=stage.settings.runtime_row),
        stage.settings.batching,
        storage=stage.settings.target_storage,
    )
    return stage, lake, path


def default_environment() -> Environment | None:
    """The CLI's account/region when it knows them; otherwise an environment-agnostic stack."""
    account, region = os.environ.get("CDK_DEFAULT_ACCOUNT"), os.environ.get("CDK_DEFAULT_REGION")
    return Environment(account=account, region=region) if account and region else None


def build(app: App, *, nag: bool = True, env: Environment | None = None) -> LakeloaderStack:
    """Add the selected stage's stack to `app` (and cdk-nag's AwsSolutions checks, unless nag=False)."""
    stage, lake, path = load_stage_and_config(app)
    stack = LakeloaderStack(app, stage.prefix, stage=stage, lake=lake, config_path=path, env=env)
    if nag:
        Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))
    return stack
