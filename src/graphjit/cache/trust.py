"""Who may write the cache directory, and what graphjit does about everyone else.

Threat model.  A cache entry holds code: the transformed bytecode of a frame, its resume
functions, the guard's code, the graphs.  Whoever can put a file where graphjit reads
entries decides what the next process runs, with the rights of the user who runs it.
graphjit therefore runs only entries it wrote itself (or that a process holding the same
secret key wrote), and trusts the directory no further than its permissions say:

* **Who may write.**  The cache root (``config.cache_dir``) and every directory graphjit
  creates below it are the user's own: created ``0700``, files ``0600``.  A root or
  entry directory that is writable by group or others, or owned by another user, is
  refused with one warning (the cache is off for that directory), unless the user names
  it as trusted (``config.cache_trusted``, ``GRAPHJIT_CACHE_TRUSTED``: a
  ``os.pathsep``-separated list): a directory shared by a team or by the ranks of a job
  on purpose.
* **What an attacker who can write the directory can do.**  Plant, overwrite, truncate
  or symlink entry files, or replace them with files of another user's graphjit.  None of
  it runs: every entry carries an HMAC-SHA256 over its header and payload under a
  per-user secret key (:func:`secret_key`), checked before a byte of the payload is
  unpickled; a file that fails it, is not a regular file (a symlink), or is writable by
  others is skipped with one warning and the frame is traced as without a cache.  What
  remains is denial of service (deleting entries makes the next process trace again).
* **The key.**  32 random bytes (hex) in ``~/.config/graphjit/cache-key`` (or
  ``$XDG_CONFIG_HOME/graphjit``, or the file ``config.cache_key_file`` /
  ``GRAPHJIT_CACHE_KEY_FILE`` names), created on first use, ``0600`` (its directory
  ``0700`` when graphjit makes it).  Whoever can read it can forge entries, so a default key file that group
  or others can read or write, or that another user owns, is refused (the cache is off,
  one warning).  A shared cache works by sharing the key deliberately: the ranks of a
  job on one machine (one user) share it already; a team points
  ``GRAPHJIT_CACHE_KEY_FILE`` at a key only its members can read (a named key file is
  refused only when others outside its group can read or write it).
* **The key is the boundary.**  An entry holds bytecode that graphjit runs when the
  frame is called, so whoever holds the key can make graphjit run anything: no check of
  an authenticated entry's content can stop that.  Unpickling is still restricted to what
  entries legitimately reference (``portable.py``: graphjit's loaders and data classes,
  plain values, and named objects checked on load; ``find_class`` never answers
  ``eval``, ``getattr``, ``os.system`` or another callable by name), so that loading a
  damaged or mistaken entry cannot call arbitrary code by itself.  Replace the key file
  (delete it: a new one is made) to revoke every entry written with the old one.
* **Not covered**: an attacker who runs code as the user (they can read the key and
  write the user's files anyway), or who controls the Python path (graphjit's own code).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import stat
import threading
import warnings

from .. import config

KEY_BYTES = 32
_lock = threading.Lock()
#: path -> the refusal (``None``: usable), checked once per process
_dirs: dict[str, str | None] = {}
_keys: dict[str, bytes | None] = {}
_warned: set[str] = set()


class Refused(Exception):
    """A directory or key file graphjit will not use (the message says why and what to do)."""


def warn_once(what: str, message: str) -> None:
    if what in _warned:
        return
    _warned.add(what)
    warnings.warn(message, stacklevel=3)


def trusted(path: str) -> bool:
    """Is ``path`` (a cache root, or a directory below one) named trusted by the user?"""
    names = config.cache_trusted
    if not names:
        return False
    real = os.path.realpath(path)
    for name in names:
        root = os.path.realpath(os.path.expanduser(name))
        if real == root or real.startswith(root + os.sep):
            return True
    return False


def _why_unsafe(st: os.stat_result, what: str, follow_ok: bool) -> str | None:
    if stat.S_ISLNK(st.st_mode) and not follow_ok:
        return f"{what} is a symbolic link"
    if st.st_uid != os.getuid():
        return f"{what} is owned by another user (uid {st.st_uid})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{what} is writable by {'group and others' if st.st_mode & stat.S_IWOTH and st.st_mode & stat.S_IWGRP else 'others' if st.st_mode & stat.S_IWOTH else 'its group'} (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def usable_root(root: str) -> bool:
    """May entries be read from and written under ``root``?  Creates it (``0700``) if it
    does not exist; a root that is not private is refused with one warning."""
    known = _dirs.get(root, False)
    if known is not False:
        return known is None
    why = None
    try:
        if not os.path.isdir(root):
            os.makedirs(root, mode=0o700, exist_ok=True)
            os.chmod(root, 0o700)
        if not trusted(root):
            why = _why_unsafe(os.stat(root), f"the cache directory {root}", follow_ok=True)
    except OSError as e:
        why = f"the cache directory {root} cannot be made ({e})"
    _dirs[root] = why
    if why is not None:
        warn_once(root, f"graphjit cache: not using {root}: {why}. The cache is off for it; make it private "
                  f"(chmod 700) or name it in GRAPHJIT_CACHE_TRUSTED to share it on purpose.")
    return why is None


def private_dir(root: str, path: str, create: bool) -> str | None:
    """Check (with ``create``: make, ``0700``) the directory ``path`` below ``root``; the
    refusal, or ``None``.  Raises ``FileNotFoundError`` for a missing one not made.
    (Checked on every read and write: a few ``lstat`` calls, on a miss in memory only.)"""
    if create:
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        except OSError as e:
            return f"cannot be made ({e})"
    elif not os.path.lexists(path):
        raise FileNotFoundError(path)
    why = None
    if not trusted(root):
        try:
            why = _why_unsafe(os.lstat(path), f"the directory {path}", follow_ok=False)
        except OSError as e:
            why = f"cannot be read ({e})"
    return why


def check_file(fd: int, path: str, root: str) -> str | None:
    """Why the open entry file ``fd`` must not be used (``None``: it may be)."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if trusted(root):
        return None
    return _why_unsafe(st, "the file", follow_ok=False)


def key_path() -> tuple[str, bool]:
    """The key file, and whether the user named it (``config.cache_key_file``)."""
    if config.cache_key_file:
        return os.path.expanduser(config.cache_key_file), True
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "graphjit", "cache-key"), False


def secret_key() -> bytes | None:
    """The per-user secret the entries are authenticated with (created on first use), or
    ``None`` (with one warning) when there is none graphjit may use: the cache is off."""
    path, named = key_path()
    with _lock:
        if path in _keys:
            return _keys[path]
        try:
            key = _read_or_create(path, named)
        except Refused as e:
            warn_once(path, f"graphjit cache: not using the key {path}: {e}. The cache is off.")
            key = None
        except OSError as e:
            warn_once(path, f"graphjit cache: the key {path} cannot be read or made ({e}). The cache is off.")
            key = None
        _keys[path] = key
        return key


def _read_or_create(path: str, named: bool) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        _create_key(path)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise Refused("it is not a regular file")
        mode = stat.S_IMODE(st.st_mode)
        if named:
            if mode & (stat.S_IROTH | stat.S_IWOTH):
                raise Refused(f"others can read or write it (mode {mode:o})")
        else:
            if st.st_uid != os.getuid():
                raise Refused(f"it is owned by another user (uid {st.st_uid})")
            if mode & 0o077:
                raise Refused(f"group or others can read or write it (mode {mode:o}; chmod 600 it)")
        try:
            key = bytes.fromhex(f.read(4096).decode("ascii", "replace").strip())
        except ValueError:
            raise Refused("it holds no key") from None
    if len(key) < 16:
        raise Refused("it holds no key")
    return key


def _create_key(path: str) -> None:
    """Write a new key atomically: two processes starting at once end with one key."""
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    tmp = os.path.join(directory, f".cache-key-{os.getpid()}-{threading.get_ident()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(KEY_BYTES).hex().encode() + b"\n")
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)  # (fails if another process made the key first: theirs is kept)
        except FileExistsError:
            pass
    finally:
        os.unlink(tmp)


def mac(key: bytes, *parts: bytes) -> bytes:
    h = hmac.new(key, digestmod=hashlib.sha256)
    for part in parts:
        h.update(part)
    return h.digest()


def forget() -> None:
    """Check directories and keys again (tests change them; ``graphjit.cache.clear``)."""
    with _lock:
        _dirs.clear()
        _keys.clear()


__all__ = ["usable_root", "private_dir", "check_file", "secret_key", "mac", "trusted", "forget", "key_path",
           "warn_once", "Refused"]
