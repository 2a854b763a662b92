"""`python -m lakeloader_dev.local deploy` on an end-of-life Node: jsii's banner, which its stderr sink
prints as Python byte strings, is silenced before the kernel starts and said in one line of text."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from lakeloader_dev.emulator.deploy import SUPPORTED_NODE

START_KERNEL = "import aws_cdk; aws_cdk.App(); print('kernel started')"


def kernel_output(before: str) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"}
    done = subprocess.run(
        [sys.executable, "-c", before + START_KERNEL], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return (done.stdout + done.stderr).splitlines()


@pytest.mark.slow
def test_the_banner_is_one_line_of_text_not_byte_strings():
    node = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    if node.lstrip("v").split(".")[0] in SUPPORTED_NODE:
        pytest.skip(f"Node {node} is supported: jsii prints no banner to silence")
    assert any(line.startswith("b'") for line in kernel_output("")), "jsii printed no banner to silence"

    lines = kernel_output(
        "from lakeloader_dev.emulator.deploy import quiet_node_banner; quiet_node_banner(print); "
    )

    assert not [line for line in lines if line.startswith("b'")], lines
    assert lines[0] == f"Node {node} is end-of-life (jsii supports Node 22 and 24); synthesizing on it"
