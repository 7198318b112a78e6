"""The cache directory: one file per entry, written atomically, read defensively.

Layout: ``<cache_dir>/v1/<key[:2]>/<key>/<digest>.entry``, ``key`` from
:func:`key.entry_key`, ``digest`` the SHA-256 of the entry's payload (two processes that
write the same entry write the same file).  A file is a magic line, a JSON header (format
version, the frame's qualified name, the argument types it was traced with, the payload's
digest) and the payload.  Writes go to a temporary file in the same directory, then
``os.replace`` (atomic): readers see a whole file or none, and two processes writing at
once both succeed.  A file that cannot be read (truncated, another format, a digest that
does not match, a payload that does not unpickle) is skipped with one warning per file;
the frame is then traced as without a cache.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import struct
import tempfile
import warnings
import zlib
from typing import Any, Callable, Iterator

MAGIC = b"graphjit cache entry\n"
FORMAT = 1
_SUBDIR = f"v{FORMAT}"
_warned: set[str] = set()


def entries_dir(root: str, key: str) -> str:
    return os.path.join(root, _SUBDIR, key[:2], key)


def write(root: str, key: str, header: dict[str, Any], payload: bytes) -> str:
    """Write one entry (atomically); returns its path."""
    payload = zlib.compress(payload, 1)
    digest = hashlib.sha256(payload).hexdigest()
    header = dict(header, format=FORMAT, payload_sha256=digest)
    head = json.dumps(header, sort_keys=True).encode()
    directory = entries_dir(root, key)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{digest[:32]}.entry")
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".entry")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(MAGIC)
            f.write(struct.pack(">I", len(head)))
            f.write(head)
            f.write(payload)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def read(root: str, key: str) -> Iterator[tuple[str, dict[str, Any], Callable[[], bytes | None]]]:
    """``(path, header, payload)`` of each entry of ``key`` whose header reads (oldest
    first); ``payload()`` reads the rest of the file, or gives ``None`` (with a warning)
    when it does not match the header's digest."""
    directory = entries_dir(root, key)
    try:
        found = sorted(os.scandir(directory), key=_mtime)
    except OSError:
        return
    for dirent in found:
        if not dirent.name.endswith(".entry") or dirent.name.startswith("."):
            continue
        header = _read_header(dirent.path)
        if header is not None:
            yield dirent.path, header[0], functools.partial(_read_payload, dirent.path, header[1], header[0])


def _mtime(dirent) -> float:
    try:
        return dirent.stat().st_mtime
    except OSError:
        return 0.0


def _read_header(path: str) -> tuple[dict, int] | None:
    try:
        with open(path, "rb") as f:
            head = f.read(len(MAGIC) + 4)
            if not head.startswith(MAGIC) or len(head) < len(MAGIC) + 4:
                bad_entry(path, "not a graphjit cache entry")
                return None
            (n,) = struct.unpack(">I", head[len(MAGIC):])
            raw = f.read(n)
    except OSError as e:
        bad_entry(path, f"unreadable ({e})")
        return None
    try:
        header = json.loads(raw)
    except ValueError:
        header = None
    if not isinstance(header, dict):
        bad_entry(path, "its header is not readable")
        return None
    if header.get("format") != FORMAT:
        bad_entry(path, f"format {header.get('format')!r} (this graphjit reads {FORMAT})")
        return None
    return header, len(MAGIC) + 4 + n


def _read_payload(path: str, offset: int, header: dict) -> bytes | None:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            payload = f.read()
    except OSError as e:
        bad_entry(path, f"unreadable ({e})")
        return None
    if hashlib.sha256(payload).hexdigest() != header.get("payload_sha256"):
        bad_entry(path, "its content does not match its digest (truncated or corrupt)")
        return None
    try:
        return zlib.decompress(payload)
    except zlib.error:
        bad_entry(path, "its content does not decompress")
        return None


def bad_entry(path: str, why: str) -> None:
    """One warning per file for an entry that cannot be used."""
    if path in _warned:
        return
    _warned.add(path)
    warnings.warn(f"graphjit cache: ignoring {path}: {why}", stacklevel=2)


def clear(root: str) -> None:
    """Delete every entry under ``root`` (the cache's own subdirectory only)."""
    shutil.rmtree(os.path.join(root, _SUBDIR), ignore_errors=True)


__all__ = ["write", "read", "clear", "bad_entry", "entries_dir"]
