"""What the persistent cache (``graphjit.cache``) needs from the runtime: where it is
consulted (a dispatcher's miss, before tracing; after a trace, to write), how a session's
own objects in generated code are named and found again (:class:`SessionObjects`), and
the stats it counts.

Contract: :func:`load` returns a :class:`CacheEntry` read from disk that serves this call
(its guard passed on these arguments; nothing was traced), or ``None`` (always while a
report is recorded: the report shows what compiling the program does, so a recorded run
traces); :func:`save` writes a traced entry.  Neither raises into the program (a bad file is a warning and a
miss; something that cannot be written is a log line).
"""

from __future__ import annotations

import types
from typing import Any

from .. import cache
from ..report import record
from . import stats
from .convert_frame import CacheEntry, class_closure, graph_callable


def _record(event: "cache.CacheEvent") -> None:
    counter = {"hit": "cache_hits", "miss": "cache_misses", "written": "cache_writes"}.get(event.outcome)
    if counter:
        stats.bump(counter)
    stats.record("cache_events", event)


cache.set_recorder(_record)


class SessionObjects(cache.SessionRefs):
    """A compile session's objects that generated code holds: resume functions (by their
    code), wrappers of callees called at breaks (by the function, module or code they
    wrap), the eager-code resolver, and the copies of functions it runs in Python with
    their calls intercepted (by the function)."""

    def __init__(self, session) -> None:
        self.session = session

    def references(self) -> dict[int, tuple]:
        s = self.session
        refs: dict[int, tuple] = {id(s.hooks.wrap_callable): ("wrap_callable",)}
        if s.hooks.resolve is not None:
            refs[id(s.hooks.resolve)] = ("resolve",)
        for (code, closure_ids), cf in list(s._resumes.items()):  # (copied: a writer thread reads them)
            generic = s.hooks.shapes.for_code(code).modules_generic if s.hooks.shapes else False
            refs[id(cf)] = ("resume", code, closure_ids is not None, generic)
        for fn, wrapper in list(s._wrapped.items()):
            refs[id(wrapper)] = ("wrap", fn)
        for code, nested in list(s._nested.items()):
            refs[id(nested)] = ("wrap", code)
        for fn, copy in s.interceptor.copies():  # functions run in Python, calls intercepted
            refs[id(copy)] = ("eager", fn)
        return refs

    def resolve(self, ref: tuple, fn: types.FunctionType) -> Any:
        s = self.session
        kind = ref[0]
        if kind == "wrap_callable":
            return s.hooks.wrap_callable
        if kind == "resolve":
            return s.hooks.resolve
        if kind == "resume":
            _, code, with_class, generic = ref
            if generic and s.hooks.shapes is not None:
                s.hooks.shapes.for_code(code).make_modules_generic()
            return s.make_resume(code, fn.__globals__, class_closure(fn) if with_class else None)
        if kind == "wrap":
            return s.wrap_callable(ref[1])
        if kind == "eager":
            return s.interceptor.eager(ref[1])
        raise cache.Stale(f"unknown runtime reference {kind!r}")


def frame_cache(dispatcher, code: types.CodeType, kind: str) -> "cache.FrameCache":
    fc = dispatcher.__dict__.get("_disk")
    if fc is None:
        fc = dispatcher._disk = cache.FrameCache(code, kind, dispatcher._session, code.co_qualname)
    return fc


def load(dispatcher, fn: types.FunctionType, code: types.CodeType, kind: str, args: tuple,
         kwargs: dict) -> "CacheEntry | cache.Skipped | None":
    """A written entry for this call, or :class:`cache.Skipped` (see the module docstring)."""
    if cache.cache_dir() is None or record.active() is not None:
        return None
    session = dispatcher._session
    found = frame_cache(dispatcher, code, kind).load(fn, args, kwargs, SessionObjects(session),
                                                     session.compiler_fn, graph_callable)
    if found is None or isinstance(found, cache.Skipped):
        return found
    guard, new_fn, graphs = found
    return CacheEntry(guard, new_fn, graphs)


def save(dispatcher, fn: types.FunctionType, code: types.CodeType, kind: str, entry: CacheEntry,
         args: tuple, kwargs: dict, recording=None) -> None:
    """Write a traced entry (see the module docstring); ``recording``: the report's handle
    of the compile that traced it (told whether it was written)."""
    if cache.cache_dir() is None:
        return
    frame_cache(dispatcher, code, kind).save(fn, entry.guard, entry.fn, entry.graphs,
                                             SessionObjects(dispatcher._session), args, kwargs, [],
                                             listener=getattr(recording, "cache_outcome", None))


def flush() -> None:
    """Every queued entry written (before counts are read or the session is dropped)."""
    cache.flush()


def written() -> None:
    """The call that traced is over: the entries it queued are written now (the
    persistent cache's writer thread, ``cache/writer.py``)."""
    cache.writer.kick()


def save_skip(dispatcher, code: types.CodeType, kind: str, reason: str, recording=None) -> None:
    """Write that this frame runs in Python (its first break comes before anything to
    compile), so the next process does not trace it to find out."""
    if cache.cache_dir() is not None:
        frame_cache(dispatcher, code, kind).save_skip(reason, listener=getattr(recording, "cache_outcome", None))


__all__ = ["load", "save", "save_skip", "written", "flush", "SessionObjects"]
