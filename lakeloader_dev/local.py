"""``python -m lakeloader_dev.local up|deploy|env|status|down``: the embedded AWS emulator, detached.

    python -m lakeloader_dev.local up        # start the emulator (moto, extended) on 127.0.0.1, detached
    python -m lakeloader_dev.local deploy    # synthesize the CDK app and deploy it (again: an update)
    python -m lakeloader_dev.local deploy --config my_tables.yaml   # with your own table config
    eval "$(python -m lakeloader_dev.local env)"   # AWS_ENDPOINT_URL + test credentials for your shell
    python -m lakeloader_dev.local down      # stop it (all state is in memory: gone)

State lives in ``.lakeloader/local/`` (state.json: endpoint, pid, work folder; emulator.log:
every Lambda invocation and Glue run). ``deploy`` also works against any endpoint given
by ``--endpoint`` or AWS_ENDPOINT_URL (LocalStack).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

STATE_DIR = Path(".lakeloader") / "local"


def _state_file(state_dir: Path) -> Path:
    return state_dir / "state.json"


def read_state(state_dir: Path = STATE_DIR) -> dict | None:
    path = _state_file(state_dir)
    if not path.exists():
        return None
    state = json.loads(path.read_text())
    host, port = state["endpoint"].rsplit("//", 1)[1].rsplit(":", 1)
    try:
        os.kill(int(state["pid"]), 0)
        with socket.create_connection((host, int(port)), timeout=2):
            return state
    except OSError:
        return None


def up(state_dir: Path = STATE_DIR, port: int = 0, timeout: float = 60.0) -> dict:
    state = read_state(state_dir)
    if state:
        print(f"emulator already running on {state['endpoint']} (pid {state['pid']})")
        return state
    state_dir.mkdir(parents=True, exist_ok=True)
    _state_file(state_dir).unlink(missing_ok=True)
    workdir = state_dir / "work"
    log = open(state_dir / "emulator.log", "ab")  # noqa: SIM115 - handed to the child
    cmd = [
        sys.executable, "-m", "lakeloader_dev.emulator.serve",
        "--port", str(port), "--workdir", str(workdir), "--state-file", str(_state_file(state_dir)),
    ]  # fmt: skip
    process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(
                f"python -m lakeloader_dev.local up: the emulator exited; see {state_dir / 'emulator.log'}"
            )
        state = read_state(state_dir)
        if state:
            print(
                f"emulator up on {state['endpoint']} (pid {state['pid']}, log {state_dir / 'emulator.log'})"
            )
            return state
        time.sleep(0.2)
    process.terminate()
    raise SystemExit("python -m lakeloader_dev.local up: the emulator did not answer in time")


def down(state_dir: Path = STATE_DIR) -> None:
    path = _state_file(state_dir)
    if not path.exists():
        print("emulator not running")
        return
    state = json.loads(path.read_text())
    try:
        os.kill(int(state["pid"]), signal.SIGTERM)
    except ProcessLookupError:
        path.unlink(missing_ok=True)
    for _ in range(100):
        if not path.exists():
            break
        time.sleep(0.1)
    path.unlink(missing_ok=True)
    print(f"emulator on {state['endpoint']} stopped")


def _endpoint(args: argparse.Namespace) -> str:
    if getattr(args, "endpoint", None):
        return args.endpoint
    state = read_state(Path(args.state_dir))
    if state:
        return state["endpoint"]
    if os.environ.get("AWS_ENDPOINT_URL"):
        return os.environ["AWS_ENDPOINT_URL"]
    raise SystemExit("no emulator running: `python -m lakeloader_dev.local up` first, or pass --endpoint")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m lakeloader_dev.local",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("action", choices=["up", "deploy", "env", "status", "down"])
    parser.add_argument("--state-dir", default=str(STATE_DIR), help="default: .lakeloader/local")
    parser.add_argument("--port", type=int, default=0, help="up: port on 127.0.0.1 (default: a free one)")
    parser.add_argument("--stage", default="dev", help="deploy: the stage (cdk.json context), default dev")
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="deploy: the table config to synthesize with (CDK context `config`; default config/tables.yaml)",
    )
    parser.add_argument(
        "--endpoint", help="deploy: an AWS endpoint (default: the emulator, else AWS_ENDPOINT_URL)"
    )
    return parser


def main(args: argparse.Namespace) -> int:
    from lakeloader_dev.emulator import aws_env

    state_dir = Path(args.state_dir)
    if args.action == "up":
        up(state_dir, args.port)
    elif args.action == "down":
        down(state_dir)
    elif args.action == "status":
        state = read_state(state_dir)
        print(json.dumps(state, indent=2) if state else "emulator not running")
        return 0 if state else 1
    elif args.action == "env":
        for name, value in aws_env(_endpoint(args)).items():
            print(f"export {name}={value}")
    elif args.action == "deploy":
        from lakeloader_dev.emulator.deploy import DeployError, deploy

        context = {}
        if args.config:
            config = Path(args.config).resolve()  # synth runs in the repository's root
            if not config.is_file():
                print(f"python -m lakeloader_dev.local deploy: no config file {args.config}", file=sys.stderr)
                return 2
            context["config"] = str(config)
        endpoint = _endpoint(args)
        os.environ.update(aws_env(endpoint))
        try:
            deployment = deploy(
                endpoint=endpoint,
                stage=args.stage,
                context=context,
                progress=lambda m: print(f"  {m}", flush=True),
            )
        except DeployError as exc:
            print(f"python -m lakeloader_dev.local deploy: {exc}", file=sys.stderr)
            return 1
        width = max(len(k) for k in deployment.outputs) if deployment.outputs else 0
        for key, value in sorted(deployment.outputs.items()):
            print(f"  {key:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main(build_parser().parse_args()))
