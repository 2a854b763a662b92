"""Who acts: named in the erasure audit record and in the ledger notes of operator actions."""

from __future__ import annotations

import getpass
import os


def identity() -> str:
    """The OS user (or LAKELOADER_ACTOR), plus the AWS caller ARN when credentials are at hand."""
    who = os.environ.get("LAKELOADER_ACTOR") or getpass.getuser()
    try:
        import boto3
        from botocore.config import Config

        session = boto3.Session()
        if session.get_credentials() is not None:
            sts = session.client(
                "sts", config=Config(connect_timeout=2, read_timeout=2, retries={"max_attempts": 1})
            )
            who += f" ({sts.get_caller_identity()['Arn']})"
    except Exception:  # noqa: BLE001 - no AWS identity here: the OS user stands alone
        pass
    return who
