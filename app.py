#!/usr/bin/env python3
"""CDK entry point: `cdk synth -c stage=dev` / `cdk deploy -c stage=prod`.

Stage settings come from cdk.json's context (`lakeloader:stages`), the table config from
context `config` (default config/tables.yaml), validated here: an invalid config fails synth
with the config model's message. cdk-nag's AwsSolutions checks run on every synth.
"""

import sys

from aws_cdk import App

from infra.app import build, default_environment
from infra.settings import SettingsError
from lakeloader.config import ConfigError


def main() -> int:
    app = App()
    try:
        build(app, env=default_environment())
    except (ConfigError, SettingsError) as exc:
        print(f"cdk synth: {exc}", file=sys.stderr)
        return 1
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
