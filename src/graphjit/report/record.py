"""Recording what the compiler did: cheap, structured, and only when asked for.

Contract: while a :class:`Recorder` is active (:func:`start`), every compile of a frame
(``runtime/dispatch.py`` wraps ``convert_frame`` in :func:`compiling`) becomes one
:class:`CompileRecord`: the function, when it started and how long it took, how long the
backend took (:func:`backend_time`, from ``convert_frame.build_entry``), why it was
compiled again (the failing guard), the graph breaks and skipped frames ``runtime/stats``
reports while it runs, and the cache entry it made.  Entries made while recording count
their guard checks and hits (``_Handle.check``).  Nothing here formats text: the
records keep the live objects (code objects, graphs, break records), and
``report/serialize.py`` turns them into the structured log when the report is written.

When no recorder is active every hook is a test of one global and a return, and the
dispatcher's hot path is untouched (a guard is wrapped only when its entry is made while
recording).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import types
from typing import Any, Callable, Iterator

_active: "Recorder | None" = None


@dataclasses.dataclass
class EntryStats:
    """Guard checks of one cache entry made while recording: calls, hits, seconds."""

    checks: int = 0
    hits: int = 0
    seconds: float = 0.0


@dataclasses.dataclass
class CompileRecord:
    """One trace of one frame (a compile or a recompile)."""

    index: int
    code: types.CodeType
    qualname: str
    start: float                 # seconds since recording started
    seconds: float = 0.0         # the whole compile
    backend_seconds: float = 0.0
    recompile_reason: str | None = None
    outcome: str = "running"     # done (``entry`` holds convert_frame's result) | broke | failed
    entry: Any = None            # what convert_frame returned
    breaks: list = dataclasses.field(default_factory=list)   # exc.Unsupported records
    skipped: list = dataclasses.field(default_factory=list)  # runtime.stats.SkippedFrame
    error: str | None = None
    entry_stats: EntryStats | None = None
    called: type | None = None   # the class of the object graphjit's call_object frame calls
    cache: str | None = None     # the persistent cache: "written", or "not written: why"

    def __repr__(self) -> str:
        return f"CompileRecord(#{self.index} {self.qualname} {self.outcome})"


class Recorder:
    """The records of one run (see the module docstring)."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.wall_start = time.time()
        self.compiles: list[CompileRecord] = []
        self._open: list[CompileRecord] = []
        self.other_breaks: list = []     # reported outside any compile
        self.other_skipped: list = []

    def __repr__(self) -> str:
        return f"Recorder({len(self.compiles)} compiles)"

    def now(self) -> float:
        return time.perf_counter() - self.t0

    @property
    def current(self) -> CompileRecord | None:
        return self._open[-1] if self._open else None


def start() -> Recorder:
    """Start recording (a new recorder; a running one is replaced)."""
    global _active
    _active = Recorder()
    return _active


def stop() -> "Recorder | None":
    """Stop recording; returns the recorder that was active."""
    global _active
    rec, _active = _active, None
    return rec


def active() -> "Recorder | None":
    return _active


class _Handle:
    """What :func:`compiling` yields: ``done(result)`` records what ``convert_frame``
    returned, ``check(fn)`` is the guard check to dispatch the new entry with."""

    __slots__ = ("record",)

    def __init__(self, record: CompileRecord | None) -> None:
        self.record = record

    def done(self, result: Any) -> None:
        if self.record is not None:
            self.record.outcome, self.record.entry = "done", result

    def cache_outcome(self, outcome: str, detail: str) -> None:
        """What the persistent cache did with the entry (its writer thread calls this)."""
        if self.record is not None:
            self.record.cache = outcome if outcome == "written" else f"{outcome}: {detail}"

    def check(self, check: Callable[..., bool]) -> Callable[..., bool]:
        """``check`` itself when not recording; else a wrapper counting its calls, hits
        and time."""
        if self.record is None:
            return check
        stats = self.record.entry_stats = EntryStats()
        clock = time.perf_counter

        def timed(*args, **kwargs):
            t = clock()
            ok = check(*args, **kwargs)
            stats.seconds += clock() - t
            stats.checks += 1
            stats.hits += bool(ok)
            return ok

        return timed


_NOT_RECORDING = _Handle(None)


@contextlib.contextmanager
def compiling(fn: types.FunctionType, recompile_reason: str | None = None, called: Any = None) -> Iterator[_Handle]:
    """Around one ``convert_frame`` call of ``fn``.  ``called``: the module or callable
    object when ``fn`` is graphjit's own frame that calls it (``call_object``): the record
    is named after its class."""
    rec = _active
    if rec is None:
        yield _NOT_RECORDING
        return
    name = fn.__qualname__ if called is None else f"{type(called).__qualname__} (called)"
    record = CompileRecord(len(rec.compiles), fn.__code__, name, rec.now(),
                           recompile_reason=recompile_reason, called=None if called is None else type(called))
    rec.compiles.append(record)
    rec._open.append(record)
    try:
        yield _Handle(record)
    except BaseException as e:
        record.outcome = "broke" if record.breaks else "failed"
        record.error = f"{type(e).__name__}: {e}"
        raise
    finally:
        record.seconds = rec.now() - record.start
        rec._open.remove(record)


def backend_time(seconds: float) -> None:
    """The backend compiled a graph of the frame being compiled in ``seconds``."""
    rec = _active
    if rec is not None and rec.current is not None:
        rec.current.backend_seconds += seconds


def stat_recorded(key: str, item: Any) -> None:
    """``runtime/stats.record``'s listener: breaks and skipped frames."""
    rec = _active
    if rec is None:
        return
    cur = rec.current
    if key == "break_reasons":
        (cur.breaks if cur is not None else rec.other_breaks).append(item)
    elif key == "skipped_frames":
        (cur.skipped if cur is not None else rec.other_skipped).append(item)
