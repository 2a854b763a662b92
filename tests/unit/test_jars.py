"""The local jars come from a Maven repository by coordinates, checked against their pins
(lakeloader_dev.jars).

Offline: a Maven repository laid out in a temporary folder and served as `file://` stands in for
Maven Central, through the same urllib path a real download takes.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import zipfile

import pytest

from lakeloader.control import runtimes
from lakeloader_dev import jars


def _jar_bytes(tmp_path: pathlib.Path, member: str) -> bytes:
    built = tmp_path / "built.jar"
    with zipfile.ZipFile(built, "w") as archive:
        archive.writestr(member, b"\xca\xfe\xba\xbe")
    return built.read_bytes()


@pytest.fixture
def repository(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch):
    """An empty cache and a local Maven repository; returns a function that publishes one jar."""
    monkeypatch.setenv("LAKELOADER_CACHE", str(tmp_path / "cache"))
    repo = tmp_path / "repo"
    monkeypatch.setenv(jars.MAVEN_REPO_ENV, repo.as_uri())

    def publish(coordinates: str, probe: str = "a/Probe.class", *, pinned: bytes | None = None):
        data = _jar_bytes(tmp_path, probe)
        jar = jars.MavenJar(coordinates, hashlib.sha256(pinned or data).hexdigest(), probe)
        (repo / jar.path).parent.mkdir(parents=True, exist_ok=True)
        (repo / jar.path).write_bytes(data)
        return jar

    return publish


def test_every_runtime_has_pinned_jars_of_its_own_spark_scala_and_iceberg():
    for name, runtime in runtimes.RUNTIMES.items():
        coordinates = [jar.coordinates for jar in jars.RUNTIME_JARS[name]]
        spark_scala = f"{runtime.spark_line}_{runtime.scala}"
        assert f"org.apache.iceberg:iceberg-spark-runtime-{spark_scala}:{runtime.iceberg}" in coordinates
        assert f"org.apache.iceberg:iceberg-aws-bundle:{runtime.iceberg}" in coordinates
        assert f"org.apache.hadoop:hadoop-aws:{runtime.hadoop}" in coordinates
        assert all(len(jar.sha256) == 64 for jar in jars.RUNTIME_JARS[name])


def test_maven_layout_of_coordinates():
    jar = jars.MavenJar("org.apache.iceberg:iceberg-aws-bundle:1.10.0", "0" * 64, "x")
    assert jar.path == "org/apache/iceberg/iceberg-aws-bundle/1.10.0/iceberg-aws-bundle-1.10.0.jar"


def test_fetch_keeps_a_jar_whose_digest_matches_and_then_works_offline(repository, monkeypatch, tmp_path):
    jar = repository("org.example:good:1.0")
    monkeypatch.setitem(jars.RUNTIME_JARS, "glue-5.1", (jar,))
    runtime = runtimes.runtime("glue-5.1")
    [path] = jars.local_jars(runtime)
    assert path == jars.cache_dir() / jar.path and jars.problem(jar, path) is None

    monkeypatch.setenv(jars.MAVEN_REPO_ENV, (tmp_path / "gone").as_uri())  # offline from now on
    assert jars.local_jars(runtime) == [path]
    assert jars.spark_conf(runtime) == {"spark.jars": f"local:{path}"}
    assert json.loads(jars.jar_conf_path(runtime).read_text()) == {"spark.jars": f"local:{path}"}


def test_fetch_refuses_a_jar_whose_digest_is_not_the_pin_and_keeps_nothing(repository, monkeypatch):
    jar = repository("org.example:tampered:1.0", pinned=b"what was pinned")
    monkeypatch.setitem(jars.RUNTIME_JARS, "glue-5.1", (jar,))
    with pytest.raises(RuntimeError, match=r"tampered-1\.0\.jar: SHA-256 .* is not the pinned"):
        jars.local_jars(runtimes.runtime("glue-5.1"))
    folder = (jars.cache_dir() / jar.path).parent
    assert not folder.exists() or list(folder.iterdir()) == []


def test_an_unreachable_repository_names_the_artifact_and_the_way_out(repository, monkeypatch):
    jar = jars.MavenJar("org.example:absent:1.0", "0" * 64, "x")
    monkeypatch.setitem(jars.RUNTIME_JARS, "glue-5.1", (jar,))
    assert jars.main(["--runtime", "glue-5.1"]) == 1
    with pytest.raises(RuntimeError, match=rf"org\.example:absent:1\.0 from .*{jars.MAVEN_REPO_ENV}"):
        jars.local_jars(runtimes.runtime("glue-5.1"))


def test_check_reports_each_jar_without_fetching(repository, monkeypatch, capsys):
    good = repository("org.example:good:1.0", "a/Probe.class")
    hollow = repository("org.example:hollow:1.0", "b/Other.class")
    hollow = jars.MavenJar(hollow.coordinates, hollow.sha256, "b/Missing.class")
    absent = jars.MavenJar("org.example:absent:1.0", "0" * 64, "x")
    monkeypatch.setitem(jars.RUNTIME_JARS, "glue-6.0", (good, hollow))
    jars.local_jars(runtimes.runtime("glue-6.0"))
    monkeypatch.setitem(jars.RUNTIME_JARS, "glue-6.0", (good, hollow, absent))

    assert jars.main(["--check", "--runtime", "glue-6.0"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[0] for line in lines] == ["ok", "lacks b/Missing.class", "missing"]
    assert not (jars.cache_dir() / absent.path).exists()


def test_cache_dir_honours_env(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path):
    monkeypatch.setenv("LAKELOADER_CACHE", str(tmp_path / "c"))
    assert jars.cache_dir() == (tmp_path / "c").resolve()
    monkeypatch.delenv("LAKELOADER_CACHE")
    assert jars.cache_dir().parts[-2:] == (".lakeloader", "jars")


def test_each_runtime_records_its_own_settings(monkeypatch, tmp_path):
    monkeypatch.setenv("LAKELOADER_CACHE", str(tmp_path))
    paths = {jars.jar_conf_path(runtime) for runtime in runtimes.RUNTIMES.values()}
    assert len(paths) == len(runtimes.RUNTIMES)
    monkeypatch.setenv(runtimes.RUNTIME_ENV, "glue-6.0")
    assert jars.jar_conf_path() == jars.jar_conf_path(runtimes.runtime("glue-6.0"))
