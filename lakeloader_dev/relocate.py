"""Relocate Java packages inside jars, in pure Python (no JVM, no Maven shade plugin).

Only the CONSTANT_Utf8 entries of each class file's constant pool are rewritten (class names,
descriptors, generic signatures and string literals all live there), so indices and bytecode stay
untouched. Entry names and ``META-INF/services`` files are renamed the same way; signatures,
``module-info.class``, ``META-INF/versions/`` and Maven metadata are dropped, since a relocated jar
is neither signed nor a module. ``lakeloader_dev.jars`` uses this to assemble the local Spark jars.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import re
import struct
import threading
import zipfile
from collections.abc import Callable, Iterable, Iterator

__all__ = ["Relocation", "atomic_path", "relocate_class", "relocate_jar"]


# --------------------------------------------------------------------------- atomic output


def _tmp_name(target: pathlib.Path) -> pathlib.Path:
    """Unique per thread: the emulator runs Glue jobs in threads of one process, and two of them may
    write the same file at once."""
    return target.with_name(f".{target.name}.tmp-{os.getpid()}-{threading.get_ident()}")


@contextlib.contextmanager
def atomic_path(target: pathlib.Path) -> Iterator[pathlib.Path]:
    """Yield a temporary path next to ``target``; rename it onto ``target`` on success."""
    tmp = _tmp_name(target)
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


# --------------------------------------------------------------------------- class-file relocation


class Relocation:
    """Rename package prefixes, in slash (``a/b/``) and dot (``a.b.``) form.

    ``rules`` maps old slash-form prefixes to new ones, e.g.
    ``{"com/fasterxml/jackson/": "org/apache/iceberg/shaded/com/fasterxml/jackson/"}``.
    Text that already carries a new prefix is left alone, so relocating twice is harmless.
    """

    def __init__(self, rules: dict[str, str]):
        if not rules:
            raise ValueError("no relocation rules")
        self.rules = dict(rules)
        table: dict[bytes, bytes] = {}
        alternatives: list[tuple[int, bytes]] = []
        for old, new in rules.items():
            if not (old.endswith("/") and new.endswith("/")):
                raise ValueError(f"relocation prefixes must end with '/': {old!r} -> {new!r}")
            for o, n in ((old, new), (old.replace("/", "."), new.replace("/", "."))):
                ob, nb = o.encode(), n.encode()
                table[ob] = nb
                pattern = re.escape(ob)
                if nb.endswith(ob):  # e.g. a/ -> x/a/: don't touch x/a/ again
                    pattern = b"(?<!" + re.escape(nb[: -len(ob)]) + b")" + pattern
                alternatives.append((len(ob), pattern))
        alternatives.sort(key=lambda item: item[0], reverse=True)  # longest (most specific) first
        self._table = table
        self._pattern = re.compile(b"|".join(pattern for _, pattern in alternatives))

    def bytes(self, data: bytes) -> bytes:
        return self._pattern.sub(lambda m: self._table[m.group(0)], data)

    def text(self, value: str) -> str:
        return self.bytes(value.encode("utf-8")).decode("utf-8")

    def matches(self, data: bytes) -> bool:
        return self._pattern.search(data) is not None


_CP_SIZES = {  # payload size of each non-Utf8 constant-pool entry, by tag
    3: 4,  # Integer
    4: 4,  # Float
    5: 8,  # Long (takes two slots)
    6: 8,  # Double (takes two slots)
    7: 2,  # Class
    8: 2,  # String
    9: 4,  # Fieldref
    10: 4,  # Methodref
    11: 4,  # InterfaceMethodref
    12: 4,  # NameAndType
    15: 3,  # MethodHandle
    16: 2,  # MethodType
    17: 4,  # Dynamic
    18: 4,  # InvokeDynamic
    19: 2,  # Module
    20: 2,  # Package
}


def relocate_class(data: bytes, rewrite: Callable[[bytes], bytes]) -> bytes:
    """Return class file ``data`` with ``rewrite`` applied to every CONSTANT_Utf8 entry.

    Everything else (indices, attributes, bytecode) is copied unchanged, which is
    valid because only the byte length of Utf8 entries changes. ``rewrite`` gets the
    entry's modified-UTF-8 bytes, in which ASCII prefixes can be replaced safely.
    """
    if data[:4] != b"\xca\xfe\xba\xbe":
        raise ValueError("not a class file (bad magic)")
    (count,) = struct.unpack_from(">H", data, 8)
    out = [data[:10]]
    pos, index = 10, 1
    while index < count:
        tag = data[pos]
        if tag == 1:
            (length,) = struct.unpack_from(">H", data, pos + 1)
            start = pos + 3
            value = data[start : start + length]
            new = rewrite(value)
            if new == value:
                out.append(data[pos : start + length])
            elif len(new) > 0xFFFF:
                raise ValueError("relocated CONSTANT_Utf8 entry exceeds 65535 bytes")
            else:
                out.append(b"\x01" + struct.pack(">H", len(new)) + new)
            pos = start + length
            index += 1
        else:
            size = _CP_SIZES.get(tag)
            if size is None:
                raise ValueError(f"unknown constant-pool tag {tag} at offset {pos}")
            out.append(data[pos : pos + 1 + size])
            pos += 1 + size
            index += 2 if tag in (5, 6) else 1
    out.append(data[pos:])
    return b"".join(out)


# --------------------------------------------------------------------------- jar writing


def _dropped(name: str) -> bool:
    """Entries never carried into a generated jar."""
    if name.startswith(("META-INF/versions/", "META-INF/maven/")) or name.endswith("module-info.class"):
        return True
    upper = name.upper()
    if upper.startswith("META-INF/") and upper.count("/") == 1:
        return upper.endswith((".SF", ".RSA", ".DSA", ".EC")) or upper in (
            "META-INF/MANIFEST.MF",
            "META-INF/INDEX.LIST",
        )
    return False


class _JarWriter:
    """Stream entries into a new jar: duplicates keep the first copy, service files are merged."""

    def __init__(self, path: pathlib.Path, title: str):
        self._zip = zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6)
        self._names: set[str] = set()
        self._services: dict[str, list[str]] = {}
        self.classes = 0
        manifest = (
            f"Manifest-Version: 1.0\r\nCreated-By: lakeloader.jars\r\nImplementation-Title: {title}\r\n\r\n"
        )
        self._write("META-INF/MANIFEST.MF", manifest.encode())

    def _write(self, name: str, data: bytes) -> None:
        info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED
        info.external_attr = 0o644 << 16
        self._zip.writestr(info, data)
        self._names.add(name)

    def add(self, name: str, data: bytes) -> None:
        if name.startswith("META-INF/services/") and name.count("/") == 2:
            lines = self._services.setdefault(name, [])
            for line in data.decode("utf-8").splitlines():
                line = line.split("#", 1)[0].strip()
                if line and line not in lines:
                    lines.append(line)
            return
        if name in self._names:
            return
        self._write(name, data)
        if name.endswith(".class"):
            self.classes += 1

    def close(self) -> None:
        try:
            for name, lines in sorted(self._services.items()):
                if lines:
                    self._write(name, ("\n".join(lines) + "\n").encode())
        finally:
            self._zip.close()


def relocate_jar(
    target: pathlib.Path,
    sources: Iterable[pathlib.Path],
    rules: dict[str, str],
    select: Callable[[str], bool] | None = None,
    title: str = "relocated by lakeloader.jars",
) -> int:
    """Write ``target`` (atomically) from the entries of ``sources`` that ``select`` accepts.

    Class files get their constant pool relocated by ``rules`` (see :class:`Relocation`),
    entry names and ``META-INF/services`` files (name and content) are relocated too;
    signatures, ``module-info.class``, ``META-INF/versions/`` and Maven metadata are
    dropped. Entries are streamed one at a time. Returns the number of classes written.
    """
    relocation = Relocation(rules)
    with atomic_path(target) as tmp:
        writer = _JarWriter(tmp, title)
        try:
            for source in sources:
                with zipfile.ZipFile(source) as jar:
                    for info in jar.infolist():
                        name = info.filename
                        if info.is_dir() or _dropped(name) or (select is not None and not select(name)):
                            continue
                        data = jar.read(info)
                        if name.endswith(".class"):
                            if relocation.matches(data):
                                data = relocate_class(data, relocation.bytes)
                        elif name.startswith("META-INF/services/"):
                            data = relocation.bytes(data)
                        writer.add(relocation.text(name), data)
        finally:
            writer.close()
    return writer.classes
