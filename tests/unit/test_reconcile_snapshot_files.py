"""Which files `lakeloader reconcile --snapshot URI` reads: the file a URI names, or every data file
under the folder it names (hidden and _-prefixed files such as _SUCCESS left out), locally and on S3
(moto over HTTP)."""

from __future__ import annotations

import boto3
import pytest

from lakeloader.jobs.reconcile import snapshot_files
from lakeloader.spark.errors import LakeloaderError
from tests.unit import stage_world
from tests.unit.stage_world import unique_name

moto_server, aws_endpoint = stage_world.moto_server, stage_world.aws_endpoint


def test_a_local_folder_gives_its_data_files_and_a_file_itself(tmp_path):
    for name in (
        "full/LOAD00000001.parquet",
        "full/part/LOAD00000002.parquet",
        "full/_SUCCESS",
        "full/.x.crc",
    ):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")

    folder = snapshot_files(str(tmp_path / "full"))
    one = snapshot_files(str(tmp_path / "full" / "LOAD00000001.parquet"))

    assert [f.name for f in folder] == ["LOAD00000001.parquet", "part/LOAD00000002.parquet"]
    assert [(f.name, f.uri) for f in one] == [
        ("LOAD00000001.parquet", str(tmp_path / "full" / "LOAD00000001.parquet"))
    ]
    with pytest.raises(FileNotFoundError, match="no such file or folder"):
        snapshot_files(str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(LakeloaderError, match="no data file there"):
        snapshot_files(str(tmp_path / "empty"))


def test_an_s3_prefix_gives_its_data_files_and_an_object_itself(aws_endpoint):
    s3 = boto3.client("s3")
    bucket = unique_name("exports")
    s3.create_bucket(Bucket=bucket)
    for key in ("full/part-0.parquet", "full/part-1.parquet", "full/_SUCCESS", "fuller/part-0.parquet"):
        s3.put_object(Bucket=bucket, Key=key, Body=b"data")

    folder = snapshot_files(f"s3://{bucket}/full")  # the folder, not every key starting with "full"
    also = snapshot_files(f"s3://{bucket}/full/")
    one = snapshot_files(f"s3://{bucket}/full/part-1.parquet")

    assert [f.uri for f in folder] == [
        f"s3://{bucket}/full/part-0.parquet",
        f"s3://{bucket}/full/part-1.parquet",
    ]
    assert also == folder
    assert [(f.name, f.uri, f.size) for f in one] == [
        ("part-1.parquet", f"s3://{bucket}/full/part-1.parquet", 4)
    ]
    with pytest.raises(LakeloaderError, match="no data file there"):
        snapshot_files(f"s3://{bucket}/missing/")
