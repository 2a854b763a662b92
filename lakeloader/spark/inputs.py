"""Finding raw files: on local disk or under an s3:// prefix. No PySpark here."""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from lakeloader.control.contract import SUCCESS_MARKER

IGNORED_PREFIXES = (".", "_")


@dataclass(frozen=True, order=True)
class InputFile:
    """One raw object. `name` is its path under the raw root; `version` is its mtime or ETag."""

    name: str
    uri: str
    size: int
    version: str

    @property
    def identity(self) -> str:
        """What makes a file 'the same file' for idempotency: same name, size and version."""
        return f"{self.name}|{self.size}|{self.version}"

    @property
    def is_full_load(self) -> bool:
        """DMS names full-load files LOAD00000001.*; CDC files carry a timestamp name."""
        return posixpath.basename(self.name).upper().startswith("LOAD")


def batch_order(files: list[InputFile]) -> list[InputFile]:
    """Full loads first, then CDC files by name (DMS and most exporters name them by time)."""
    return sorted(files, key=lambda f: (not f.is_full_load, f.name))


def _is_data_file(name: str) -> bool:
    return not any(part.startswith(IGNORED_PREFIXES) for part in name.split("/"))


def is_success_marker(name: str) -> bool:
    return posixpath.basename(name) == SUCCESS_MARKER


def list_inputs(raw_root: str, prefix: str = "", *, markers: bool = False) -> list[InputFile]:
    """Every data file under `raw_root/prefix` (hidden and `_`-prefixed files skipped), and with
    `markers` the `_SUCCESS` files too."""
    if raw_root.startswith(("s3://", "s3a://")):
        return _list_s3(raw_root, prefix, markers)
    root = Path(raw_root)
    base = root / prefix
    if not base.exists():
        return []
    files = []
    for path in sorted(p for p in base.rglob("*") if p.is_file()):
        name = path.relative_to(root).as_posix()
        if _is_data_file(name) or (markers and is_success_marker(name)):
            stat = path.stat()
            files.append(InputFile(name, str(path.resolve()), stat.st_size, str(stat.st_mtime_ns)))
    return files


def _list_s3(raw_root: str, prefix: str, markers: bool) -> list[InputFile]:
    import boto3

    parsed = urlparse(raw_root)
    root_key = parsed.path.lstrip("/")
    if root_key and not root_key.endswith("/"):
        root_key += "/"
    client = boto3.client("s3")
    files = []
    for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=parsed.netloc, Prefix=root_key + prefix
    ):
        for obj in page.get("Contents", []):
            name = obj["Key"][len(root_key) :]
            if (_is_data_file(name) or (markers and is_success_marker(name))) and not name.endswith("/"):
                uri = f"s3://{parsed.netloc}/{obj['Key']}"
                files.append(InputFile(name, uri, obj["Size"], obj["ETag"].strip('"')))
    return files


def resolve_paths(paths: list[str], raw_root: str) -> list[InputFile]:
    """Files named on the command line (files or folders), named relative to the raw root when inside it."""
    files = []
    root = Path(raw_root).resolve() if not raw_root.startswith("s3") else None
    for given in paths:
        path = Path(given).resolve()
        if not path.exists():
            raise FileNotFoundError(f"--input {given}: no such file or folder")
        candidates = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for candidate in candidates:
            if root is not None and candidate.is_relative_to(root):
                name = candidate.relative_to(root).as_posix()
            else:
                name = candidate.as_posix().lstrip("/")
            if _is_data_file(os.path.basename(name)):
                stat = candidate.stat()
                files.append(InputFile(name, str(candidate), stat.st_size, str(stat.st_mtime_ns)))
    return files
