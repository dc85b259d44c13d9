"""The members of a run archive (``.tar``, ``.zip``) or of a folder in its layout (a hub snapshot), read without
extracting anything: plain files only, links and special files refused, each name once. ``archives.import_runs``
reads what it imports through :func:`open_source`."""

from __future__ import annotations

import tarfile
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ...tasks.base import DataError


@dataclass
class _Member:
    name: str
    size: int


class Source:
    """The members of an archive or of a folder in the same layout, read without extracting anything;
    subclasses give ``members()`` and ``open(name)`` (a context manager yielding a binary file)."""

    def __init__(self, where: Path):
        self.where = where


class _TarSource(Source):
    def __init__(self, where: Path):
        super().__init__(where)
        try:
            self.tar = tarfile.open(where, "r:*")
            infos = self.tar.getmembers()
        except (tarfile.TarError, EOFError) as e:
            raise DataError(f"{where}: not a readable tar archive ({e})") from None
        self.infos = {}
        for i in infos:
            if i.isdir():
                continue
            if not i.isfile():
                kind = "link" if (i.issym() or i.islnk()) else "special file"
                raise DataError(f"{where}: member {i.name!r} is a {kind}; an archive of runs holds plain files only "
                                f"(refused; nothing was imported)")
            if i.name in self.infos:
                raise DataError(f"{where}: member {i.name!r} appears twice (refused; nothing was imported)")
            self.infos[i.name] = i

    def members(self) -> list[_Member]:
        return [_Member(n, i.size) for n, i in self.infos.items()]

    @contextmanager
    def open(self, name: str):
        f = self.tar.extractfile(self.infos[name])
        try:
            yield f
        finally:
            f.close()


class _ZipSource(Source):
    def __init__(self, where: Path):
        super().__init__(where)
        try:
            self.zip = zipfile.ZipFile(where)
        except (zipfile.BadZipFile, OSError) as e:
            raise DataError(f"{where}: not a readable zip archive ({e})") from None
        self.infos = {}
        for i in self.zip.infolist():
            if i.is_dir():
                continue
            if (i.external_attr >> 16) & 0o170000 not in (0, 0o100000):
                raise DataError(f"{where}: member {i.filename!r} is a link or special file; an archive of runs holds "
                                f"plain files only (refused; nothing was imported)")
            if i.filename in self.infos:
                raise DataError(f"{where}: member {i.filename!r} appears twice (refused; nothing was imported)")
            self.infos[i.filename] = i

    def members(self) -> list[_Member]:
        return [_Member(n, i.file_size) for n, i in self.infos.items()]

    @contextmanager
    def open(self, name: str):
        with self.zip.open(self.infos[name]) as f:
            yield f


class _FolderSource(Source):
    """A folder in the archive's layout (a hub snapshot): links are refused like archive members."""

    def __init__(self, where: Path):
        super().__init__(where)
        self.files = {}
        # A hub snapshot's files are links into the cache's blobs/ folder, two levels up; nothing else may link.
        allowed = where.resolve().parents[1] if where.parent.name == "snapshots" else where.resolve()
        for p in sorted(where.rglob("*")):
            rel = p.relative_to(where).as_posix()
            if rel.startswith(".") or "/." in rel:  # the hub's own bookkeeping (.gitattributes, .cache/)
                continue
            if p.is_symlink() and not p.resolve().is_relative_to(allowed):
                raise DataError(f"{where}: {rel} is a link to {p.resolve()}, outside the folder (refused; nothing "
                                f"was imported)")
            if p.is_file():
                self.files[rel] = p

    def members(self) -> list[_Member]:
        return [_Member(n, p.stat().st_size) for n, p in self.files.items()]

    @contextmanager
    def open(self, name: str):
        with open(self.files[name], "rb") as f:
            yield f


def open_source(where: Path) -> Source:
    if where.is_dir():
        return _FolderSource(where)
    if not where.is_file():
        raise DataError(f"{where}: no such archive")
    # By name first: a tar whose last member is an .npz (itself a zip) looks like a zip to is_zipfile.
    name = where.name.lower()
    if name.endswith(".zip") or (not name.endswith(".tar") and zipfile.is_zipfile(where)):
        return _ZipSource(where)
    return _TarSource(where)
