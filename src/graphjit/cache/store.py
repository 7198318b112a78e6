"""The cache directory: one file per entry, written atomically and privately, read only
when authenticated (the threat model is ``trust.py``'s docstring).

Layout: ``<cache_dir>/v2/<key[:2]>/<key>/<digest>.entry``, ``key`` from
:func:`key.entry_key`, ``digest`` the SHA-256 of the entry's payload (two processes that
write the same entry write the same file); every directory ``0700``, every file ``0600``.
A file is a magic line, an HMAC-SHA256 under the user's secret key
(:func:`trust.secret_key`) over everything after it, the length of a JSON header (format
version, the frame's qualified name, the argument types it was traced with, the
payload's digest), the header and the compressed payload.  Writes go to a temporary file
in the same directory, then ``os.replace`` (atomic): readers see a whole file or none,
and two processes writing at once both succeed.

A file is used only when it is a regular file (not a symbolic link), private (unless its
directory is trusted: ``trust.trusted``) and its HMAC is right; only then is its header
parsed, and its payload given to the (restricted) unpickler.  Anything else (planted,
overwritten, truncated, symlinked, another user's or another format) is skipped with one
warning per file; the frame is then traced as without a cache.  A root or entry
directory that is not private is skipped as a whole (one warning).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import os
import shutil
import struct
import tempfile
import warnings
import zlib
from typing import Any, Callable, Iterator

from . import trust

MAGIC = b"graphjit cache entry v2\n"
FORMAT = 2
_SUBDIR = f"v{FORMAT}"
_MAC = 32
#: the largest entry file read (a bigger one is not an entry graphjit wrote)
MAX_ENTRY = 1 << 30
_warned: set[str] = set()


def entries_dir(root: str, key: str) -> str:
    return os.path.join(root, _SUBDIR, key[:2], key)


def _chain(root: str, key: str) -> list[str]:
    sub = os.path.join(root, _SUBDIR)
    return [sub, os.path.join(sub, key[:2]), os.path.join(sub, key[:2], key)]


def write(root: str, key: str, header: dict[str, Any], payload: bytes) -> str | None:
    """Write one entry (atomically, ``0600``); returns its path, or ``None`` when the
    directory or the key may not be used (one warning said why)."""
    secret = trust.secret_key()
    if secret is None or not trust.usable_root(root):
        return None
    for path in _chain(root, key):
        why = trust.private_dir(root, path, create=True)
        if why is not None:
            _refused_dir(path, why)
            return None
    payload = zlib.compress(payload, 1)
    digest = hashlib.sha256(payload).hexdigest()
    head = json.dumps(dict(header, format=FORMAT, payload_sha256=digest), sort_keys=True).encode()
    body = struct.pack(">I", len(head)) + head + payload
    directory = entries_dir(root, key)
    path = os.path.join(directory, f"{digest[:32]}.entry")
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".entry")  # (0600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(MAGIC)
            f.write(trust.mac(secret, MAGIC, body))
            f.write(body)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def read(root: str, key: str) -> Iterator[tuple[str, dict[str, Any], Callable[[], bytes | None]]]:
    """``(path, header, payload)`` of each authenticated entry of ``key`` (oldest first);
    ``payload()`` decompresses it (``None``, with a warning, when it does not)."""
    secret = trust.secret_key()
    if secret is None or not trust.usable_root(root):
        return
    for path in _chain(root, key):
        try:
            why = trust.private_dir(root, path, create=False)
        except FileNotFoundError:
            return
        if why is not None:
            _refused_dir(path, why)
            return
    directory = entries_dir(root, key)
    try:
        found = sorted(os.scandir(directory), key=_mtime)
    except OSError:
        return
    for dirent in found:
        if not dirent.name.endswith(".entry") or dirent.name.startswith("."):
            continue
        entry = _read_entry(dirent.path, root, secret)
        if entry is not None:
            header, payload = entry
            yield dirent.path, header, functools.partial(_decompress, dirent.path, payload)


def _mtime(dirent) -> float:
    try:
        return dirent.stat(follow_symlinks=False).st_mtime
    except OSError:
        return 0.0


def _read_entry(path: str, root: str, secret: bytes) -> tuple[dict, bytes] | None:
    """The header and (compressed) payload of an authenticated entry file, or ``None``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as e:
        bad_entry(path, "a symbolic link" if os.path.islink(path) else f"unreadable ({e})")
        return None
    with os.fdopen(fd, "rb") as f:
        why = trust.check_file(f.fileno(), path, root)
        if why is not None:
            bad_entry(path, why)
            return None
        data = f.read(MAX_ENTRY + 1)
    if not data.startswith(MAGIC):
        bad_entry(path, "not a graphjit cache entry of this version")
        return None
    tag, body = data[len(MAGIC):len(MAGIC) + _MAC], data[len(MAGIC) + _MAC:]
    if len(data) > MAX_ENTRY or not hmac.compare_digest(tag, trust.mac(secret, MAGIC, body)):
        bad_entry(path, "it was not written by this user's graphjit (its HMAC does not match the cache key: "
                  "planted, altered, truncated, or written with another key)")
        return None
    try:
        (n,) = struct.unpack(">I", body[:4])
        header = json.loads(body[4:4 + n])
    except (struct.error, ValueError):
        header = None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        bad_entry(path, "its header is not readable")
        return None
    payload = body[4 + n:]
    if hashlib.sha256(payload).hexdigest() != header.get("payload_sha256"):
        bad_entry(path, "its content does not match its digest")
        return None
    return header, payload


def _decompress(path: str, payload: bytes) -> bytes | None:
    try:
        return zlib.decompress(payload)
    except zlib.error:
        bad_entry(path, "its content does not decompress")
        return None


def _refused_dir(path: str, why: str) -> None:
    trust.warn_once(path, f"graphjit cache: not using {path}: {why}. Entries there are neither read nor "
                    f"written; make it private (chmod 700) or name the cache directory in "
                    f"GRAPHJIT_CACHE_TRUSTED to share it on purpose.")


def bad_entry(path: str, why: str) -> None:
    """One warning per file for an entry that cannot be used."""
    if path in _warned:
        return
    _warned.add(path)
    warnings.warn(f"graphjit cache: ignoring {path}: {why}", stacklevel=2)


def clear(root: str) -> None:
    """Delete every entry under ``root`` (the cache's own subdirectories only)."""
    for name in ("v1", _SUBDIR):
        shutil.rmtree(os.path.join(root, name), ignore_errors=True)
    trust.forget()


__all__ = ["write", "read", "clear", "bad_entry", "entries_dir", "MAGIC", "FORMAT"]
