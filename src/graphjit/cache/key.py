"""Cache keys: a hash of an explicit details object (what went into a compile), as
Inductor's ``FxGraphHashDetails``.

:func:`entry_key` hashes: the code object's content (:func:`portable.code_digest`:
bytecode, constants and nested code, names, file, qualified name, line table), what kind
of dispatcher compiled it (a function, or the code of functions made per call), the
session's options (backend, ``mode``, ``options``, ``dynamic``, ``fullgraph``), the
settings in ``graphjit.config`` that change traces, and the system: graphjit's own sources
(a digest of every ``.py`` file of the package, so a changed graphjit never reads an older
entry), torch's version and git revision, and Python's version.  A key that cannot be
made (a backend that is not found by its name) is ``None``: nothing is read or written.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import sys
import threading
import types
from typing import Any

import torch

from .. import config, trace_rules
from .portable import NotCacheable, code_digest, dumps

#: ``graphjit.config`` settings that do not change what a trace produces
_NOT_IN_KEY = frozenset({"cache_dir", "cache_trusted", "cache_key_file", "debug_checks", "recompile_limit",
                         "suppress_errors"})


_digest: str | None = None
_digest_lock = threading.Lock()


def _compute_digest() -> str:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                h.update(os.path.relpath(path, root).encode())
                with open(path, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()[:32]


def graphjit_digest() -> str:
    """A digest of graphjit's own source files (computed once per process; reading and
    hashing release the GIL, so :func:`prefetch_digest` computes it beside the program)."""
    global _digest
    if _digest is None:
        with _digest_lock:
            if _digest is None:
                _digest = _compute_digest()
    return _digest


def prefetch_digest() -> None:
    """Start computing :func:`graphjit_digest` in a daemon thread (``graphjit.compile``
    calls it with the cache on: the program builds its model meanwhile)."""
    if _digest is None and not _digest_lock.locked():
        threading.Thread(target=graphjit_digest, name="graphjit-digest", daemon=True).start()


def _after_fork() -> None:  # a lock a thread held at the fork is never released in the child
    global _digest_lock
    _digest_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork)


def system_details() -> tuple:
    return (graphjit_digest(), torch.__version__, torch.version.git_version, sys.version,
            sys.implementation.cache_tag)


def override_details() -> tuple:
    """``allow_in_graph``/``disable``/``skip`` overrides: by code digest (another
    callable's rule only counts, it cannot be named)."""
    by_code, others = trace_rules.user_overrides()
    return (tuple(sorted((code_digest(code), rule.name) for code, rule in by_code)),
            tuple(sorted(rule.name for rule in others)))


def config_details() -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in vars(config).items()
                        if not k.startswith("_") and k not in _NOT_IN_KEY
                        and not isinstance(v, (types.ModuleType, types.FunctionType, type))))


@dataclasses.dataclass(frozen=True)
class KeyDetails:
    """What one key hashes (see the module docstring)."""

    code: str
    kind: str
    backend: Any
    mode: Any
    options: Any
    dynamic: Any
    fullgraph: bool
    config: tuple
    overrides: tuple
    system: tuple

    def digest(self) -> str:
        return hashlib.sha256(repr(self).encode()).hexdigest()


def backend_id(backend: Any) -> Any:
    """A backend as key material: its name, a reference to the function (by name, with
    its code's digest) for a callable, or the ``graphjit_cache_key`` string a backend
    names itself with (a backend whose compiled graphs depend only on the graph and its
    inputs: ``graphjit.testing.CompileCounter``; one that also sets ``graphjit_runs_graph``
    runs the graph as it is, so graphs with symbolic sizes are written for it as for
    ``eager``); ``NotCacheable`` for anything else (an object's state is not its identity)."""
    if isinstance(backend, str):
        return backend
    named = getattr(backend, "graphjit_cache_key", None)
    if isinstance(named, str):
        return ("object", named)
    if not isinstance(backend, types.FunctionType):
        raise NotCacheable(f"the backend, a {type(backend).__qualname__} object, has no name for the cache "
                           "(a graphjit_cache_key attribute)")
    try:
        return hashlib.sha256(dumps(backend)).hexdigest()[:32]
    except NotCacheable as e:
        raise NotCacheable(f"the backend {backend.__qualname__} cannot be named for the cache ({e})") from None


def entry_key(code: types.CodeType, kind: str, session) -> str:
    """The key of ``code``'s entries in ``session`` (``kind``: ``"function"`` or
    ``"nested"``); :class:`NotCacheable` (saying why) when the session's backend or
    options cannot be named."""
    if code.co_name.startswith("__resume_at_"):  # (its number depends on the order traces ran in)
        code = code.replace(co_name="__resume_at", co_qualname="__resume_at")
    details = KeyDetails(code_digest(code), kind, backend_id(session.backend), session.mode,
                         repr(session.options), session.dynamic, session.fullgraph,
                         config_details(), override_details(), system_details())
    return details.digest()


__all__ = ["entry_key", "graphjit_digest", "KeyDetails"]
