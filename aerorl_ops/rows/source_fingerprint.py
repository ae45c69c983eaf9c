"""What a dataset's cached rows were built from, so that a changed source is noticed.

A :class:`SourceFingerprint` holds the files a dataset reads (each one's path, size, modification
time and, below ``HASH_LIMIT_BYTES``, the SHA-256 of its content), the package that ships it (name
and version; ``""`` for none) and the settings that shape its rows (split, limit, seed, ...; for
generated rows, the whole of their source). Its ``version`` hashes what identifies the content:
a hashed file touched but not changed keeps it, a file too large to hash is compared by size and
modification time. ``source_change(cached, current)`` says in words what differs, or ``None``.

>>> settings = {"split": "test", "limit": 12}
>>> cached = SourceFingerprint.generated("synthetic docvqa rows", settings)
>>> source_change(cached, SourceFingerprint.generated("synthetic docvqa rows", {**settings, "limit": 6}))
SourceChange(subject='its settings', details='limit 12 -> 6')
>>> source_change(cached, SourceFingerprint.from_json(cached.to_json())) is None
True
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, NamedTuple

HASH_LIMIT_BYTES = 100 * 1024 * 1024
"""Files smaller than this are hashed; a larger one is compared by size and modification time."""
_CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class FileFingerprint:
    """One file as read: ``sha256`` is ``""`` for a file of ``HASH_LIMIT_BYTES`` or more."""

    path: str
    size: int
    mtime_ns: int
    sha256: str

    @classmethod
    def of(cls, path: Path) -> FileFingerprint:
        """The fingerprint of the file at ``path`` (``FileNotFoundError`` naming it when it is missing)."""
        stat = path.stat()
        return cls(str(path), stat.st_size, stat.st_mtime_ns,
                   _sha256(path) if stat.st_size < HASH_LIMIT_BYTES else "")

    def identity(self) -> tuple[str, int, str]:
        """What tells this content apart: the hash, or for an unhashed file its modification time."""
        return self.path, self.size, self.sha256 or f"mtime_ns={self.mtime_ns}"

    def change_from(self, cached: FileFingerprint) -> str | None:
        """How this file differs from ``cached`` (the same path, read earlier), or ``None``."""
        if self.size != cached.size:
            return f"size {cached.size} -> {self.size} bytes"
        if self.identity() == cached.identity():
            return None
        return "content changed (same size)" if self.sha256 else "modified (too large to hash; same size)"


class SourceChange(NamedTuple):
    """What changed (``subject``: the source's location, the package, or ``its settings``) and how."""

    subject: str
    details: str


@dataclass(frozen=True)
class SourceFingerprint:
    """What a dataset's rows are built from; ``location`` names it for a person (a path, a package, or
    the generator). ``settings`` are ``(name, value as JSON)`` pairs, sorted by name."""

    location: str
    files: tuple[FileFingerprint, ...]
    package: str
    settings: tuple[tuple[str, str], ...]

    @classmethod
    def of_paths(cls, location: str, paths: Iterable[str | Path], settings: Mapping[str, Any]) -> SourceFingerprint:
        """The files at ``paths``; a folder stands for every file under it, a missing path for none
        (the loader names it; once it exists, it shows as a new file)."""
        files = sorted({file for path in map(Path, paths) for file in _files_under(path)})
        return cls(location, tuple(FileFingerprint.of(file) for file in files), "", _settings(settings))

    @classmethod
    def of_package(cls, distribution: str, settings: Mapping[str, Any]) -> SourceFingerprint:
        """Data shipped inside the installed ``distribution`` (PyPI name), told apart by its version."""
        try:
            version = metadata.version(distribution)
        except metadata.PackageNotFoundError:
            version = "not installed"
        return cls(f"package {distribution}", (), f"{distribution} {version}", _settings(settings))

    @classmethod
    def generated(cls, location: str, settings: Mapping[str, Any]) -> SourceFingerprint:
        """Rows generated from ``settings`` alone (no file, no package)."""
        return cls(location, (), "", _settings(settings))

    def to_json(self) -> str:
        """The stable JSON form: keys sorted, no spaces."""
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    def as_dict(self) -> dict[str, Any]:
        """The JSON form as dicts and lists (``from_dict`` reads it back)."""
        return json.loads(self.to_json())

    @classmethod
    def from_json(cls, text: str) -> SourceFingerprint:
        """The fingerprint ``to_json`` wrote; ``ValueError`` naming the text otherwise."""
        try:
            return cls.from_dict(json.loads(text))
        except json.JSONDecodeError as error:
            raise ValueError(f"not a source fingerprint (invalid JSON: {error}): {text[:200]!r}") from None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SourceFingerprint:
        """The fingerprint whose ``as_dict`` form is ``data``; ``ValueError`` naming it otherwise."""
        try:
            return cls(str(data["location"]), tuple(FileFingerprint(**file) for file in data["files"]),
                       str(data["package"]), tuple((str(name), str(value)) for name, value in data["settings"]))
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"not a source fingerprint ({type(error).__name__}: {error}): {data!r:.200}") from None

    @property
    def version(self) -> str:
        """A hash of what identifies the rows' source (not ``location``, not a hashed file's time)."""
        identity = [[file.identity() for file in self.files], self.package, self.settings]
        return hashlib.sha256(json.dumps(identity).encode()).hexdigest()


def source_change(cached: SourceFingerprint, current: SourceFingerprint) -> SourceChange | None:
    """What differs between the source as it was (``cached``) and as it is (``current``), or ``None``.

    The subject is ``current.location`` when a file or the package changed, else ``its settings``; the
    details list every difference, ``; ``-separated."""
    if cached.version == current.version:
        return None
    files = _file_changes(cached, current)
    package = ([f"{cached.package or 'no package'} -> {current.package or 'no package'}"]
               if cached.package != current.package else [])
    settings = _setting_changes(cached.settings, current.settings)
    return SourceChange(current.location if files or package else "its settings",
                        "; ".join([*files, *package, *settings]))


def _file_changes(cached: SourceFingerprint, current: SourceFingerprint) -> list[str]:
    before = {file.path: file for file in cached.files}
    after = {file.path: file for file in current.files}
    changes = [f"{_label(path, current.location)}removed" for path in before if path not in after]
    for path, file in after.items():
        change = file.change_from(before[path]) if path in before else "new file"
        if change is not None:
            changes.append(f"{_label(path, current.location)}{change}")
    return changes


def _label(path: str, location: str) -> str:
    """``""`` for the location itself, else the path (relative to a location folder) and a colon."""
    if path == location:
        return ""
    inside = Path(path).is_relative_to(location)
    return f"{Path(path).relative_to(location) if inside else path}: "


def _setting_changes(cached: tuple[tuple[str, str], ...], current: tuple[tuple[str, str], ...]) -> list[str]:
    before, after = dict(cached), dict(current)
    return [f"{name} {before.get(name, 'unset')} -> {after.get(name, 'unset')}"
            for name in sorted(before.keys() | after.keys()) if before.get(name) != after.get(name)]


def _settings(settings: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((name, json.dumps(value, sort_keys=True)) for name, value in settings.items()))


def _files_under(path: Path) -> list[Path]:
    if path.is_dir():
        return [file for file in path.rglob("*") if file.is_file()]
    return [path] if path.is_file() else []


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()
