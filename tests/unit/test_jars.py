"""Class-file relocation (lakeloader_dev.relocate) and the jar cache CLI (lakeloader_dev.jars).

Fast and offline: a synthetic class file is relocated and checked structurally and,
when a JVM is available, executed; a real Jackson class from PySpark is relocated
when PySpark is installed.
"""

from __future__ import annotations

import glob
import os
import pathlib
import shutil
import struct
import subprocess
import zipfile

import pytest

from lakeloader_dev import jar_sources, jars, relocate

JACKSON = "com/fasterxml/jackson/"
SHADED_JACKSON = "org/apache/iceberg/shaded/com/fasterxml/jackson/"
RULES = {JACKSON: SHADED_JACKSON}


# --------------------------------------------------------------------------- helpers


def _utf8(text: str) -> bytes:
    raw = text.encode("utf-8")  # equal to modified UTF-8 for the BMP text used here (no NUL)
    return b"\x01" + struct.pack(">H", len(raw)) + raw


def demo_class() -> bytes:
    """A Java 8 class ``com.fasterxml.jackson.Demo`` whose ``main`` prints one string constant."""
    pool = [
        _utf8("com/fasterxml/jackson/Demo"),  # 1
        b"\x07" + struct.pack(">H", 1),  # 2 Class Demo
        _utf8("java/lang/Object"),  # 3
        b"\x07" + struct.pack(">H", 3),  # 4 Class Object
        _utf8("main"),  # 5
        _utf8("([Ljava/lang/String;)V"),  # 6
        _utf8("Code"),  # 7
        _utf8("java/lang/System"),  # 8
        b"\x07" + struct.pack(">H", 8),  # 9
        _utf8("out"),  # 10
        _utf8("Ljava/io/PrintStream;"),  # 11
        b"\x0c" + struct.pack(">HH", 10, 11),  # 12 NameAndType
        b"\x09" + struct.pack(">HH", 9, 12),  # 13 Fieldref System.out
        _utf8("java/io/PrintStream"),  # 14
        b"\x07" + struct.pack(">H", 14),  # 15
        _utf8("println"),  # 16
        _utf8("(Ljava/lang/String;)V"),  # 17
        b"\x0c" + struct.pack(">HH", 16, 17),  # 18
        b"\x0a" + struct.pack(">HH", 15, 18),  # 19 Methodref println
        _utf8("I am com.fasterxml.jackson.Demo, or Lcom/fasterxml/jackson/Demo;"),  # 20
        b"\x08" + struct.pack(">H", 20),  # 21 String
        b"\x05" + struct.pack(">q", 42),  # 22 Long, takes slots 22 and 23
        _utf8("org/apache/iceberg/shaded/com/fasterxml/jackson/Already"),  # 24
        _utf8("com/fasterxml/jacksonx/NotThePrefix"),  # 25
        _utf8("caf\u00e9 com.fasterxml.jackson.core.JsonFactory"),  # 26 non-ASCII
    ]
    code = bytes.fromhex("b2000d") + bytes.fromhex("1215") + bytes.fromhex("b60013") + b"\xb1"
    code_attr = struct.pack(">HHI", 2, 1, len(code)) + code + struct.pack(">HH", 0, 0)
    method = struct.pack(">HHHH", 0x0009, 5, 6, 1) + struct.pack(">HI", 7, len(code_attr)) + code_attr
    return (
        b"\xca\xfe\xba\xbe"
        + struct.pack(">HHH", 0, 52, 27)  # constant_pool_count = highest index + 1
        + b"".join(pool)
        + struct.pack(">HHHH", 0x0021, 2, 4, 0)  # public super; this; super; no interfaces
        + struct.pack(">H", 0)  # fields
        + struct.pack(">H", 1)
        + method
        + struct.pack(">H", 0)  # class attributes
    )


def parse_class(data: bytes) -> tuple[dict[int, tuple[int, object]], int, int]:
    """Parse a whole class file; return (constant pool by index, this_class, super_class).

    Fails unless every structure lines up and the parse ends exactly at the last byte.
    """
    assert data[:4] == b"\xca\xfe\xba\xbe"
    (count,) = struct.unpack_from(">H", data, 8)
    pool: dict[int, tuple[int, object]] = {}
    pos, index = 10, 1
    while index < count:
        tag = data[pos]
        if tag == 1:
            (length,) = struct.unpack_from(">H", data, pos + 1)
            pool[index] = (1, data[pos + 3 : pos + 3 + length].decode("utf-8"))
            pos += 3 + length
            index += 1
        else:
            size = relocate._CP_SIZES[tag]
            pool[index] = (tag, data[pos + 1 : pos + 1 + size])
            pos += 1 + size
            index += 2 if tag in (5, 6) else 1
    _, this, sup, n_interfaces = struct.unpack_from(">HHHH", data, pos)
    pos += 8 + 2 * n_interfaces

    def skip_attributes(pos: int) -> int:
        (n,) = struct.unpack_from(">H", data, pos)
        pos += 2
        for _ in range(n):
            (length,) = struct.unpack_from(">I", data, pos + 2)
            pos += 6 + length
        return pos

    for _ in range(2):  # fields, then methods
        (n,) = struct.unpack_from(">H", data, pos)
        pos += 2
        for _ in range(n):
            pos = skip_attributes(pos + 6)
    pos = skip_attributes(pos)
    assert pos == len(data), "trailing or missing bytes after relocation"
    return pool, this, sup


def class_name(pool: dict[int, tuple[int, object]], class_index: int) -> str:
    tag, ref = pool[class_index]
    assert tag == 7
    (name_index,) = struct.unpack(">H", ref)
    return pool[name_index][1]


# --------------------------------------------------------------------------- tests


def test_relocate_class_rewrites_only_utf8_entries():
    original = demo_class()
    before, _, _ = parse_class(original)
    relocated = relocate.relocate_class(original, relocate.Relocation(RULES).bytes)
    pool, this, sup = parse_class(relocated)

    assert class_name(pool, this) == SHADED_JACKSON + "Demo"
    assert class_name(pool, sup) == "java/lang/Object"
    assert pool[20][1] == (
        "I am org.apache.iceberg.shaded.com.fasterxml.jackson.Demo, "
        "or Lorg/apache/iceberg/shaded/com/fasterxml/jackson/Demo;"
    )
    assert pool[24][1] == "org/apache/iceberg/shaded/com/fasterxml/jackson/Already"  # not relocated twice
    assert pool[25][1] == "com/fasterxml/jacksonx/NotThePrefix"  # prefix must end at '/'
    assert pool[26][1] == "caf\u00e9 org.apache.iceberg.shaded.com.fasterxml.jackson.core.JsonFactory"
    assert 23 not in pool and pool[22] == before[22]  # Long keeps its two slots and value
    for index, (tag, value) in before.items():
        if tag != 1:
            assert pool[index] == (tag, value), f"constant #{index} changed"
    assert relocated[-2:] == original[-2:]


def test_relocate_class_is_identity_without_matches():
    data = demo_class()
    rules = relocate.Relocation({"org/nowhere/": "x/org/nowhere/"})
    assert relocate.relocate_class(data, rules.bytes) == data


def test_relocate_class_rejects_non_class_bytes():
    with pytest.raises(ValueError):
        relocate.relocate_class(b"PK\x03\x04 not a class", lambda value: value)


def test_relocation_handles_both_forms_and_reverse_rules():
    back = relocate.Relocation({"smfs/shaded/software/amazon/": "software/amazon/"})
    assert (
        back.text("Lsmfs/shaded/software/amazon/awssdk/core/SdkBytes;")
        == "Lsoftware/amazon/awssdk/core/SdkBytes;"
    )
    assert back.text("smfs.shaded.software.amazon.awssdk.http.apache.ApacheSdkHttpService") == (
        "software.amazon.awssdk.http.apache.ApacheSdkHttpService"
    )
    assert (
        back.text("smfs/shaded/org/apache/hc/core5/http/HttpHost")
        == "smfs/shaded/org/apache/hc/core5/http/HttpHost"
    )
    with pytest.raises(ValueError):
        relocate.Relocation({"com/fasterxml": "x/com/fasterxml"})


@pytest.mark.skipif(shutil.which("java") is None, reason="no JVM on PATH")
def test_relocated_class_runs_on_the_jvm(tmp_path: pathlib.Path):
    relocated = relocate.relocate_class(demo_class(), relocate.Relocation(RULES).bytes)
    target = tmp_path / SHADED_JACKSON / "Demo.class"
    target.parent.mkdir(parents=True)
    target.write_bytes(relocated)
    result = subprocess.run(
        [
            "java",
            "-Xshare:auto",
            "-cp",
            str(tmp_path),
            "org.apache.iceberg.shaded.com.fasterxml.jackson.Demo",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        "I am org.apache.iceberg.shaded.com.fasterxml.jackson.Demo, "
        "or Lorg/apache/iceberg/shaded/com/fasterxml/jackson/Demo;"
    )


def test_relocate_jar_renames_entries_services_and_drops_metadata(tmp_path: pathlib.Path):
    source = tmp_path / "jackson-core-2.15.2.jar"
    with zipfile.ZipFile(source, "w") as jar:
        jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\n\r\n")
        jar.writestr("META-INF/SIGNER.SF", "sig")
        jar.writestr("META-INF/SIGNER.RSA", "sig")
        jar.writestr("META-INF/LICENSE", "Apache-2.0")
        jar.writestr("META-INF/maven/com.fasterxml.jackson.core/jackson-core/pom.xml", "<project/>")
        jar.writestr("META-INF/versions/11/com/fasterxml/jackson/core/io/Fast.class", b"\xca\xfe\xba\xbe")
        jar.writestr("META-INF/versions/9/module-info.class", b"\xca\xfe\xba\xbe")
        jar.writestr("module-info.class", b"\xca\xfe\xba\xbe")
        jar.writestr(
            "META-INF/services/com.fasterxml.jackson.core.JsonFactory",
            "# header\ncom.fasterxml.jackson.core.JsonFactory\n",
        )
        jar.writestr("com/fasterxml/jackson/", b"")
        jar.writestr("com/fasterxml/jackson/Demo.class", demo_class())
        jar.writestr("com/fasterxml/jackson/core/json/VERSION.txt", "2.15.2")
    other = tmp_path / "jackson-databind-2.15.2.jar"
    with zipfile.ZipFile(other, "w") as jar:
        jar.writestr("META-INF/LICENSE", "duplicate, first copy wins")
        jar.writestr(
            "META-INF/services/com.fasterxml.jackson.core.JsonFactory",
            "com.fasterxml.jackson.databind.MappingJsonFactory\n",
        )

    target = tmp_path / "out" / "shaded.jar"
    target.parent.mkdir()
    classes = relocate.relocate_jar(target, [source, other], RULES, title="test")

    assert classes == 1
    assert sorted(p.name for p in target.parent.iterdir()) == ["shaded.jar"]  # no temporary left behind
    with zipfile.ZipFile(target) as jar:
        names = set(jar.namelist())
        assert names == {
            "META-INF/MANIFEST.MF",
            "META-INF/LICENSE",
            "META-INF/services/org.apache.iceberg.shaded.com.fasterxml.jackson.core.JsonFactory",
            SHADED_JACKSON + "Demo.class",
            SHADED_JACKSON + "core/json/VERSION.txt",
        }
        assert jar.read("META-INF/LICENSE") == b"Apache-2.0"
        services = jar.read(
            "META-INF/services/org.apache.iceberg.shaded.com.fasterxml.jackson.core.JsonFactory"
        )
        assert services.decode().split() == [
            "org.apache.iceberg.shaded.com.fasterxml.jackson.core.JsonFactory",
            "org.apache.iceberg.shaded.com.fasterxml.jackson.databind.MappingJsonFactory",
        ]
        pool, this, _ = parse_class(jar.read(SHADED_JACKSON + "Demo.class"))
        assert class_name(pool, this) == SHADED_JACKSON + "Demo"


def test_relocate_jar_select_filters_entries(tmp_path: pathlib.Path):
    source = tmp_path / "in.jar"
    with zipfile.ZipFile(source, "w") as jar:
        jar.writestr("smfs/shaded/software/amazon/awssdk/services/s3/S3Client.class", demo_class())
        jar.writestr(
            "smfs/shaded/software/amazon/awssdk/services/sagemaker/SageMakerClient.class", demo_class()
        )
        jar.writestr("smfs/shaded/org/apache/hc/core5/http/HttpHost.class", demo_class())
    target = tmp_path / "out.jar"
    relocate.relocate_jar(
        target,
        [source],
        {"smfs/shaded/software/amazon/": "software/amazon/"},
        select=lambda name: "/sagemaker/" not in name,
    )
    with zipfile.ZipFile(target) as jar:
        assert sorted(jar.namelist()) == [
            "META-INF/MANIFEST.MF",
            "smfs/shaded/org/apache/hc/core5/http/HttpHost.class",
            "software/amazon/awssdk/services/s3/S3Client.class",
        ]


def _pyspark_jackson_core() -> str | None:
    try:
        folder = jar_sources.spark_jars_dir()
    except RuntimeError:
        return None
    found = sorted(glob.glob(os.path.join(folder, "jackson-core-2.*.jar")))
    return found[-1] if found else None


@pytest.mark.skipif(_pyspark_jackson_core() is None, reason="PySpark (with its Jackson jars) not installed")
def test_real_jackson_class_relocates_cleanly():
    relocation = relocate.Relocation(RULES)
    with zipfile.ZipFile(_pyspark_jackson_core()) as jar:
        original = jar.read("com/fasterxml/jackson/core/JsonFactory.class")
    relocated = relocate.relocate_class(original, relocation.bytes)
    pool, this, sup = parse_class(relocated)
    assert class_name(pool, this) == SHADED_JACKSON + "core/JsonFactory"
    assert class_name(pool, sup) == SHADED_JACKSON + "core/TokenStreamFactory"
    texts = [value for tag, value in pool.values() if tag == 1]
    assert not [t for t in texts if JACKSON in t.replace(SHADED_JACKSON, "")]
    assert not [
        t
        for t in texts
        if "com.fasterxml.jackson." in t.replace("org.apache.iceberg.shaded.com.fasterxml.jackson.", "")
    ]
    assert relocate.relocate_class(relocated, relocation.bytes) == relocated  # idempotent


def test_local_jars_rejects_unknown_kind():
    with pytest.raises(ValueError, match="unknown jar kind"):
        jars.local_jars("delta")


def test_cache_dir_honours_env(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path):
    monkeypatch.setenv("LAKELOADER_CACHE", str(tmp_path / "c"))
    assert jars.cache_dir() == (tmp_path / "c").resolve()
    monkeypatch.delenv("LAKELOADER_CACHE")
    assert jars.cache_dir().parts[-2:] == (".lakeloader", "jars")


def test_check_reports_missing_jars_without_building(monkeypatch: pytest.MonkeyPatch, tmp_path, capsys):
    monkeypatch.setenv("LAKELOADER_CACHE", str(tmp_path))
    assert jars.main(["--check", "--kind", "s3a"]) == 1
    out = capsys.readouterr().out
    assert "missing" in out and "hadoop-aws-3.3.1.jar" in out
    assert not (tmp_path / "downloads").exists()
