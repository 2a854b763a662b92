"""lakeloader.spark.inputs: which raw files a run sees, on local disk and under an s3:// root (moto over
HTTP), in what order, and what makes two listings of a file the same file."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import boto3
import pytest

from lakeloader.spark.inputs import InputFile, batch_order, is_success_marker, list_inputs, resolve_paths

sys.path.append(str(Path(__file__).resolve().parents[1]))  # tests/ -> aws_fixtures
import aws_fixtures  # noqa: E402

moto_server, aws_endpoint = aws_fixtures.moto_server, aws_fixtures.aws_endpoint


def write(root: Path, name: str, body: bytes = b"0123456789") -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)
    return path


def names(files: list[InputFile]) -> list[str]:
    return [f.name for f in files]


def test_a_files_identity_is_its_name_size_and_version():
    file = InputFile("crm/a.parquet", "s3://b/crm/a.parquet", 42, "etag1")
    assert file.identity == "crm/a.parquet|42|etag1"
    assert file.identity != InputFile("crm/a.parquet", "s3://b/crm/a.parquet", 42, "etag2").identity


@pytest.mark.parametrize(
    ("name", "full_load"),
    [
        ("crm/public/customers/LOAD00000001.parquet", True),
        ("crm/load00000002.csv", True),  # DMS's prefix in any case
        ("LOAD00000001.parquet", True),
        ("crm/LOADS/20261101-100000000.parquet", False),  # a folder's name is not the file's
        ("crm/2026/11/01/20261101-100000000.parquet", False),
        ("crm/preLOAD.parquet", False),
    ],
)
def test_a_full_load_is_named_load_by_dms(name, full_load):
    assert InputFile(name, name, 1, "v").is_full_load is full_load


def test_batch_order_puts_full_loads_first_then_every_file_by_name():
    given = ("t/2026/b.parquet", "t/LOAD00000002.parquet", "t/2026/a.parquet", "t/LOAD00000001.parquet")
    files = [InputFile(name, name, 1, "v") for name in given]
    assert names(batch_order(files)) == [
        "t/LOAD00000001.parquet",
        "t/LOAD00000002.parquet",
        "t/2026/a.parquet",
        "t/2026/b.parquet",
    ]


def test_a_success_marker_is_a_file_named_success_in_any_folder():
    assert is_success_marker("t/2026-11-01/_SUCCESS") and is_success_marker("_SUCCESS")
    assert not is_success_marker("t/_SUCCESS.crc") and not is_success_marker("t/_SUCCESS/part-0.parquet")


def test_a_local_listing_names_files_from_the_root_and_skips_hidden_and_underscored(tmp_path):
    first = write(tmp_path, "crm/customers/2026/b.parquet", b"12345")
    write(tmp_path, "crm/customers/LOAD00000001.parquet")
    write(tmp_path, "crm/customers/.b.parquet.crc")
    write(tmp_path, "crm/customers/_temporary/0/part.parquet")
    write(tmp_path, "crm/customers/2026/_SUCCESS")
    write(tmp_path, "crm/orders/o.parquet")
    (tmp_path / "crm/customers/empty-folder").mkdir()

    listed = list_inputs(str(tmp_path), "crm/customers/")
    assert names(listed) == ["crm/customers/2026/b.parquet", "crm/customers/LOAD00000001.parquet"]
    [b, _] = listed
    assert b.uri == str(first.resolve()) and b.size == 5 and b.version == str(first.stat().st_mtime_ns)
    assert names(list_inputs(str(tmp_path))) == [*names(listed), "crm/orders/o.parquet"]


def test_a_local_listing_gives_markers_only_when_asked(tmp_path):
    write(tmp_path, "t/2026-11-01/part-0.parquet")
    write(tmp_path, "t/2026-11-01/_SUCCESS")
    write(tmp_path, "t/2026-11-01/_committed_1")
    assert names(list_inputs(str(tmp_path), "t/", markers=True)) == [
        "t/2026-11-01/_SUCCESS",
        "t/2026-11-01/part-0.parquet",
    ]


def test_a_local_prefix_that_does_not_exist_lists_nothing(tmp_path):
    assert list_inputs(str(tmp_path), "nothing/here/") == []


@pytest.mark.parametrize("scheme", ["s3", "s3a"])
@pytest.mark.parametrize("root", ["raw", "raw/", ""])
def test_an_s3_listing_names_files_from_the_root_with_their_etag(aws_endpoint, scheme, root):
    bucket = aws_fixtures.unique_name("inputs")
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=bucket)
    under = root.rstrip("/") + "/" if root else ""
    for key, body in (
        ("t/2026/b.parquet", b"12345"),
        ("t/LOAD00000001.parquet", b"1"),
        ("t/_temporary/part.parquet", b"1"),
        ("t/.hidden", b"1"),
        ("t/2026/_SUCCESS", b""),
        ("t/folder/", b""),
        ("other/o.parquet", b"1"),
        ("tables/not-t.parquet", b"1"),
    ):
        s3.put_object(Bucket=bucket, Key=under + key, Body=body)
    etag = s3.head_object(Bucket=bucket, Key=under + "t/2026/b.parquet")["ETag"]

    listed = list_inputs(f"{scheme}://{bucket}/{root}", "t/")
    assert names(listed) == ["t/2026/b.parquet", "t/LOAD00000001.parquet"]
    uri = f"s3://{bucket}/{under}t/2026/b.parquet"
    assert listed[0] == InputFile("t/2026/b.parquet", uri, 5, etag.strip('"'))
    assert '"' not in listed[0].version
    assert names(list_inputs(f"{scheme}://{bucket}/{root}", "t/", markers=True)) == [
        "t/2026/_SUCCESS",
        "t/2026/b.parquet",
        "t/LOAD00000001.parquet",
    ]


def test_named_paths_inside_the_root_are_named_from_it(tmp_path):
    root = tmp_path / "raw"
    inside = write(root, "t/LOAD00000001.parquet", b"123")
    write(root, "t/2026/b.parquet")
    write(root, "t/2026/.b.parquet.crc")
    outside = write(tmp_path, "elsewhere/x.parquet")

    files = resolve_paths([str(inside), str(root / "t/2026"), str(outside)], str(root))
    assert names(files) == ["t/LOAD00000001.parquet", "t/2026/b.parquet", outside.as_posix().lstrip("/")]
    assert files[0] == InputFile("t/LOAD00000001.parquet", str(inside), 3, str(inside.stat().st_mtime_ns))


def test_named_paths_with_an_s3_root_keep_their_own_path(tmp_path):
    local = write(tmp_path, "t/a.parquet")
    [file] = resolve_paths([str(local)], "s3://bucket/raw")
    assert file.name == local.as_posix().lstrip("/") and file.uri == str(local)


def test_a_named_path_that_does_not_exist_is_an_error_naming_it(tmp_path):
    missing = os.path.join(tmp_path, "nope.parquet")
    with pytest.raises(FileNotFoundError, match=f"--input {missing}: no such file or folder"):
        resolve_paths([missing], str(tmp_path))
