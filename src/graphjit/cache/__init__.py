"""graphjit.cache: compiled entries kept on disk, so a new process starts without tracing.

Contract:

* ``graphjit.config.cache_dir`` (from ``GRAPHJIT_CACHE_DIR``, default
  ``~/.cache/graphjit``; ``None`` or an empty variable: off) holds the entries.
* After a frame is traced, its entry is written (:meth:`FrameCache.save`): the transformed
  code and the code of its resume functions (each resume function's own entries are
  written under its own key when it is traced), the guard with its constants as values,
  names or slots found again through their sources (``entries.py``), the graphs as FX
  nodes with their attributes found again the same way (``graphs.py``), keyed by the code
  object's content, graphjit's and torch's versions, the backend, options and settings
  (``key.py``).  An entry that holds something that cannot be found again is not written
  (a log line says why).
* On a miss in memory, before tracing (:meth:`FrameCache.load`), the entries written for
  that key are bound to the call (``EntryPayload.bind``); the first whose guard passes is
  used with no trace.  The backend is called again on the rebuilt graph at its first call
  (``eager``/``aot_eager`` rebuild from the graph; ``inductor`` hits its own FX graph and
  AOTAutograd caches).  Anything that changed (edited source, a global, a class attribute,
  a parameter replaced, another static shape) fails a fingerprint, a reference, the key or
  the guard, and the frame is traced as without the cache.
* The cache runs only what graphjit wrote (the threat model: ``trust.py``): directories
  ``0700`` and files ``0600``, a directory that others may write refused (one warning)
  unless named trusted, every entry authenticated with an HMAC under the user's secret
  key before any byte of it is unpickled, and unpickling restricted to what entries
  legitimately reference (``portable.py``).  Nothing is copied that the entry holds by
  identity: an entry loaded from disk behaves as the entry made in memory.
* Files are written atomically; a corrupt, planted, symlinked or foreign file is skipped
  with one warning; a reference that leads to something else now makes that entry stale
  (skipped).
  ``graphjit.reset()`` leaves the directory alone; :func:`clear` empties it.
* ``graphjit.stats()`` counts ``cache_hits``/``cache_misses``/``cache_writes`` and lists
  ``cache_events`` per frame; ``GRAPHJIT_LOGS=cache`` prints each.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import types
from typing import Any, Callable

from .. import config
from ..diagnostics import logs
from ..exc import InternalError
from . import store, writer
from .entries import EntryPayload, SessionRefs, arg_types, capture
from .key import entry_key, prefetch_digest
from .portable import NotCacheable, Stale, dumps, loads


def cache_dir() -> str | None:
    """The directory entries are kept in (``None``: the cache is off)."""
    root = config.cache_dir
    return os.path.expanduser(root) if root else None


def prefetch() -> None:
    """With the cache on, start computing what every key hashes of the system (graphjit's
    sources' digest) in the background: ``graphjit.compile`` calls it, so a warm
    process's first call finds it done."""
    if cache_dir() and _reads:
        prefetch_digest()


def clear() -> None:
    """Delete every entry in :func:`cache_dir` (``graphjit.reset()`` does not)."""
    writer.flush()
    root = cache_dir()
    if root:
        store.clear(root)


#: entries are read on a miss in memory (off inside :func:`write_only`)
_reads = True


@contextlib.contextmanager
def write_only():
    """Entries are written but not read inside the block: a test's first pass traces
    every frame as without a cache, and its warm pass then reads what it wrote
    (``graphjit.testing``)."""
    global _reads
    old, _reads = _reads, False
    try:
        yield
    finally:
        _reads = old


@contextlib.contextmanager
def disabled():
    """The cache off inside the block (``graphjit.explain`` must trace)."""
    old = config.cache_dir
    config.cache_dir = None
    try:
        yield
    finally:
        config.cache_dir = old


@dataclasses.dataclass(frozen=True)
class CacheEvent:
    """One frame's cache outcome: ``"hit"``, ``"miss"``, ``"written"`` or ``"not written"``."""

    frame: str
    outcome: str
    detail: str = ""

    def __str__(self) -> str:
        return f"cache {self.outcome}: {self.frame}" + (f" ({self.detail})" if self.detail else "")


#: counted in ``graphjit.stats()`` (the runtime installs its recorder: :func:`set_recorder`)
_recorder: Callable[[CacheEvent], None] = lambda event: None


def set_recorder(record: Callable[[CacheEvent], None]) -> None:
    global _recorder
    _recorder = record


#: more observers of every event (``graphjit.testing``'s warm pass)
listeners: list[Callable[[CacheEvent], None]] = []


def _event(frame: str, outcome: str, detail: str = "", listener: Callable[[str, str], None] | None = None) -> None:
    event = CacheEvent(frame, outcome, detail)
    if listener is not None:
        listener(outcome, detail)
    _recorder(event)
    for listener in listeners:
        listener(event)
    logs.emit("cache", str(event))


@dataclasses.dataclass(frozen=True)
class Skipped:
    """What :meth:`FrameCache.load` returns for a frame an earlier process found nothing to
    compile in before its first graph break: it runs in Python (with its calls
    compiled), as it did there, without tracing it again to find that out."""

    reason: str


class _Candidate:
    __slots__ = ("path", "header", "read", "payload", "dead", "used")

    def __init__(self, path: str, header: dict, read: Callable[[], bytes | None]) -> None:
        self.path, self.header, self.read = path, header, read
        self.payload: EntryPayload | None = None
        self.dead = self.used = False

    def load(self) -> EntryPayload | None:
        if self.payload is None:
            data = self.read()
            if data is None:
                self.dead = True
                return None
            self.payload = loads(data)
        return self.payload


class FrameCache:
    """The disk side of one dispatcher: ``code`` compiled in ``session`` (``kind``:
    ``"function"``, or ``"nested"`` for the code of functions made per call)."""

    def __init__(self, code: types.CodeType, kind: str, session, qualname: str) -> None:
        self.code, self.kind, self.session, self.qualname = code, kind, session, qualname
        self._key: str | None | bool = False  # False: not computed yet
        self._no_key = ""  # why there is no key
        self._candidates: list[_Candidate] | None = None

    def __repr__(self) -> str:
        return f"FrameCache({self.qualname})"

    def key(self) -> str | None:
        """The entries' key, or ``None`` (``_no_key`` says why: nothing is read or written)."""
        if self._key is False:
            try:
                self._key = entry_key(self.code, self.kind, self.session)
            except NotCacheable as e:
                self._key, self._no_key = None, str(e)
        return self._key

    def reset(self) -> None:
        """Forget what was read (``graphjit.reset()``, a changed trace rule: the key too)."""
        self._candidates = None
        self._key = False

    def load(self, fn: types.FunctionType, args: tuple, kwargs: dict, refs: SessionRefs,
             compiler_fn: Callable, finish: Callable) -> tuple | None:
        """``(guard, function, graphs, labels)`` of a written entry that serves this call,
        a :class:`Skipped` for a frame that runs in Python, or ``None`` (it is traced)."""
        root = cache_dir()
        key = self.key() if root and _reads else None
        if key is None:
            return None
        if writer.pending():  # (an entry queued in this process is read as a written one)
            writer.flush(timeout=2.0)
        if self._candidates is None:
            self._candidates = [_Candidate(*found) for found in store.read(root, key)]
        wanted = arg_types(args, kwargs)
        tried = 0
        skipped = None
        why: list[str] = []
        for cand in self._candidates:
            if "skip" in cand.header:
                skipped = cand
                continue
            if cand.dead or cand.used or cand.header.get("arg_types") != wanted:
                continue
            tried += 1
            try:
                payload = cand.load()
                if payload is None:
                    continue
                bound = payload.bind(fn, args, kwargs, refs, compiler_fn, finish, explain=logs.enabled("cache"))
            except Stale as e:
                cand.dead = True
                _event(self.qualname, "stale", f"{cand.path}: {e}")
                continue
            except Exception as e:  # a bad entry is a miss (with a warning), never an error
                if config.debug_checks and not isinstance(e, (EOFError, ValueError)) and \
                        type(e).__module__ != "_pickle":
                    raise InternalError(f"graphjit cache: loading {cand.path}: {type(e).__name__}: {e}") from e
                cand.dead = True
                store.bad_entry(cand.path, f"{type(e).__name__}: {e}")
                continue
            if isinstance(bound, str):
                why.append(bound)
                continue
            cand.used = True
            _event(self.qualname, "hit", cand.path)
            guard, new_fn, graphs = bound
            return guard, new_fn, graphs
        if skipped is not None:
            _event(self.qualname, "hit", f"runs in Python: {skipped.path}")
            return Skipped(skipped.header["skip"])
        _event(self.qualname, "miss", f"{tried} written entries tried: {'; '.join(why)}" if tried
               else "no written entry")
        return None

    def save_skip(self, reason: str, listener: Callable[[str, str], None] | None = None) -> None:
        """Write that this frame runs in Python (nothing to compile before its first break).
        ``listener(outcome, detail)`` hears what became of it (the report)."""
        root = cache_dir()
        if root:
            writer.submit(functools.partial(self._write_skip, root, reason, listener))

    def _write_skip(self, root: str, reason: str, listener=None) -> None:
        event = functools.partial(_event, self.qualname, listener=listener)
        key = self.key()
        if key is None:
            event("not written", self._no_key)
            return
        try:
            path = store.write(root, key, {"qualname": self.qualname, "skip": reason}, b"")
        except OSError as e:
            store.bad_entry(root, f"cannot write: {e}")
            event("not written", f"{type(e).__name__}: {e}")
            return
        if path is None:
            event("not written", "the cache directory or key is refused")
            return
        event("written", f"runs in Python: {path}")

    def save(self, fn: types.FunctionType, guard, entry_fn: types.FunctionType, graphs: list,
             refs: SessionRefs, args: tuple, kwargs: dict, breaks: list[str],
             listener: Callable[[str, str], None] | None = None) -> None:
        """Queue the entry just traced to be written (``writer.py``: after the call that
        traced it returns), or log why it cannot be; ``listener(outcome, detail)`` hears
        which (the report)."""
        root = cache_dir()
        if root:
            writer.submit(functools.partial(self._write, root, fn, guard, entry_fn, list(graphs), refs,
                                            arg_types(args, kwargs), breaks, listener))

    def _write(self, root: str, fn: types.FunctionType, guard, entry_fn: types.FunctionType, graphs: list,
               refs: SessionRefs, types_of_args: list[str], breaks: list[str], listener=None) -> None:
        event = functools.partial(_event, self.qualname, listener=listener)
        key = self.key()
        if key is None:
            event("not written", self._no_key)
            return
        try:
            backend = self.session.backend
            payload = capture(self.qualname, guard, fn, entry_fn, graphs, refs, breaks,
                              symbolic_ok=backend == "eager" or getattr(backend, "graphjit_runs_graph", False))
            data = dumps(payload)
            header = {"qualname": self.qualname, "arg_types": types_of_args,
                      "graphs": len(graphs), "file": self.code.co_filename, "line": self.code.co_firstlineno}
            path = store.write(root, key, header, data)
            if path is None:
                raise NotCacheable("the cache directory or key is refused")
        except NotCacheable as e:
            event("not written", str(e))
            return
        except OSError as e:
            store.bad_entry(root, f"cannot write: {e}")
            event("not written", f"{type(e).__name__}: {e}")
            return
        except Exception as e:
            event("not written", f"{type(e).__name__}: {e}")
            if config.debug_checks:
                raise InternalError(f"graphjit cache: writing {self.qualname}: {type(e).__name__}: {e}") from e
            return
        event("written", path)


def flush(timeout: float | None = None) -> bool:
    """Wait until every entry queued to be written is written (``writer.py``)."""
    return writer.flush(timeout)


__all__ = ["FrameCache", "SessionRefs", "CacheEvent", "Skipped", "cache_dir", "clear", "disabled", "write_only", "flush",
           "set_recorder", "NotCacheable"]
